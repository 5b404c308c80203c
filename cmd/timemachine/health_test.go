package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestProbeURL(t *testing.T) {
	for _, tc := range []struct {
		addr, want string
		bad        bool
	}{
		{addr: "127.0.0.1:8080", want: "http://127.0.0.1:8080/healthz"},
		{addr: " [::1]:8080 ", want: "http://[::1]:8080/healthz"},
		{addr: "http://10.0.0.1:8080/", want: "http://10.0.0.1:8080/healthz"},
		{addr: "HTTPS://tm.example:8443", want: "HTTPS://tm.example:8443/healthz"},
		{addr: "", bad: true},
		{addr: "ftp://x:1", bad: true},
		{addr: "host:1/path", bad: true},
	} {
		got, err := probeURL(tc.addr, "/healthz")
		if tc.bad {
			if err == nil {
				t.Errorf("probeURL(%q) = %q, want an error", tc.addr, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("probeURL(%q) = %q, %v; want %q", tc.addr, got, err, tc.want)
		}
	}
}

func TestLocalHTTPAddr(t *testing.T) {
	for in, want := range map[string]string{
		"":                "127.0.0.1:8080",
		"garbage":         "127.0.0.1:8080",
		"0.0.0.0:9090":    "127.0.0.1:9090",
		":9090":           "127.0.0.1:9090",
		"[::]:9090":       "[::1]:9090",
		"10.0.0.5:8080":   "10.0.0.5:8080",
		"tm1.example:443": "tm1.example:443",
	} {
		if got := localHTTPAddr(in); got != want {
			t.Errorf("localHTTPAddr(%q) = %q, want %q", in, got, want)
		}
	}
}

// health asks /healthz, or /readyz with --ready, and turns anything but a 200
// into exit code 1 with the node's answer in the error.
func TestHealthCommand(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz":
			w.Write([]byte("ok"))
		case "/readyz":
			http.Error(w, `{"error":{"code":"unavailable","message":"slot 3 has no leader"}}`, http.StatusServiceUnavailable)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	out, err := runRoot(t, "health", "--addr", addr)
	if err != nil || !strings.Contains(out, "200") {
		t.Fatalf("health on a live node: out %q, err %v; want success", out, err)
	}
	_, err = runRoot(t, "health", "--addr", srv.URL, "--ready")
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 1 || !strings.Contains(err.Error(), "slot 3 has no leader") {
		t.Fatalf("health --ready on an unready node: err %v; want exit 1 naming the reason", err)
	}

	srv.Close() // nothing listens there now
	if _, err = runRoot(t, "health", "--addr", addr, "--timeout", "2s"); !errors.As(err, &ee) || ee.code != 1 {
		t.Fatalf("health on a stopped node: err %v; want exit 1", err)
	}
}
