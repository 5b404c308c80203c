package slot

import (
	"math"
	"time"
)

// tokenBucket is a rate limiter: tokens accrue at rate per second up to
// burst, and each delivery takes one. It starts full. Not safe for
// concurrent use (a lane holds it under the Lanes lock); the caller
// passes the time, so tests drive it with a fake clock.
type tokenBucket struct {
	rate, burst float64
	tokens      float64
	last        time.Time
	started     bool
}

// configure sets the rate and burst (a node's share changes with the
// slots it leads), keeping the tokens already earned up to the new burst.
func (b *tokenBucket) configure(rate, burst float64, now time.Time) {
	if !b.started {
		b.rate, b.burst, b.tokens, b.last, b.started = rate, burst, burst, now, true
		return
	}
	b.refill(now)
	b.rate, b.burst = rate, burst
	b.tokens = min(b.tokens, burst)
}

func (b *tokenBucket) refill(now time.Time) {
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(b.burst, b.tokens+d.Seconds()*b.rate)
		b.last = now
	}
}

// take takes n tokens when there are that many, or says how long until
// there will be (never zero when it refuses).
func (b *tokenBucket) take(n float64, now time.Time) (bool, time.Duration) {
	b.refill(now)
	if b.tokens >= n {
		b.tokens -= n
		return true, 0
	}
	if b.rate <= 0 {
		return false, time.Second
	}
	wait := time.Duration(math.Ceil((n - b.tokens) / b.rate * float64(time.Second)))
	return false, max(wait, time.Microsecond)
}
