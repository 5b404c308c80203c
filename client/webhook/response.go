package webhook

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Outcomes of a job, as a batched answer spells them.
const (
	OutcomeOK    = "ok"
	OutcomeRetry = "retry"
	OutcomeFail  = "fail"
)

// Response is a receiver's answer for one job. Build it with OK, Retry,
// Fail, RescheduleIn or RescheduleAt; the zero Response is OK.
//
// For a single callback it becomes the HTTP answer (docs/api.md#the-callback):
//
//	OK              204, no body                          → succeeded
//	RescheduleIn(d) 200 {"reschedule_in":"<d>"}           → scheduled again, attempts reset
//	RescheduleAt(t) 200 {"reschedule_at":<unix ms>}       → scheduled again, attempts reset
//	Retry(after)    503 (Retry-After: <after> if > 0)     → retried per the retry policy
//	Fail(reason)    422 text/plain reason                 → failed now (a dead letter)
//
// For a job of a batch it becomes that job's entry in {"results":[…]}.
type Response struct {
	outcome      string
	retryAfter   time.Duration
	rescheduleIn time.Duration
	rescheduleAt int64 // unix ms; 0: none
	reason       string
}

// OK acknowledges the job: it succeeded.
func OK() Response { return Response{outcome: OutcomeOK} }

// Retry asks timemachine to try again. after > 0 is sent as Retry-After
// (whole seconds, rounded up) and sets the wait before the next attempt
// instead of the job's backoff; 0 leaves the backoff to the retry policy.
// The job still fails once its retry policy is exhausted. In a batch the
// job's entry carries after as "reschedule_in" (servers before 2026-11-28
// ignore it there and take the backoff).
func Retry(after time.Duration) Response {
	return Response{outcome: OutcomeRetry, retryAfter: max(after, 0)}
}

// Fail marks the job failed at once, without retries (it becomes a dead
// letter that can be redriven). reason is sent as the answer body, which
// timemachine keeps in the job's last_error.
func Fail(reason string) Response { return Response{outcome: OutcomeFail, reason: reason} }

// RescheduleIn acknowledges the job and schedules it again d from now,
// with attempts reset. d ≤ 0 means at once (sent as 1ms).
func RescheduleIn(d time.Duration) Response {
	if d <= 0 {
		d = time.Millisecond
	}
	return Response{outcome: OutcomeOK, rescheduleIn: d}
}

// RescheduleAt acknowledges the job and schedules it again at t (sent in
// Unix milliseconds), with attempts reset. timemachine refuses times
// before the year 2000 (they are usually seconds sent as milliseconds).
func RescheduleAt(t time.Time) Response {
	return Response{outcome: OutcomeOK, rescheduleAt: t.UnixMilli()}
}

// Outcome returns "ok", "retry" or "fail".
func (r Response) Outcome() string {
	if r.outcome == "" {
		return OutcomeOK
	}
	return r.outcome
}

// RetryAfter returns the wait of a Retry answer (0 if none).
func (r Response) RetryAfter() time.Duration { return r.retryAfter }

// Reason returns the reason of a Fail answer.
func (r Response) Reason() string { return r.reason }

// Rescheduled reports whether the answer reschedules the job.
func (r Response) Rescheduled() bool { return r.rescheduleIn > 0 || r.rescheduleAt != 0 }

// rescheduleBody is the JSON of a reschedule answer, or nil.
func (r Response) rescheduleBody() []byte {
	switch {
	case r.rescheduleIn > 0:
		return []byte(`{"reschedule_in":` + strconv.Quote(r.rescheduleIn.String()) + `}`)
	case r.rescheduleAt != 0:
		return []byte(`{"reschedule_at":` + strconv.FormatInt(r.rescheduleAt, 10) + `}`)
	}
	return nil
}

// Write sends r as the answer to a single callback; see Response for the
// mapping. Use it from handlers that do not use Handler.
func (r Response) Write(w http.ResponseWriter) {
	switch r.Outcome() {
	case OutcomeRetry:
		if r.retryAfter > 0 {
			w.Header().Set("Retry-After", retryAfterSeconds(r.retryAfter))
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	case OutcomeFail:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = w.Write([]byte(r.reason))
	default:
		if b := r.rescheduleBody(); b != nil {
			writeJSON(w, http.StatusOK, b)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

// retryAfterSeconds renders a wait as Retry-After delta-seconds, rounded
// up so the sender never comes back early.
func retryAfterSeconds(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// Result is one job's entry in the answer to a batched delivery.
type Result struct {
	ID           string `json:"id"`
	Collection   string `json:"collection"`
	Outcome      string `json:"outcome"`
	RescheduleIn string `json:"reschedule_in,omitempty"`
	RescheduleAt int64  `json:"reschedule_at,omitempty"`
}

// ResultFor is the batch entry for cb answered with r.
func ResultFor(cb *Callback, r Response) Result {
	res := Result{ID: cb.ID, Collection: cb.Collection, Outcome: r.Outcome()}
	if r.outcome == OutcomeRetry {
		if r.retryAfter > 0 {
			res.RescheduleIn = r.retryAfter.String()
		}
		return res
	}
	if r.rescheduleIn > 0 {
		res.RescheduleIn = r.rescheduleIn.String()
	} else if r.rescheduleAt != 0 {
		res.RescheduleAt = r.rescheduleAt
	}
	return res
}

// WriteBatch answers a batched delivery with one Response per callback, in
// order (docs/api.md#routes, batch):
//   - every job OK without reschedule: 200 with no body ("all succeeded");
//   - every job Retry with the same wait: 503, with that Retry-After (which
//     servers of every version honour);
//   - otherwise 200 {"results":[{"id","collection","outcome",…}]}.
//
// len(rs) must equal len(cbs); otherwise the whole delivery is answered 500
// (retried), since answering for the wrong jobs would lose some.
func WriteBatch(w http.ResponseWriter, cbs []Callback, rs []Response) {
	if len(rs) != len(cbs) {
		http.Error(w, "webhook: the batch handler answered "+strconv.Itoa(len(rs))+" results for "+strconv.Itoa(len(cbs))+" jobs", http.StatusInternalServerError)
		return
	}
	allOK, allRetry := true, len(rs) > 0
	var wait time.Duration
	for i, r := range rs {
		if r.Outcome() != OutcomeOK || r.Rescheduled() {
			allOK = false
		}
		if r.Outcome() != OutcomeRetry || (i > 0 && r.retryAfter != wait) {
			allRetry = false
		}
		wait = r.retryAfter
	}
	switch {
	case allOK:
		w.WriteHeader(http.StatusOK)
		return
	case allRetry:
		Retry(wait).Write(w)
		return
	}
	out := struct {
		Results []Result `json:"results"`
	}{make([]Result, len(rs))}
	for i := range rs {
		out.Results[i] = ResultFor(&cbs[i], rs[i])
	}
	b, err := json.Marshal(out)
	if err != nil { // cannot happen: strings and ints only
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, http.StatusOK, b)
}
