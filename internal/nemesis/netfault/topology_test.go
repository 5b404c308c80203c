package netfault

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"
)

// TestTopology wires two nodes and checks, with a TCP echo server in node
// 1's namespace (on the bind port), that node 0 reaches it through the
// proxy, that a partition stops the packets and healing restores them,
// and that delay applies.
func TestTopology(t *testing.T) {
	if err := Available(); err != nil {
		t.Skipf("network namespaces not usable here: %v", err)
	}
	const port = 7000
	topo, err := New(port, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer topo.Close()
	for i := 0; i < 2; i++ {
		if err := topo.AddNode(i); err != nil {
			t.Fatal(err)
		}
	}
	target := net.JoinHostPort(nodeIP(1), strconv.Itoa(port))
	var ln net.Listener
	if err := topo.nodes[1].Do(func() error {
		var err error
		ln, err = net.Listen("tcp", target)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	peer := make(chan string, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			peer <- c.RemoteAddr().(*net.TCPAddr).IP.String()
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	defer ln.Close()

	dialFrom0 := func(timeout time.Duration) (net.Conn, error) {
		var c net.Conn
		err := topo.nodes[0].Do(func() error {
			var err error
			c, err = net.DialTimeout("tcp", target, timeout)
			return err
		})
		return c, err
	}
	c, err := dialFrom0(2 * time.Second)
	if err != nil {
		t.Fatalf("node 0 → node 1: %v", err)
	}
	r := bufio.NewReader(c)
	roundTrip(t, c, r)
	if got := c.RemoteAddr().String(); got != target {
		t.Fatalf("remote %s, want %s (DNAT is invisible to the node)", got, target)
	}
	if src := <-peer; src != proxyIP(0, 1) {
		t.Fatalf("node 1 sees the connection from %s, want the (0, 1) proxy %s", src, proxyIP(0, 1))
	}

	// The hub reaches node 1 directly.
	hc, err := topo.DialContext(context.Background(), "tcp", target)
	if err != nil {
		t.Fatalf("hub → node 1: %v", err)
	}
	roundTrip(t, hc, bufio.NewReader(hc))
	hc.Close()

	if err := topo.Partition([]Pair{{0, 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := dialFrom0(time.Second); err == nil {
		t.Fatal("dial across a partition succeeded")
	}
	if _, err := c.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("an established connection still carried data across the partition")
	}
	if err := topo.Heal(); err != nil {
		t.Fatal(err)
	}
	// The line sent during the partition is retransmitted once healed.
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if line, err := r.ReadString('\n'); err != nil || line != "ping\n" {
		t.Fatalf("after healing: %q %v", line, err)
	}
	topo.SetDelay([]int{1}, 100*time.Millisecond)
	if d := roundTrip(t, c, r); d < 200*time.Millisecond {
		t.Fatalf("round trip with 100ms delay each way took %v", d)
	}
	topo.SetDelay(nil, 0)
	c.Close()
}

// TestBridgeAddressStaysPut: the hub bridge keeps one link-layer address
// while nodes join. Left to itself a Linux bridge takes the lowest address
// of its ports, so a joining node's veth changed it, and every node's ARP
// entry for the hub went stale: packets to the clients and the receiver
// were dropped until the entry expired.
func TestBridgeAddressStaysPut(t *testing.T) {
	if err := Available(); err != nil {
		t.Skipf("network namespaces not usable here: %v", err)
	}
	topo, err := New(7000, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer topo.Close()
	first, err := topo.bridgeAddr()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		if err := topo.AddNode(i); err != nil {
			t.Fatal(err)
		}
		got, err := topo.bridgeAddr()
		if err != nil {
			t.Fatal(err)
		}
		if got != first {
			t.Fatalf("after node %d joined the bridge's address is %s, was %s", i, got, first)
		}
	}
}
