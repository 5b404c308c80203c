package faultnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/timemachine-db/timemachine/rpc/mux"
	"github.com/timemachine-db/timemachine/rpc/peer"
)

// ErrCut is the cause of a dial refused because the link is cut. Dials
// fail with a *net.OpError wrapping it, as a refused connection would.
var ErrCut = errors.New("faultnet: link cut")

type link struct{ a, b string } // unordered: a < b

func linkOf(x, y string) link {
	if x > y {
		x, y = y, x
	}
	return link{x, y}
}

// Network is the fault state shared by every node of a test cluster. The
// zero value is not usable; call New.
type Network struct {
	mu       sync.Mutex
	names    map[string]string // bind address → node name
	cut      map[link]bool
	isolated map[string]bool
	conns    map[*conn]struct{}
	dial     func(addr string, proto byte, group uint16, timeout time.Duration) (net.Conn, error)
}

// New returns a Network with every link up.
func New() *Network {
	return &Network{
		names:    map[string]string{},
		cut:      map[link]bool{},
		isolated: map[string]bool{},
		conns:    map[*conn]struct{}{},
		dial:     mux.Dial,
	}
}

// Register names the node listening on bindAddr. Dials are matched to
// nodes by the exact address string, so register the address peers dial
// (the advertised bind address). Dials to unregistered addresses are never
// cut.
func (n *Network) Register(name, bindAddr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.names[bindAddr] = name
}

// MuxDialer returns the dial hook node self uses for raft
// (mux.StreamLayer.Dialer).
func (n *Network) MuxDialer(self string) func(addr string, proto byte, group uint16, timeout time.Duration) (net.Conn, error) {
	return func(addr string, proto byte, group uint16, timeout time.Duration) (net.Conn, error) {
		return n.dialFrom(self, addr, proto, group, timeout)
	}
}

// PeerDialer returns the dial hook node self uses for node-to-node calls
// (peer.ClientOptions.Dial).
func (n *Network) PeerDialer(self string) peer.Dialer {
	return func(addr string, timeout time.Duration) (net.Conn, error) {
		return n.dialFrom(self, addr, mux.ProtoRPC, 0, timeout)
	}
}

// Partition cuts every link between a and b in both directions: their
// existing connections are closed before it returns, and new dials fail
// until Heal.
func (n *Network) Partition(a, b string) {
	n.mu.Lock()
	if a != b {
		n.cut[linkOf(a, b)] = true
	}
	victims := n.crossingLocked()
	n.mu.Unlock()
	closeAll(victims)
}

// Isolate cuts a from every other node, including ones registered later.
func (n *Network) Isolate(a string) {
	n.mu.Lock()
	n.isolated[a] = true
	victims := n.crossingLocked()
	n.mu.Unlock()
	closeAll(victims)
}

// Heal restores every link. Connections closed by the cut stay closed; the
// nodes redial as they would after any network failure.
func (n *Network) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.cut)
	clear(n.isolated)
}

// Connected reports whether a and b can currently reach each other.
func (n *Network) Connected(a, b string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return !n.blockedLocked(a, b)
}

// Conns counts the open connections dialed from `from` to `to` through
// this Network.
func (n *Network) Conns(from, to string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := 0
	for c := range n.conns {
		if c.from == from && c.to == to {
			k++
		}
	}
	return k
}

func (n *Network) blockedLocked(a, b string) bool {
	if a == b || a == "" || b == "" {
		return false
	}
	return n.isolated[a] || n.isolated[b] || n.cut[linkOf(a, b)]
}

// crossingLocked removes and returns the tracked connections across a cut.
func (n *Network) crossingLocked() []*conn {
	var out []*conn
	for c := range n.conns {
		if n.blockedLocked(c.from, c.to) {
			delete(n.conns, c)
			out = append(out, c)
		}
	}
	return out
}

func closeAll(cs []*conn) {
	for _, c := range cs {
		c.cut.Store(true)
		_ = c.Conn.Close()
	}
}

func (n *Network) dialFrom(self, addr string, proto byte, group uint16, timeout time.Duration) (net.Conn, error) {
	n.mu.Lock()
	target := n.names[addr]
	blocked := n.blockedLocked(self, target)
	n.mu.Unlock()
	if blocked {
		return nil, refused(addr)
	}
	c, err := n.dial(addr, proto, group, timeout)
	if err != nil {
		return nil, err
	}
	fc := &conn{Conn: c, n: n, from: self, to: target}
	n.mu.Lock()
	// The link may have been cut while we dialed.
	if n.blockedLocked(self, target) {
		n.mu.Unlock()
		_ = c.Close()
		return nil, refused(addr)
	}
	n.conns[fc] = struct{}{}
	n.mu.Unlock()
	return fc, nil
}

func refused(addr string) error {
	var ra net.Addr
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		ra = net.TCPAddrFromAddrPort(ap)
	}
	return &net.OpError{Op: "dial", Net: "tcp", Addr: ra, Err: ErrCut}
}

// conn tracks one dialed connection so a cut can close it.
type conn struct {
	net.Conn
	n        *Network
	from, to string
	cut      atomic.Bool // closed by a cut: errors say so
}

// cutErr makes the error of an operation on a cut connection wrap ErrCut
// (and still net.ErrClosed), so a test failure names the real cause.
func (c *conn) cutErr(op string, err error) error {
	if err == nil || !c.cut.Load() {
		return err
	}
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(),
		Err: fmt.Errorf("%w: %w", ErrCut, err)}
}

func (c *conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	return n, c.cutErr("read", err)
}

func (c *conn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	return n, c.cutErr("write", err)
}

func (c *conn) Close() error {
	c.n.mu.Lock()
	delete(c.n.conns, c)
	c.n.mu.Unlock()
	return c.Conn.Close()
}
