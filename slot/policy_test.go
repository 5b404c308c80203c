package slot

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/model"
)

func TestBackoff(t *testing.T) {
	p := model.RetryPolicy{InitialIntervalMs: 1000, Multiplier: 2, MaxIntervalMs: 10_000}
	cases := []struct {
		n      int64
		jitter float64
		want   time.Duration
	}{
		{1, 0, time.Second},
		{2, 0, 2 * time.Second},
		{3, 0, 4 * time.Second},
		{4, 0, 8 * time.Second},
		{5, 0, 10 * time.Second}, // capped
		{50, 0, 10 * time.Second},
		{1, 1, 1200 * time.Millisecond}, // +20%
		{1, -1, 800 * time.Millisecond}, // -20%
		{5, -1, 8 * time.Second},        // jitter applies after the cap
		{0, 0, time.Second},             // n < 1 treated as 1
	}
	for _, c := range cases {
		if got := Backoff(p, c.n, c.jitter); got != c.want {
			t.Errorf("Backoff(n=%d, jitter=%v) = %v, want %v", c.n, c.jitter, got, c.want)
		}
	}
	if got := Backoff(model.RetryPolicy{InitialIntervalMs: 100, Multiplier: 0.5}, 3, 0); got != 100*time.Millisecond {
		t.Errorf("a multiplier below 1 must not shrink the wait: %v", got)
	}
}

func TestDecide(t *testing.T) {
	p := model.DefaultRetryPolicy // 5 attempts, 1s ×2, max 10m, max_age 24h
	const trig, now = int64(1_000_000), int64(1_000_500)
	cases := []struct {
		name    string
		res     DeliveryResult
		attempt int64
		want    Verdict
		next    int64 // NextDue or Trigger
	}{
		{"200", DeliveryResult{StatusCode: 200}, 1, VerdictSucceeded, 0},
		{"204", DeliveryResult{StatusCode: 204}, 1, VerdictSucceeded, 0},
		{"reschedule_at", DeliveryResult{StatusCode: 200, RescheduleAt: 5_000_000}, 1, VerdictReschedule, 5_000_000},
		{"reschedule_in", DeliveryResult{StatusCode: 200, RescheduleIn: 30 * time.Second}, 3, VerdictReschedule, now + 30_000},
		{"bad reschedule answer still succeeds", DeliveryResult{StatusCode: 200, RescheduleErr: errors.New("bad")}, 1, VerdictSucceeded, 0},
		{"500 retried", DeliveryResult{StatusCode: 500}, 1, VerdictRetry, now + 1000},
		{"503 second attempt", DeliveryResult{StatusCode: 503}, 2, VerdictRetry, now + 2000},
		{"408 retried", DeliveryResult{StatusCode: 408}, 1, VerdictRetry, now + 1000},
		{"425 retried", DeliveryResult{StatusCode: 425}, 1, VerdictRetry, now + 1000},
		{"429 retried", DeliveryResult{StatusCode: 429}, 1, VerdictRetry, now + 1000},
		{"timeout retried", DeliveryResult{TimedOut: true, Err: errors.New("timeout")}, 1, VerdictRetry, now + 1000},
		{"connection error retried", DeliveryResult{Err: errors.New("refused")}, 1, VerdictRetry, now + 1000},
		{"Retry-After wins", DeliveryResult{StatusCode: 503, HasRetryAfter: true, RetryAfter: 7 * time.Second}, 1, VerdictRetry, now + 7000},
		{"404 permanent", DeliveryResult{StatusCode: 404}, 1, VerdictFailed, 0},
		{"400 permanent", DeliveryResult{StatusCode: 400}, 1, VerdictFailed, 0},
		{"422 permanent", DeliveryResult{StatusCode: 422}, 1, VerdictFailed, 0},
		{"302 permanent", DeliveryResult{StatusCode: 302}, 1, VerdictFailed, 0},
		{"attempts exhausted", DeliveryResult{StatusCode: 500}, 5, VerdictFailed, 0},
		{"refused by the egress policy: not retried", DeliveryResult{Permanent: true, Err: errors.New("callback to 169.254.169.254 refused by the callback egress policy: --callback-deny 169.254.0.0/16")}, 1, VerdictFailed, 0},
	}
	for _, c := range cases {
		d := Decide(c.res, p, trig, c.attempt, now, 0)
		if d.Verdict != c.want {
			t.Errorf("%s: verdict %v, want %v (%+v)", c.name, d.Verdict, c.want, d)
			continue
		}
		switch d.Verdict {
		case VerdictRetry:
			if d.NextDue != c.next {
				t.Errorf("%s: next %d, want %d", c.name, d.NextDue, c.next)
			}
			if d.LastError == "" {
				t.Errorf("%s: retry without last_error", c.name)
			}
		case VerdictReschedule:
			if d.Trigger != c.next {
				t.Errorf("%s: trigger %d, want %d", c.name, d.Trigger, c.next)
			}
		case VerdictFailed:
			if d.LastError == "" {
				t.Errorf("%s: failure without last_error", c.name)
			}
		}
	}
	// max_age: the next attempt would land after trigger + max_age.
	short := model.RetryPolicy{MaxAttempts: 10, InitialIntervalMs: 60_000, Multiplier: 1, MaxAgeMs: 30_000}
	if d := Decide(DeliveryResult{StatusCode: 500}, short, trig, 1, now, 0); d.Verdict != VerdictFailed {
		t.Errorf("max_age not enforced: %+v", d)
	}
}

// Intervals near the longest duration saturate instead of overflowing
// into a negative wait (which retried at once).
func TestBackoffSaturates(t *testing.T) {
	huge := int64(math.MaxInt64 / int64(time.Millisecond)) // the longest duration, in ms
	for _, p := range []model.RetryPolicy{
		{InitialIntervalMs: 9_000_000_000_000, Multiplier: 1, MaxIntervalMs: 9_000_000_000_000},
		{InitialIntervalMs: huge, Multiplier: 100},
		{InitialIntervalMs: huge, Multiplier: 100, MaxIntervalMs: huge},
	} {
		for _, jitter := range []float64{-1, 0, 0.999} {
			for _, n := range []int64{1, 2, 50} {
				if w := Backoff(p, n, jitter); w < time.Duration(7e12)*time.Millisecond {
					t.Fatalf("Backoff(%+v, %d, %v) = %v, want about 2.5M hours or more", p, n, jitter, w)
				}
			}
		}
	}
}
