package mux

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Protocols carried on the shared port.
const (
	ProtoRaft byte = 1 // a raft group's transport; group = slot, or MetaGroup
	ProtoRPC  byte = 2 // node-to-node requests
)

// Version is the header version this binary speaks.
const Version byte = 1

// MetaGroup is the group id of the meta raft group.
const MetaGroup uint16 = 0xFFFF

const headerLen = 4

// headerTimeout bounds how long an accepted connection may take to send its
// header, so a stray client cannot pin a goroutine.
const headerTimeout = 10 * time.Second

// ErrClosed is returned by Accept after the listener closed. It wraps
// net.ErrClosed so ordinary accept loops recognise it.
var ErrClosed = fmt.Errorf("mux: listener closed: %w", net.ErrClosed)

type route struct {
	proto byte
	group uint16
}

// Mux accepts connections on one TCP listener and routes them by header.
type Mux struct {
	ln      net.Listener
	log     *slog.Logger
	tls     *tls.Config   // nil: plain TCP (tls.go)
	pending chan struct{} // connections in their handshake or header
	refused refusals
	mu      sync.Mutex
	subs    map[route]*Listener
	wg      sync.WaitGroup
	done    chan struct{}
	once    sync.Once
	dialed  dialedSet // raft connections dialed through StreamLayers (DropPeer)
}

// Listen binds addr and starts routing connections.
func Listen(addr string, log *slog.Logger) (*Mux, error) {
	return ListenWith(addr, Options{Logger: log})
}

// ListenWith is Listen with options (mutual TLS).
func ListenWith(addr string, o Options) (*Mux, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on bind address %s: %w", addr, err)
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "mux")
	m := &Mux{ln: ln, log: log, tls: o.TLS, pending: make(chan struct{}, maxPending),
		refused: refusals{log: log}, subs: map[route]*Listener{}, done: make(chan struct{})}
	m.wg.Add(1)
	go m.serve()
	return m, nil
}

// Addr is the bound address.
func (m *Mux) Addr() net.Addr { return m.ln.Addr() }

// serve accepts until Close. An accept error (out of file descriptors)
// never stops the internal port: it is retried with a backoff.
func (m *Mux) serve() {
	defer m.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		c, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			m.log.Warn("accept failed; retrying", "error", err, "retry_in", backoff)
			select {
			case <-m.done:
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		select {
		case m.pending <- struct{}{}:
		default:
			m.refused.add(RefusedBusy, c.RemoteAddr(), errors.New("too many connections in their handshake"))
			_ = c.Close()
			continue
		}
		go m.route(c)
	}
}

func (m *Mux) route(c net.Conn) {
	released := false
	release := func() {
		if !released {
			released = true
			<-m.pending
		}
	}
	defer release()
	remote := c.RemoteAddr()
	if m.tls != nil {
		tc, err := m.handshake(c)
		if err != nil {
			m.refused.add(RefusedTLS, remote, err)
			_ = c.Close()
			return
		}
		c = tc
	}
	var hdr [headerLen]byte
	_ = c.SetReadDeadline(time.Now().Add(headerTimeout))
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		m.refused.add(RefusedHeader, remote, err)
		_ = c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	if hdr[1] != Version {
		m.refused.add(RefusedHeader, remote, fmt.Errorf("unknown header version %d", hdr[1]))
		_ = c.Close()
		return
	}
	release()
	r := route{proto: hdr[0], group: uint16(hdr[2])<<8 | uint16(hdr[3])}
	m.mu.Lock()
	sub := m.subs[r]
	m.mu.Unlock()
	if sub == nil {
		m.refused.add(RefusedRoute, remote, fmt.Errorf("protocol %d group %d is not served here", r.proto, r.group))
	}
	if sub == nil || !sub.deliver(c) {
		_ = c.Close()
	}
}

// Listen registers a sub-listener for (proto, group). Registering a pair
// twice replaces nothing and fails.
func (m *Mux) Listen(proto byte, group uint16) (*Listener, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := route{proto, group}
	if _, ok := m.subs[r]; ok {
		return nil, fmt.Errorf("mux: protocol %d group %d already registered", proto, group)
	}
	l := &Listener{m: m, r: r, ch: make(chan net.Conn, 64), closed: make(chan struct{})}
	m.subs[r] = l
	return l, nil
}

func (m *Mux) unregister(l *Listener) {
	m.mu.Lock()
	if m.subs[l.r] == l {
		delete(m.subs, l.r)
	}
	m.mu.Unlock()
}

// Close stops accepting, closes the shared listener and every registered
// listener (so their Accept returns ErrClosed).
func (m *Mux) Close() error {
	var err error
	m.once.Do(func() {
		close(m.done)
		err = m.ln.Close()
		m.wg.Wait()
		m.mu.Lock()
		subs := make([]*Listener, 0, len(m.subs))
		for _, l := range m.subs {
			subs = append(subs, l)
		}
		m.mu.Unlock()
		for _, l := range subs {
			_ = l.Close()
		}
	})
	return err
}

// Dial connects to a peer's mux and sends the header for (proto, group).
// TCP keepalives are short so a peer that vanished without a reset (power
// loss, a real partition) is noticed in seconds, not minutes.
func Dial(addr string, proto byte, group uint16, timeout time.Duration) (net.Conn, error) {
	c, err := dialTCP(addr, timeout)
	if err != nil {
		return nil, err
	}
	if err := sendHeader(c, addr, proto, group, timeout); err != nil {
		return nil, err
	}
	return c, nil
}

func dialTCP(addr string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout, KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 5 * time.Second, Interval: 2 * time.Second, Count: 3}}
	return d.Dial("tcp", addr)
}

// sendHeader writes the header for (proto, group); it closes c on error.
func sendHeader(c net.Conn, addr string, proto byte, group uint16, timeout time.Duration) error {
	hdr := [headerLen]byte{proto, Version, byte(group >> 8), byte(group)}
	_ = c.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := c.Write(hdr[:]); err != nil {
		_ = c.Close()
		return fmt.Errorf("mux: send header to %s: %w", addr, err)
	}
	_ = c.SetWriteDeadline(time.Time{})
	return nil
}

// Listener is a net.Listener for one (protocol, group) on the shared port.
type Listener struct {
	m      *Mux
	r      route
	ch     chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func (l *Listener) deliver(c net.Conn) bool {
	select {
	case <-l.closed:
		return false
	default:
	}
	select {
	case l.ch <- c:
		return true
	case <-l.closed:
		return false
	case <-time.After(headerTimeout):
		return false
	}
}

// Accept waits for the next connection.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.closed:
		return nil, ErrClosed
	}
}

// Close unregisters the listener; the shared port stays open.
func (l *Listener) Close() error {
	l.once.Do(func() {
		close(l.closed)
		l.m.unregister(l)
		for {
			select {
			case c := <-l.ch:
				_ = c.Close()
			default:
				return
			}
		}
	})
	return nil
}

// Addr is the shared port's address.
func (l *Listener) Addr() net.Addr { return l.m.Addr() }
