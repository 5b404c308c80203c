package slot

import (
	"testing"
	"time"
)

func TestTokenBucket(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type step struct {
		ms   int     // clock
		n    float64 // tokens asked for
		ok   bool
		wait time.Duration // when refused
	}
	for _, tc := range []struct {
		name        string
		rate, burst float64
		steps       []step
	}{
		{"starts full, then the rate", 100, 10, []step{
			{0, 10, true, 0}, {0, 1, false, 10 * time.Millisecond}, {5, 1, false, 5 * time.Millisecond},
			{10, 1, true, 0}, {10, 1, false, 10 * time.Millisecond}, {30, 2, true, 0},
		}},
		{"never above burst", 100, 5, []step{
			{0, 5, true, 0}, {10_000, 6, false, 10 * time.Millisecond}, {10_000, 5, true, 0},
		}},
		{"slow rate", 0.5, 1, []step{
			{0, 1, true, 0}, {1000, 1, false, time.Second}, {2000, 1, true, 0},
		}},
		{"batch of many", 1000, 100, []step{
			{0, 100, true, 0}, {50, 100, false, 50 * time.Millisecond}, {100, 100, true, 0},
		}},
		{"clock going back earns nothing", 100, 1, []step{
			{100, 1, true, 0}, {50, 1, false, 10 * time.Millisecond}, {110, 1, true, 0},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b tokenBucket
			b.configure(tc.rate, tc.burst, at(tc.steps[0].ms))
			for i, s := range tc.steps {
				ok, wait := b.take(s.n, at(s.ms))
				if ok != s.ok || (!ok && wait != s.wait) {
					t.Fatalf("step %d (%+v): got %v %v", i, s, ok, wait)
				}
			}
		})
	}
}

// TestTokenBucketReconfigure: a node's share changing keeps what was
// earned, capped at the new burst.
func TestTokenBucketReconfigure(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var b tokenBucket
	b.configure(100, 10, t0)
	if ok, _ := b.take(10, t0); !ok {
		t.Fatal("full bucket refused")
	}
	b.configure(50, 5, t0.Add(40*time.Millisecond)) // 4 earned at the old rate
	if ok, _ := b.take(4, t0.Add(40*time.Millisecond)); !ok {
		t.Fatal("earned tokens lost")
	}
	if ok, wait := b.take(1, t0.Add(40*time.Millisecond)); ok || wait != 20*time.Millisecond {
		t.Fatalf("new rate: %v %v", ok, wait)
	}
	b.configure(1000, 2, t0.Add(10*time.Second))
	if ok, _ := b.take(3, t0.Add(10*time.Second)); ok {
		t.Fatal("above the new burst")
	}
}
