package client

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"
)

// RetryConfig bounds how the client resends a call that got 503
// unavailable, 429 overloaded or a broken connection. Zero fields take the
// defaults. Which calls are resent at all is fixed by what is safe (see the
// package documentation); this only says how often and how long.
type RetryConfig struct {
	// MaxAttempts is how many times one call is sent, over all addresses.
	// Default 5; 1 never resends.
	MaxAttempts int
	// InitialBackoff is the wait before the first resend that has no
	// Retry-After; it doubles per further resend, up to MaxBackoff, and each
	// wait is drawn at random from its upper half (jitter, so that many
	// clients that failed together do not come back together). Default
	// 100ms.
	InitialBackoff time.Duration
	// MaxBackoff caps one computed wait. It does not shorten a server's
	// Retry-After: coming back sooner than asked is what keeps an
	// overloaded server overloaded. Default 5s.
	MaxBackoff time.Duration
	// MaxElapsed bounds the whole call, waits included: a resend that could
	// not start before it is not made, and the last error is returned at
	// once (with its RetryAfter) rather than after a wait. The context's
	// deadline bounds it the same way. Default 30s.
	MaxElapsed time.Duration
}

// Defaults of RetryConfig.
const (
	DefaultMaxAttempts    = 5
	DefaultInitialBackoff = 100 * time.Millisecond
	DefaultMaxBackoff     = 5 * time.Second
	DefaultMaxElapsed     = 30 * time.Second
)

func (r RetryConfig) withDefaults() (RetryConfig, error) {
	if r.MaxAttempts < 0 || r.InitialBackoff < 0 || r.MaxBackoff < 0 || r.MaxElapsed < 0 {
		return r, argErrorf("timemachine client: retry settings must not be negative")
	}
	if r.MaxAttempts == 0 {
		r.MaxAttempts = DefaultMaxAttempts
	}
	if r.InitialBackoff == 0 {
		r.InitialBackoff = DefaultInitialBackoff
	}
	if r.MaxBackoff == 0 {
		r.MaxBackoff = DefaultMaxBackoff
	}
	if r.MaxElapsed == 0 {
		r.MaxElapsed = DefaultMaxElapsed
	}
	r.MaxBackoff = max(r.MaxBackoff, r.InitialBackoff)
	return r, nil
}

// backoff is the k-th computed wait (k from 0): InitialBackoff·2^k capped at
// MaxBackoff, drawn uniformly from its upper half.
func (r *RetryConfig) backoff(k int) time.Duration {
	d := r.MaxBackoff
	if k < 30 {
		d = min(r.InitialBackoff<<k, r.MaxBackoff)
	}
	half := d / 2
	return half + rand.N(half+1)
}

// honour is the wait for a Retry-After: at least what the server asked,
// plus up to a tenth more so that clients told the same do not return in
// the same instant.
func honour(ra time.Duration) time.Duration {
	return ra + rand.N(ra/10+1)
}

// do runs the retry loop: it starts at the next address in round-robin
// order, moves to the next address on a failed connection or a 503/429,
// waits between rounds as RetryConfig says, and stops at MaxAttempts,
// MaxElapsed or the context's deadline. It returns the 2xx answer.
func (c *Client) do(ctx context.Context, cl *call) (*result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n := len(c.bases)
	first, attempts := 0, c.retry.MaxAttempts
	if cl.single {
		first, attempts = cl.addr, 1
	} else if n > 1 {
		first = int((c.next.Add(1) - 1) % uint64(n))
	}
	header := c.header
	if len(cl.header) > 0 {
		header = append(append(make([][2]string, 0, len(c.header)+len(cl.header)), c.header...), cl.header...)
	}
	end := time.Now().Add(c.retry.MaxElapsed)
	if d, ok := ctx.Deadline(); ok && d.Before(end) {
		end = d
	}
	var last error
	waits := 0
	for i := 0; i < attempts; i++ {
		idx := (first + i) % n
		r := c.tr.roundTrip(ctx, idx, cl, header, time.Now().Add(c.timeout))
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("timemachine client: %s %s: %w", cl.method, r.url, err)
		}
		if d, ok := ctx.Deadline(); ok && r.err != nil && !time.Now().Before(d) {
			// The attempt ran into the context's deadline (a transport
			// without context support noticed it first).
			return nil, fmt.Errorf("timemachine client: %s %s: %w", cl.method, r.url, context.DeadlineExceeded)
		}
		var wait time.Duration
		switch {
		case r.err != nil:
			last = fmt.Errorf("timemachine client: %s %s: %w", cl.method, r.url, r.err)
			if r.permanent || (!r.notSent && !cl.retrySafe) {
				return nil, last
			}
			// Try every address once without waiting, then back off.
			if i+1 >= n {
				wait = c.retry.backoff(waits)
				waits++
			}
		case r.status >= 200 && r.status < 300:
			if !cl.anyBody && len(trimBody(r.body)) > 0 && !isJSON(r.contentType) {
				return nil, r.protocolError(nil)
			}
			return &r, nil
		case r.status == http.StatusServiceUnavailable || r.status == http.StatusTooManyRequests:
			last = decodeError(&r)
			if !cl.retrySafe {
				return nil, last
			}
			if r.retryAfter > 0 {
				wait = honour(r.retryAfter)
			} else {
				wait = c.retry.backoff(waits)
				waits++
			}
		case r.status >= 300 && r.status < 400:
			return nil, r.protocolError(fmt.Errorf("redirected to %q; use that address", r.location))
		default:
			return nil, decodeError(&r)
		}
		if i+1 >= attempts {
			break
		}
		if time.Now().Add(wait).After(end) {
			// The next attempt could not start in time: the caller gets the
			// server's answer (and its RetryAfter) now instead of a
			// deadline error later.
			return nil, last
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, fmt.Errorf("timemachine client: %s %s: %w", cl.method, cl.path, ctx.Err())
			case <-t.C:
			}
		}
	}
	return nil, last
}
