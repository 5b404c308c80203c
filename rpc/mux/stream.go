package mux

import (
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// StreamLayer is a raft.StreamLayer for one raft group over the shared port.
// The group travels in the connection header, so every group on every node
// uses the same ServerAddress: the node's bind address.
type StreamLayer struct {
	*Listener
	group     uint16
	advertise net.Addr
	dialed    *dialedSet
	// Dialer, if set, replaces the TCP dial; tests inject faults with it.
	Dialer func(addr string, proto byte, group uint16, timeout time.Duration) (net.Conn, error)
}

// StreamLayer registers a raft transport for a group. advertise is the
// address peers reach this node at (nil: the listener's address).
func (m *Mux) StreamLayer(group uint16, advertise net.Addr) (*StreamLayer, error) {
	l, err := m.Listen(ProtoRaft, group)
	if err != nil {
		return nil, err
	}
	if advertise == nil {
		advertise = m.Addr()
	}
	return &StreamLayer{Listener: l, group: group, advertise: advertise, dialed: &m.dialed}, nil
}

// maxRaftDial caps raft's dial timeout (its transport passes 10 s): a
// dial into a partition or to a paused node waits on SYN retransmissions,
// and raft's next heartbeat or vote to that peer waited behind it for
// seconds after the heal. A failed dial is retried by raft.
const maxRaftDial = time.Second

// Dial implements raft.StreamLayer.
func (s *StreamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	dial := Dial
	if s.Dialer != nil {
		dial = s.Dialer
	}
	timeout = min(timeout, maxRaftDial)
	c, err := dial(string(addr), ProtoRaft, s.group, timeout)
	if err != nil || s.dialed == nil {
		return c, err
	}
	return s.dialed.add(string(addr), c, func() (net.Conn, error) {
		return dial(string(addr), ProtoRaft, s.group, timeout)
	}), nil
}

// Addr implements net.Listener with the advertised address.
func (s *StreamLayer) Addr() net.Addr { return s.advertise }
