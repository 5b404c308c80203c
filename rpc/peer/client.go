package peer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/timemachine-db/timemachine/rpc/mux"
)

// Method identifies a call; the node defines the values.
type Method uint8

// Dialer opens a connection to a peer's internal port, mux header already
// sent. Tests replace it to inject faults (see internal/faultnet).
type Dialer func(addr string, timeout time.Duration) (net.Conn, error)

// DialMux is the default Dialer: TCP to addr with the ProtoRPC header.
func DialMux(addr string, timeout time.Duration) (net.Conn, error) {
	return mux.Dial(addr, mux.ProtoRPC, 0, timeout)
}

// ClientOptions configures a Client. Zero values take the defaults.
type ClientOptions struct {
	// Dial opens connections; default DialMux.
	Dial Dialer
	// ConnsPerPeer is how many connections are kept to each peer (default
	// 2). More than one lets a large body being written on one connection
	// not delay small calls, which go to the least-loaded connection.
	ConnsPerPeer int
	// DialTimeout bounds one dial (default 2s).
	DialTimeout time.Duration
	// DeadPeerTimeout: a connection with calls outstanding that receives
	// nothing for this long is declared dead, failing its calls with
	// ErrUnreachable. It catches peers that vanish without a reset (power
	// loss, a real network partition), which TCP itself notices only after
	// minutes. While calls are outstanding and the connection is quiet the
	// client pings every quarter of it; the peer's transport answers
	// independently of slow handlers. Default 5s; negative disables.
	DeadPeerTimeout time.Duration
	// OnConnLost, if set, is told (on a goroutine of its own) the address
	// of a peer whose connection broke — closed or reset by the peer, a
	// failed read or write, silence with calls outstanding — though not
	// one this client closed itself (Close, Drop). The liveness check
	// pings that peer at once rather than at its next round.
	OnConnLost func(addr string)
	// Logger; default slog.Default().
	Logger *slog.Logger
}

const (
	defaultConnsPerPeer    = 2
	defaultDialTimeout     = 2 * time.Second
	defaultDeadPeerTimeout = 5 * time.Second
)

// Client calls peers. It is safe for concurrent use; one Client per node is
// enough, it keeps its connections per peer address.
type Client struct {
	opts ClientOptions
	log  *slog.Logger

	mu     sync.RWMutex
	peers  map[string]*peerConns
	closed bool
}

// NewClient returns a Client; connections are dialed on first use.
func NewClient(o ClientOptions) *Client {
	if o.Dial == nil {
		o.Dial = DialMux
	}
	if o.ConnsPerPeer <= 0 {
		o.ConnsPerPeer = defaultConnsPerPeer
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = defaultDialTimeout
	}
	if o.DeadPeerTimeout == 0 {
		o.DeadPeerTimeout = defaultDeadPeerTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Client{opts: o, log: o.Logger.With("component", "peer-client"), peers: map[string]*peerConns{}}
}

// Call sends one request to the peer at addr and waits for its answer or for
// ctx. body is not copied: it must not be modified after Call is made (even
// if Call returned early on ctx, the body may still be being written). The
// returned body belongs to the caller.
//
// Errors: *RemoteError if the handler failed; ErrUnreachable (wrapping the
// dial or I/O error) if the peer could not be reached or the connection
// broke — a request already sent may or may not have run, so Call never
// retries by itself; ctx.Err() wrapped if ctx ended first;
// ErrFrameTooLarge; ErrClosed.
func (c *Client) Call(ctx context.Context, addr string, m Method, body []byte) ([]byte, error) {
	if len(body) > MaxBodySize {
		return nil, fmt.Errorf("peer: call %d to %s: body of %d bytes: %w", m, addr, len(body), ErrFrameTooLarge)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("peer: call %d to %s: %w", m, addr, err)
	}
	p, err := c.peer(addr)
	if err != nil {
		return nil, err
	}
	cc, err := p.get(ctx)
	if err != nil {
		return nil, fmt.Errorf("peer: call %d to %s: %w", m, addr, err)
	}
	cl := &call{done: make(chan result, 1)}
	id, err := cc.register(cl)
	if err != nil {
		return nil, fmt.Errorf("peer: call %d to %s: %w", m, addr, err)
	}
	// A send error means the connection is failing; fail() answers every
	// registered call, ours included, so just wait.
	_ = cc.w.send(frame{id: id, kind: kindRequest, method: byte(m), payload: body})
	select {
	case r := <-cl.done:
		if r.err != nil {
			var re *RemoteError
			if errors.As(r.err, &re) {
				return nil, r.err // as the handler sent it, no wrapping
			}
			return nil, fmt.Errorf("peer: call %d to %s: %w", m, addr, r.err)
		}
		return r.body, nil
	case <-ctx.Done():
		cc.forget(id) // a late answer finds no one and is dropped
		return nil, fmt.Errorf("peer: call %d to %s: %w", m, addr, ctx.Err())
	}
}

// Ping sends a liveness ping carrying this node's wall time (Unix ns) to
// the peer at addr and returns the peer's wall time when it answered (0
// from a peer that does not send one). The peer's transport answers it
// itself, on its reader goroutine, so a busy handler cannot delay it; a
// paused or cut-off peer does not answer at all. Errors are as for Call.
func (c *Client) Ping(ctx context.Context, addr string, wall int64) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("peer: ping %s: %w", addr, err)
	}
	p, err := c.peer(addr)
	if err != nil {
		return 0, err
	}
	cc, err := p.get(ctx)
	if err != nil {
		return 0, fmt.Errorf("peer: ping %s: %w", addr, err)
	}
	cl := &call{done: make(chan result, 1)}
	id, err := cc.register(cl)
	if err != nil {
		return 0, fmt.Errorf("peer: ping %s: %w", addr, err)
	}
	_ = cc.w.send(frame{id: id, kind: kindPing, payload: binary.BigEndian.AppendUint64(nil, uint64(wall))})
	select {
	case r := <-cl.done:
		if r.err != nil {
			return 0, fmt.Errorf("peer: ping %s: %w", addr, r.err)
		}
		if len(r.body) != 8 {
			return 0, nil
		}
		return int64(binary.BigEndian.Uint64(r.body)), nil
	case <-ctx.Done():
		cc.forget(id)
		return 0, fmt.Errorf("peer: ping %s: %w", addr, ctx.Err())
	}
}

// PingAsync is Ping without a goroutine waiting for the answer: done gets
// the outcome once — from the connection's reader goroutine, or from
// whoever fails the connection, or at once — unless cancel was called
// first; it must not block. An idle node pings every peer five times a
// second (ten before), and the goroutine each Ping woke was ~10 % of the node's
// wake-ups (docs/scaling.md, fifth pass). While the first connection to
// addr is still being dialed the ping waits for it on a goroutine of its
// own, as Ping does. There is no timeout: the caller cancels a ping it
// gave up on.
func (c *Client) PingAsync(addr string, wall int64, done func(peerWall int64, err error)) (cancel func()) {
	p, err := c.peer(addr)
	if err != nil {
		done(0, err)
		return func() {}
	}
	cc, err := p.ready()
	if err != nil {
		done(0, fmt.Errorf("peer: ping %s: %w", addr, err))
		return func() {}
	}
	if cc == nil {
		ctx, stop := context.WithCancel(context.Background())
		go func() {
			t2, err := c.Ping(ctx, addr, wall)
			if ctx.Err() == nil {
				done(t2, err)
			}
		}()
		return stop
	}
	cl := &call{cb: func(r result) {
		switch {
		case r.err != nil:
			done(0, fmt.Errorf("peer: ping %s: %w", addr, r.err))
		case len(r.body) != 8:
			done(0, nil)
		default:
			done(int64(binary.BigEndian.Uint64(r.body)), nil)
		}
	}}
	id, err := cc.register(cl)
	if err != nil {
		done(0, fmt.Errorf("peer: ping %s: %w", addr, err))
		return func() {}
	}
	_ = cc.w.send(frame{id: id, kind: kindPing, payload: binary.BigEndian.AppendUint64(nil, uint64(wall))})
	return func() { cc.forget(id) }
}

// Drop closes the connections to addr at once, failing the calls waiting
// on them with ErrUnreachable: the node's liveness check found the peer
// dead (paused, cut off), and a call would otherwise wait for
// DeadPeerTimeout. New calls dial again. The calls' errors wrap both
// ErrUnreachable and ErrDropped (and why).
func (c *Client) Drop(addr string, why error) {
	c.mu.RLock()
	p := c.peers[addr]
	c.mu.RUnlock()
	if p == nil {
		return
	}
	p.mu.Lock()
	conns := append([]*clientConn(nil), p.conns...)
	p.mu.Unlock()
	for _, cc := range conns {
		cc.fail(unreachable(fmt.Errorf("%w: %w", ErrDropped, why)))
	}
}

// Close fails every outstanding call with ErrClosed and closes all
// connections. Later calls fail with ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	peers := c.peers
	c.peers = nil
	c.mu.Unlock()
	for _, p := range peers {
		p.close()
	}
	return nil
}

func (c *Client) peer(addr string) (*peerConns, error) {
	c.mu.RLock()
	p, ok := c.peers[addr]
	closed := c.closed
	c.mu.RUnlock()
	if ok {
		return p, nil
	}
	if closed {
		return nil, ErrClosed
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if p, ok = c.peers[addr]; !ok {
		p = &peerConns{c: c, addr: addr, wait: make(chan struct{}), log: c.log.With("peer", addr)}
		c.peers[addr] = p
	}
	return p, nil
}

// peerConns is the connection pool for one peer address.
type peerConns struct {
	c    *Client
	addr string
	log  *slog.Logger
	rr   atomic.Uint32

	mu      sync.Mutex
	conns   []*clientConn // live connections
	dialing int           // dials in flight
	wait    chan struct{} // closed and replaced whenever a dial ends
	lastErr error         // why the last dial or connection failed
	closed  bool
}

// get returns a live connection, dialing if there is none. It tops the pool
// up to ConnsPerPeer in the background, so a broken connection is replaced
// without making calls wait while another one still works.
func (p *peerConns) get(ctx context.Context) (*clientConn, error) {
	p.mu.Lock()
	if !p.closed {
		for len(p.conns)+p.dialing < p.c.opts.ConnsPerPeer {
			p.dialing++
			go p.dial()
		}
	}
	for {
		if p.closed {
			p.mu.Unlock()
			return nil, ErrClosed
		}
		if len(p.conns) > 0 {
			cc := p.pick()
			p.mu.Unlock()
			return cc, nil
		}
		if p.dialing == 0 {
			err := p.lastErr
			if err == nil {
				err = unreachable(errors.New("no connection"))
			}
			p.mu.Unlock()
			return nil, err
		}
		w := p.wait
		p.mu.Unlock()
		select {
		case <-w:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		p.mu.Lock()
	}
}

// ready is get without waiting: a live connection, nil while the first
// ones are being dialed, or the error of the last failed dial.
func (p *peerConns) ready() (*clientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	for len(p.conns)+p.dialing < p.c.opts.ConnsPerPeer {
		p.dialing++
		go p.dial()
	}
	if len(p.conns) > 0 {
		return p.pick(), nil
	}
	if p.dialing == 0 {
		if p.lastErr != nil {
			return nil, p.lastErr
		}
		return nil, unreachable(errors.New("no connection"))
	}
	return nil, nil
}

// pick chooses the live connection with the fewest bytes waiting to be
// written, starting round-robin so equal ones share the load. p.mu held.
func (p *peerConns) pick() *clientConn {
	n := len(p.conns)
	start := int(p.rr.Add(1))
	best := p.conns[start%n]
	for i := 1; i < n; i++ {
		if cc := p.conns[(start+i)%n]; cc.w.queued.Load() < best.w.queued.Load() {
			best = cc
		}
	}
	return best
}

// dial runs without any caller's ctx: callers that give up stop waiting,
// the dial completes (bounded by DialTimeout) and serves later calls.
func (p *peerConns) dial() {
	conn, err := p.c.opts.Dial(p.addr, p.c.opts.DialTimeout)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dialing--
	close(p.wait)
	p.wait = make(chan struct{})
	switch {
	case err != nil:
		p.lastErr = unreachable(err)
		p.log.Debug("dial failed", "error", err)
	case p.closed:
		_ = conn.Close()
	default:
		p.conns = append(p.conns, newClientConn(p, conn))
	}
}

// remove drops a failed connection from the pool.
func (p *peerConns) remove(cc *clientConn, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, x := range p.conns {
		if x == cc {
			p.conns = append(p.conns[:i], p.conns[i+1:]...)
			break
		}
	}
	if !p.closed {
		p.lastErr = err
	}
}

func (p *peerConns) close() {
	p.mu.Lock()
	p.closed = true
	conns := append([]*clientConn(nil), p.conns...)
	close(p.wait) // wake callers waiting for a dial; they see closed
	p.wait = make(chan struct{})
	p.mu.Unlock()
	for _, cc := range conns {
		cc.fail(ErrClosed)
	}
}

type result struct {
	body []byte
	err  error
}

type call struct {
	done chan result // buffered 1: exactly one result is ever sent
	// cb, if set, takes the result instead of done (PingAsync), on the
	// goroutine that has it: it must not block.
	cb func(result)
}

func (cl *call) deliver(r result) {
	if cl.cb != nil {
		cl.cb(r)
		return
	}
	cl.done <- r
}

// clientConn is one multiplexed connection to a peer: one writer goroutine
// (frameWriter), one reader goroutine dispatching answers by id, and, if
// DeadPeerTimeout is enabled, a keepalive timer that runs only while calls
// are outstanding.
type clientConn struct {
	p    *peerConns
	conn net.Conn
	w    *frameWriter
	done chan struct{}

	lastRecv  atomic.Int64 // now() when bytes last arrived
	busySince atomic.Int64 // now() when pending last went from empty to non-empty

	mu      sync.Mutex
	pending map[uint64]*call
	nextID  uint64
	err     error // set once failed

	// keepalive's timer (nil when DeadPeerTimeout is disabled): armed when
	// pending goes from empty to non-empty and stopped when it empties,
	// both under mu, so that an idle connection — or one whose calls are
	// all answered within a quarter of the timeout, as the liveness pings
	// are — never wakes the process for it (it was a ticker per
	// connection: ~3 wake-ups a second on an idle node, docs/scaling.md).
	kaTimer *time.Timer
	kaEvery time.Duration
}

func newClientConn(p *peerConns, conn net.Conn) *clientConn {
	cc := &clientConn{p: p, conn: conn, done: make(chan struct{}), pending: map[uint64]*call{}}
	cc.lastRecv.Store(now())
	cc.w = newFrameWriter(conn, func(err error) { cc.fail(unreachable(fmt.Errorf("write: %w", err))) })
	if t := p.c.opts.DeadPeerTimeout; t > 0 {
		cc.kaEvery = max(t/4, time.Millisecond)
		cc.kaTimer = time.AfterFunc(time.Hour, func() { cc.keepalive(t) })
		cc.kaTimer.Stop()
	}
	go cc.readLoop()
	return cc
}

func (cc *clientConn) register(cl *call) (uint64, error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.err != nil {
		return 0, cc.err
	}
	if len(cc.pending) == 0 {
		cc.busySince.Store(now())
		if cc.kaTimer != nil {
			cc.kaTimer.Reset(cc.kaEvery)
		}
	}
	cc.nextID++
	cc.pending[cc.nextID] = cl
	return cc.nextID, nil
}

func (cc *clientConn) forget(id uint64) {
	cc.mu.Lock()
	cc.remove(id)
	cc.mu.Unlock()
}

// remove takes call id off pending (cc.mu held) and stops the keepalive
// timer when nothing is left waiting.
func (cc *clientConn) remove(id uint64) *call {
	cl := cc.pending[id]
	delete(cc.pending, id)
	if len(cc.pending) == 0 && cc.kaTimer != nil {
		cc.kaTimer.Stop()
	}
	return cl
}

// fail tears the connection down and fails every waiting call with err at
// once: callers learn the peer is gone without waiting for their timeouts.
func (cc *clientConn) fail(err error) {
	cc.mu.Lock()
	if cc.err != nil {
		cc.mu.Unlock()
		return
	}
	cc.err = err
	pending := cc.pending
	cc.pending = nil
	if cc.kaTimer != nil {
		cc.kaTimer.Stop()
	}
	cc.mu.Unlock()

	close(cc.done)
	if len(pending) > 0 || !errors.Is(err, ErrClosed) {
		abandon(cc.conn)
	} else {
		_ = cc.conn.Close()
	}
	cc.w.stop(err)
	cc.p.remove(cc, err)
	for _, cl := range pending {
		cl.deliver(result{err: err})
	}
	if f := cc.p.c.opts.OnConnLost; f != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrDropped) {
		go f(cc.p.addr)
	}
	if !errors.Is(err, ErrClosed) {
		cc.p.log.Info("peer connection lost", "calls_failed", len(pending), "error", err)
	}
}

// abandon makes the coming Close of a failed connection a reset (SO_LINGER
// 0): the kernel then throws away request bytes it has not delivered yet.
// A plain close leaves them queued on an orphaned socket that keeps
// retransmitting, and when a partition heals the peer reads and runs a
// request its caller gave up on seconds earlier. Callers treat a failed
// write as of unknown outcome and find the outcome out with the current
// leader (service/resolve.go), so a late copy must never arrive: in the
// nemesis (seed 11358230646049423404, cycle 48) a create forwarded to a
// leader cut off by a partition reached it 6 s later, after the client had
// its 201 from the new leader and a DELETE 204, and re-created the job.
//
// The TCP connection itself is closed first: a TLS connection's own Close
// writes a close_notify alert and waits up to 5 s for a peer that may be
// cut off; the outer Close then fails at once.
func abandon(c net.Conn) {
	outer := c
	for c != nil {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
			_ = tc.Close()
			break
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = u.NetConn()
	}
	_ = outer.Close()
}

func (cc *clientConn) readLoop() {
	fr := newFrameReader(liveReader{r: cc.conn, last: &cc.lastRecv})
	for {
		f, err := fr.read()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("connection closed by peer: %w", err)
			}
			cc.fail(unreachable(err))
			return
		}
		switch f.kind {
		case kindOK, kindError:
			cc.mu.Lock()
			cl := cc.remove(f.id)
			cc.mu.Unlock()
			if cl == nil {
				continue // its caller gave up (ctx); drop the late answer
			}
			if f.kind == kindOK {
				cl.deliver(result{body: f.payload})
				continue
			}
			re, err := decodeError(f.payload)
			if err != nil {
				cl.deliver(result{err: unreachable(err)})
				cc.fail(unreachable(err))
				return
			}
			cl.deliver(result{err: re})
		case kindPong:
			// lastRecv is already updated, which is what keepalive pings
			// (id 0) are for; a Ping call waits for its own.
			if f.id == 0 {
				continue
			}
			cc.mu.Lock()
			cl := cc.remove(f.id)
			cc.mu.Unlock()
			if cl != nil {
				cl.deliver(result{body: f.payload})
			}
		default:
			cc.fail(unreachable(fmt.Errorf("%w: kind %d sent to a client", errBadFrame, f.kind)))
			return
		}
	}
}

// keepalive runs every quarter of timeout while calls are outstanding (the
// timer armed by register, stopped when pending empties): it declares the
// connection dead when nothing has arrived for timeout, and pings when it
// has been quiet for a quarter of it. Quiet periods are measured from the
// later of the last received byte and the moment calls started waiting, so
// an idle connection is not condemned by its first new call.
func (cc *clientConn) keepalive(timeout time.Duration) {
	cc.mu.Lock()
	busy := cc.err == nil && len(cc.pending) > 0
	if busy {
		// Re-armed under mu: a concurrent remove that empties pending
		// stops it after this, never before.
		cc.kaTimer.Reset(cc.kaEvery)
	}
	cc.mu.Unlock()
	if !busy {
		return
	}
	quiet := time.Duration(now() - max(cc.lastRecv.Load(), cc.busySince.Load()))
	if quiet >= timeout {
		cc.fail(unreachable(fmt.Errorf("nothing received for %v with calls outstanding", quiet.Round(time.Millisecond))))
		return
	}
	if quiet >= timeout/4 {
		_ = cc.w.send(frame{kind: kindPing})
	}
}
