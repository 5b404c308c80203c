package client

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorded is one request as the fake server saw it.
type recorded struct {
	Method string
	URI    string // raw request URI, escaping preserved
	Header http.Header
	Body   []byte
}

// fakeServer is an in-process HTTP server on 127.0.0.1:0 that records every
// request and answers with handler (default: 200 {}).
type fakeServer struct {
	t   *testing.T
	srv *httptest.Server

	mu      sync.Mutex
	reqs    []recorded
	handler func(w http.ResponseWriter, r *http.Request, body []byte)
}

func newFake(t *testing.T, h func(w http.ResponseWriter, r *http.Request, body []byte)) *fakeServer {
	t.Helper()
	f := &fakeServer{t: t, handler: h}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, recorded{Method: r.Method, URI: r.RequestURI, Header: r.Header.Clone(), Body: body})
	h := f.handler
	f.mu.Unlock()
	if h == nil {
		reply(w, 200, `{}`)
		return
	}
	h(w, r, body)
}

func (f *fakeServer) addr() string { return strings.TrimPrefix(f.srv.URL, "http://") }

func (f *fakeServer) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

func (f *fakeServer) setHandler(h func(w http.ResponseWriter, r *http.Request, body []byte)) {
	f.mu.Lock()
	f.handler = h
	f.mu.Unlock()
}

func reply(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func fixed(status int, body string) func(http.ResponseWriter, *http.Request, []byte) {
	return func(w http.ResponseWriter, _ *http.Request, _ []byte) { reply(w, status, body) }
}

func newClient(t *testing.T, addrs []string, opts ...Option) *Client {
	t.Helper()
	c, err := New(addrs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// transports runs f once per transport, so that behaviour that depends on
// the transport (errors, cancellation, failover) is checked on both.
func transports(t *testing.T, f func(t *testing.T, opt Option)) {
	t.Run("net/http", func(t *testing.T) { f(t, func(*options) {}) })
	t.Run("fasthttp", func(t *testing.T) { f(t, WithFastHTTP()) })
}

// fastRetry keeps retry tests quick without changing what they check.
var fastRetry = WithRetry(RetryConfig{InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond})

// jsonEq compares two JSON texts by value.
func jsonEq(t *testing.T, got []byte, want string) {
	t.Helper()
	if want == "" {
		if len(got) != 0 {
			t.Errorf("body = %s, want none", got)
		}
		return
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("request body %q is not JSON: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want %q: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("body = %s\nwant   %s", got, want)
	}
}

func ptr[T any](v T) *T { return &v }

// waitFor polls cond until it holds or 5 s pass: waiting on a condition,
// never sleeping for a fixed time.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}
