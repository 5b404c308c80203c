package mux

import (
	"net"
	"sync"
	"time"
)

// dialedSet tracks the raft connections this node dialed, by peer address,
// so they can be dropped when the peer's reachability changes (DropPeer).
type dialedSet struct {
	mu    sync.Mutex
	conns map[string]map[*dialedConn]struct{}
}

func (s *dialedSet) add(addr string, c net.Conn, redial func() (net.Conn, error)) net.Conn {
	dc := &dialedConn{inner: c, addr: addr, set: s, redial: redial}
	s.mu.Lock()
	if s.conns == nil {
		s.conns = map[string]map[*dialedConn]struct{}{}
	}
	if s.conns[addr] == nil {
		s.conns[addr] = map[*dialedConn]struct{}{}
	}
	s.conns[addr][dc] = struct{}{}
	s.mu.Unlock()
	return dc
}

func (s *dialedSet) remove(dc *dialedConn) {
	s.mu.Lock()
	if m := s.conns[dc.addr]; m != nil {
		delete(m, dc)
		if len(m) == 0 {
			delete(s.conns, dc.addr)
		}
	}
	s.mu.Unlock()
}

// drop drops every tracked connection to addr and returns how many.
func (s *dialedSet) drop(addr string) int {
	s.mu.Lock()
	var cs []*dialedConn
	for dc := range s.conns[addr] {
		cs = append(cs, dc)
	}
	s.mu.Unlock()
	for _, dc := range cs {
		dc.drop()
	}
	return len(cs)
}

// dialedConn is a raft connection this node dialed. Dropped, its TCP
// connection is closed (an RPC waiting on it fails at once) and the next
// write dials a new one: raft keeps idle connections in a pool, and a
// closed one there failed the next RPC on it — a vote between two
// followers, which talk only during elections, so the election failed
// and waited out its timeout.
type dialedConn struct {
	addr   string
	set    *dialedSet
	redial func() (net.Conn, error)

	// wmu serialises writes and the redial before one. It is never held
	// with mu while dialing: a redial to a dead peer waits out the dial
	// timeout, and drop, Read and Close must not wait for it (the node's
	// liveness reactor calls DropPeer, and a drop stuck behind a 1 s dial
	// delayed every hurried election of the node by that second).
	wmu sync.Mutex

	mu      sync.Mutex
	inner   net.Conn
	dropped bool
	closed  bool
}

func (c *dialedConn) conn() net.Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inner
}

func (c *dialedConn) drop() {
	c.mu.Lock()
	if c.closed || c.dropped {
		c.mu.Unlock()
		return
	}
	c.dropped = true
	inner := c.inner
	c.mu.Unlock()
	_ = inner.Close()
}

// Write sends on the connection, first dialing a new one if it was
// dropped. Raft writes a whole request before it reads the answer, so a
// write on a dropped connection starts an RPC: nothing is lost with the
// old connection.
func (c *dialedConn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	redial := c.dropped && !c.closed
	c.mu.Unlock()
	if redial {
		nc, err := c.redial()
		if err != nil {
			return 0, err
		}
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			_ = nc.Close()
			return 0, net.ErrClosed
		}
		c.inner, c.dropped = nc, false
		c.mu.Unlock()
	}
	return c.conn().Write(b)
}

func (c *dialedConn) Read(b []byte) (int, error) { return c.conn().Read(b) }

func (c *dialedConn) Close() error {
	c.mu.Lock()
	first := !c.closed
	c.closed = true
	inner := c.inner
	c.mu.Unlock()
	if first {
		c.set.remove(c)
	}
	return inner.Close()
}

func (c *dialedConn) LocalAddr() net.Addr  { return c.conn().LocalAddr() }
func (c *dialedConn) RemoteAddr() net.Addr { return c.conn().RemoteAddr() }

func (c *dialedConn) SetDeadline(t time.Time) error      { return c.conn().SetDeadline(t) }
func (c *dialedConn) SetReadDeadline(t time.Time) error  { return c.conn().SetReadDeadline(t) }
func (c *dialedConn) SetWriteDeadline(t time.Time) error { return c.conn().SetWriteDeadline(t) }

// DropPeer drops every raft connection this node dialed to addr (any
// group) and returns how many. The node calls it when a peer turns
// unreachable and when it answers again: a TCP connection that carried
// data through a partition or a pause retransmits on an exponential
// backoff (seconds after a few seconds of silence), so raft's heartbeats
// and votes sent on it after the heal arrived seconds late, and elections
// failed meanwhile. A dropped connection dials anew on its next write.
func (m *Mux) DropPeer(addr string) int { return m.dialed.drop(addr) }
