package tune

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/internal/testutil"
)

func TestStep(t *testing.T) {
	o := GovernorOptions{}.withDefaults() // 500 ms, busy 0.5, idle 0.2, quiet 5 s
	ms := time.Millisecond
	type sample struct {
		used time.Duration // CPU over a 500 ms interval
		want int
	}
	quiet := func(n int) []sample { // n idle intervals that decide nothing
		s := make([]sample, n)
		for i := range s {
			s[i] = sample{10 * ms, keep}
		}
		return s
	}
	cat := func(parts ...[]sample) []sample {
		var all []sample
		for _, p := range parts {
			all = append(all, p...)
		}
		return all
	}
	for _, tc := range []struct {
		name    string
		samples []sample
	}{
		{"ten quiet intervals drop to one", cat(quiet(9), []sample{{10 * ms, toOne}})},
		{"one busy-ish interval restarts the quiet count",
			cat(quiet(8), []sample{{100 * ms, keep}}, quiet(9), []sample{{0, toOne}})},
		{"exactly Idle is not quiet", cat(quiet(5), []sample{{100 * ms, keep}}, quiet(9), []sample{{0, toOne}})},
		{"low: moderate load stays on one", cat(quiet(9), []sample{{0, toOne}, {200 * ms, keep}, {250 * ms, keep}})},
		{"low: one busy interval goes back at once", cat(quiet(9), []sample{{0, toOne}, {251 * ms, toDefault}})},
		{"back to default needs a whole quiet again",
			cat(quiet(9), []sample{{0, toOne}, {400 * ms, toDefault}}, quiet(9), []sample{{0, toOne}})},
		{"busy never drops", []sample{{300 * ms, keep}, {900 * ms, keep}, {150 * ms, keep}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s state
			for i, x := range tc.samples {
				if got := s.step(x.used, o.Interval, o); got != x.want {
					t.Fatalf("sample %d (%v): got %d, want %d", i, x.used, got, x.want)
				}
			}
		})
	}
	var s state
	if got := s.step(time.Second, 0, o); got != keep || s.quiet != 0 {
		t.Fatalf("no time elapsed: got %d, quiet %v", got, s.quiet)
	}
}

// TestRunSwitchesAndRestores drives Run with a fake CPU counter: idle, then
// busy, then idle again, and checks that cancelling it while low leaves the
// default in place.
func TestRunSwitchesAndRestores(t *testing.T) {
	var (
		mu    sync.Mutex
		cpu   time.Duration
		clock = time.Unix(0, 0)
		calls []string
		busy  bool
	)
	g := NewGovernor(GovernorOptions{Interval: time.Millisecond})
	g.cpu = func() (time.Duration, error) {
		mu.Lock()
		defer mu.Unlock()
		if busy {
			cpu += 900 * time.Millisecond // 0.9 of a core per 1 s tick of the fake clock
		}
		return cpu, nil
	}
	g.now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		clock = clock.Add(time.Second)
		return clock
	}
	record := func(s string) func() {
		return func() { mu.Lock(); calls = append(calls, s); mu.Unlock() }
	}
	g.setOne, g.setDef = record("one"), record("default")
	last := func() string {
		mu.Lock()
		defer mu.Unlock()
		if len(calls) == 0 {
			return ""
		}
		return calls[len(calls)-1]
	}
	wantLast := func(want string) func() error {
		return func() error {
			if got := last(); got != want {
				return fmt.Errorf("last call %q", got)
			}
			return nil
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { g.Run(ctx); close(done) }()
	testutil.Eventually(t, 5*time.Second, "idle: one processor", wantLast("one"))
	mu.Lock()
	busy = true
	mu.Unlock()
	testutil.Eventually(t, 5*time.Second, "busy: default", wantLast("default"))
	mu.Lock()
	busy = false
	mu.Unlock()
	testutil.Eventually(t, 5*time.Second, "idle again: one processor", wantLast("one"))
	// Wake: back to the default at once, although the CPU stays idle, and
	// down again only after a whole quiet.
	// The fake clock runs a second per sample, so the quiet after the wake
	// can pass before a poll sees "default": the calls since the wake are
	// checked, not the last one alone.
	mu.Lock()
	before := len(calls)
	mu.Unlock()
	Wake()
	testutil.Eventually(t, 5*time.Second, "woken: default, then idle: one processor", func() error {
		mu.Lock()
		defer mu.Unlock()
		if since := calls[before:]; len(since) < 2 || since[0] != "default" || since[len(since)-1] != "one" {
			return fmt.Errorf("calls since the wake: %v", since)
		}
		return nil
	})
	cancel()
	<-done
	if got := last(); got != "default" {
		t.Fatalf("after Run returned while low, last call %q, want default", got)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(calls); i++ {
		if calls[i] == calls[i-1] {
			t.Fatalf("two %q in a row: %v", calls[i], calls)
		}
	}
}
