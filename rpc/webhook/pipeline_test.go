package webhook

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"github.com/valyala/fasthttp"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/internal/testutil"
)

// pipeRequest is testRequest for job id, pipelined.
func pipeRequest(url, id string) *Request {
	r := testRequest(url)
	r.Payload.ID = id
	r.IdempotencyKey = "c:" + id + ":1"
	r.Pipeline = true
	return r
}

// readID reads one request and returns its job id (the Idempotency-Key's
// middle part).
func readID(br *bufio.Reader) (string, error) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return "", err
	}
	_, _ = io.Copy(io.Discard, req.Body)
	k := strings.Split(req.Header.Get("Idempotency-Key"), ":")
	if len(k) != 3 {
		return "", fmt.Errorf("idempotency key %q", req.Header.Get("Idempotency-Key"))
	}
	return k[1], nil
}

func answer(id string) string {
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(id), id)
}

// oneConnClient is a client whose pipelined connections never count as
// stalled: requests sent together share a connection even on a slow test
// host (a second one opens only when the first is full or closes).
func oneConnClient(t *testing.T) *Client {
	c := newClient(t, Options{})
	c.pipeStall = time.Minute
	return c
}

// deliverAll sends ids pipelined at once and returns their results by id.
func deliverAll(c *Client, url string, ids []string, timeout time.Duration) map[string]Result {
	var mu sync.Mutex
	out := make(map[string]Result, len(ids))
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			r := pipeRequest(url, id)
			r.Timeout = timeout
			res := c.Deliver(context.Background(), r)
			mu.Lock()
			out[id] = res
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// tally counts, by job id, the requests a test receiver processed; its
// connections' goroutines add to it while the test reads it.
type tally struct {
	mu sync.Mutex
	n  map[string]int
}

func newTally() *tally { return &tally{n: map[string]int{}} }

func (c *tally) add(id string) {
	c.mu.Lock()
	c.n[id]++
	c.mu.Unlock()
}

func (c *tally) of(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[id]
}

// mustAllOnce fails unless every id in want was answered 200 (with its
// own id as the body, when echo) and processed exactly once (seen).
func mustAllOnce(t *testing.T, res map[string]Result, want []string, seen *tally, echo bool) {
	t.Helper()
	for _, id := range want {
		if r := res[id]; r.Err != nil || r.StatusCode != 200 || (echo && r.BodySnippet != id) {
			t.Fatalf("%s = %+v", id, r)
		}
		if n := seen.of(id); n != 1 {
			t.Fatalf("%s processed %d times", id, n)
		}
	}
}

func ids(n int, prefix string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

// The receiver answers nothing until ten requests have arrived on one
// connection: only a pipelining client gets any answer. Each answer
// carries its request's id, so the answers must be matched in order.
func TestPipelineWritesBeforeAnswers(t *testing.T) {
	addr := rawServer(t, func(conn net.Conn, br *bufio.Reader, _ int) {
		for {
			var got []string
			for len(got) < 10 {
				id, err := readID(br)
				if err != nil {
					return
				}
				got = append(got, id)
			}
			var all strings.Builder
			for _, id := range got {
				all.WriteString(answer(id))
			}
			if _, err := io.WriteString(conn, all.String()); err != nil {
				return
			}
		}
	})
	c := oneConnClient(t)
	url := "http://" + addr + "/hook"
	// Ten at a time: the pipeline's connections fill in order, so they
	// all land on the first.
	for round := range 3 {
		res := deliverAll(c, url, ids(10, fmt.Sprintf("r%d-", round)), 5*time.Second)
		for id, r := range res {
			if r.Err != nil || r.StatusCode != 200 || r.BodySnippet != id {
				t.Fatalf("round %d: %s = %+v", round, id, r)
			}
		}
	}
}

// A receiver of another HTTP stack (net/http serves pipelined requests one
// after the other) gets every request once, and each answer reaches the
// request it belongs to, over few connections.
func TestPipelineNetHTTPReceiver(t *testing.T) {
	var conns atomic.Int32
	seen := newTally()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		id := strings.Split(r.Header.Get("Idempotency-Key"), ":")[1]
		seen.add(id)
		_, _ = io.WriteString(w, id)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	c := newClient(t, Options{})
	want := ids(2000, "j")
	res := deliverAll(c, srv.URL+"/hook", want, 10*time.Second)
	mustAllOnce(t, res, want, seen, true)
	// 2,000 callbacks at once: without pipelining as many connections
	// as the pool allows (1,024); pipelined, a connection per 128 owed
	// answers, plus those opened on a stall (5 ms without an answer,
	// frequent on a loaded test host: 17–33 here on a quiet one).
	if n := conns.Load(); n > 500 {
		t.Fatalf("%d connections for 2,000 pipelined callbacks", n)
	}
	t.Logf("%d connections", conns.Load())
}

// An answer with "Connection: close" ends the connection; the requests
// written after it were not processed (RFC 9112 §9.6) and go again on a
// new connection, costing no attempt.
func TestPipelineConnectionCloseResends(t *testing.T) {
	seen := newTally()
	var unprocessed atomic.Int32
	addr := rawServer(t, func(conn net.Conn, br *bufio.Reader, index int) {
		for n := 0; ; n++ {
			id, err := readID(br)
			if err != nil {
				return
			}
			if index == 0 && n > 0 {
				unprocessed.Add(1)
				if n == 1 {
					// A request is written behind the first: the first's
					// answer closes the connection. What is read after
					// it (until the client hangs up) is counted, never
					// processed.
					io.WriteString(conn, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok")
				}
				continue
			}
			seen.add(id)
			if index == 0 {
				continue
			}
			if _, err := io.WriteString(conn, answer(id)); err != nil {
				return
			}
		}
	})
	c := oneConnClient(t)
	want := ids(20, "k")
	res := deliverAll(c, "http://"+addr+"/", want, 5*time.Second)
	mustAllOnce(t, res, want, seen, false)
	if unprocessed.Load() == 0 {
		t.Fatal("no request was written behind the closing answer")
	}
}

// A receiver that closes the connection without a word after answering
// one request: the answered one stands; the others, which it may have
// seen, fail as a connection error (retried by the slot like any other).
func TestPipelineBrokenConnectionFailsTheUnanswered(t *testing.T) {
	got := make(chan struct{})
	addr := rawServer(t, func(conn net.Conn, br *bufio.Reader, _ int) {
		var first string
		for n := range 3 {
			id, err := readID(br)
			if err != nil {
				return
			}
			if n == 0 {
				first = id
			}
		}
		io.WriteString(conn, answer(first))
		close(got)
	})
	c := oneConnClient(t)
	url := "http://" + addr + "/"
	// Three requests queued together, so they share the connection.
	res := deliverAll(c, url, ids(3, "b"), 5*time.Second)
	<-got
	ok, failed := 0, 0
	for id, r := range res {
		switch {
		case r.StatusCode == 200 && r.Err == nil && r.BodySnippet == id:
			ok++
		case r.StatusCode == 0 && r.Err != nil && !r.TimedOut:
			failed++
		default:
			t.Fatalf("%s = %+v", id, r)
		}
	}
	if ok != 1 || failed != 2 {
		t.Fatalf("%d answered, %d failed; want 1 and 2", ok, failed)
	}
}

// A slow answer holds only what was queued behind it before the stall
// showed: later requests go to a new connection and are answered while
// the slow one is still open.
func TestPipelineStallOpensAConnection(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if strings.Contains(r.Header.Get("Idempotency-Key"), ":slow:") {
			<-release
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	c := newClient(t, Options{})
	slow := make(chan Result, 1)
	go func() { slow <- c.Deliver(context.Background(), pipeRequest(srv.URL, "slow")) }()
	time.Sleep(3 * pipeStall)
	for _, id := range ids(5, "f") {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		res := c.Deliver(ctx, pipeRequest(srv.URL, id))
		cancel()
		if res.Err != nil || res.StatusCode != 200 {
			t.Fatalf("%s behind a slow answer = %+v", id, res)
		}
	}
	select {
	case res := <-slow:
		t.Fatalf("the slow callback finished early: %+v", res)
	default:
	}
}

// The head's timeout fails it as a timeout; the connection is closed, and
// the callbacks queued behind it cannot be matched any more.
func TestPipelineTimeout(t *testing.T) {
	addr := rawServer(t, func(conn net.Conn, br *bufio.Reader, _ int) {
		for {
			if _, err := readID(br); err != nil {
				return
			}
		}
	})
	c := newClient(t, Options{})
	start := time.Now()
	res := deliverAll(c, "http://"+addr+"/", ids(3, "t"), 200*time.Millisecond)
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("took %v", d)
	}
	timedOut := 0
	for id, r := range res {
		if r.Err == nil || r.StatusCode != 0 {
			t.Fatalf("%s = %+v", id, r)
		}
		if r.TimedOut {
			timedOut++
		}
	}
	if timedOut == 0 {
		t.Fatalf("no timeout reported: %+v", res)
	}
}

// An answer larger than the client reads keeps its status; the connection
// is closed (the rest of the body is on the wire) and later callbacks use
// a new one.
func TestPipelineHugeAnswer(t *testing.T) {
	big := strings.Repeat("x", DefaultMaxResponseBodySize+100)
	addr := rawServer(t, func(conn net.Conn, br *bufio.Reader, index int) {
		for {
			id, err := readID(br)
			if err != nil {
				return
			}
			body := id
			if index == 0 {
				body = big
			}
			if _, err := fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body); err != nil {
				return
			}
		}
	})
	c := newClient(t, Options{})
	url := "http://" + addr + "/"
	if res := c.Deliver(context.Background(), pipeRequest(url, "big")); res.Err != nil || res.StatusCode != 200 {
		t.Fatalf("huge answer = %+v", res)
	}
	if res := c.Deliver(context.Background(), pipeRequest(url, "next")); res.Err != nil || res.StatusCode != 200 || res.BodySnippet != "next" {
		t.Fatalf("after a huge answer = %+v", res)
	}
}

// A connection the receiver closed while it idled is noticed before the
// next write: the request goes on a new connection, seen once.
func TestPipelineStaleConnection(t *testing.T) {
	var requests atomic.Int32
	closed := make(chan struct{})
	addr := rawServer(t, func(conn net.Conn, br *bufio.Reader, index int) {
		for {
			id, err := readID(br)
			if err != nil {
				return
			}
			requests.Add(1)
			io.WriteString(conn, answer(id))
			if index == 0 {
				conn.Close()
				close(closed)
				return
			}
		}
	})
	c := newClient(t, Options{StaleCheckAfter: -1})
	url := "http://" + addr + "/"
	if res := c.Deliver(context.Background(), pipeRequest(url, "a")); res.StatusCode != 200 {
		t.Fatalf("first = %+v", res)
	}
	<-closed
	if res := c.Deliver(context.Background(), pipeRequest(url, "b")); res.Err != nil || res.StatusCode != 200 || res.BodySnippet != "b" {
		t.Fatalf("on a stale connection = %+v", res)
	}
	if n := requests.Load(); n != 2 {
		t.Fatalf("receiver saw %d requests, want 2", n)
	}
}

func TestPipelineTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, strings.Split(r.Header.Get("Idempotency-Key"), ":")[1])
	}))
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	c := newClient(t, Options{TLSConfig: &tls.Config{RootCAs: roots}})
	for id, r := range deliverAll(c, srv.URL, ids(50, "s"), 5*time.Second) {
		if r.Err != nil || r.StatusCode != 200 || r.BodySnippet != id {
			t.Fatalf("%s = %+v", id, r)
		}
	}
	res := newClient(t, Options{}).Deliver(context.Background(), pipeRequest(srv.URL, "x"))
	if res.Err == nil || res.StatusCode != 0 {
		t.Fatalf("untrusted certificate = %+v", res)
	}
}

func TestPipelineConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := newClient(t, Options{})
	for id, r := range deliverAll(c, "http://"+addr+"/", ids(5, "r"), 2*time.Second) {
		if r.Err == nil || r.StatusCode != 0 {
			t.Fatalf("%s = %+v", id, r)
		}
	}
}

// The egress policy decides pipelined connections too.
func TestPipelineEgressRefused(t *testing.T) {
	srv, reqs := newServer(t, nil)
	p, err := NewPolicy([]string{"127.0.0.0/8"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, Options{Egress: p})
	res := c.Deliver(context.Background(), pipeRequest(srv.URL, "e"))
	if !errors.Is(res.Err, ErrRefused) {
		t.Fatalf("Deliver = %+v, want ErrRefused", res)
	}
	select {
	case <-reqs:
		t.Fatal("the receiver got a request")
	default:
	}
}

// An idle pipelined connection is closed after MaxIdleConnDuration, and
// the next callback opens a new one.
func TestPipelineIdleClose(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	closed := make(chan struct{}, 4)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			conns.Add(1)
		case http.StateClosed:
			closed <- struct{}{}
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	c := newClient(t, Options{MaxIdleConnDuration: 50 * time.Millisecond})
	for i := range 2 {
		if res := c.Deliver(context.Background(), pipeRequest(srv.URL, "i")); res.Err != nil || res.StatusCode != 200 {
			t.Fatalf("Deliver %d = %+v", i, res)
		}
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Fatal("the idle connection was not closed")
		}
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
}

// A pipelined connection's idle time counts from its last answer, not
// from its last write: after an answer slower than MaxIdleConnDuration
// the connection stays open that long again.
func TestPipelineIdleCountsFromTheLastAnswer(t *testing.T) {
	const idle = 100 * time.Millisecond
	answered := make(chan time.Time, 1)
	closedAt := make(chan time.Time, 1)
	addr := rawServer(t, func(conn net.Conn, br *bufio.Reader, _ int) {
		id, err := readID(br)
		if err != nil {
			return
		}
		time.Sleep(idle + idle/2)
		answered <- time.Now()
		_, _ = io.WriteString(conn, answer(id))
		_, _ = io.Copy(io.Discard, br) // until the client closes
		closedAt <- time.Now()
	})
	c := newClient(t, Options{MaxIdleConnDuration: idle})
	if res := c.Deliver(context.Background(), pipeRequest("http://"+addr+"/", "slow")); res.Err != nil || res.StatusCode != 200 {
		t.Fatalf("Deliver = %+v", res)
	}
	a := <-answered
	select {
	case cl := <-closedAt:
		if d := cl.Sub(a); d < idle*9/10 {
			t.Fatalf("closed %v after the answer, want at least %v", d, idle)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the idle connection was not closed")
	}
}

// A lone callback whose receiver does not answer in time times out as a
// callback does without pipelining, whichever of its caller and the
// connection's reader sees the deadline first: it is not reported as
// waiting behind earlier callbacks (there were none) or as never written.
func TestPipelineLoneTimeoutIsAPlainTimeout(t *testing.T) {
	addr := rawServer(t, func(conn net.Conn, br *bufio.Reader, _ int) {
		_, _ = io.Copy(io.Discard, br) // never answers
	})
	// The default client: a connection that owes an answer and had none
	// for pipeStall takes no new request, so each run's request is alone
	// on its connection (oneConnClient's would queue behind the last
	// run's, whose connection breaks when that one times out).
	c := newClient(t, Options{})
	for i := range 20 {
		r := pipeRequest("http://"+addr+"/", fmt.Sprint("lone-", i))
		r.Timeout = 30 * time.Millisecond
		res := c.Deliver(context.Background(), r)
		if !res.TimedOut || !errors.Is(res.Err, fasthttp.ErrTimeout) || errors.Is(res.Err, errPipeBehind) || errors.Is(res.Err, errPipeQueued) {
			t.Fatalf("run %d: %+v", i, res)
		}
	}
}

// A request sent while a timed-out connection is being shut goes to
// another connection: its caller gave up at the deadline before the
// reader saw the read fail, so the next request could find the
// connection owing nothing and still open (a race that failed
// TestPipelineLoneTimeoutIsAPlainTimeout about once in 2,000 runs).
func TestPipelineNextRequestAvoidsAConnectionBeingShut(t *testing.T) {
	addr := rawServer(t, func(conn net.Conn, br *bufio.Reader, _ int) {
		_, _ = io.Copy(io.Discard, br) // never answers
	})
	c := newClient(t, Options{})
	url := "http://" + addr + "/"
	var once sync.Once
	next := make(chan Result, 1)
	// In the reader, between the timed-out request leaving the
	// connection and the connection's shut: the next request.
	c.popped = func() {
		once.Do(func() {
			r := pipeRequest(url, "next")
			r.Timeout = 30 * time.Millisecond
			next <- c.Deliver(context.Background(), r)
		})
	}
	r := pipeRequest(url, "first")
	r.Timeout = 30 * time.Millisecond
	if res := c.Deliver(context.Background(), r); !res.TimedOut {
		t.Fatalf("first = %+v", res)
	}
	res := <-next
	if !res.TimedOut || !errors.Is(res.Err, fasthttp.ErrTimeout) || errors.Is(res.Err, errPipeBehind) || errors.Is(res.Err, errPipeBroken) {
		t.Fatalf("next = %+v", res)
	}
}

// A request with a short timeout behind one with a long timeout and a
// slow answer returns at its own deadline, not the first one's.
func TestPipelineOwnDeadlineBehindASlowAnswer(t *testing.T) {
	addr := rawServer(t, func(conn net.Conn, br *bufio.Reader, _ int) {
		var got []string
		for len(got) < 2 {
			id, err := readID(br)
			if err != nil {
				return
			}
			got = append(got, id)
		}
		time.Sleep(time.Second)
		io.WriteString(conn, answer(got[0])+answer(got[1]))
		io.Copy(io.Discard, br)
	})
	c := oneConnClient(t)
	url := "http://" + addr + "/"
	slow := make(chan Result, 1)
	go func() {
		r := pipeRequest(url, "long")
		r.Timeout = 5 * time.Second
		slow <- c.Deliver(context.Background(), r)
	}()
	time.Sleep(50 * time.Millisecond) // "long" is written first
	r := pipeRequest(url, "short")
	r.Timeout = 150 * time.Millisecond
	start := time.Now()
	res := c.Deliver(context.Background(), r)
	if !res.TimedOut || res.StatusCode != 0 || !errors.Is(res.Err, errPipeBehind) {
		t.Fatalf("short = %+v", res)
	}
	if d := time.Since(start); d > 700*time.Millisecond {
		t.Fatalf("short returned after %v", d)
	}
	if res := <-slow; res.Err != nil || res.StatusCode != 200 || res.BodySnippet != "long" {
		t.Fatalf("long = %+v", res)
	}
}

// The counters behind the node's timemachine_callback_pipeline_* metrics.
func TestPipelineStats(t *testing.T) {
	addr := rawServer(t, func(conn net.Conn, br *bufio.Reader, index int) {
		for n := 0; ; n++ {
			id, err := readID(br)
			if err != nil {
				return
			}
			if index == 0 && n == 5 {
				// The sixth answer closes the connection (after enough
				// answers that the receiver is not demoted); what is
				// read after it is never processed.
				io.WriteString(conn, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok")
				for {
					if _, err := readID(br); err != nil {
						return
					}
				}
			}
			if _, err := io.WriteString(conn, answer(id)); err != nil {
				return
			}
		}
	})
	c := oneConnClient(t)
	for id, r := range deliverAll(c, "http://"+addr+"/", ids(10, "m"), 5*time.Second) {
		if r.Err != nil || r.StatusCode != 200 {
			t.Fatalf("%s = %+v", id, r)
		}
	}
	st := c.PipelineStats()
	if st.Opened != 2 || st.Resent == 0 || st.Broken != 0 || st.Requests < 10 || st.Writes == 0 || st.Writes > st.Requests {
		t.Fatalf("stats %+v", st)
	}
	testutil.Eventually(t, 5*time.Second, "one connection open", func() error {
		if n := c.PipelineStats().Connections; n != 1 {
			return fmt.Errorf("%d open", n)
		}
		return nil
	})
}

// A pipelined request's path and query reach the receiver byte for byte,
// as without pipelining (pre-signed URLs).
func TestPipelineKeepsThePath(t *testing.T) {
	srv, reqs := newServer(t, nil)
	c := newClient(t, Options{})
	if res := c.Deliver(context.Background(), pipeRequest(srv.URL+"/hook/a%2Fb//c/./d?x=%20y", "p")); res.Err != nil || res.StatusCode != 200 {
		t.Fatalf("Deliver = %+v", res)
	}
	if got := (<-reqs).requestURI; got != "/hook/a%2Fb//c/./d?x=%20y" {
		t.Fatalf("request URI %q", got)
	}
}

// A receiver that answers with "Connection: close" and closes at once,
// leaving the requests behind unread (its kernel resets the connection):
// the answered request stands, the others were never processed and are
// sent again; nothing is failed, nothing processed twice.
func TestPipelineCloseWithResetFailsNothing(t *testing.T) {
	seen := newTally()
	addr := rawServer(t, func(conn net.Conn, br *bufio.Reader, index int) {
		for n := 0; ; n++ {
			id, err := readID(br)
			if err != nil {
				return
			}
			seen.add(id)
			if index == 0 {
				for br.Buffered() == 0 { // a request written behind it
					if _, err := br.Peek(1); err != nil {
						return
					}
				}
				io.WriteString(conn, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: "+fmt.Sprint(len(id))+"\r\n\r\n"+id)
				return // closed with unread requests: a reset
			}
			if _, err := io.WriteString(conn, answer(id)); err != nil {
				return
			}
		}
	})
	c := oneConnClient(t)
	want := ids(30, "z")
	res := deliverAll(c, "http://"+addr+"/", want, 5*time.Second)
	mustAllOnce(t, res, want, seen, true)
	if st := c.PipelineStats(); st.Broken != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// A 200 whose body is cut short keeps its status, as without pipelining.
func TestPipelineTruncatedAnswerStands(t *testing.T) {
	addr := rawServer(t, func(conn net.Conn, br *bufio.Reader, _ int) {
		if _, err := readID(br); err != nil {
			return
		}
		io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort")
	})
	c := newClient(t, Options{})
	res := c.Deliver(context.Background(), pipeRequest("http://"+addr+"/", "t"))
	if res.Err != nil || res.StatusCode != 200 {
		t.Fatalf("Deliver = %+v", res)
	}
}

// A receiver that closes the connection after every answer: after the
// first such close the host gets one request per connection, instead of
// every pipelined request being written again and again.
func TestPipelineDemotesACloseEveryTimeReceiver(t *testing.T) {
	seen := newTally()
	addr := rawServer(t, func(conn net.Conn, br *bufio.Reader, _ int) {
		id, err := readID(br)
		if err != nil {
			return
		}
		seen.add(id)
		io.WriteString(conn, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok")
		io.Copy(io.Discard, br)
	})
	c := oneConnClient(t)
	want := ids(40, "d")
	res := deliverAll(c, "http://"+addr+"/", want, 5*time.Second)
	mustAllOnce(t, res, want, seen, false)
	if st := c.PipelineStats(); st.Requests > 2*40 {
		t.Fatalf("%d requests written for 40 callbacks: %+v", st.Requests, st)
	}
}
