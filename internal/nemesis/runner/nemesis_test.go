package runner

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/internal/nemesis/fault"
	"github.com/timemachine-db/timemachine/internal/nemesis/workload"
	"github.com/timemachine-db/timemachine/internal/testutil"
)

// serverBinary is $TIMEMACHINE_BIN, else bin/timemachine of the module
// when it exists, else a fresh build of ./cmd/timemachine.
func serverBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("TIMEMACHINE_BIN"); p != "" {
		abs, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(abs); err != nil {
			t.Fatalf("TIMEMACHINE_BIN=%q: %v (run `make build`)", p, err)
		}
		return abs
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if p := filepath.Join(root, "bin", "timemachine"); fileExists(p) {
		return p
	}
	out := filepath.Join(t.TempDir(), "timemachine")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/timemachine")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/timemachine: %v\n%s", err, b)
	}
	return out
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestNemesisShort is the short nemesis: a 3-node cluster, one cycle of
// every fault (each held at most 3 s), the whole workload and every
// checker. Any violation fails it. Without network namespaces (not root)
// the network faults cannot run: the rest runs, and the test then reports
// itself skipped with the reason (or failed, if something else failed).
//
//	TIMEMACHINE_NEMESIS_SEED=<n>   another schedule (default 1)
//	TIMEMACHINE_NEMESIS_OUT=<dir>  keep the run's files there
func TestNemesisShort(t *testing.T) {
	if testing.Short() {
		t.Skip("the nemesis takes minutes; skipped under -short")
	}
	seed := uint64(1)
	if v := os.Getenv("TIMEMACHINE_NEMESIS_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("TIMEMACHINE_NEMESIS_SEED=%q: %v", v, err)
		}
		seed = s
	}
	out := os.Getenv("TIMEMACHINE_NEMESIS_OUT")
	if out == "" {
		out = t.TempDir()
	}
	progress := &testutil.SyncBuffer{}
	cfg := Config{Bin: serverBinary(t), Out: out, Seed: seed, Nodes: 3, Cycles: len(fault.All), Kinds: fault.All,
		MaxHold: 3 * time.Second, Clients: 4, Network: "auto", Policy: workload.DefaultPolicy, Progress: progress}
	cfg.Command = "TIMEMACHINE_NEMESIS_SEED=" + strconv.FormatUint(seed, 10) + " go test -count=1 -run TestNemesisShort ./internal/nemesis/runner/"
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	start := time.Now()
	rep, err := Run(ctx, cfg)
	t.Logf("nemesis (%v):\n%s", time.Since(start).Round(time.Second), progress.String())
	if err != nil {
		t.Fatalf("the run failed: %v", err)
	}
	if n := rep.Violations(); n > 0 {
		var found []string
		for _, l := range rep.Summary() {
			if !strings.HasPrefix(strings.TrimSpace(l), "0 ") {
				found = append(found, l)
			}
		}
		t.Errorf("%d violations (seed %d, files in %s; replay: %s):\n%s", n, seed, out, cfg.Command, strings.Join(found, "\n"))
	}
	if d := time.Since(start); d > 5*time.Minute {
		t.Errorf("the short nemesis took %v, over its 5 minute budget", d.Round(time.Second))
	}
	var skipped []string
	for _, k := range fault.All {
		if why, ok := rep.Meta.Unsupported[string(k)]; ok {
			skipped = append(skipped, string(k)+": "+why)
		}
	}
	if len(skipped) > 0 {
		t.Skipf("not covered here: %s", strings.Join(skipped, "; "))
	}
}
