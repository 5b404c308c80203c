package e2e

import (
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// policy builds a retry_policy object.
func policy(maxAttempts int, initial string, multiplier float64) map[string]any {
	return map[string]any{"max_attempts": maxAttempts, "initial_interval": initial, "multiplier": multiplier}
}

// checkGap checks that the wait between two deliveries is at least
// lo (jitter already allowed for by the caller) and not absurdly long.
func checkGap(t *testing.T, what string, a, b *Delivery, lo, hi time.Duration) {
	t.Helper()
	gap := b.At.Sub(a.At)
	if gap < lo {
		t.Errorf("%s: attempt %d came %v after attempt %d, want at least %v", what, b.N, gap, a.N, lo)
	}
	if gap > hi {
		t.Errorf("%s: attempt %d came %v after attempt %d, want at most %v", what, b.N, gap, a.N, hi)
	}
}

func TestRetries(t *testing.T) {
	t.Parallel()
	s := shared(t)
	rcv := newReceiver(t)
	coll := s.newCollection(t, "retry", nil)

	// 503 for attempts 1–2, then 200: attempts 1, 2, 3 with the policy's
	// backoff (200 ms, then 400 ms, ±20%) and one Idempotency-Key.
	t.Run("backoff then success", func(t *testing.T) {
		t.Parallel()
		trigger := nowMs()
		rcv.Script(coll, "flaky", func(d *Delivery) Reply {
			if d.N <= 2 {
				return Reply{Status: http.StatusServiceUnavailable}
			}
			return Reply{}
		})
		j := rcv.job("flaky", trigger)
		j["retry_policy"] = policy(5, "200ms", 2)
		s.createJob(t, coll, j)
		ds := rcv.WaitN(t, coll, "flaky", 3, lateBound+waitSlack)
		for i, d := range ds {
			if a := attemptHeader(d); a != i+1 || d.Payload.Attempt != i+1 {
				t.Errorf("delivery %d: X-Timemachine-Attempt %d, payload attempt %d, want %d", i+1, a, d.Payload.Attempt, i+1)
			}
			if k := d.Header.Get("Idempotency-Key"); k != idemKey(coll, "flaky", trigger) {
				t.Errorf("delivery %d: Idempotency-Key %q, want %q", i+1, k, idemKey(coll, "flaky", trigger))
			}
			if d.Payload.TriggerTime != trigger {
				t.Errorf("delivery %d: trigger_time %d, want %d (unchanged by retries)", i+1, d.Payload.TriggerTime, trigger)
			}
		}
		checkGap(t, "flaky", ds[0], ds[1], 160*time.Millisecond, 240*time.Millisecond+lateBound)
		checkGap(t, "flaky", ds[1], ds[2], 320*time.Millisecond, 480*time.Millisecond+lateBound)
		got := s.waitStatus(t, coll, "flaky", "succeeded", 5*time.Second)
		if got.Attempts != 3 {
			t.Errorf("succeeded with attempts %d, want 3", got.Attempts)
		}
		rcv.ExpectNoMore(t, coll, "flaky", 3, 800*time.Millisecond)
	})

	// Always 500 with max_attempts 2: failed (a dead letter) after two
	// attempts, listed by ?status=failed; a PUT redrives it.
	t.Run("exhausted then redriven", func(t *testing.T) {
		t.Parallel()
		var healthy atomic.Bool
		rcv.Script(coll, "dead", func(d *Delivery) Reply {
			if healthy.Load() {
				return Reply{}
			}
			return Reply{Status: http.StatusInternalServerError, Body: `{"oops":"down"}`}
		})
		j := rcv.job("dead", nowMs())
		j["retry_policy"] = policy(2, "100ms", 2)
		s.createJob(t, coll, j)
		rcv.WaitN(t, coll, "dead", 2, lateBound+waitSlack)
		got := s.waitStatus(t, coll, "dead", "failed", 5*time.Second)
		if got.Attempts != 2 || got.LastError == "" || got.FinishedAt == 0 {
			t.Errorf("failed job %+v, want attempts 2, a last_error, finished_at", got)
		}
		rcv.ExpectNoMore(t, coll, "dead", 2, time.Second)
		failed := s.listAll(t, coll, "status=failed")
		found := false
		for _, f := range failed {
			found = found || f.ID == "dead"
			if f.Status != "failed" {
				t.Errorf("?status=failed lists %s with status %q", f.ID, f.Status)
			}
		}
		if !found {
			t.Errorf("?status=failed does not list the dead letter: %+v", failed)
		}

		healthy.Store(true)
		redrive := rcv.job("dead", nowMs())
		delete(redrive, "id")
		redrive["retry_policy"] = policy(2, "100ms", 2)
		r := s.Do(t, "PUT", jobPath(coll, "dead"), redrive)
		mustStatus(t, "PUT redrive", r, http.StatusOK)
		if j := decodeJSON[Job](t, "redrive", r.Body); j.Status != "scheduled" || j.Attempts != 0 {
			t.Errorf("redriven job %+v, want scheduled with attempts 0", j)
		}
		ds := rcv.WaitN(t, coll, "dead", 3, lateBound+waitSlack)
		if a := attemptHeader(ds[2]); a != 1 {
			t.Errorf("redriven delivery has attempt %d, want 1", a)
		}
		got = s.waitStatus(t, coll, "dead", "succeeded", 5*time.Second)
		if got.Attempts != 1 {
			t.Errorf("redriven job succeeded with attempts %d, want 1", got.Attempts)
		}
	})

	// Retry-After: 1 sets the wait to a second although the policy says 100 ms.
	for _, st := range []int{http.StatusServiceUnavailable, http.StatusTooManyRequests} {
		t.Run(fmt.Sprintf("Retry-After with %d", st), func(t *testing.T) {
			t.Parallel()
			id := fmt.Sprintf("retry-after-%d", st)
			rcv.Script(coll, id, func(d *Delivery) Reply {
				if d.N == 1 {
					return Reply{Status: st, Header: map[string]string{"Retry-After": "1"}}
				}
				return Reply{}
			})
			j := rcv.job(id, nowMs())
			j["retry_policy"] = policy(3, "100ms", 1)
			s.createJob(t, coll, j)
			ds := rcv.WaitN(t, coll, id, 2, lateBound+waitSlack+time.Second)
			// The server works in whole milliseconds: allow 1 ms of rounding.
			checkGap(t, id, ds[0], ds[1], time.Second-time.Millisecond, time.Second+lateBound)
			if got := s.waitStatus(t, coll, id, "succeeded", 5*time.Second); got.Attempts != 2 {
				t.Errorf("attempts %d, want 2", got.Attempts)
			}
		})
	}

	// Each retryable answer is retried: one failure, then success.
	for _, st := range []int{408, 425, 429, 500, 502, 503, 504} {
		t.Run(fmt.Sprintf("retryable %d", st), func(t *testing.T) {
			t.Parallel()
			id := fmt.Sprintf("retryable-%d", st)
			rcv.Script(coll, id, func(d *Delivery) Reply {
				if d.N == 1 {
					return Reply{Status: st}
				}
				return Reply{}
			})
			j := rcv.job(id, nowMs())
			j["retry_policy"] = policy(3, "100ms", 2)
			s.createJob(t, coll, j)
			ds := rcv.WaitN(t, coll, id, 2, lateBound+waitSlack)
			checkGap(t, id, ds[0], ds[1], 80*time.Millisecond, 120*time.Millisecond+lateBound)
			if a := attemptHeader(ds[1]); a != 2 {
				t.Errorf("second delivery attempt header %d, want 2", a)
			}
			if got := s.waitStatus(t, coll, id, "succeeded", 5*time.Second); got.Attempts != 2 {
				t.Errorf("attempts %d, want 2", got.Attempts)
			}
		})
	}

	// A receiver slower than callback_timeout is retried.
	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		rcv.Script(coll, "slow", func(d *Delivery) Reply {
			if d.N == 1 {
				return Reply{Delay: 1500 * time.Millisecond}
			}
			return Reply{}
		})
		j := rcv.job("slow", nowMs())
		j["retry_policy"] = policy(3, "100ms", 2)
		j["callback_timeout"] = "300ms"
		s.createJob(t, coll, j)
		ds := rcv.WaitN(t, coll, "slow", 2, lateBound+waitSlack)
		checkGap(t, "slow", ds[0], ds[1], 300*time.Millisecond+80*time.Millisecond, 1400*time.Millisecond+lateBound)
		if got := s.waitStatus(t, coll, "slow", "succeeded", 5*time.Second); got.Attempts != 2 {
			t.Errorf("attempts %d, want 2", got.Attempts)
		}
	})

	// Nobody listening: connection errors are retried, then the job fails.
	t.Run("connection refused", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := "http://" + ln.Addr().String() + "/nobody"
		ln.Close()
		s.createJob(t, coll, map[string]any{"id": "refused", "trigger_time": nowMs(), "callback_url": closed,
			"retry_policy": policy(2, "100ms", 2)})
		got := s.waitStatus(t, coll, "refused", "failed", lateBound+waitSlack)
		if got.Attempts != 2 || got.LastError == "" {
			t.Errorf("job %+v, want attempts 2 and a last_error", got)
		}
	})

	// A field left out of the job's policy comes from the collection's.
	t.Run("collection policy", func(t *testing.T) {
		t.Parallel()
		c2 := s.newCollection(t, "retrycoll", map[string]any{"retry_policy": policy(2, "100ms", 1)})
		rcv.Script(c2, "inherit", func(d *Delivery) Reply { return Reply{Status: http.StatusServiceUnavailable} })
		s.createJob(t, c2, rcv.job("inherit", nowMs()))
		rcv.WaitN(t, c2, "inherit", 2, lateBound+waitSlack)
		got := s.waitStatus(t, c2, "inherit", "failed", 5*time.Second)
		if got.Attempts != 2 {
			t.Errorf("attempts %d, want 2 (the collection's max_attempts)", got.Attempts)
		}
		rcv.ExpectNoMore(t, c2, "inherit", 2, 600*time.Millisecond)
	})
}

// TestPermanentClientErrorFailsAtOnce: a 4xx other than 408/425/429 fails
// the job after exactly one delivery.
func TestPermanentClientErrorFailsAtOnce(t *testing.T) {
	t.Parallel()
	s := shared(t)
	rcv := newReceiver(t)
	coll := s.newCollection(t, "perm", nil)
	codes := []int{400, 401, 404, 410, 422}
	for _, st := range codes {
		id := fmt.Sprintf("perm-%d", st)
		rcv.Script(coll, id, func(d *Delivery) Reply { return Reply{Status: st, Body: `{"error":"no such user"}`} })
		j := rcv.job(id, nowMs())
		j["retry_policy"] = policy(5, "100ms", 1)
		s.createJob(t, coll, j)
	}
	for _, st := range codes {
		id := fmt.Sprintf("perm-%d", st)
		rcv.WaitN(t, coll, id, 1, lateBound+waitSlack)
		got := s.waitStatus(t, coll, id, "failed", 5*time.Second)
		if got.Attempts != 1 || got.LastError == "" {
			t.Errorf("%s: %+v, want attempts 1 and a last_error", id, got)
		}
	}
	// A retry would come ~100 ms later; give it a generous window.
	for _, st := range codes {
		rcv.ExpectNoMore(t, coll, fmt.Sprintf("perm-%d", st), 1, 300*time.Millisecond)
	}
}

// TestRescheduleFromCallback: 2xx with {"reschedule_in"} / {"reschedule_at"}
// schedules the job again (attempts reset, a new Idempotency-Key with the
// new trigger_time); a plain 2xx then finishes it.
func TestRescheduleFromCallback(t *testing.T) {
	t.Parallel()
	s := shared(t)
	rcv := newReceiver(t)
	coll := s.newCollection(t, "resched", nil)

	var at atomic.Int64
	rcv.Script(coll, "again", func(d *Delivery) Reply {
		switch d.N {
		case 1:
			return Reply{Status: http.StatusServiceUnavailable}
		case 2:
			return Reply{Body: `{"reschedule_in":"1s"}`}
		case 3:
			ms := time.Now().Add(time.Second).UnixMilli()
			at.Store(ms)
			return Reply{Body: fmt.Sprintf(`{"reschedule_at":%d}`, ms)}
		}
		return Reply{Body: `{"ok":true}`}
	})
	t0 := nowMs()
	j := rcv.job("again", t0)
	j["retry_policy"] = policy(5, "100ms", 1)
	s.createJob(t, coll, j)

	ds := rcv.WaitN(t, coll, "again", 2, lateBound+waitSlack)
	for i, d := range ds {
		if attemptHeader(d) != i+1 || d.Payload.TriggerTime != t0 || d.Header.Get("Idempotency-Key") != idemKey(coll, "again", t0) {
			t.Errorf("delivery %d: attempt %d trigger %d key %q", i+1, attemptHeader(d), d.Payload.TriggerTime, d.Header.Get("Idempotency-Key"))
		}
	}
	// Rescheduled: scheduled again, later, attempts reset.
	mid := s.waitJob(t, coll, "again", 5*time.Second, "rescheduled", func(j Job) bool { return j.TriggerTime != t0 })
	if mid.Status != "scheduled" || mid.Attempts != 0 {
		t.Errorf("after reschedule_in: %+v, want scheduled with attempts 0", mid)
	}

	d3 := rcv.WaitN(t, coll, "again", 3, time.Second+lateBound+waitSlack)[2]
	t1 := d3.Payload.TriggerTime
	if t1 < ds[1].AtMs()+1000 || t1 > ds[1].AtMs()+1000+lateBound.Milliseconds() {
		t.Errorf("reschedule_in 1s answered at %d gave trigger_time %d (%+d ms), want about 1000 ms later", ds[1].AtMs(), t1, t1-ds[1].AtMs())
	}
	if msg := checkOnTime(d3, t1); msg != "" {
		t.Error(msg)
	}
	if attemptHeader(d3) != 1 || d3.Payload.Attempt != 1 {
		t.Errorf("after reschedule_in: attempt header %d payload %d, want 1 (attempts reset)", attemptHeader(d3), d3.Payload.Attempt)
	}
	if k := d3.Header.Get("Idempotency-Key"); k != idemKey(coll, "again", t1) {
		t.Errorf("after reschedule_in: Idempotency-Key %q, want %q", k, idemKey(coll, "again", t1))
	}

	d4 := rcv.WaitN(t, coll, "again", 4, time.Second+lateBound+waitSlack)[3]
	t2 := at.Load()
	if d4.Payload.TriggerTime != t2 {
		t.Errorf("reschedule_at %d gave trigger_time %d", t2, d4.Payload.TriggerTime)
	}
	if msg := checkOnTime(d4, t2); msg != "" {
		t.Error(msg)
	}
	if attemptHeader(d4) != 1 || d4.Header.Get("Idempotency-Key") != idemKey(coll, "again", t2) {
		t.Errorf("after reschedule_at: attempt %d key %q", attemptHeader(d4), d4.Header.Get("Idempotency-Key"))
	}

	final := s.waitStatus(t, coll, "again", "succeeded", 5*time.Second)
	if final.Attempts != 1 || final.TriggerTime != t2 {
		t.Errorf("final %+v, want succeeded, attempts 1, trigger_time %d", final, t2)
	}
	rcv.ExpectNoMore(t, coll, "again", 4, 700*time.Millisecond)
}
