package mux

import (
	"net"
	"sync"
)

// dialedSet tracks the raft connections this node dialed, by peer address,
// so they can be closed when the peer's reachability changes (DropPeer).
type dialedSet struct {
	mu    sync.Mutex
	conns map[string]map[*dialedConn]struct{}
}

func (s *dialedSet) add(addr string, c net.Conn) net.Conn {
	dc := &dialedConn{Conn: c, addr: addr, set: s}
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

// drop closes every tracked connection to addr and returns how many.
func (s *dialedSet) drop(addr string) int {
	s.mu.Lock()
	var cs []*dialedConn
	for dc := range s.conns[addr] {
		cs = append(cs, dc)
	}
	delete(s.conns, addr)
	s.mu.Unlock()
	for _, dc := range cs {
		_ = dc.Conn.Close()
	}
	return len(cs)
}

// dialedConn is a raft connection this node dialed.
type dialedConn struct {
	net.Conn
	addr string
	set  *dialedSet
	once sync.Once
}

func (c *dialedConn) Close() error {
	c.once.Do(func() { c.set.remove(c) })
	return c.Conn.Close()
}

// DropPeer closes every raft connection this node dialed to addr (any
// group) and returns how many it closed. The node calls it when a peer
// turns unreachable and when it answers again: a TCP connection that
// carried data through a partition or a pause retransmits on an
// exponential backoff (seconds after a few seconds of silence), so raft's
// heartbeats and votes sent on it after the heal arrived seconds late, and
// elections failed meanwhile. Raft dials a new connection for the next
// RPC.
func (m *Mux) DropPeer(addr string) int { return m.dialed.drop(addr) }
