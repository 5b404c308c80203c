package runner

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/internal/nemesis/cluster"
)

// TestSetClock checks the clock-fault hook's protocol against a stand-in
// server: POST /v1/debug/clock {"offset":"2s"} → 204; a 404 means the
// build does not support it.
func TestSetClock(t *testing.T) {
	var got []string
	supported := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "POST" || r.URL.Path != "/v1/debug/clock" || !supported {
			http.NotFound(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		got = append(got, string(b))
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	bin := filepath.Join(t.TempDir(), "timemachine")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cl, err := cluster.New(cluster.Config{Bin: bin, Dir: t.TempDir()}, cluster.Loopback{})
	if err != nil {
		t.Fatal(err)
	}
	n, err := cl.AddNode(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	n.HTTPAddr = strings.TrimPrefix(srv.URL, "http://")
	r := &run{cl: cl}
	ctx := context.Background()
	if err := r.setClock(ctx, n, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := r.setClock(ctx, n, -1500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := r.setClock(ctx, n, 0); err != nil {
		t.Fatal(err)
	}
	want := []string{`{"offset":"2s"}`, `{"offset":"-1.5s"}`, `{"offset":"0s"}`}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("bodies %v, want %v", got, want)
	}
	supported = false
	if err := r.setClock(ctx, n, time.Second); err == nil || !strings.Contains(err.Error(), "not supported by this build") {
		t.Fatalf("a 404 must say the build does not support it: %v", err)
	}
	// The flag probe: a binary that refuses the flag does not support it.
	if cluster.SupportsFlag(bin, "--debug-faults") {
		t.Fatal("a binary exiting 1 supports no flag")
	}
}
