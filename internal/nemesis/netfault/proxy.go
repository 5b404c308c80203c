package netfault

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy forwards TCP connections to one target, holding every chunk of
// bytes for the current delay (in both directions) before passing it on.
// With delay 0 it is a plain relay. Order is kept; throughput is not
// limited (chunks in flight are buffered, up to a bound per direction).
type Proxy struct {
	ln     net.Listener
	target string
	dial   func(ctx context.Context, target string) (net.Conn, error)
	delay  atomic.Int64 // ns

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewProxy serves ln, dialing target with dial for every accepted
// connection.
func NewProxy(ln net.Listener, target string, dial func(ctx context.Context, target string) (net.Conn, error)) *Proxy {
	p := &Proxy{ln: ln, target: target, dial: dial, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p
}

// Addr is the listening address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetDelay sets the one-way delay of every chunk from now on.
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// Delay is the current delay.
func (p *Proxy) Delay() time.Duration { return time.Duration(p.delay.Load()) }

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.handle(c)
		}()
	}
}

func (p *Proxy) handle(in net.Conn) {
	if !p.track(in) {
		in.Close()
		return
	}
	defer p.untrack(in)
	defer in.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	out, err := p.dial(ctx, p.target)
	cancel()
	if err != nil {
		return
	}
	if !p.track(out) {
		out.Close()
		return
	}
	defer p.untrack(out)
	defer out.Close()
	done := make(chan struct{}, 2)
	go func() { p.pipe(out, in); done <- struct{}{} }()
	go func() { p.pipe(in, out); done <- struct{}{} }()
	<-done
	// One direction ended (EOF or error): close both so the other ends too.
	in.Close()
	out.Close()
	<-done
}

type chunk struct {
	b  []byte
	at time.Time
}

// pipe copies src to dst, each chunk held until its arrival + delay.
func (p *Proxy) pipe(dst, src net.Conn) {
	q := make(chan chunk, 256)
	var werr atomic.Bool
	go func() {
		defer close(q)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				q <- chunk{b: buf[:n], at: time.Now()}
			}
			if err != nil || werr.Load() {
				return
			}
		}
	}()
	for c := range q {
		if werr.Load() {
			continue // drain
		}
		if d := p.Delay(); d > 0 {
			if wait := time.Until(c.at.Add(d)); wait > 0 {
				time.Sleep(wait)
			}
		}
		if _, err := dst.Write(c.b); err != nil {
			werr.Store(true)
			src.Close()
		}
	}
	if tc, ok := dst.(interface{ CloseWrite() error }); ok {
		_ = tc.CloseWrite()
	}
}

// Close stops accepting, closes every connection and waits for the
// goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) {
		err = nil
	}
	return err
}
