package peer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// HandlerFunc serves the calls of one method. Returning an error sends it
// to the caller as a *RemoteError; return a *RemoteError (possibly wrapped)
// to set its Code. ctx is cancelled when the caller's connection breaks or
// the server closes; the caller's own deadline is not transmitted. body
// belongs to the handler, and the returned body must not be modified after
// the handler returns.
type HandlerFunc func(ctx context.Context, body []byte) ([]byte, error)

// defaultCloseWait bounds how long Close waits for running handlers.
const defaultCloseWait = 5 * time.Second

// Server serves calls arriving on a listener (a mux listener for ProtoRPC).
type Server struct {
	l       net.Listener
	methods [256]atomic.Pointer[HandlerFunc] // by Method
	log     *slog.Logger

	ctx    context.Context // parent of every handler's ctx; cancelled by Close
	cancel context.CancelFunc

	closeWait time.Duration // tests shorten it
	clock     atomic.Pointer[func() time.Time]

	mu       sync.Mutex
	closed   bool
	conns    map[*serverConn]struct{}
	handlers sync.WaitGroup // Add only under mu while !closed, so Close's Wait is safe
	readers  sync.WaitGroup
}

// NewServer returns a Server for l. Register the methods it serves with
// Handle, then call Serve.
func NewServer(l net.Listener, log *slog.Logger) *Server {
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		l: l, log: log.With("component", "peer-server"),
		ctx: ctx, cancel: cancel, closeWait: defaultCloseWait,
		conns: map[*serverConn]struct{}{},
	}
}

// SetClock sets the wall clock whose time a pong carries (Client.Ping);
// default time.Now. Set it before Serve.
func (s *Server) SetClock(now func() time.Time) { s.clock.Store(&now) }

func (s *Server) wall() int64 {
	if c := s.clock.Load(); c != nil {
		return (*c)().UnixNano()
	}
	return time.Now().UnixNano()
}

// Handle registers the handler of method m. Each method has one handler,
// registered once (a second registration is a programming error and
// panics): the packages that own a protocol register their methods at
// start, so a method number can never be served by two of them. A call of
// a method nobody registered is answered with CodeUnknownMethod.
func (s *Server) Handle(m Method, h HandlerFunc) {
	if h == nil {
		panic(fmt.Sprintf("peer: nil handler for method %d", m))
	}
	if !s.methods[m].CompareAndSwap(nil, &h) {
		panic(fmt.Sprintf("peer: method %d registered twice", m))
	}
}

// Serve accepts connections until Close, and then returns nil. Any other
// accept error is returned (the listener is then unusable).
func (s *Server) Serve() error {
	for {
		conn, err := s.l.Accept()
		if err != nil {
			if s.isClosed() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("peer: accept: %w", err)
		}
		sc := &serverConn{s: s, conn: conn}
		sc.w = newFrameWriter(conn, func(error) {
			// The reader then fails on the closed connection and cleans up.
			_ = conn.Close()
		})
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			sc.w.stop(net.ErrClosed)
			_ = conn.Close()
			return nil
		}
		s.conns[sc] = struct{}{}
		s.readers.Add(1)
		s.mu.Unlock()
		go sc.serve()
	}
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close stops accepting, closes every connection — callers waiting on them
// get ErrUnreachable at once rather than an answer that might be a shutdown
// artefact — cancels the handlers' ctx and waits for them to return, up to a
// bound (5s), so the node can tear down what handlers use. It returns an
// error if handlers were still running at the bound.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	conns := make([]*serverConn, 0, len(s.conns))
	for sc := range s.conns {
		conns = append(conns, sc)
	}
	s.mu.Unlock()

	s.cancel()
	err := s.l.Close()
	for _, sc := range conns {
		_ = sc.conn.Close()
	}

	done := make(chan struct{})
	go func() {
		s.handlers.Wait()
		s.readers.Wait()
		close(done)
	}()
	t := time.NewTimer(s.closeWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		return fmt.Errorf("peer: handlers still running %v after close", s.closeWait)
	}
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("peer: close listener: %w", err)
	}
	return nil
}

// serverConn is one accepted connection: a reader goroutine (serve), a
// goroutine per call, and a frameWriter serialising their answers.
type serverConn struct {
	s    *Server
	conn net.Conn
	w    *frameWriter
}

func (sc *serverConn) serve() {
	s := sc.s
	ctx, cancel := context.WithCancel(s.ctx)
	defer func() {
		cancel()
		sc.w.stop(net.ErrClosed)
		_ = sc.conn.Close()
		s.mu.Lock()
		delete(s.conns, sc)
		s.mu.Unlock()
		s.readers.Done()
	}()

	fr := newFrameReader(sc.conn)
	for {
		f, err := fr.read()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && ctx.Err() == nil {
				s.log.Warn("dropping peer connection", "remote", sc.conn.RemoteAddr(), "error", err)
			}
			return
		}
		switch f.kind {
		case kindRequest:
			s.mu.Lock()
			if s.closed {
				s.mu.Unlock()
				return
			}
			s.handlers.Add(1)
			s.mu.Unlock()
			go sc.handle(ctx, f)
		case kindPing:
			// A liveness ping (Client.Ping) carries the caller's wall time
			// and gets ours back; a keepalive ping carries nothing.
			pong := frame{id: f.id, kind: kindPong}
			if len(f.payload) == 8 {
				pong.payload = binary.BigEndian.AppendUint64(nil, uint64(s.wall()))
			}
			_ = sc.w.send(pong)
		default:
			s.log.Warn("dropping peer connection", "remote", sc.conn.RemoteAddr(),
				"error", fmt.Errorf("%w: kind %d sent to a server", errBadFrame, f.kind))
			return
		}
	}
}

func (sc *serverConn) handle(ctx context.Context, f frame) {
	defer sc.s.handlers.Done()
	body, err := sc.run(ctx, Method(f.method), f.payload)
	out := frame{id: f.id, kind: kindOK, method: f.method, payload: body}
	if err == nil && len(body) > MaxBodySize {
		err = &RemoteError{Code: CodeResponseTooLarge, Message: fmt.Sprintf("answer of %d bytes exceeds %d", len(body), MaxBodySize)}
	}
	if err != nil {
		out.kind = kindError
		out.payload = encodeError(remoteErrorFrom(err))
	}
	_ = sc.w.send(out) // fails only if the connection is gone: nobody to tell
}

// run calls the handler, turning a panic into an error for the caller. A
// panicking handler is a bug, but one bad request must not take the node
// down with every other call it is serving.
func (sc *serverConn) run(ctx context.Context, m Method, body []byte) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			sc.s.log.Error("peer handler panicked", "method", m, "panic", r, "stack", string(debug.Stack()))
			out, err = nil, &RemoteError{Code: CodeInternal, Message: fmt.Sprintf("handler panicked: %v", r)}
		}
	}()
	h := sc.s.methods[m].Load()
	if h == nil {
		return nil, &RemoteError{Code: CodeUnknownMethod, Message: fmt.Sprintf("method %d is not served here", m)}
	}
	return (*h)(ctx, body)
}
