package testutil

import (
	"fmt"
	"testing"
	"time"
)

// Polling intervals: the first check runs at once, later ones back off from
// minInterval to maxInterval, so a fast condition is seen within
// milliseconds and a slow one does not burn a shared CPU.
const (
	minInterval = 2 * time.Millisecond
	maxInterval = 50 * time.Millisecond
)

// Poll calls cond until it returns nil or timeout passes, and returns cond's
// last error (nil once it held). It is Eventually for callers that decide
// themselves what a timeout means.
func Poll(timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	wait := minInterval
	for {
		err := cond()
		if err == nil {
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return err
		}
		time.Sleep(min(wait, left))
		wait = min(2*wait, maxInterval)
	}
}

// Eventually waits until cond returns nil, failing t after timeout with
// what it waited for and cond's last error. Call it from the test's own
// goroutine (it may call t.Fatalf).
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	if err := Poll(timeout, cond); err != nil {
		t.Fatalf("timed out after %v waiting for %s: %v", timeout, what, err)
	}
}

// True adapts a boolean condition to Eventually: while cond is false, the
// error says so.
func True(cond func() bool) func() error {
	return func() error {
		if cond() {
			return nil
		}
		return errNotYet
	}
}

var errNotYet = fmt.Errorf("condition still false")
