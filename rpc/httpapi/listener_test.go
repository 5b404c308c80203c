package httpapi

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/internal/testcerts"
	"github.com/timemachine-db/timemachine/internal/testutil"
)

// serveTest serves s on a loopback port until the test ends.
func serveTest(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		<-done
	})
	return ln.Addr().String()
}

func rssBytes(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skipf("no /proc/self/statm: %v", err)
	}
	f := strings.Fields(string(b))
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

func rawRequest(t *testing.T, addr, req string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	return c
}

// The issue's attack: connections that send only headers announcing a huge
// body once made the server allocate the announced length (10 × 80 MiB
// raised RSS by 1.3 GB). Bodies are streamed now: 30 connections each
// announcing exactly the limit (16 MiB, so allowed) and 10 announcing
// 80 MiB raise RSS by a few MiB at most; then a client that sends its
// oversized body gets 413 with the contract's body.
func TestAnnouncedBodiesAllocateNothing(t *testing.T) {
	s := newTestServer(&fakeBackend{}) // the default limit, 16 MiB
	addr := serveTest(t, s)
	runtime.GC()
	debug.FreeOSMemory()
	before := rssBytes(t)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < 40; i++ {
		n := DefaultMaxBodyBytes
		if i%4 == 0 {
			n = 80 << 20
		}
		conns = append(conns, rawRequest(t, addr, fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", jobsURI, n)))
	}
	// Let the server read every header and start waiting for the bodies.
	time.Sleep(300 * time.Millisecond)
	after := rssBytes(t)
	if grew := after - before; grew > 64<<20 {
		t.Fatalf("RSS grew by %d MiB for 40 header-only connections", grew>>20)
	}
	t.Logf("RSS %d MiB → %d MiB with 40 connections announcing 16-80 MiB", before>>20, after>>20)

	// An oversized body that is being sent is refused with 413.
	c := rawRequest(t, addr, fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", jobsURI, 80<<20))
	defer c.Close()
	go func() { _, _ = c.Write(make([]byte, 64<<10)) }()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 413 || !strings.Contains(string(b), CodeTooLarge) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}

	// A chunked body is cut at the limit too.
	s2 := newTestServer(&fakeBackend{}, func(o *Options) { o.MaxBodyBytes = 1000 })
	addr2 := serveTest(t, s2)
	chunk := strings.Repeat("x", 600)
	c2 := rawRequest(t, addr2, fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n", jobsURI, len(chunk), chunk, len(chunk), chunk))
	defer c2.Close()
	_ = c2.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err = http.ReadResponse(bufio.NewReader(c2), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 413 {
		t.Fatalf("chunked over the limit: %d", resp.StatusCode)
	}
}

// A body announced over the limit is refused at once, whatever of it was
// sent: nothing, a byte, or less than the 8 KiB fasthttp reads before a
// handler runs (they used to wait out the read timeout and get 408).
func TestAnnouncedTooLargeRefusedAtOnce(t *testing.T) {
	s := newTestServer(&fakeBackend{}) // the default limit, 16 MiB
	addr := serveTest(t, s)
	for _, sent := range []int{0, 1, 4096, 64 << 10} {
		start := time.Now()
		c := rawRequest(t, addr, fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			jobsURI, 100<<20, strings.Repeat("x", sent)))
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			c.Close()
			t.Fatalf("%d bytes sent: %v", sent, err)
		}
		b, _ := io.ReadAll(resp.Body)
		c.Close()
		if resp.StatusCode != 413 || !strings.Contains(string(b), CodeTooLarge) {
			t.Fatalf("%d bytes sent: %d %s", sent, resp.StatusCode, b)
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Fatalf("%d bytes sent: 413 after %v", sent, took)
		}
	}
}

// A plain HTTP request sent to the HTTPS port is answered 400 in plain
// HTTP with the contract's body (it used to be closed without a word), and
// HTTPS on the same port still works.
func TestPlainHTTPOnTheHTTPSPort(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, dir, "ca")
	pair := ca.Issue(t, dir, "server")
	cert, err := tls.LoadX509KeyPair(pair.CertFile, pair.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	s := newTestServer(&fakeBackend{}, func(o *Options) { o.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}} })
	addr := serveTest(t, s)

	c := rawRequest(t, addr, "GET /v1/collections HTTP/1.1\r\nHost: x\r\n\r\n")
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(b), CodeInvalidArgument) || !strings.Contains(string(b), "https://") {
		t.Fatalf("plain HTTP on the HTTPS port: %d %s", resp.StatusCode, b)
	}

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	hr, err := cl.Get("https://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	hr.Body.Close()
	if hr.StatusCode != 200 {
		t.Fatalf("HTTPS /healthz: %d", hr.StatusCode)
	}
}

// A small body is read whole into one buffer of its announced length: a
// complete one creates, one cut short (the client stops sending) is a 400,
// not a create of what arrived.
func TestSmallBodyReadWhole(t *testing.T) {
	s := newTestServer(&fakeBackend{})
	addr := serveTest(t, s)
	job := `{"delay":"1m","callback_url":"https://example.com/h"}`
	c := rawRequest(t, addr, fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", jobsURI, len(job), job))
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("a complete small body: %d", resp.StatusCode)
	}

	short := rawRequest(t, addr, fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", jobsURI, len(job)+10, job))
	defer short.Close()
	_ = short.(*net.TCPConn).CloseWrite()
	_ = short.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err = http.ReadResponse(bufio.NewReader(short), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(b), CodeInvalidArgument) {
		t.Fatalf("a body cut short: %d %s", resp.StatusCode, b)
	}
}

// Thousands of idle connections do not slow a create on another
// connection, and past the cap new connections are answered 503 with the
// contract's error body instead of exhausting file descriptors.
func TestIdleConnectionsAndCap(t *testing.T) {
	const capConns, idle = 1500, 1400
	s := newTestServer(&fakeBackend{}, func(o *Options) { o.MaxConns = capConns })
	addr := serveTest(t, s)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < idle; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		conns = append(conns, c)
	}
	testutil.Eventually(t, 10*time.Second, "idle connections accepted", func() error {
		if n := s.OpenConns(); n < idle {
			return fmt.Errorf("%d open", n)
		}
		return nil
	})
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	defer hc.CloseIdleConnections()
	var worst time.Duration
	for i := 0; i < 20; i++ {
		start := time.Now()
		resp, err := hc.Post("http://"+addr+jobsURI, "application/json", strings.NewReader(`{"delay":"1m","callback_url":"https://example.com/h"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 201 {
			t.Fatalf("create with %d idle connections: %d", idle, resp.StatusCode)
		}
		worst = max(worst, time.Since(start))
	}
	// A server that idle connections starved would hold the create until
	// their idle timeout; the bound is loose so a loaded CI host's
	// scheduling delays do not trip it.
	if worst > 5*time.Second {
		t.Fatalf("a create took %v with %d idle connections open", worst, idle)
	}
	t.Logf("worst create latency with %d idle connections: %v", idle, worst)

	// Fill the cap; the next connection is turned away with a 503.
	for i := idle; i < capConns; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	testutil.Eventually(t, 10*time.Second, "the cap filled", func() error {
		if n := s.OpenConns(); n < capConns {
			return fmt.Errorf("%d open", n)
		}
		return nil
	})
	resp, b := refusal(t, addr)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), CodeUnavailable) {
		t.Fatalf("over the cap: %d %s", resp.StatusCode, b)
	}
	if s.RefusedConns() == 0 {
		t.Fatal("refusal not counted")
	}
	// Closing idle connections frees the cap again.
	for _, c := range conns[:100] {
		c.Close()
	}
	conns = conns[100:]
	waitAccepted(t, hc, addr)
}

// refusal reads the answer to a connection turned away at a cap. It is
// written as soon as the connection is accepted, before any request:
// net/http's client calls that an unsolicited response and fails the
// request, so it is read off a raw connection.
func refusal(t *testing.T, addr string) (*http.Response, []byte) {
	t.Helper()
	over, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	_ = over.SetDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(over), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, b
}

// waitAccepted waits until a new connection to addr is served again.
func waitAccepted(t *testing.T, hc *http.Client, addr string) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, "a connection accepted again", func() error {
		resp, err := hc.Get("http://" + addr + "/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
}

// flakyListener fails Accept with EMFILE a few times, as a process out of
// file descriptors does.
type flakyListener struct {
	net.Listener
	mu    sync.Mutex
	fails int
}

func (l *flakyListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if l.fails > 0 {
		l.fails--
		l.mu.Unlock()
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	l.mu.Unlock()
	return l.Listener.Accept()
}

// The issue's outage: "too many open files" ended fasthttp's accept loop
// for good. Accept errors are retried now.
func TestAcceptErrorsDoNotStopTheServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fl := &flakyListener{Listener: ln, fails: 5}
	s := newTestServer(&fakeBackend{})
	done := make(chan error, 1)
	go func() { done <- s.Serve(fl) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	resp, err := http.Get("http://" + ln.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%d", resp.StatusCode)
	}
	select {
	case err := <-done:
		t.Fatalf("Serve returned after accept errors: %v", err)
	default:
	}
}

// --max-conns-per-ip: one connection more from the same address is turned
// away with 429 and the contract's error body (overloaded, Retry-After);
// closing one frees the address's share again.
func TestConnectionsPerIPCap(t *testing.T) {
	const perIP = 3
	s := newTestServer(&fakeBackend{}, func(o *Options) { o.MaxConnsPerIP = perIP })
	addr := serveTest(t, s)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < perIP; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	testutil.Eventually(t, 10*time.Second, "the address's share filled", func() error {
		if n := s.OpenConns(); n < perIP {
			return fmt.Errorf("%d open", n)
		}
		return nil
	})
	resp, b := refusal(t, addr)
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" || resp.Header.Get("Content-Type") != "application/json" ||
		json.Unmarshal(b, &e) != nil || e.Error.Code != "overloaded" || !strings.Contains(e.Error.Message, "--max-conns-per-ip") {
		t.Fatalf("over the address's cap: %d %v %s", resp.StatusCode, resp.Header, b)
	}
	conns[0].Close()
	conns = conns[1:]
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	defer hc.CloseIdleConnections()
	waitAccepted(t, hc, addr)
}
