package webhook

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// seen is what a test server observed of one request.
type seen struct {
	method, requestURI string
	header             http.Header
	body               []byte
}

// newServer starts a net/http server on 127.0.0.1 (a different HTTP stack
// from the client's, which is what receivers will mostly be) that records
// each request and answers with respond.
func newServer(t *testing.T, respond http.HandlerFunc) (*httptest.Server, <-chan seen) {
	t.Helper()
	reqs := make(chan seen, 64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		reqs <- seen{method: r.Method, requestURI: r.RequestURI, header: r.Header.Clone(), body: body}
		if respond != nil {
			respond(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, reqs
}

// rawServer accepts connections on loopback and runs serve on each (conn
// is the connection's index, from 0). It returns the address. Cleanups
// run last-registered first: a client made after it is closed first (its
// pooled connections dropped), then the listener, then the connections'
// goroutines are awaited.
func rawServer(t *testing.T, serve func(conn net.Conn, br *bufio.Reader, index int)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(func() { ln.Close() })
	wg.Go(func() {
		for i := 0; ; i++ {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer conn.Close()
				serve(conn, bufio.NewReader(conn), i)
			})
		}
	})
	return ln.Addr().String()
}

func newClient(t *testing.T, o Options) *Client {
	t.Helper()
	c := New(o)
	t.Cleanup(c.Close)
	return c
}

var fixedNow = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func testRequest(url string) *Request {
	return &Request{
		URL: url,
		Payload: Payload{
			ID: "user-reminder-123", Collection: "notifications",
			TriggerTime: 1767225600000, Attempt: 3,
			Meta: json.RawMessage(`{"any":"json"}`),
		},
		IdempotencyKey: "notifications:user-reminder-123:1767225600000",
		Timeout:        5 * time.Second,
		Now:            fixedNow,
	}
}

func TestDeliverSendsProtocol(t *testing.T) {
	srv, reqs := newServer(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) })
	c := newClient(t, Options{})

	// The path keeps an encoded slash and the query an encoded space: a
	// pre-signed URL must reach the receiver byte for byte.
	r := testRequest(srv.URL + "/hooks/a%2Fb?token=x%20y&z=1")
	res := c.Deliver(context.Background(), r)
	if res.Err != nil || res.StatusCode != 204 {
		t.Fatalf("Deliver = %+v", res)
	}
	if res.Latency <= 0 {
		t.Errorf("Latency = %v", res.Latency)
	}
	got := <-reqs
	if got.method != "POST" {
		t.Errorf("method %q", got.method)
	}
	if got.requestURI != "/hooks/a%2Fb?token=x%20y&z=1" {
		t.Errorf("request URI %q", got.requestURI)
	}
	wantHeaders := map[string]string{
		"Content-Type":          "application/json",
		"Idempotency-Key":       "notifications:user-reminder-123:1767225600000",
		"X-Timemachine-Attempt": "3",
		"User-Agent":            "timemachine-webhook/1",
	}
	for k, v := range wantHeaders {
		if g := got.header.Values(k); len(g) != 1 || g[0] != v {
			t.Errorf("header %s = %q, want [%q]", k, g, v)
		}
	}
	for _, k := range []string{HeaderWebhookID, HeaderWebhookTimestamp, HeaderWebhookSignature} {
		if v := got.header.Get(k); v != "" {
			t.Errorf("unsigned request carries %s: %q", k, v)
		}
	}
	wantBody := `{"id":"user-reminder-123","collection":"notifications","trigger_time":1767225600000,"attempt":3,"meta":{"any":"json"}}`
	if string(got.body) != wantBody {
		t.Errorf("body %s\nwant %s", got.body, wantBody)
	}
}

func TestDeliverDerivesIdempotencyKey(t *testing.T) {
	srv, reqs := newServer(t, nil)
	c := newClient(t, Options{UserAgent: "custom/2"})
	r := testRequest(srv.URL)
	r.IdempotencyKey = ""
	if res := c.Deliver(context.Background(), r); res.StatusCode != 200 {
		t.Fatalf("Deliver = %+v", res)
	}
	got := <-reqs
	if k := got.header.Get("Idempotency-Key"); k != "notifications:user-reminder-123:1767225600000" {
		t.Errorf("Idempotency-Key %q", k)
	}
	if ua := got.header.Get("User-Agent"); ua != "custom/2" {
		t.Errorf("User-Agent %q", ua)
	}
}

func TestDeliverSigned(t *testing.T) {
	srv, reqs := newServer(t, nil)
	c := newClient(t, Options{})
	key, err := ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	r := testRequest(srv.URL)
	r.SigningKey = key
	if res := c.Deliver(context.Background(), r); res.Err != nil || res.StatusCode != 200 {
		t.Fatalf("Deliver = %+v", res)
	}
	got := <-reqs
	id := got.header.Get("webhook-id")
	if id != r.IdempotencyKey {
		t.Errorf("webhook-id %q, want %q", id, r.IdempotencyKey)
	}
	ts, err := strconv.ParseInt(got.header.Get("webhook-timestamp"), 10, 64)
	if err != nil || ts != fixedNow.Unix() {
		t.Errorf("webhook-timestamp %q, want %d", got.header.Get("webhook-timestamp"), fixedNow.Unix())
	}
	sig := got.header.Get("webhook-signature")
	if !strings.HasPrefix(sig, "v1,") || !Verify(key, id, ts, got.body, sig) {
		t.Fatalf("signature %q does not verify over %s", sig, got.body)
	}
	if Verify(key, id, ts+1, got.body, sig) {
		t.Fatal("signature verifies with another timestamp")
	}
}

// The contract spells the Standard Webhooks headers in lower case; check the
// names on the wire, which net/http would canonicalize away.
func TestDeliverHeaderNamesOnTheWire(t *testing.T) {
	names := make(chan []string, 1)
	addr := serveFastHTTP(t, &fasthttp.Server{
		DisableHeaderNamesNormalizing: true,
		Handler: func(ctx *fasthttp.RequestCtx) {
			var n []string
			for k := range ctx.Request.Header.All() {
				n = append(n, string(k))
			}
			names <- n
			// Lower-case on the wire too: must still be found.
			ctx.Response.Header.Set("retry-after", "3")
			ctx.SetStatusCode(429)
		},
	})
	c := newClient(t, Options{})
	r := testRequest("http://" + addr + "/")
	r.SigningKey = []byte("0123456789abcdef01234567")
	r.Headers = map[string]string{"x-Route-Case": "kept"}
	if res := c.Deliver(context.Background(), r); res.StatusCode != 429 || res.RetryAfter != 3*time.Second || !res.HasRetryAfter {
		t.Fatalf("Deliver = %+v", res)
	}
	got := strings.Join(<-names, ",")
	for _, want := range []string{"webhook-id", "webhook-timestamp", "webhook-signature", "Idempotency-Key", "X-Timemachine-Attempt", "Content-Type", "User-Agent", "x-Route-Case"} {
		if !strings.Contains(","+got+",", ","+want+",") {
			t.Errorf("header %q not on the wire; got %s", want, got)
		}
	}
}

func TestDeliverRouteHeaders(t *testing.T) {
	srv, reqs := newServer(t, nil)
	c := newClient(t, Options{})
	r := testRequest(srv.URL)
	r.Headers = map[string]string{
		"Authorization":         "Bearer route-token",
		"X-Tenant":              "acme",
		"Idempotency-Key":       "forged",
		"idempotency-key":       "forged-lower",
		"X-Timemachine-Attempt": "99",
		"webhook-signature":     "v1,forged",
		"Content-Type":          "text/plain",
		"Content-Length":        "1",
		"Host":                  "evil.example",
		"User-Agent":            "route-agent",
	}
	if res := c.Deliver(context.Background(), r); res.Err != nil || res.StatusCode != 200 {
		t.Fatalf("Deliver = %+v", res)
	}
	got := <-reqs
	check := func(name string, want ...string) {
		t.Helper()
		if g := got.header.Values(name); strings.Join(g, "|") != strings.Join(want, "|") {
			t.Errorf("%s = %q, want %q", name, g, want)
		}
	}
	check("Authorization", "Bearer route-token")
	check("X-Tenant", "acme")
	check("Idempotency-Key", r.IdempotencyKey)
	check("X-Timemachine-Attempt", "3")
	check("webhook-signature") // unsigned: none at all, not the forged one
	check("Content-Type", "application/json")
	check("User-Agent", "timemachine-webhook/1")
	if !json.Valid(got.body) {
		t.Errorf("body corrupted: %q", got.body)
	}
}

func TestDeliverInvalidRequests(t *testing.T) {
	c := newClient(t, Options{})
	urls := []string{
		"", "not a url", "example.com/hook", "/relative", "ftp://example.com/x",
		"http://", "http:///path", "https://:443/", "http://exa mple.com/",
		"http://host/\r\nX-Evil: 1", "http://host:99999/", "http://host:0/",
		"http://[::1/", "http://%zz/", "javascript:alert(1)",
	}
	for _, u := range urls {
		r := testRequest(u)
		res := c.Deliver(context.Background(), r)
		if !errors.Is(res.Err, ErrInvalidRequest) || res.StatusCode != 0 || res.TimedOut {
			t.Errorf("Deliver(%q) = %+v, want ErrInvalidRequest", u, res)
		}
	}

	srv, reqs := newServer(t, nil)
	for name, v := range map[string]string{"Bad Name": "v", "X-Ok": "a\nb", "": "v"} {
		r := testRequest(srv.URL)
		r.Headers = map[string]string{name: v}
		if res := c.Deliver(context.Background(), r); !errors.Is(res.Err, ErrInvalidRequest) {
			t.Errorf("header %q: %q: Deliver = %+v, want ErrInvalidRequest", name, v, res)
		}
	}
	if res := c.Deliver(context.Background(), nil); !errors.Is(res.Err, ErrInvalidRequest) {
		t.Errorf("nil request: %+v", res)
	}
	select {
	case s := <-reqs:
		t.Fatalf("an invalid request reached the server: %+v", s)
	default:
	}
}

func TestDeliverReschedule(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		body    string
		at      int64
		in      time.Duration
		wantErr bool
	}{
		{name: "at", status: 200, body: `{"reschedule_at":1767229200000}`, at: 1767229200000},
		{name: "at RFC 3339", status: 202, body: `{"reschedule_at":"2026-01-01T01:00:00Z"}`, at: 1767229200000},
		{name: "in", status: 200, body: `{"reschedule_in":"30s"}`, in: 30 * time.Second},
		{name: "bad in", status: 200, body: `{"reschedule_in":"banana"}`, wantErr: true},
		{name: "negative in", status: 200, body: `{"reschedule_in":"-1m"}`, wantErr: true},
		{name: "ignored on non-2xx", status: 500, body: `{"reschedule_in":"banana"}`},
		{name: "plain ok", status: 200, body: `ok`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := newServer(t, func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			})
			res := newClient(t, Options{}).Deliver(context.Background(), testRequest(srv.URL))
			if res.Err != nil || res.StatusCode != tt.status {
				t.Fatalf("Deliver = %+v", res)
			}
			if res.RescheduleAt != tt.at || res.RescheduleIn != tt.in || (res.RescheduleErr != nil) != tt.wantErr {
				t.Fatalf("got at=%d in=%v err=%v; want at=%d in=%v err=%v",
					res.RescheduleAt, res.RescheduleIn, res.RescheduleErr, tt.at, tt.in, tt.wantErr)
			}
			if res.BodySnippet != tt.body {
				t.Errorf("BodySnippet %q, want %q", res.BodySnippet, tt.body)
			}
		})
	}
}

func TestDeliverRetryAfter(t *testing.T) {
	tests := []struct {
		name   string
		value  string
		want   time.Duration
		wantOK bool
	}{
		{"delta seconds", "7", 7 * time.Second, true},
		{"http date", fixedNow.Add(2 * time.Minute).Format(http.TimeFormat), 2 * time.Minute, true},
		{"garbage", "later", 0, false},
		{"absent", "", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := newServer(t, func(w http.ResponseWriter, _ *http.Request) {
				if tt.value != "" {
					w.Header().Set("Retry-After", tt.value)
				}
				w.WriteHeader(503)
			})
			res := newClient(t, Options{}).Deliver(context.Background(), testRequest(srv.URL))
			if res.Err != nil || res.StatusCode != 503 {
				t.Fatalf("Deliver = %+v", res)
			}
			if res.RetryAfter != tt.want || res.HasRetryAfter != tt.wantOK {
				t.Fatalf("RetryAfter = %v, %v; want %v, %v", res.RetryAfter, res.HasRetryAfter, tt.want, tt.wantOK)
			}
		})
	}
}

// blockingServer never answers until the test ends.
func blockingServer(t *testing.T) (url string, arrived <-chan struct{}) {
	t.Helper()
	release := make(chan struct{})
	in := make(chan struct{}, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		in <- struct{}{}
		<-release
	}))
	t.Cleanup(srv.Close) // runs after close(release): cleanups are LIFO
	t.Cleanup(func() { close(release) })
	return srv.URL, in
}

func TestDeliverTimeout(t *testing.T) {
	url, _ := blockingServer(t)
	c := newClient(t, Options{})
	r := testRequest(url)
	r.Timeout = 100 * time.Millisecond
	res := c.Deliver(context.Background(), r)
	if !res.TimedOut || res.Err == nil || res.StatusCode != 0 {
		t.Fatalf("Deliver = %+v, want a timeout", res)
	}
	if res.Latency < r.Timeout || res.Latency > 3*time.Second {
		t.Errorf("Latency %v for a %v timeout", res.Latency, r.Timeout)
	}
}

func TestDeliverContext(t *testing.T) {
	url, arrived := blockingServer(t)
	c := newClient(t, Options{})

	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-arrived
			cancel()
		}()
		res := c.Deliver(ctx, testRequest(url))
		if !errors.Is(res.Err, context.Canceled) || res.TimedOut || res.StatusCode != 0 {
			t.Fatalf("Deliver = %+v, want context.Canceled", res)
		}
	})
	t.Run("deadline shorter than Timeout", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		r := testRequest(url)
		r.Timeout = time.Minute
		res := c.Deliver(ctx, r)
		if !res.TimedOut || res.Err == nil || res.Latency > 3*time.Second {
			t.Fatalf("Deliver = %+v, want a timeout", res)
		}
	})
	t.Run("already cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if res := c.Deliver(ctx, testRequest(url)); !errors.Is(res.Err, context.Canceled) {
			t.Fatalf("Deliver = %+v", res)
		}
	})
}

func TestDeliverConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	res := newClient(t, Options{}).Deliver(context.Background(), testRequest("http://"+addr+"/hook"))
	if res.Err == nil || res.StatusCode != 0 || res.TimedOut || errors.Is(res.Err, ErrInvalidRequest) {
		t.Fatalf("Deliver = %+v, want a connection error", res)
	}
	if !strings.Contains(res.Err.Error(), "refused") {
		t.Errorf("error %q does not say the connection was refused", res.Err)
	}
}

func TestDeliverDoesNotFollowRedirects(t *testing.T) {
	var followed atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/hook", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	})
	mux.HandleFunc("/elsewhere", func(http.ResponseWriter, *http.Request) { followed.Add(1) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	res := newClient(t, Options{}).Deliver(context.Background(), testRequest(srv.URL+"/hook"))
	if res.Err != nil || res.StatusCode != 302 {
		t.Fatalf("Deliver = %+v, want 302", res)
	}
	if n := followed.Load(); n != 0 {
		t.Fatalf("redirect followed %d times", n)
	}
}

func TestDeliverHugeBody(t *testing.T) {
	const huge = 8 << 20
	chunk := strings.Repeat("x", 32<<10)
	tests := []struct {
		name    string
		status  int
		chunked bool
		prefix  string
		wantErr bool // RescheduleErr
	}{
		{name: "2xx content-length", status: 200},
		{name: "2xx chunked", status: 200, chunked: true},
		{name: "5xx", status: 503},
		{name: "2xx reschedule lost in a huge body", status: 200, prefix: `{"reschedule_in":"30s","pad":"`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := newServer(t, func(w http.ResponseWriter, _ *http.Request) {
				if !tt.chunked {
					w.Header().Set("Content-Length", strconv.Itoa(len(tt.prefix)+huge))
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.prefix)
				for n := 0; n < huge; n += len(chunk) {
					if _, err := io.WriteString(w, chunk); err != nil {
						return // the client hung up after reading enough: expected
					}
				}
			})
			c := newClient(t, Options{MaxResponseBodySize: 4 << 10})
			res := c.Deliver(context.Background(), testRequest(srv.URL))
			if res.Err != nil || res.StatusCode != tt.status {
				t.Fatalf("Deliver = %+v", res)
			}
			if len(res.BodySnippet) != SnippetMax {
				t.Errorf("BodySnippet is %d bytes", len(res.BodySnippet))
			}
			if (res.RescheduleErr != nil) != tt.wantErr || res.RescheduleIn != 0 {
				t.Errorf("RescheduleErr = %v, RescheduleIn = %v", res.RescheduleErr, res.RescheduleIn)
			}
			// The connection was abandoned mid-body; the next delivery must
			// still work on a fresh one.
			if res := c.Deliver(context.Background(), testRequest(srv.URL)); res.StatusCode != tt.status {
				t.Fatalf("second Deliver = %+v", res)
			}
		})
	}
}

func TestDeliverBodySnippet(t *testing.T) {
	srv, _ := newServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(500)
		io.WriteString(w, "database \xffis down "+strings.Repeat("!", 400))
	})
	res := newClient(t, Options{}).Deliver(context.Background(), testRequest(srv.URL))
	if res.StatusCode != 500 || !strings.HasPrefix(res.BodySnippet, "database \uFFFDis down !!!") || len(res.BodySnippet) > SnippetMax {
		t.Fatalf("Deliver = %+v", res)
	}
}

// Connections are reused across deliveries: a slot-leader firing at a
// receiver must not pay a handshake per callback.
func TestDeliverReusesConnections(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `{"ok":true}`)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	c := newClient(t, Options{})
	for i := range 20 {
		if res := c.Deliver(context.Background(), testRequest(srv.URL)); res.StatusCode != 200 {
			t.Fatalf("delivery %d: %+v", i, res)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("20 sequential deliveries used %d connections, want 1", n)
	}
}

// A receiver that closes a keep-alive connection while it idles in our pool
// (Node, uvicorn and gunicorn all do within seconds) must not cost the job an
// attempt: the request is replayed once on a fresh connection.
func TestDeliverReplaysOnStaleConnection(t *testing.T) {
	var requests atomic.Int32
	closedFirst := make(chan struct{})
	addr := rawServer(t, func(conn net.Conn, br *bufio.Reader, i int) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			requests.Add(1)
			// Keep-alive answer, then the first connection is closed
			// as if its idle timeout had fired.
			io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			if i == 0 {
				conn.Close()
				close(closedFirst)
				return
			}
		}
	})

	// The receiver closes right after its answer, standing in for an idle
	// timeout: peek before every request (by default a connection answered
	// less than DefaultStaleCheckAfter ago is not peeked at).
	c := newClient(t, Options{StaleCheckAfter: -1})
	url := "http://" + addr + "/"
	if res := c.Deliver(context.Background(), testRequest(url)); res.StatusCode != 200 {
		t.Fatalf("first Deliver = %+v", res)
	}
	<-closedFirst
	res := c.Deliver(context.Background(), testRequest(url))
	if res.Err != nil || res.StatusCode != 200 {
		t.Fatalf("Deliver on a stale connection = %+v", res)
	}
	if n := requests.Load(); n != 2 {
		t.Fatalf("server saw %d requests, want 2", n)
	}
}

// A connection the receiver reset right after answering is reused at once
// (no peek: it carried an answer less than DefaultStaleCheckAfter ago),
// but the reset fails the request's first write before a byte leaves: the
// request is replayed on a fresh connection and costs no attempt.
func TestDeliverReplaysAfterResetWithoutPeek(t *testing.T) {
	var requests atomic.Int32
	resetFirst := make(chan struct{})
	addr := rawServer(t, func(conn net.Conn, br *bufio.Reader, i int) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			requests.Add(1)
			io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			if i == 0 {
				_ = conn.(*net.TCPConn).SetLinger(0) // close with a reset
				conn.Close()
				close(resetFirst)
				return
			}
		}
	})

	c := newClient(t, Options{})
	url := "http://" + addr + "/"
	if res := c.Deliver(context.Background(), testRequest(url)); res.StatusCode != 200 {
		t.Fatalf("first Deliver = %+v", res)
	}
	<-resetFirst
	res := c.Deliver(context.Background(), testRequest(url))
	if res.Err != nil || res.StatusCode != 200 {
		t.Fatalf("Deliver on a reset connection = %+v", res)
	}
	if n := requests.Load(); n != 2 {
		t.Fatalf("server saw %d requests, want 2", n)
	}
}

// A receiver that reads a request and closes the connection without
// answering got it twice: fasthttp replayed the POST on the EOF. The
// attempt must reach the receiver once, on a fresh connection and on a
// reused one alike, and count as failed.
func TestDeliverNoReplayWhenReceiverClosesWithoutAnswer(t *testing.T) {
	var requests atomic.Int32
	addr := rawServer(t, func(conn net.Conn, br *bufio.Reader, i int) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			if requests.Add(1)%2 == 1 {
				// Odd requests: answered, so the connection goes
				// back to the pool and the next request reuses it.
				io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				continue
			}
			return // even ones: closed without an answer
		}
	})
	c := newClient(t, Options{})
	url := "http://" + addr + "/"
	for round := 0; round < 3; round++ {
		before := requests.Load()
		if res := c.Deliver(context.Background(), testRequest(url)); res.StatusCode != 200 {
			t.Fatalf("round %d: answered delivery = %+v", round, res)
		}
		res := c.Deliver(context.Background(), testRequest(url)) // reuses the connection
		if res.Err == nil {
			t.Fatalf("round %d: a delivery the receiver never answered succeeded: %+v", round, res)
		}
		if n := requests.Load() - before; n != 2 {
			t.Fatalf("round %d: the receiver saw %d requests for 2 deliveries (the unanswered one was replayed)", round, n)
		}
	}
}

func TestDeliverTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Idempotency-Key") == "" {
			w.WriteHeader(400)
		}
	}))
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	c := newClient(t, Options{TLSConfig: &tls.Config{RootCAs: roots}})
	for range 3 {
		if res := c.Deliver(context.Background(), testRequest(srv.URL)); res.Err != nil || res.StatusCode != 200 {
			t.Fatalf("Deliver = %+v", res)
		}
	}
	// Without the test CA the certificate must be rejected, not ignored.
	res := newClient(t, Options{}).Deliver(context.Background(), testRequest(srv.URL))
	if res.Err == nil || res.StatusCode != 0 {
		t.Fatalf("Deliver with untrusted certificate = %+v", res)
	}
}

// A receiver that accepts TCP but never completes the TLS handshake must be
// bounded by the request's Timeout and by DialTimeout, not by anything longer.
func TestDeliverTLSHandshakeStall(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, conn)
			mu.Unlock()
		}
	}()
	url := "https://" + ln.Addr().String() + "/"

	r := testRequest(url)
	r.Timeout = 150 * time.Millisecond
	res := newClient(t, Options{}).Deliver(context.Background(), r)
	if !res.TimedOut || res.Latency > 3*time.Second {
		t.Fatalf("request timeout: Deliver = %+v", res)
	}

	r = testRequest(url)
	r.Timeout = time.Minute
	res = newClient(t, Options{DialTimeout: 150 * time.Millisecond}).Deliver(context.Background(), r)
	if !res.TimedOut || res.Latency > 3*time.Second {
		t.Fatalf("dial timeout: Deliver = %+v", res)
	}
}

// Many concurrent deliveries through a small pool: requests beyond
// MaxConnsPerHost wait for a connection instead of failing.
func TestDeliverConcurrent(t *testing.T) {
	var n atomic.Int32
	// Not newServer: its recording channel would fill up.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, `{"got":%q}`, r.Header.Get("Idempotency-Key"))
	}))
	t.Cleanup(srv.Close)

	c := newClient(t, Options{MaxConnsPerHost: 8})
	const total = 300
	var wg sync.WaitGroup
	errs := make(chan string, total)
	for i := range total {
		wg.Go(func() {
			r := testRequest(srv.URL)
			r.IdempotencyKey = fmt.Sprintf("c:%d:1", i)
			res := c.Deliver(context.Background(), r)
			if want := fmt.Sprintf(`{"got":"c:%d:1"}`, i); res.StatusCode != 200 || res.BodySnippet != want {
				errs <- fmt.Sprintf("delivery %d: %+v", i, res)
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if got := n.Load(); got != total {
		t.Fatalf("server saw %d requests, want %d", got, total)
	}
}

func TestDeliverAfterClose(t *testing.T) {
	srv, _ := newServer(t, nil)
	c := New(Options{})
	c.Close()
	if res := c.Deliver(context.Background(), testRequest(srv.URL)); !errors.Is(res.Err, ErrClosed) {
		t.Fatalf("Deliver after Close = %+v", res)
	}
}

// serveFastHTTP serves s on a 127.0.0.1 port until the test ends.
func serveFastHTTP(tb testing.TB, s *fasthttp.Server) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Serve(ln)
	}()
	tb.Cleanup(func() {
		s.Shutdown()
		<-done
	})
	return ln.Addr().String()
}

// Whatever URL and route header a user manages to store, building the request
// must not panic, and if it is accepted the bytes on the wire must still be
// one well-formed request whose protocol headers and body are ours.
func FuzzBuildRequest(f *testing.F) {
	f.Add("http://127.0.0.1:8080/hook?x=1", "Authorization", "Bearer t")
	f.Add("https://[::1]:443/a%2Fb", "X-A", "a\r\nIdempotency-Key: forged")
	f.Add("http://host/\r\n\r\nGET / HTTP/1.1", "idempotency-key", "forged")
	f.Add("http://user:pass@host:1/p#frag", "Content-Length", "0")
	f.Add("ftp://x", "", "")
	c := New(Options{})
	defer c.Close()
	f.Fuzz(func(t *testing.T, url, hk, hv string) {
		r := testRequest(url)
		r.Headers = map[string]string{hk: hv}
		r.SigningKey = []byte("0123456789abcdef01234567")
		req := fasthttp.AcquireRequest()
		defer fasthttp.ReleaseRequest(req)
		if err := c.buildRequest(req, r, fixedNow); err != nil {
			if !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("error not marked ErrInvalidRequest: %v", err)
			}
			return
		}
		var wire strings.Builder
		bw := bufio.NewWriter(&wire)
		if err := req.Write(bw); err != nil {
			return // fasthttp refused to write it: nothing reached the wire
		}
		bw.Flush()
		br := bufio.NewReader(strings.NewReader(wire.String()))
		got, err := http.ReadRequest(br)
		if err != nil {
			t.Fatalf("accepted URL %q produced an unparsable request: %v\n%s", url, err, wire.String())
		}
		body, _ := io.ReadAll(got.Body)
		if got.Method != "POST" || string(body) != string(r.Payload.AppendJSON(nil)) {
			t.Fatalf("request mangled: %s %s body %q", got.Method, got.RequestURI, body)
		}
		if v := got.Header.Values("Idempotency-Key"); len(v) != 1 || v[0] != r.IdempotencyKey {
			t.Fatalf("Idempotency-Key = %q", v)
		}
		if !Verify(r.SigningKey, r.IdempotencyKey, fixedNow.Unix(), body, got.Header.Get("webhook-signature")) {
			t.Fatalf("signature does not verify")
		}
		if br.Buffered() != 0 {
			t.Fatalf("bytes after the request (smuggling?): %q", wire.String())
		}
	})
}

// Several pooled connections the receiver closed while they idled (after a
// burst, a receiver's idle timeout fires on all of them) must not cost the
// job an attempt either: each is refused before a byte of the request
// leaves, and the request goes on to the next, then to a fresh one. With a
// single replay the second stale connection failed the attempt, and a job
// in the nemesis failed its 4 attempts without the receiver seeing one.
func TestDeliverSkipsEveryStaleConnection(t *testing.T) {
	const burst = 4
	var requests atomic.Int32
	arrived := make(chan struct{}, burst)
	release := make(chan struct{})
	var closed sync.WaitGroup
	closed.Add(burst)
	addr := rawServer(t, func(conn net.Conn, br *bufio.Reader, i int) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			requests.Add(1)
			if i >= burst {
				io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				continue
			}
			// One of the burst: answer once all of it is here (so
			// it took burst connections), then close as an idle
			// timeout would.
			arrived <- struct{}{}
			<-release
			io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			conn.Close()
			closed.Done()
			return
		}
	})
	c := newClient(t, Options{StaleCheckAfter: -1}) // closes stand in for idle timeouts
	url := "http://" + addr + "/"
	var burstWG sync.WaitGroup
	for range burst {
		burstWG.Go(func() {
			if res := c.Deliver(context.Background(), testRequest(url)); res.StatusCode != 200 {
				t.Errorf("burst Deliver = %+v", res)
			}
		})
	}
	for range burst {
		<-arrived
	}
	close(release)
	burstWG.Wait()
	closed.Wait()
	res := c.Deliver(context.Background(), testRequest(url))
	if res.Err != nil || res.StatusCode != 200 {
		t.Fatalf("Deliver with %d stale connections pooled = %+v", burst, res)
	}
	if n := requests.Load(); n != burst+1 {
		t.Fatalf("server saw %d requests, want %d", n, burst+1)
	}
}

// A receiver whose error page repeats the request's headers does not carry
// a route header's value back into the result (and so into last_error):
// the API never echoes a route's headers (a black-box review found the
// Authorization value in a job's last_error). Single, pipelined and
// batched deliveries alike.
func TestAnswerDoesNotEchoRouteHeaders(t *testing.T) {
	const secret = "hdr-secret-XYZZY-0123"
	echo := func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(400)
		fmt.Fprintf(w, "auth=%s tenant=%s token-alone=%s", r.Header.Get("Authorization"), r.Header.Get("X-Tenant"), strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	}
	srv, _ := newServer(t, echo)
	c := newClient(t, Options{})
	headers := map[string]string{"Authorization": "Bearer " + secret, "X-Tenant": "acme-tenant"}
	check := func(name, snippet string) {
		t.Helper()
		if strings.Contains(snippet, secret) || strings.Contains(snippet, "acme-tenant") || !strings.Contains(snippet, "auth=REDACTED") {
			t.Errorf("%s: the answer kept %q", name, snippet)
		}
	}
	for _, pipeline := range []bool{false, true} {
		r := testRequest(srv.URL)
		r.Headers, r.Pipeline = headers, pipeline
		res := c.Deliver(context.Background(), r)
		if res.StatusCode != 400 {
			t.Fatalf("Deliver = %+v", res)
		}
		check(fmt.Sprintf("pipeline=%t", pipeline), res.BodySnippet)
	}
	res := c.DeliverBatch(context.Background(), &BatchRequest{URL: srv.URL, Headers: headers, Jobs: batchJobs(2), Timeout: 5 * time.Second, Now: time.Now()})
	if res.StatusCode != 400 {
		t.Fatalf("DeliverBatch = %+v", res.Result)
	}
	check("batch", res.BodySnippet)
}

func TestRedact(t *testing.T) {
	secrets := headerSecrets(map[string]string{"Authorization": "Bearer abcdefgh12345678", "X-Short": "ab"})
	for _, c := range []struct{ in, want string }{
		{"auth=Bearer abcdefgh12345678 ok", "auth=REDACTED ok"},
		{"token abcdefgh12345678", "token REDACTED"},
		{"X-Short: ab", "X-Short: ab"}, // too short to tell from text
		{"cut at the limit: abcdefgh1234", "cut at the limit: REDACTED…"},
		{"nothing here", "nothing here"},
	} {
		if got := redact(c.in, secrets); got != c.want {
			t.Errorf("redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
