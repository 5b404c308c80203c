package peer

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/internal/testutil"
	"github.com/timemachine-db/timemachine/rpc/mux"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

type testServer struct {
	m      *mux.Mux
	s      *Server
	addr   string
	served chan error
	once   sync.Once
}

// testHandler serves every method of a test server.
type testHandler func(ctx context.Context, m Method, body []byte) ([]byte, error)

// handleAll registers h for every method.
func handleAll(s *Server, h testHandler) {
	for m := 0; m < 256; m++ {
		m := Method(m)
		s.Handle(m, func(ctx context.Context, b []byte) ([]byte, error) { return h(ctx, m, b) })
	}
}

// startServer runs a mux on addr ("127.0.0.1:0" for any port) with a peer
// Server on its ProtoRPC listener.
func startServer(t testing.TB, addr string, h testHandler) *testServer {
	t.Helper()
	m, err := mux.Listen(addr, quiet())
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.Listen(mux.ProtoRPC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{m: m, s: NewServer(l, quiet()), addr: m.Addr().String(), served: make(chan error, 1)}
	handleAll(ts.s, h)
	go func() { ts.served <- ts.s.Serve() }()
	t.Cleanup(ts.stop)
	return ts
}

// stop closes the server and its port, as a node shutting down (or dying) would.
func (ts *testServer) stop() {
	ts.once.Do(func() {
		_ = ts.s.Close()
		_ = ts.m.Close()
	})
}

func newClient(t testing.TB, o ClientOptions) *Client {
	t.Helper()
	o.Logger = quiet()
	c := NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func timeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func echo(_ context.Context, m Method, body []byte) ([]byte, error) {
	return append([]byte(fmt.Sprintf("m%d:", m)), body...), nil
}

func TestRoundTrip(t *testing.T) {
	ts := startServer(t, "127.0.0.1:0", echo)
	c := newClient(t, ClientOptions{})
	got, err := c.Call(timeout(t, 5*time.Second), ts.addr, 7, []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "m7:hello" {
		t.Fatalf("got %q", got)
	}
	// Empty bodies both ways.
	ts2 := startServer(t, "127.0.0.1:0", func(context.Context, Method, []byte) ([]byte, error) { return nil, nil })
	if got, err := c.Call(timeout(t, 5*time.Second), ts2.addr, 1, nil); err != nil || len(got) != 0 {
		t.Fatalf("empty call: %q, %v", got, err)
	}
}

// A few MiB (a forwarded batch of commands) crosses the progressive
// allocation path on both sides.
func TestLargeBody(t *testing.T) {
	ts := startServer(t, "127.0.0.1:0", func(_ context.Context, _ Method, b []byte) ([]byte, error) { return b, nil })
	c := newClient(t, ClientOptions{})
	body := make([]byte, 5<<20+123)
	for i := range body {
		body[i] = byte(i * 7)
	}
	want := bytes.Clone(body)
	got, err := c.Call(timeout(t, 10*time.Second), ts.addr, 1, body)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("large body corrupted")
	}
}

// 500 calls in flight at once on 2 connections: every caller gets its own
// answer, however the server orders them.
func TestConcurrentCallsOnTwoConns(t *testing.T) {
	ts := startServer(t, "127.0.0.1:0", func(_ context.Context, m Method, b []byte) ([]byte, error) {
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond) // shuffle completion order
		return echo(context.Background(), m, b)
	})
	var dials atomic.Int32
	c := newClient(t, ClientOptions{ConnsPerPeer: 2, Dial: func(addr string, to time.Duration) (net.Conn, error) {
		dials.Add(1)
		return DialMux(addr, to)
	}})
	ctx := timeout(t, 20*time.Second)
	const n = 500
	errs := make(chan error, n)
	var start sync.WaitGroup
	start.Add(1)
	for i := range n {
		go func() {
			start.Wait()
			body := fmt.Appendf(nil, "call-%d", i)
			got, err := c.Call(ctx, ts.addr, Method(i%256), body)
			if err == nil && string(got) != fmt.Sprintf("m%d:call-%d", i%256, i) {
				err = fmt.Errorf("call %d got %q", i, got)
			}
			errs <- err
		}()
	}
	start.Done()
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if d := dials.Load(); d != 2 {
		t.Fatalf("%d dials, want 2", d)
	}
	ts.s.mu.Lock()
	conns := len(ts.s.conns)
	ts.s.mu.Unlock()
	if conns != 2 {
		t.Fatalf("server has %d connections, want 2", conns)
	}
}

// A handler that takes forever delays nobody else, even on a single
// connection.
func TestSlowHandlerDoesNotBlockFastCalls(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	ts := startServer(t, "127.0.0.1:0", func(ctx context.Context, m Method, b []byte) ([]byte, error) {
		if m == 1 {
			close(entered)
			<-release
			return []byte("slow"), nil
		}
		return echo(ctx, m, b)
	})
	c := newClient(t, ClientOptions{ConnsPerPeer: 1})
	slow := make(chan error, 1)
	go func() {
		got, err := c.Call(timeout(t, 20*time.Second), ts.addr, 1, nil)
		if err == nil && string(got) != "slow" {
			err = fmt.Errorf("slow call got %q", got)
		}
		slow <- err
	}()
	<-entered
	for i := range 100 {
		got, err := c.Call(timeout(t, 5*time.Second), ts.addr, 2, []byte{byte(i)})
		if err != nil {
			t.Fatalf("fast call %d behind a slow one: %v", i, err)
		}
		if !bytes.Equal(got, []byte{'m', '2', ':', byte(i)}) {
			t.Fatalf("fast call %d got %q", i, got)
		}
	}
	close(release)
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
}

func TestHandlerErrorsBecomeRemoteErrors(t *testing.T) {
	ts := startServer(t, "127.0.0.1:0", func(_ context.Context, m Method, _ []byte) ([]byte, error) {
		switch m {
		case 1:
			return []byte("ignored"), &RemoteError{Code: "not_leader", Message: "leader is n2"}
		case 2:
			return nil, errors.New("boom")
		case 3:
			return nil, fmt.Errorf("forwarding: %w", &RemoteError{Code: "busy", Message: "queue full"})
		case 4:
			panic("kaboom")
		}
		return nil, nil
	})
	c := newClient(t, ClientOptions{})
	for _, tc := range []struct {
		m         Method
		code, msg string
	}{
		{1, "not_leader", "leader is n2"},
		{2, "", "boom"},
		{3, "busy", "forwarding: remote error busy: queue full"},
		{4, CodeInternal, "handler panicked: kaboom"},
	} {
		_, err := c.Call(timeout(t, 5*time.Second), ts.addr, tc.m, nil)
		var re *RemoteError
		if !errors.As(err, &re) {
			t.Fatalf("method %d: %v is not a *RemoteError", tc.m, err)
		}
		if re.Code != tc.code || re.Message != tc.msg {
			t.Fatalf("method %d: got code %q message %q", tc.m, re.Code, re.Message)
		}
		if errors.Is(err, ErrUnreachable) {
			t.Fatalf("method %d: a remote error must not look like an unreachable peer", tc.m)
		}
	}
	// The panics did not hurt the connection or the server.
	if _, err := c.Call(timeout(t, 5*time.Second), ts.addr, 9, nil); err != nil {
		t.Fatal(err)
	}
}

// A call whose ctx ends returns at once; its late answer is dropped and
// never handed to a later call.
func TestContextTimeoutReturnsPromptly(t *testing.T) {
	release := make(chan struct{})
	ts := startServer(t, "127.0.0.1:0", func(ctx context.Context, m Method, b []byte) ([]byte, error) {
		if m == 1 {
			<-release
			return []byte("late"), nil
		}
		return echo(ctx, m, b)
	})
	c := newClient(t, ClientOptions{ConnsPerPeer: 1})
	// Warm the connection so the timing below measures the call only.
	if _, err := c.Call(timeout(t, 5*time.Second), ts.addr, 2, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Call(ctx, ts.addr, 1, nil)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrUnreachable) {
		t.Fatalf("got %v, want a deadline error", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("timed-out call took %v", el)
	}
	// Cancellation, not only deadlines.
	ctx2, cancel2 := context.WithCancel(context.Background())
	go cancel2()
	if _, err := c.Call(ctx2, ts.addr, 1, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	close(release) // both late answers now arrive and must be dropped
	for i := range 20 {
		got, err := c.Call(timeout(t, 5*time.Second), ts.addr, 2, []byte{byte(i)})
		if err != nil || !bytes.Equal(got, []byte{'m', '2', ':', byte(i)}) {
			t.Fatalf("after the late answers: %q, %v", got, err)
		}
	}
}

// Killing the server fails every waiting call with ErrUnreachable at once,
// not when their (long) deadlines expire, and without waiting for the
// server's handlers.
func TestServerKilledMidCall(t *testing.T) {
	const n = 20
	entered := make(chan struct{}, n)
	release := make(chan struct{})
	ts := startServer(t, "127.0.0.1:0", func(context.Context, Method, []byte) ([]byte, error) {
		entered <- struct{}{}
		<-release // ignores ctx: the caller must not depend on the handler
		return []byte("too late"), nil
	})
	defer close(release)
	c := newClient(t, ClientOptions{})
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := c.Call(timeout(t, 30*time.Second), ts.addr, 1, nil)
			errs <- err
		}()
	}
	for range n {
		<-entered
	}
	start := time.Now()
	go ts.stop() // Close waits for the stuck handlers; callers must not
	for range n {
		err := <-errs
		if !errors.Is(err, ErrUnreachable) {
			t.Fatalf("got %v, want ErrUnreachable", err)
		}
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("callers learned of the dead server after %v", el)
	}
}

func TestReconnectAfterServerRestart(t *testing.T) {
	ts := startServer(t, "127.0.0.1:0", echo)
	addr := ts.addr
	var dials atomic.Int32
	c := newClient(t, ClientOptions{ConnsPerPeer: 1, Dial: func(a string, to time.Duration) (net.Conn, error) {
		dials.Add(1)
		return DialMux(a, to)
	}})
	if _, err := c.Call(timeout(t, 5*time.Second), addr, 1, []byte("a")); err != nil {
		t.Fatal(err)
	}
	ts.stop()
	_, err := c.Call(timeout(t, 5*time.Second), addr, 1, []byte("b"))
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("server down: got %v, want ErrUnreachable", err)
	}
	ts2 := startServer(t, addr, echo) // same address: a node restarting
	got, err := c.Call(timeout(t, 5*time.Second), ts2.addr, 1, []byte("c"))
	if err != nil || string(got) != "m1:c" {
		t.Fatalf("after restart: %q, %v", got, err)
	}
	if dials.Load() < 2 {
		t.Fatalf("only %d dials: the connection was not replaced", dials.Load())
	}
}

func TestDialRefusedIsUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c := newClient(t, ClientOptions{})
	_, err = c.Call(timeout(t, 5*time.Second), addr, 1, nil)
	if !errors.Is(err, ErrUnreachable) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("got %v, want ErrUnreachable wrapping ECONNREFUSED", err)
	}
}

// A node reachable on the port but without an RPC server registered (still
// starting) closes the connection after the mux header.
func TestNoRPCListenerIsUnreachable(t *testing.T) {
	m := listenMux(t)
	c := newClient(t, ClientOptions{})
	_, err := c.Call(timeout(t, 5*time.Second), m.Addr().String(), 1, nil)
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("got %v, want ErrUnreachable", err)
	}
}

func TestOversizedFrames(t *testing.T) {
	ts := startServer(t, "127.0.0.1:0", func(_ context.Context, m Method, b []byte) ([]byte, error) {
		if m == 1 {
			return make([]byte, MaxBodySize+1), nil
		}
		return echo(context.Background(), m, b)
	})
	c := newClient(t, ClientOptions{ConnsPerPeer: 1})

	t.Run("request body over the limit is refused before sending", func(t *testing.T) {
		_, err := c.Call(timeout(t, 5*time.Second), ts.addr, 2, make([]byte, MaxBodySize+1))
		if !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("got %v", err)
		}
		if _, err := c.Call(timeout(t, 5*time.Second), ts.addr, 2, nil); err != nil {
			t.Fatalf("connection unusable after a refused body: %v", err)
		}
	})
	t.Run("answer over the limit becomes a remote error", func(t *testing.T) {
		_, err := c.Call(timeout(t, 5*time.Second), ts.addr, 1, nil)
		var re *RemoteError
		if !errors.As(err, &re) || re.Code != CodeResponseTooLarge {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("server drops a connection announcing a huge frame", func(t *testing.T) {
		conn, err := mux.Dial(ts.addr, mux.ProtoRPC, 0, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var h [headerSize]byte
		binary.BigEndian.PutUint32(h[:], MaxFrameSize+1)
		h[12] = kindRequest
		if _, err := conn.Write(h[:]); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("read after oversized frame: %v, want EOF", err)
		}
		if _, err := c.Call(timeout(t, 5*time.Second), ts.addr, 2, nil); err != nil {
			t.Fatalf("server hurt by the bad connection: %v", err)
		}
	})
	t.Run("client drops a connection announcing a huge frame", func(t *testing.T) {
		m := listenMux(t)
		l, _ := m.Listen(mux.ProtoRPC, 0)
		go func() {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
			var h [headerSize]byte
			if _, err := io.ReadFull(conn, h[:]); err != nil {
				return
			}
			binary.BigEndian.PutUint32(h[:], 0xFFFFFFFF)
			h[12] = kindOK
			_, _ = conn.Write(h[:])
			_, _ = io.Copy(io.Discard, conn)
		}()
		c2 := newClient(t, ClientOptions{ConnsPerPeer: 1})
		_, err := c2.Call(timeout(t, 5*time.Second), m.Addr().String(), 1, nil)
		if !errors.Is(err, ErrUnreachable) || !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("got %v", err)
		}
	})
}

// Garbage on the port — with or without a valid mux header — costs the
// sender its connection and nothing else.
func TestGarbageDoesNotHurtServer(t *testing.T) {
	var calls atomic.Int32
	ts := startServer(t, "127.0.0.1:0", func(ctx context.Context, m Method, b []byte) ([]byte, error) {
		calls.Add(1)
		return echo(ctx, m, b)
	})
	rng := rand.New(rand.NewPCG(1, 2))
	junk := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return b
	}
	var payloads [][]byte
	for i := range 60 {
		payloads = append(payloads, junk(i*7))
	}
	// Structurally plausible frames that are still wrong.
	short := make([]byte, headerSize)
	binary.BigEndian.PutUint32(short, 3) // length below the fixed part
	wrongKind := make([]byte, headerSize)
	binary.BigEndian.PutUint32(wrongKind, frameFixed)
	wrongKind[12] = kindOK // an answer sent to a server
	badKind := bytes.Clone(wrongKind)
	badKind[12] = 200
	truncated := make([]byte, headerSize+10)
	binary.BigEndian.PutUint32(truncated, frameFixed+1000)
	truncated[12] = kindRequest
	payloads = append(payloads, short, wrongKind, badKind, truncated)

	for i, p := range payloads {
		var conn net.Conn
		var err error
		if i%5 == 0 {
			conn, err = net.Dial("tcp", ts.addr) // no mux header at all
		} else {
			conn, err = mux.Dial(ts.addr, mux.ProtoRPC, 0, time.Second)
		}
		if err != nil {
			t.Fatal(err)
		}
		_, _ = conn.Write(p)
		if i%2 == 0 {
			_ = conn.(*net.TCPConn).CloseWrite()
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, _ = io.Copy(io.Discard, conn) // until the server hangs up
		}
		conn.Close()
	}
	c := newClient(t, ClientOptions{})
	got, err := c.Call(timeout(t, 5*time.Second), ts.addr, 3, []byte("still here"))
	if err != nil || string(got) != "m3:still here" {
		t.Fatalf("after garbage: %q, %v", got, err)
	}
}

// Close returns only after running handlers have returned (they see their
// ctx cancelled), so the node can then close what they use.
func TestCloseWaitsForHandlers(t *testing.T) {
	entered := make(chan struct{})
	var finished atomic.Bool
	ts := startServer(t, "127.0.0.1:0", func(ctx context.Context, _ Method, _ []byte) ([]byte, error) {
		close(entered)
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond) // cleanup work after cancellation
		finished.Store(true)
		return nil, ctx.Err()
	})
	c := newClient(t, ClientOptions{})
	go func() { _, _ = c.Call(context.Background(), ts.addr, 1, nil) }()
	<-entered
	if err := ts.s.Close(); err != nil {
		t.Fatal(err)
	}
	if !finished.Load() {
		t.Fatal("Close returned before the handler finished")
	}
	select {
	case err := <-ts.served:
		if err != nil {
			t.Fatalf("Serve returned %v after Close", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after Close")
	}
}

// A handler that ignores its ctx cannot hold Close forever.
func TestCloseWaitIsBounded(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	ts := startServer(t, "127.0.0.1:0", func(context.Context, Method, []byte) ([]byte, error) {
		close(entered)
		<-release
		return nil, nil
	})
	defer close(release)
	ts.s.closeWait = 100 * time.Millisecond
	c := newClient(t, ClientOptions{})
	go func() { _, _ = c.Call(context.Background(), ts.addr, 1, nil) }()
	<-entered
	start := time.Now()
	if err := ts.s.Close(); err == nil {
		t.Fatal("Close reported success with a handler still running")
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("Close took %v", el)
	}
}

// A peer that accepts the connection and then goes silent (power loss, a
// real partition: no reset ever comes) is declared dead by the keepalive.
func TestSilentPeerIsUnreachable(t *testing.T) {
	m := listenMux(t)
	l, _ := m.Listen(mux.ProtoRPC, 0)
	var held []net.Conn
	var mu sync.Mutex
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	}()
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, conn) // never read, never answered
			mu.Unlock()
		}
	}()
	c := newClient(t, ClientOptions{DeadPeerTimeout: 200 * time.Millisecond})
	start := time.Now()
	_, err := c.Call(timeout(t, 30*time.Second), m.Addr().String(), 1, nil)
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("got %v, want ErrUnreachable", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("silent peer detected after %v", el)
	}
}

// The keepalive answers come from the peer's transport, so a handler slower
// than DeadPeerTimeout is not mistaken for a dead peer.
func TestKeepaliveSparesSlowHandlers(t *testing.T) {
	ts := startServer(t, "127.0.0.1:0", func(context.Context, Method, []byte) ([]byte, error) {
		time.Sleep(time.Second) // the handler's work: 2.5x DeadPeerTimeout
		return []byte("done"), nil
	})
	c := newClient(t, ClientOptions{DeadPeerTimeout: 400 * time.Millisecond})
	got, err := c.Call(timeout(t, 10*time.Second), ts.addr, 1, nil)
	if err != nil || string(got) != "done" {
		t.Fatalf("%q, %v", got, err)
	}
}

func TestClientClose(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	ts := startServer(t, "127.0.0.1:0", func(context.Context, Method, []byte) ([]byte, error) {
		close(entered)
		<-release
		return nil, nil
	})
	defer close(release)
	c := NewClient(ClientOptions{Logger: quiet()})
	errs := make(chan error, 1)
	go func() {
		_, err := c.Call(timeout(t, 30*time.Second), ts.addr, 1, nil)
		errs <- err
	}()
	<-entered
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errs; !errors.Is(err, ErrClosed) {
		t.Fatalf("in-flight call: %v, want ErrClosed", err)
	}
	if _, err := c.Call(timeout(t, time.Second), ts.addr, 1, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after Close: %v, want ErrClosed", err)
	}
}

// listenMux opens a mux on a free loopback port, closed when the test ends.
func listenMux(t *testing.T) *mux.Mux {
	t.Helper()
	m, err := mux.Listen("127.0.0.1:0", quiet())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// Each method has its handler; a method nobody registered is answered with
// CodeUnknownMethod (the peer is up, it just does not serve that call), and
// registering a method twice is refused.
func TestHandlerRegistry(t *testing.T) {
	m, err := mux.Listen("127.0.0.1:0", quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, err := m.Listen(mux.ProtoRPC, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(l, quiet())
	s.Handle(1, func(_ context.Context, b []byte) ([]byte, error) { return append([]byte("one:"), b...), nil })
	s.Handle(2, func(context.Context, []byte) ([]byte, error) { return []byte("two"), nil })
	func() {
		defer func() {
			if recover() == nil {
				t.Error("a second handler for method 1 was accepted")
			}
		}()
		s.Handle(1, func(context.Context, []byte) ([]byte, error) { return nil, nil })
	}()
	go func() { _ = s.Serve() }()
	defer s.Close()
	c := newClient(t, ClientOptions{})
	addr := m.Addr().String()
	if got, err := c.Call(timeout(t, 5*time.Second), addr, 1, []byte("x")); err != nil || string(got) != "one:x" {
		t.Fatalf("method 1: %q %v", got, err)
	}
	if got, err := c.Call(timeout(t, 5*time.Second), addr, 2, nil); err != nil || string(got) != "two" {
		t.Fatalf("method 2: %q %v", got, err)
	}
	_, err = c.Call(timeout(t, 5*time.Second), addr, 3, nil)
	var re *RemoteError
	if !errors.As(err, &re) || re.Code != CodeUnknownMethod {
		t.Fatalf("an unregistered method: %v, want a RemoteError %s", err, CodeUnknownMethod)
	}
}

// rawPeer serves one connection by hand and reports how its reads ended:
// requests are answered when answer is set, else left in flight.
func rawPeer(t *testing.T, answer bool) (addr string, requests <-chan struct{}, readErr <-chan error) {
	m := listenMux(t)
	l, _ := m.Listen(mux.ProtoRPC, 0)
	errc := make(chan error, 16)
	reqc := make(chan struct{}, 16)
	serve := func(conn net.Conn) {
		defer conn.Close()
		fr := newFrameReader(conn)
		w := newFrameWriter(conn, func(error) {})
		defer w.stop(ErrClosed)
		for {
			f, err := fr.read()
			if err != nil {
				errc <- err
				return
			}
			if f.kind != kindRequest {
				continue
			}
			reqc <- struct{}{}
			if answer {
				_ = w.send(frame{id: f.id, kind: kindOK, method: f.method})
			}
		}
	}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go serve(conn)
		}
	}()
	return m.Addr().String(), reqc, errc
}

// A connection failed with calls in flight is reset, not closed: the
// kernel then discards request bytes it has not delivered, where a plain
// close keeps retransmitting them from an orphaned socket until a healed
// partition lets the peer run a request its caller already gave up on
// (see abandon). The peer sees the reset as ECONNRESET instead of EOF.
func TestDroppedConnectionWithCallsInFlightIsReset(t *testing.T) {
	addr, requests, readErr := rawPeer(t, false)
	c := newClient(t, ClientOptions{})
	callErr := make(chan error, 1)
	go func() {
		_, err := c.Call(timeout(t, 30*time.Second), addr, 1, []byte("create c3-000685"))
		callErr <- err
	}()
	select {
	case <-requests:
	case <-time.After(10 * time.Second):
		t.Fatal("the request never reached the peer")
	}
	c.Drop(addr, errors.New("node answers no liveness ping"))
	if err := <-callErr; !errors.Is(err, ErrUnreachable) {
		t.Fatalf("call: %v, want ErrUnreachable", err)
	}
	select {
	case err := <-readErr:
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("the peer's read ended with %v, want ECONNRESET (a reset, not an orderly close)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the peer never saw the connection end")
	}
}

// A client closed with no call in flight closes its connections in order
// (FIN): only abandoned calls call for a reset.
func TestClientCloseWithoutCallsIsOrderly(t *testing.T) {
	addr, _, readErr := rawPeer(t, true)
	c := NewClient(ClientOptions{Logger: quiet()})
	if _, err := c.Call(timeout(t, 10*time.Second), addr, 1, []byte("get")); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	select {
	case err := <-readErr:
		if errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("an idle connection was reset: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the peer never saw the connection end")
	}
}

// PingAsync hands its callback the peer's wall time — through the dial
// of the first connection, then on the reader goroutine with no goroutine
// of its own — and an error once the peer is gone.
func TestPingAsync(t *testing.T) {
	ts := startServer(t, "127.0.0.1:0", echo)
	c := newClient(t, ClientOptions{})
	type answer struct {
		wall int64
		err  error
	}
	ping := func(addr string) answer {
		t.Helper()
		ch := make(chan answer, 2)
		c.PingAsync(addr, time.Now().UnixNano(), func(w int64, err error) { ch <- answer{w, err} })
		select {
		case a := <-ch:
			return a
		case <-time.After(10 * time.Second):
			t.Fatal("no answer to a ping in 10 s")
			return answer{}
		}
	}
	for i := 0; i < 3; i++ { // the first dials
		before := time.Now().UnixNano()
		a := ping(ts.addr)
		if a.err != nil || a.wall < before || a.wall > time.Now().UnixNano() {
			t.Fatalf("ping %d: wall %d (sent after %d), %v", i, a.wall, before, a.err)
		}
	}
	ts.stop()
	testutil.Eventually(t, 10*time.Second, "a ping to a stopped peer fails", func() error {
		if a := ping(ts.addr); a.err == nil {
			return errors.New("answered")
		}
		return nil
	})
}

// OnConnLost hears of a connection the peer broke (here: it stopped), not
// of one this client dropped itself.
func TestOnConnLost(t *testing.T) {
	lost := make(chan string, 16)
	c := newClient(t, ClientOptions{OnConnLost: func(addr string) { lost <- addr }})
	dropped := startServer(t, "127.0.0.1:0", echo)
	if _, err := c.Call(timeout(t, 5*time.Second), dropped.addr, 1, nil); err != nil {
		t.Fatal(err)
	}
	c.Drop(dropped.addr, errors.New("test"))
	ts := startServer(t, "127.0.0.1:0", echo)
	if _, err := c.Call(timeout(t, 5*time.Second), ts.addr, 1, nil); err != nil {
		t.Fatal(err)
	}
	ts.stop()
	select {
	case addr := <-lost:
		if addr != ts.addr {
			t.Fatalf("lost %s, want %s (the dropped one must not count)", addr, ts.addr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no OnConnLost after the peer stopped")
	}
}

// freezeProxy forwards TCP connections to target until frozen; from then
// on it forwards nothing either way and closes nothing: the silence of a
// peer cut off without a reset.
type freezeProxy struct {
	addr   string
	frozen atomic.Bool
}

func startFreezeProxy(t *testing.T, target string) *freezeProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezeProxy{addr: l.Addr().String()}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	pump := func(dst, src net.Conn) {
		buf := make([]byte, 4096)
		for {
			n, err := src.Read(buf)
			if err != nil {
				return
			}
			if p.frozen.Load() {
				continue // swallowed
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
	}
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			go pump(out, in)
			go pump(in, out)
		}
	}()
	return p
}

// The keepalive runs only while calls wait: after quick calls are answered
// the connection's timer is stopped (an idle node is not woken for it),
// and a connection that was idle still finds a peer that went silent
// when the next call waits.
func TestKeepaliveOnlyWhileCallsWait(t *testing.T) {
	ts := startServer(t, "127.0.0.1:0", echo)
	p := startFreezeProxy(t, ts.addr)
	c := newClient(t, ClientOptions{ConnsPerPeer: 1, DeadPeerTimeout: 200 * time.Millisecond})
	for i := range 5 {
		if _, err := c.Call(timeout(t, 10*time.Second), p.addr, 1, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	c.mu.RLock()
	pc := c.peers[p.addr]
	c.mu.RUnlock()
	pc.mu.Lock()
	conns := slices.Clone(pc.conns)
	pc.mu.Unlock()
	if len(conns) == 0 {
		t.Fatal("no connection kept")
	}
	for _, cc := range conns {
		cc.mu.Lock()
		armed := cc.kaTimer.Stop()
		cc.mu.Unlock()
		if armed {
			t.Fatal("the keepalive timer was armed with no call waiting")
		}
	}
	// Idle for longer than the timeout, then the peer goes silent.
	time.Sleep(300 * time.Millisecond) // lets the connection be idle for longer than DeadPeerTimeout: what is tested is that idleness does not condemn it
	p.frozen.Store(true)
	start := time.Now()
	_, err := c.Call(timeout(t, 30*time.Second), p.addr, 1, nil)
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("got %v, want ErrUnreachable", err)
	}
	if el := time.Since(start); el < 150*time.Millisecond || el > 5*time.Second {
		t.Fatalf("silent peer detected after %v, want about 200ms", el)
	}
}
