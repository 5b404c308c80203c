package client

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestNewValidates(t *testing.T) {
	for _, tc := range []struct {
		addrs []string
		opts  []Option
	}{
		{nil, nil},
		{[]string{""}, nil},
		{[]string{"nohost"}, nil},
		{[]string{"127.0.0.1:1/x"}, nil},
		{[]string{"ftp://127.0.0.1:1"}, nil},
		{[]string{"http://user:pw@127.0.0.1:1"}, nil},
		{[]string{"http://127.0.0.1:1?x=1"}, nil},
		{[]string{"http://"}, nil},
		{[]string{"http://127.0.0.1:1/v1"}, nil},
		{[]string{"https://h:9/gw/v1/"}, nil},
		{[]string{"127.0.0.1:1"}, []Option{WithTimeout(0)}},
		{[]string{"127.0.0.1:1"}, []Option{WithMaxAttempts(-1)}},
		{[]string{"127.0.0.1:1"}, []Option{WithMaxResponseBytes(0)}},
		{[]string{"127.0.0.1:1"}, []Option{WithToken("a\nb")}},
		{[]string{"127.0.0.1:1"}, []Option{WithCAFile("/nonexistent/ca.pem")}},
		{[]string{"127.0.0.1:1"}, []Option{WithHTTPClient(http.DefaultClient), WithFastHTTP()}},
		{[]string{"127.0.0.1:1"}, []Option{WithHTTPClient(http.DefaultClient), WithMaxConns(4)}},
	} {
		if _, err := New(tc.addrs, tc.opts...); err == nil {
			t.Errorf("New(%v) succeeded, want an error", tc.addrs)
		}
	}
}

func TestAddresses(t *testing.T) {
	c, err := New([]string{"127.0.0.1:1", " 127.0.0.1:2 ", "https://tm.example", "http://[::1]:8080/gw/", "https://h:9/a%2Fb"}, WithMaxConns(4))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"http://127.0.0.1:1", "http://127.0.0.1:2", "https://tm.example", "http://[::1]:8080/gw", "https://h:9/a%2Fb"}
	if got := c.Addrs(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("Addrs = %v\nwant    %v", got, want)
	}
	// A path prefix (a gateway) goes in front of every path.
	f := newFake(t, fixed(200, `{"slot_count":1}`))
	c = newClient(t, []string{f.srv.URL + "/timemachine/"})
	if _, err := c.Cluster(context.Background()); err != nil {
		t.Fatal(err)
	}
	if uri := f.requests()[0].URI; uri != "/timemachine/v1/cluster" {
		t.Errorf("URI = %s", uri)
	}
}

func TestTokenAndEnv(t *testing.T) {
	f := newFake(t, fixed(200, `{"slot_count":1}`))
	auth := func(opts ...Option) string {
		t.Helper()
		c := newClient(t, []string{f.addr()}, opts...)
		if _, err := c.Cluster(context.Background()); err != nil {
			t.Fatal(err)
		}
		reqs := f.requests()
		return reqs[len(reqs)-1].Header.Get("Authorization")
	}
	t.Setenv(EnvToken, "from-env")
	if got := auth(); got != "" {
		t.Errorf("without WithEnv the environment is not read: %q", got)
	}
	if got := auth(WithEnv()); got != "Bearer from-env" {
		t.Errorf("WithEnv: %q", got)
	}
	if got := auth(WithEnv(), WithToken("explicit")); got != "Bearer explicit" {
		t.Errorf("explicit token must win: %q", got)
	}
	if got := auth(WithToken("tok"), WithHeader("Authorization", "Basic x")); got != "Bearer tok" {
		t.Errorf("token must win over WithHeader: %q", got)
	}
	// Addresses from the environment when New gets none.
	t.Setenv(EnvAddr, " "+f.addr()+" ,")
	c, err := New(nil, WithEnv())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.Addrs(); len(got) != 1 || got[0] != f.srv.URL {
		t.Errorf("Addrs from env = %v", got)
	}
	// An unknown token: the contract's 401 is an *Error like any other.
	f.setHandler(func(w http.ResponseWriter, r *http.Request, _ []byte) {
		if r.Header.Get("Authorization") != "Bearer good" {
			reply(w, 401, `{"error":{"code":"unauthenticated","message":"unknown token"}}`)
			return
		}
		reply(w, 403, `{"error":{"code":"permission_denied","message":"role reader may not write"}}`)
	})
	c = newClient(t, []string{f.addr()}, WithToken("bad"))
	if _, _, err := c.PutCollection(context.Background(), "x", Collection{}); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("bad token: %v", err)
	}
	c = newClient(t, []string{f.addr()}, WithToken("good"))
	if _, _, err := c.PutCollection(context.Background(), "x", Collection{}); !errors.Is(err, ErrPermissionDenied) {
		t.Errorf("reader token: %v", err)
	}
}

// writeCA writes the test server's certificate as a PEM CA file.
func writeCA(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.pem")
	b := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTLS(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		reply(w, 200, `{"slot_count":12}`)
	}))
	defer srv.Close()
	hostport := strings.TrimPrefix(srv.URL, "https://")
	ca := writeCA(t, srv)

	transports(t, func(t *testing.T, opt Option) {
		// host:port with a CA file means https.
		c := newClient(t, []string{hostport}, WithCAFile(ca), opt)
		if c.Addrs()[0] != srv.URL {
			t.Errorf("Addrs = %v", c.Addrs())
		}
		if ci, err := c.Cluster(context.Background()); err != nil || ci.SlotCount != 12 {
			t.Fatalf("Cluster over TLS: %+v, %v", ci, err)
		}
		// The CA file from the environment.
		t.Setenv(EnvCACert, ca)
		c = newClient(t, []string{srv.URL}, WithEnv(), opt)
		if _, err := c.Cluster(context.Background()); err != nil {
			t.Fatalf("CA from env: %v", err)
		}
		// A certificate the client does not trust fails at once, with the
		// reason, and is not retried.
		n.Store(0)
		c = newClient(t, []string{srv.URL}, opt)
		_, err := c.Cluster(context.Background())
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("untrusted certificate: %v", err)
		}
		if n.Load() != 0 {
			t.Error("no request may reach the server without a trusted certificate")
		}
	})
	// WithTLSConfig: the server's own pool.
	c := newClient(t, []string{srv.URL}, WithTLSConfig(srv.Client().Transport.(*http.Transport).TLSClientConfig))
	if _, err := c.Cluster(context.Background()); err != nil {
		t.Errorf("WithTLSConfig: %v", err)
	}
	// An empty CA file is an error at New.
	empty := filepath.Join(t.TempDir(), "empty.pem")
	_ = os.WriteFile(empty, []byte("no pem here"), 0o600)
	if _, err := New([]string{hostport}, WithCAFile(empty)); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("empty CA file: %v", err)
	}
}

// TestHTTPToHTTPS: a plain-HTTP client at a TLS port gets a clear error.
func TestHTTPToHTTPS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reply(w, 200, `{}`) }))
	defer srv.Close()
	c := newClient(t, []string{strings.TrimPrefix(srv.URL, "https://")}, WithMaxAttempts(1))
	_, err := c.Cluster(context.Background())
	if !errors.Is(err, ErrNotTimemachine) || !strings.Contains(err.Error(), "HTTP 400") {
		t.Errorf("http to an https port: %v", err)
	}
}

type countingTransport struct {
	n    atomic.Int32
	next http.RoundTripper
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

func TestWithHTTPClient(t *testing.T) {
	f := newFake(t, fixed(200, `{"slot_count":3}`))
	ct := &countingTransport{next: http.DefaultTransport}
	c := newClient(t, []string{f.addr()}, WithHTTPClient(&http.Client{Transport: ct}))
	if _, err := c.Cluster(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ct.n.Load() != 1 {
		t.Errorf("custom client used %d times", ct.n.Load())
	}
}

func TestMaxResponseBytes(t *testing.T) {
	transports(t, func(t *testing.T, opt Option) {
		f := newFake(t, fixed(200, `{"jobs":[`+strings.Repeat(`{"id":"x"},`, 100)+`{"id":"y"}]}`))
		c := newClient(t, []string{f.addr()}, WithMaxResponseBytes(64), opt)
		start := time.Now()
		_, err := c.ListJobs(context.Background(), "c", ListOptions{})
		if err == nil || !strings.Contains(err.Error(), "larger than 64 bytes") {
			t.Errorf("err = %v", err)
		}
		if len(f.requests()) != 1 || time.Since(start) > 5*time.Second {
			t.Errorf("an oversized answer is not retried (%d requests)", len(f.requests()))
		}
	})
}
