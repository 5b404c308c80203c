package faultnet

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/rpc/mux"
	"github.com/timemachine-db/timemachine/rpc/peer"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testNode is one node's internal port: a peer server answering its own
// name, and a ProtoRaft group-1 listener standing in for raft, whose
// accepted connections are handed to the test.
type testNode struct {
	name     string
	addr     string
	client   *peer.Client
	raftDial func(addr string, proto byte, group uint16, timeout time.Duration) (net.Conn, error)
	accepted chan net.Conn // server ends of raft connections
	block    chan struct{} // method 2 waits on it
	entered  chan struct{} // method 2 signals it started
}

func cluster(t *testing.T, names ...string) (*Network, map[string]*testNode) {
	t.Helper()
	n := New()
	nodes := map[string]*testNode{}
	for _, name := range names {
		m, err := mux.Listen("127.0.0.1:0", quiet())
		if err != nil {
			t.Fatal(err)
		}
		rpcL, _ := m.Listen(mux.ProtoRPC, 0)
		raftL, _ := m.Listen(mux.ProtoRaft, 1)
		tn := &testNode{name: name, addr: m.Addr().String(), accepted: make(chan net.Conn, 16),
			block: make(chan struct{}), entered: make(chan struct{}, 16)}
		srv := peer.NewServer(rpcL, quiet())
		// Method 1 answers at once; method 2 blocks until released (or the
		// connection breaks). Both answer with the node's name.
		srv.Handle(1, func(context.Context, []byte) ([]byte, error) { return []byte(name), nil })
		srv.Handle(2, func(ctx context.Context, _ []byte) ([]byte, error) {
			tn.entered <- struct{}{}
			select {
			case <-tn.block:
			case <-ctx.Done():
			}
			return []byte(name), nil
		})
		go func() { _ = srv.Serve() }()
		go func() {
			for {
				c, err := raftL.Accept()
				if err != nil {
					return
				}
				tn.accepted <- c
			}
		}()
		n.Register(name, tn.addr)
		tn.client = peer.NewClient(peer.ClientOptions{Dial: n.PeerDialer(name), Logger: quiet()})
		tn.raftDial = n.MuxDialer(name)
		t.Cleanup(func() {
			close(tn.block)
			_ = tn.client.Close()
			_ = srv.Close()
			_ = raftL.Close()
			_ = m.Close()
		})
		nodes[name] = tn
	}
	return n, nodes
}

func call(t *testing.T, from, to *testNode) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := from.client.Call(ctx, to.addr, 1, nil)
	if err == nil && string(got) != to.name {
		t.Fatalf("%s→%s answered by %q", from.name, to.name, got)
	}
	return err
}

func mustReach(t *testing.T, from, to *testNode) {
	t.Helper()
	if err := call(t, from, to); err != nil {
		t.Fatalf("%s→%s: %v", from.name, to.name, err)
	}
}

func mustNotReach(t *testing.T, n *Network, from, to *testNode) {
	t.Helper()
	err := call(t, from, to)
	if !errors.Is(err, peer.ErrUnreachable) || !errors.Is(err, ErrCut) {
		t.Fatalf("%s→%s: got %v, want ErrUnreachable from a cut link", from.name, to.name, err)
	}
	if _, err := from.raftDial(to.addr, mux.ProtoRaft, 1, time.Second); !errors.Is(err, ErrCut) {
		t.Fatalf("%s→%s raft dial: got %v, want ErrCut", from.name, to.name, err)
	}
	if n.Connected(from.name, to.name) {
		t.Fatalf("Connected(%s, %s) after the cut", from.name, to.name)
	}
}

// raftConn dials a raft connection from → to and returns both ends.
func raftConn(t *testing.T, from, to *testNode) (dialed, accepted net.Conn) {
	t.Helper()
	c, err := from.raftDial(to.addr, mux.ProtoRaft, 1, time.Second)
	if err != nil {
		t.Fatalf("%s→%s raft dial: %v", from.name, to.name, err)
	}
	select {
	case s := <-to.accepted:
		t.Cleanup(func() { _ = c.Close(); _ = s.Close() })
		return c, s
	case <-time.After(5 * time.Second):
		t.Fatal("raft connection not accepted")
	}
	return nil, nil
}

// assertClosed: both ends of a cut connection fail promptly — the dialer's
// end is closed, the accepting end reads EOF.
func assertClosed(t *testing.T, dialed, accepted net.Conn) {
	t.Helper()
	if _, err := dialed.Write([]byte("x")); err == nil {
		t.Fatal("write on a cut connection succeeded")
	}
	_ = accepted.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, accepted); err != nil {
		t.Fatalf("accepting end: %v, want EOF", err)
	}
}

func TestPartitionClosesConnsAndBlocksDialsBothWays(t *testing.T) {
	n, nodes := cluster(t, "a", "b", "c")
	a, b, c := nodes["a"], nodes["b"], nodes["c"]
	for _, p := range [][2]*testNode{{a, b}, {b, a}, {a, c}, {c, a}, {b, c}, {c, b}} {
		mustReach(t, p[0], p[1])
	}
	abDial, abAcc := raftConn(t, a, b) // dialed by a
	baDial, baAcc := raftConn(t, b, a) // dialed by b
	acDial, acAcc := raftConn(t, a, c)
	if k := n.Conns("a", "b"); k < 2 { // the RPC connection(s) and the raft one
		t.Fatalf("%d tracked connections a→b", k)
	}

	// A call in flight across the cut fails at once, not at its deadline.
	inflight := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := a.client.Call(ctx, b.addr, 2, nil)
		inflight <- err
	}()
	<-b.entered

	start := time.Now()
	n.Partition("a", "b")
	if err := <-inflight; !errors.Is(err, peer.ErrUnreachable) {
		t.Fatalf("in-flight call across the cut: %v", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("in-flight call failed after %v", el)
	}
	assertClosed(t, abDial, abAcc)
	assertClosed(t, baDial, baAcc)
	if n.Conns("a", "b")+n.Conns("b", "a") != 0 {
		t.Fatal("connections across the cut still tracked")
	}
	mustNotReach(t, n, a, b)
	mustNotReach(t, n, b, a)
	// Other links are untouched, including a's existing raft conn to c.
	mustReach(t, a, c)
	mustReach(t, c, a)
	mustReach(t, b, c)
	if _, err := acDial.Write([]byte("still up")); err != nil {
		t.Fatalf("a→c connection hurt by the a|b cut: %v", err)
	}
	buf := make([]byte, len("still up"))
	if _, err := io.ReadFull(acAcc, buf); err != nil {
		t.Fatal(err)
	}

	n.Heal()
	mustReach(t, a, b)
	mustReach(t, b, a)
	raftConn(t, a, b)
	if !n.Connected("a", "b") {
		t.Fatal("not connected after Heal")
	}
}

func TestIsolate(t *testing.T) {
	n, nodes := cluster(t, "a", "b", "c")
	a, b, c := nodes["a"], nodes["b"], nodes["c"]
	mustReach(t, a, b)
	mustReach(t, c, a)
	d1, s1 := raftConn(t, b, a)
	d2, s2 := raftConn(t, a, c)
	bcDial, bcAcc := raftConn(t, b, c)

	n.Isolate("a")
	assertClosed(t, d1, s1)
	assertClosed(t, d2, s2)
	for _, p := range [][2]*testNode{{a, b}, {b, a}, {a, c}, {c, a}} {
		mustNotReach(t, n, p[0], p[1])
	}
	mustReach(t, b, c)
	mustReach(t, c, b)
	if _, err := bcDial.Write([]byte("y")); err != nil {
		t.Fatalf("b→c connection hurt by isolating a: %v", err)
	}
	if _, err := io.ReadFull(bcAcc, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}

	n.Heal()
	for _, p := range [][2]*testNode{{a, b}, {b, a}, {a, c}, {c, a}} {
		mustReach(t, p[0], p[1])
	}
}

// Cutting one pair leaves a node's other pair alone; a node never cuts
// itself; unregistered addresses are never cut.
func TestCutScope(t *testing.T) {
	n, nodes := cluster(t, "a", "b")
	a := nodes["a"]
	n.Isolate("a")
	if !n.Connected("a", "a") {
		t.Fatal("a node is cut from itself")
	}
	mustReach(t, a, a)
	// An address no one registered (say, an external service) stays reachable.
	other, err := mux.Listen("127.0.0.1:0", quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	l, _ := other.Listen(mux.ProtoRaft, 1)
	defer l.Close()
	c, err := a.raftDial(other.Addr().String(), mux.ProtoRaft, 1, time.Second)
	if err != nil {
		t.Fatalf("dial to an unregistered address while isolated: %v", err)
	}
	c.Close()
}
