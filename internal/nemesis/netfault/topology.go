package netfault

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Topology is the harness's private network: a hub namespace holding a
// bridge (and the clients, the receiver and the delay proxies), and one
// namespace per node, joined to the bridge by a veth pair. Nothing of it
// exists in the machine's own namespace.
type Topology struct {
	prefix   string
	bindPort int
	log      *slog.Logger

	hub *Namespace

	mu      sync.Mutex
	nodes   map[int]*Namespace
	proxies map[[2]int]*Proxy
	cut     map[Pair]bool
	loss    float64
	closed  bool
}

// New builds the hub. bindPort is the nodes' raft/RPC port (the one the
// delay proxies sit on).
func New(bindPort int, log *slog.Logger) (*Topology, error) {
	t := &Topology{prefix: fmt.Sprintf("%s%d", NamePrefix, os.Getpid()), bindPort: bindPort, log: log,
		nodes: map[int]*Namespace{}, proxies: map[[2]int]*Proxy{}, cut: map[Pair]bool{}}
	hub, err := newNamespace(t.prefix + "-hub")
	if err != nil {
		return nil, err
	}
	t.hub = hub
	steps := [][]string{
		// A fixed address: a bridge whose address was not set takes the
		// lowest of its ports', so it changed whenever a node's veth
		// joined, and the nodes' ARP entries for the hub (clients,
		// receiver, proxies) then named an address nobody answered: their
		// packets were dropped for seconds (many "lost" jobs whose
		// callbacks timed out, none reaching the receiver).
		{"link", "add", "br0", "address", bridgeMAC, "type", "bridge"},
		{"addr", "add", fmt.Sprintf("%s/%d", hubIP, prefixV4), "dev", "br0"},
		{"link", "set", "br0", "up"},
	}
	for _, s := range steps {
		if err := hub.IP(s...); err != nil {
			_ = hub.Delete()
			return nil, err
		}
	}
	return t, nil
}

// bridgeMAC is the hub bridge's fixed, locally administered address.
const bridgeMAC = "02:54:4d:00:00:01"

// bridgeAddr reads the hub bridge's current link-layer address.
func (t *Topology) bridgeAddr() (string, error) {
	out, err := exec.Command("ip", "-n", t.hub.Name, "-o", "link", "show", "br0").Output()
	if err != nil {
		return "", fmt.Errorf("ip link show br0: %w", err)
	}
	f := strings.Fields(string(out))
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "link/ether" {
			return f[i+1], nil
		}
	}
	return "", fmt.Errorf("no link/ether in %q", out)
}

// HubIP is the address of the clients and the receiver, as nodes see it.
func (t *Topology) HubIP() string { return hubIP }

// NodeIP is node i's address.
func (t *Topology) NodeIP(i int) string { return nodeIP(i) }

// NodeIndex maps an address back to the node index (-1: not a node).
func (t *Topology) NodeIndex(ip string) int {
	for i := 0; i < maxNodes; i++ {
		if nodeIP(i) == ip {
			return i
		}
	}
	return -1
}

// AddNode creates node i's namespace, wires it to the bridge, and puts
// delay proxies between it and every node already there.
func (t *Topology) AddNode(i int) error {
	if i < 0 || i >= maxNodes {
		return fmt.Errorf("netfault: node index %d out of range", i)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.nodes[i]; ok {
		return nil
	}
	ns, err := newNamespace(fmt.Sprintf("%s-n%d", t.prefix, i+1))
	if err != nil {
		return err
	}
	hostSide := fmt.Sprintf("v%d", i)
	steps := []func() error{
		func() error {
			return run("ip", "link", "add", hostSide, "netns", t.hub.Name, "type", "veth", "peer", "name", "eth0", "netns", ns.Name)
		},
		func() error { return t.hub.IP("link", "set", hostSide, "master", "br0") },
		func() error { return t.hub.IP("link", "set", hostSide, "up") },
		func() error { return ns.IP("addr", "add", fmt.Sprintf("%s/%d", nodeIP(i), prefixV4), "dev", "eth0") },
		func() error { return ns.IP("link", "set", "eth0", "up") },
		func() error { return ns.Exec(nil, "iptables", "-w", "-N", chain) },
		func() error { return ns.Exec(nil, "iptables", "-w", "-A", "INPUT", "-j", chain) },
		func() error { return ns.Exec(nil, "iptables", "-w", "-A", "OUTPUT", "-j", chain) },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			_ = ns.Delete()
			return err
		}
	}
	t.nodes[i] = ns
	for j := range t.nodes {
		if j == i {
			continue
		}
		for _, pr := range [][2]int{{i, j}, {j, i}} {
			if err := t.addProxy(pr[0], pr[1]); err != nil {
				return err
			}
		}
	}
	return t.applyLocked()
}

// addProxy puts the proxy for s → d on the hub and DNATs s's connections to
// d's bind port to it.
func (t *Topology) addProxy(s, d int) error {
	pip := proxyIP(s, d)
	if err := t.hub.IP("addr", "add", pip+"/32", "dev", "br0"); err != nil {
		return err
	}
	var ln net.Listener
	err := t.hub.Do(func() error {
		var err error
		ln, err = net.Listen("tcp", net.JoinHostPort(pip, strconv.Itoa(t.bindPort)))
		return err
	})
	if err != nil {
		return fmt.Errorf("netfault: proxy %d→%d: %w", s, d, err)
	}
	local := &net.TCPAddr{IP: net.ParseIP(pip)}
	dial := func(ctx context.Context, target string) (net.Conn, error) {
		var c net.Conn
		err := t.hub.Do(func() error {
			var err error
			c, err = (&net.Dialer{LocalAddr: local}).DialContext(ctx, "tcp", target)
			return err
		})
		return c, err
	}
	t.proxies[[2]int{s, d}] = NewProxy(ln, net.JoinHostPort(nodeIP(d), strconv.Itoa(t.bindPort)), dial)
	return t.nodes[s].Exec(nil, "iptables", "-w", "-t", "nat", "-A", "OUTPUT", "-p", "tcp", "-d", nodeIP(d),
		"--dport", strconv.Itoa(t.bindPort), "-j", "DNAT", "--to-destination", pip)
}

// Command prepares a process to run in node i's namespace.
func (t *Topology) Command(i int, name string, args ...string) (*exec.Cmd, error) {
	t.mu.Lock()
	ns, ok := t.nodes[i]
	t.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("netfault: no node %d", i)
	}
	return ns.Command(name, args...), nil
}

// DialContext connects from the hub (the clients' side).
func (t *Topology) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := t.hub.Do(func() error {
		var err error
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// Listen listens in the hub (the receiver's side).
func (t *Topology) Listen(network, addr string) (net.Listener, error) {
	var ln net.Listener
	err := t.hub.Do(func() error {
		var err error
		ln, err = net.Listen(network, addr)
		return err
	})
	return ln, err
}

// Partition replaces the set of cut links: every packet between the two
// nodes of a pair is dropped, both ways, on every port.
func (t *Topology) Partition(cut []Pair) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cut = map[Pair]bool{}
	for _, p := range cut {
		t.cut[MakePair(p.A, p.B)] = true
	}
	return t.applyLocked()
}

// SetLoss drops that fraction (0–1) of the packets between nodes.
func (t *Topology) SetLoss(p float64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.loss = p
	return t.applyLocked()
}

// SetDelay delays the raft/RPC traffic on every link of the nodes listed
// (nil: every link) by d each way.
func (t *Topology) SetDelay(nodes []int, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	in := map[int]bool{}
	for _, n := range nodes {
		in[n] = true
	}
	for k, p := range t.proxies {
		if nodes == nil || in[k[0]] || in[k[1]] {
			p.SetDelay(d)
		} else {
			p.SetDelay(0)
		}
	}
}

// Heal removes every cut, loss and delay.
func (t *Topology) Heal() error {
	t.SetDelay(nil, 0)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cut, t.loss = map[Pair]bool{}, 0
	return t.applyLocked()
}

func (t *Topology) applyLocked() error {
	var peers []int
	for i := range t.nodes {
		peers = append(peers, i)
	}
	var errs []error
	for i, ns := range t.nodes {
		if err := ns.Exec(restoreInput(nodeRules(i, peers, t.cut, t.loss)), "iptables-restore", "-w", "--noflush"); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close stops the proxies, kills whatever still runs in the namespaces and
// removes them.
func (t *Topology) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	for _, p := range t.proxies {
		p.Close()
	}
	var errs []error
	for _, ns := range t.nodes {
		for _, pid := range ns.Pids() {
			_ = syscall.Kill(pid, syscall.SIGCONT)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	for _, ns := range t.nodes {
		if err := ns.Delete(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := t.hub.Delete(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Prepare adds node i (if needed) and returns its address: the
// cluster's view of a network.
func (t *Topology) Prepare(i int) (string, error) {
	if err := t.AddNode(i); err != nil {
		return "", err
	}
	return nodeIP(i), nil
}
