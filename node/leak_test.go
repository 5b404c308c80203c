package node

import (
	"context"
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/internal/testutil"
	"github.com/timemachine-db/timemachine/model"
)

// goroutines returns the stacks of the running goroutines by id.
func goroutines() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[string]string{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		if m := goroutineID.FindStringSubmatch(g); m != nil {
			out[m[1]] = g
		}
	}
	return out
}

var goroutineID = regexp.MustCompile(`^goroutine (\d+) `)

// Goroutines that may outlive a node by design: the process-wide fire
// workers (idle for 10 s, then gone), and fasthttp's worker-pool cleaner,
// which sleeps its idle period (10 s) before it notices the server stopped.
var processWide = []string{
	"slot.(*workers).loop",
	"fasthttp.(*workerPool).Start.func2",
}

// Close stops everything Start started: after it, no goroutine the node
// created is left (the process-wide ones above aside).
func TestCloseLeavesNoGoroutines(t *testing.T) {
	before := goroutines()
	cfg := testConfig(t.TempDir())
	cfg.PprofAddr = "127.0.0.1:0"
	n := startReady(t, cfg)
	ctx := context.Background()
	in := []model.JobInput{{ID: "a", Spec: model.JobSpec{TriggerTime: time.Now().Add(time.Hour).UnixMilli(), CallbackURL: "http://127.0.0.1:9/", Hash: 1}}}
	if res, err := n.svc.CreateJobs(ctx, "default", in); err != nil || res[0].Err != nil {
		t.Fatalf("create: %v %+v", err, res)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	closed := time.Now()
	defer func() { t.Logf("goroutines gone %v after Close returned", time.Since(closed)) }()
	testutil.Eventually(t, 15*time.Second, "the node's goroutines to end", func() error {
		var left []string
		for id, stack := range goroutines() {
			if _, old := before[id]; old {
				continue
			}
			wide := false
			for _, f := range processWide {
				wide = wide || strings.Contains(stack, f)
			}
			if !wide && !strings.Contains(stack, "TestCloseLeavesNoGoroutines") {
				left = append(left, stack)
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("%d left, e.g.\n%s", len(left), left[0])
		}
		return nil
	})
}
