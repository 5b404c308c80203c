package slot

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/timemachine-db/timemachine/model"
)

// DeliveryResult is what the webhook client saw; the slot decides what it
// means for the job.
type DeliveryResult struct {
	StatusCode    int
	Err           error
	TimedOut      bool
	RetryAfter    time.Duration
	HasRetryAfter bool
	RescheduleAt  int64
	RescheduleIn  time.Duration
	RescheduleErr error
	BodySnippet   string
	// Permanent: the attempt was refused before anything was sent (the
	// callback egress policy) and no retry can change that.
	Permanent bool
}

// Verdict is what happens to a job after one attempt.
type Verdict uint8

// Verdicts.
const (
	VerdictSucceeded Verdict = iota + 1
	VerdictFailed
	VerdictRetry
	VerdictReschedule
)

func (v Verdict) String() string {
	switch v {
	case VerdictSucceeded:
		return "succeeded"
	case VerdictFailed:
		return "failed"
	case VerdictRetry:
		return "retried"
	case VerdictReschedule:
		return "rescheduled"
	}
	return "unknown"
}

// Decision is a verdict with its parameters.
type Decision struct {
	Verdict   Verdict
	NextDue   int64 // VerdictRetry: next attempt time (ms)
	Trigger   int64 // VerdictReschedule: new trigger time (ms)
	LastError string
}

// Decide applies the callback protocol (docs/api.md#the-callback) to one attempt. attempt
// is the 1-based number of the attempt just made, now the time it ended (ms)
// and jitter a number in [-1, 1) that spreads retries of jobs that failed
// together. It is a pure function: the leader calls it and commits the
// decision, so replicas never need to agree on clocks or randomness.
func Decide(res DeliveryResult, p model.RetryPolicy, triggerTime int64, attempt int64, now int64, jitter float64) Decision {
	code := res.StatusCode
	switch {
	case res.Permanent:
		return Decision{Verdict: VerdictFailed, LastError: describe(res) + " (not retried)"}
	case code >= 200 && code < 300:
		if res.RescheduleErr != nil {
			return Decision{Verdict: VerdictSucceeded, LastError: "ignored reschedule answer: " + res.RescheduleErr.Error()}
		}
		if res.RescheduleAt != 0 {
			return Decision{Verdict: VerdictReschedule, Trigger: res.RescheduleAt}
		}
		if res.RescheduleIn > 0 {
			return Decision{Verdict: VerdictReschedule, Trigger: now + ceilMs(res.RescheduleIn)}
		}
		return Decision{Verdict: VerdictSucceeded}
	case code == 0 || code == 408 || code == 425 || code == 429 || code >= 500:
		msg := describe(res)
		if attempt >= p.MaxAttempts {
			return Decision{Verdict: VerdictFailed, LastError: fmt.Sprintf("%s (gave up after %d attempts)", msg, attempt)}
		}
		wait := Backoff(p, attempt, jitter)
		if res.HasRetryAfter {
			wait = res.RetryAfter
		}
		next := now + ceilMs(wait)
		if p.MaxAgeMs > 0 && next-triggerTime > p.MaxAgeMs {
			return Decision{Verdict: VerdictFailed, LastError: fmt.Sprintf("%s (gave up: next attempt would pass max_age %s)", msg, model.Duration(p.MaxAgeMs))}
		}
		return Decision{Verdict: VerdictRetry, NextDue: next, LastError: msg}
	default:
		return Decision{Verdict: VerdictFailed, LastError: describe(res) + " (not retried)"}
	}
}

// Backoff is the wait before attempt n+1 after attempt n failed:
// initial × multiplier^(n-1), capped at max_interval, then ±20% jitter.
func Backoff(p model.RetryPolicy, n int64, jitter float64) time.Duration {
	if n < 1 {
		n = 1
	}
	mult := p.Multiplier
	if mult < 1 {
		mult = 1
	}
	ms := float64(p.InitialIntervalMs) * math.Pow(mult, float64(n-1))
	if max := float64(p.MaxIntervalMs); max > 0 && ms > max {
		ms = max
	}
	ms *= 1 + 0.2*jitter
	if ms < 1 || math.IsNaN(ms) {
		ms = 1
	}
	// Saturate: intervals near the longest duration (2,562,047 h) times
	// the jitter's 1.2 overflowed the conversion, and the negative wait
	// retried at once (a black-box review: 2-3 attempts in 33 ms where
	// 2.5M hours were asked for).
	if maxMs := float64(math.MaxInt64 / int64(time.Millisecond)); ms > maxMs {
		ms = maxMs
	}
	return time.Duration(ms * float64(time.Millisecond))
}

func describe(res DeliveryResult) string {
	var b strings.Builder
	switch {
	case res.TimedOut:
		b.WriteString("callback timed out")
	case res.StatusCode == 0 && res.Err != nil:
		b.WriteString("callback failed: " + res.Err.Error())
	case res.StatusCode == 0:
		b.WriteString("callback failed")
	case res.StatusCode >= 300 && res.StatusCode < 400:
		fmt.Fprintf(&b, "callback answered %d (redirects are not followed)", res.StatusCode)
	default:
		fmt.Fprintf(&b, "callback answered %d", res.StatusCode)
	}
	if s := strings.TrimSpace(res.BodySnippet); s != "" && res.StatusCode != 0 {
		b.WriteString(": ")
		b.WriteString(s)
	}
	out := b.String()
	if len(out) > 512 {
		out = out[:512]
	}
	return out
}

// ceilMs rounds up to whole milliseconds: a wait is never cut short.
func ceilMs(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
