package testutil

import (
	"errors"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
)

var (
	portMu    sync.Mutex
	portsUsed = map[int]bool{}
)

// ClusterAddr returns a loopback address whose port is free for TCP and
// UDP (serf gossips on both). It picks from below the kernel's ephemeral
// range (32768+ on Linux), so that while a node is down for a restart its
// ports cannot be taken as the source port of some outgoing connection —
// the node then could not bind its own address again (an in-process
// cluster test failed that way: "bind: address already in use" on a
// restart). It never hands out the same port twice in one test process.
// Another test process may still bind the port between the probe and
// the node's bind; callers that start a cluster retry on that.
func ClusterAddr() (string, error) {
	portMu.Lock()
	defer portMu.Unlock()
	for range 500 {
		p := 15000 + rand.IntN(17000)
		if portsUsed[p] {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		pc, err := net.ListenPacket("udp", addr)
		ln.Close()
		if err != nil {
			continue
		}
		pc.Close()
		portsUsed[p] = true
		return addr, nil
	}
	return "", errors.New("no free loopback port in 15000-31999 after 500 tries")
}
