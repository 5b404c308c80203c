package mux

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// DropPeer closes the raft connections this node dialed to that peer (in
// every group), and only those; a closed one is forgotten.
func TestDropPeerClosesTheDialedRaftConnections(t *testing.T) {
	server, other, local := quietMux(t), quietMux(t), quietMux(t)
	for _, m := range []*Mux{server, other} {
		for _, g := range []uint16{1, 2} {
			l, err := m.StreamLayer(g, nil)
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					go func() { _, _ = io.Copy(io.Discard, c) }()
				}
			}()
		}
	}
	s1, _ := local.StreamLayer(1, nil)
	s2, _ := local.StreamLayer(2, nil)
	dial := func(s *StreamLayer, m *Mux) interface {
		Read([]byte) (int, error)
		Close() error
	} {
		c, err := s.Dial(raft.ServerAddress(m.Addr().String()), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b, keep := dial(s1, server), dial(s2, server), dial(s1, other)
	closed := dial(s2, server)
	closed.Close()
	if n := local.DropPeer(server.Addr().String()); n != 2 {
		t.Fatalf("dropped %d connections, want 2", n)
	}
	for _, c := range []interface{ Read([]byte) (int, error) }{a, b} {
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("a dropped connection still reads")
		}
	}
	done := make(chan error, 1)
	go func() { _, err := keep.Read(make([]byte, 1)); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("the connection to another peer was closed: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	keep.Close()
	// A dropped connection dials anew on its next write: a pooled idle
	// connection must not fail the next RPC (a vote) on it.
	if _, err := a.(interface{ Write([]byte) (int, error) }).Write([]byte("x")); err != nil {
		t.Fatalf("a write after the drop: %v", err)
	}
	b.Close()
	if n := local.DropPeer(server.Addr().String()); n != 1 {
		t.Fatalf("dropped %d connections the second time, want the 1 still open", n)
	}
}

// A write that redials a dropped connection to a dead peer waits out the
// dial; dropping the peer again meanwhile (the liveness reactor does)
// must not wait with it.
func TestDropDoesNotWaitForARedial(t *testing.T) {
	var set dialedSet
	a, b := net.Pipe()
	defer b.Close()
	dialing, release := make(chan struct{}), make(chan struct{})
	c := set.add("peer", a, func() (net.Conn, error) {
		close(dialing)
		<-release // a dial to a cut-off peer: up to the dial timeout
		return nil, errors.New("dial: i/o timeout")
	})
	if set.drop("peer") != 1 {
		t.Fatal("the connection was not tracked")
	}
	wrote := make(chan error, 1)
	go func() { _, err := c.Write([]byte("vote")); wrote <- err }()
	<-dialing
	dropped := make(chan struct{})
	go func() {
		set.drop("peer")
		_ = c.SetReadDeadline(time.Now())
		close(dropped)
	}()
	select {
	case <-dropped:
	case <-time.After(5 * time.Second):
		t.Fatal("drop waited for the redial")
	}
	close(release)
	if err := <-wrote; err == nil {
		t.Fatal("a write whose redial failed succeeded")
	}
}
