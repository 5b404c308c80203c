package e2e

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// TestNeverEarly: ~200 jobs with triggers spread over the next ~2 s, made
// with single and batch POSTs. Every delivery arrives at or after its
// trigger_time, each job exactly once, and the job ends succeeded after one
// attempt.
func TestNeverEarly(t *testing.T) {
	t.Parallel()
	s := shared(t)
	rcv := newReceiver(t)
	coll := s.newCollection(t, "early", nil)

	const singles, batches, perBatch = 80, 3, 40
	base := nowMs() + 500
	triggers := map[string]int64{}
	n := 0
	next := func() (string, int64) {
		id := fmt.Sprintf("j%03d", n)
		// Spread over ~2 s, interleaving singles and batch items, with a
		// few sharing a millisecond.
		tr := base + int64(n*2000/(singles+batches*perBatch))
		n++
		triggers[id] = tr
		return id, tr
	}
	for i := 0; i < singles; i++ {
		id, tr := next()
		j := s.createJob(t, coll, rcv.job(id, tr))
		if j.TriggerTime != tr || j.Status != "scheduled" || j.ID != id || j.Collection != coll {
			t.Fatalf("created job %+v, want id %s trigger %d scheduled in %s", j, id, tr, coll)
		}
	}
	for b := 0; b < batches; b++ {
		var jobs []map[string]any
		for i := 0; i < perBatch; i++ {
			id, tr := next()
			jobs = append(jobs, rcv.job(id, tr))
		}
		for i, res := range s.createBatch(t, coll, jobs) {
			if res.Status != http.StatusCreated || res.ID != jobs[i]["id"] {
				t.Fatalf("batch item %d: %+v (error %s), want 201 for %v", i, res, res.Error, jobs[i]["id"])
			}
		}
	}
	total := len(triggers)
	lastTrigger := base + 2000
	got := rcv.WaitKeys(coll, total, time.Until(time.UnixMilli(lastTrigger))+lateBound+waitSlack)
	if got != total {
		t.Fatalf("%d of %d jobs delivered", got, total)
	}
	// Give duplicates a moment to show up.
	time.Sleep(500 * time.Millisecond)

	for id, tr := range triggers {
		ds := rcv.Of(coll, id)
		if len(ds) != 1 {
			t.Errorf("%s: %d deliveries, want exactly 1%s", id, len(ds), describe(ds))
			continue
		}
		if msg := checkOnTime(ds[0], tr); msg != "" {
			t.Error(msg)
		}
		if ds[0].Payload.TriggerTime != tr {
			t.Errorf("%s: payload trigger_time %d, want %d", id, ds[0].Payload.TriggerTime, tr)
		}
		if a := attemptHeader(ds[0]); a != 1 || ds[0].Payload.Attempt != 1 {
			t.Errorf("%s: attempt header %d, payload attempt %d, want 1", id, a, ds[0].Payload.Attempt)
		}
	}
	for id := range triggers {
		j := s.waitStatus(t, coll, id, "succeeded", 5*time.Second)
		if j.Attempts != 1 || j.LastError != "" || j.FinishedAt == 0 {
			t.Errorf("%s: %+v, want attempts 1, no last_error, finished_at set", id, j)
		}
	}
	if succeeded := s.listAll(t, coll, "status=succeeded"); len(succeeded) != total {
		t.Errorf("GET ?status=succeeded lists %d jobs, want %d", len(succeeded), total)
	}
	if sched := s.listAll(t, coll, "status=scheduled"); len(sched) != 0 {
		t.Errorf("GET ?status=scheduled lists %d jobs, want 0", len(sched))
	}
}

// TestPastTriggerFiresAtOnce: a trigger_time in the past (ms, RFC 3339
// string) and a zero delay fire within the lateness bound.
func TestPastTriggerFiresAtOnce(t *testing.T) {
	t.Parallel()
	s := shared(t)
	rcv := newReceiver(t)
	coll := s.newCollection(t, "past", nil)

	hourAgo := time.Now().Add(-time.Hour)
	cases := []struct {
		id      string
		trigger any
		want    int64
	}{
		{"ms-hour-ago", hourAgo.UnixMilli(), hourAgo.UnixMilli()},
		{"rfc3339-hour-ago", hourAgo.UTC().Format(time.RFC3339), hourAgo.Truncate(time.Second).UnixMilli()},
		{"rfc3339-offset", hourAgo.In(time.FixedZone("x", 5*3600+1800)).Format(time.RFC3339), hourAgo.Truncate(time.Second).UnixMilli()},
		{"ms-1s-ago", nowMs() - 1000, 0},
	}
	created := time.Now()
	for i := range cases {
		c := &cases[i]
		body := map[string]any{"id": c.id, "trigger_time": c.trigger, "callback_url": rcv.URL + "/hook"}
		j := s.createJob(t, coll, body)
		if c.want == 0 {
			c.want = c.trigger.(int64)
		}
		if j.TriggerTime != c.want {
			t.Errorf("%s: trigger_time %v answered as %d, want %d", c.id, c.trigger, j.TriggerTime, c.want)
		}
	}
	// "delay": "0s" is "now".
	j := s.createJob(t, coll, map[string]any{"id": "delay-zero", "delay": "0s", "callback_url": rcv.URL + "/hook"})
	if d := j.TriggerTime - created.UnixMilli(); d < 0 || d > 5000 {
		t.Errorf("delay 0s resolved to trigger_time %d, %d ms from the request", j.TriggerTime, d)
	}

	for _, id := range []string{"ms-hour-ago", "rfc3339-hour-ago", "rfc3339-offset", "ms-1s-ago", "delay-zero"} {
		ds := rcv.WaitN(t, coll, id, 1, lateBound+waitSlack)
		if late := ds[0].At.Sub(created); late > lateBound {
			t.Errorf("%s: past trigger fired %v after the create, want within %v", id, late, lateBound)
		}
	}
	for _, id := range []string{"ms-hour-ago", "rfc3339-hour-ago", "rfc3339-offset", "ms-1s-ago", "delay-zero"} {
		s.waitStatus(t, coll, id, "succeeded", 5*time.Second)
		rcv.ExpectNoMore(t, coll, id, 1, 0)
	}
}

// TestDeletedJobNeverFires: DELETE → 204, GET → 404, and nothing arrives
// after its trigger time. DELETE of an unknown job → 404 with the error
// body.
func TestDeletedJobNeverFires(t *testing.T) {
	t.Parallel()
	s := shared(t)
	rcv := newReceiver(t)
	coll := s.newCollection(t, "del", nil)

	trigger := nowMs() + 1000
	s.createJob(t, coll, rcv.job("doomed", trigger))
	// A neighbour with the same trigger proves the slot did fire at that time.
	s.createJob(t, coll, rcv.job("survivor", trigger))

	r := s.Do(t, "DELETE", jobPath(coll, "doomed"), nil)
	mustStatus(t, "DELETE doomed", r, http.StatusNoContent)
	if len(r.Body) != 0 {
		t.Errorf("204 with a body: %q", r.Body)
	}
	if _, ok := s.getJob(t, coll, "doomed"); ok {
		t.Fatalf("GET after DELETE: the job is still there")
	}
	mustError(t, "DELETE again", s.Do(t, "DELETE", jobPath(coll, "doomed"), nil), http.StatusNotFound, "not_found")
	mustError(t, "DELETE unknown", s.Do(t, "DELETE", jobPath(coll, "never-was"), nil), http.StatusNotFound, "not_found")
	mustError(t, "DELETE in unknown collection", s.Do(t, "DELETE", jobPath(uniq("nocoll"), "x"), nil), http.StatusNotFound, "not_found")

	ds := rcv.WaitN(t, coll, "survivor", 1, time.Until(time.UnixMilli(trigger))+lateBound+waitSlack)
	if msg := checkOnTime(ds[0], trigger); msg != "" {
		t.Error(msg)
	}
	// The survivor fired, so the slot's scheduler passed the trigger time;
	// wait a little longer for a stray fire of the deleted job.
	rcv.ExpectNone(t, coll, "doomed", quietWindow)
	if jobs := s.listAll(t, coll, ""); len(jobs) != 1 || jobs[0].ID != "survivor" {
		t.Errorf("list after delete: %+v, want only survivor", jobs)
	}

	// A finished job can be deleted too.
	s.waitStatus(t, coll, "survivor", "succeeded", 5*time.Second)
	mustStatus(t, "DELETE finished job", s.Do(t, "DELETE", jobPath(coll, "survivor"), nil), http.StatusNoContent)
	if _, ok := s.getJob(t, coll, "survivor"); ok {
		t.Errorf("finished job still readable after DELETE")
	}
}

// TestRescheduleByPut: PUT with If-Match of the current version moves the
// trigger; the job fires once, at (not before) its new time, never at the
// old one. A wrong If-Match is 412 and changes nothing.
func TestRescheduleByPut(t *testing.T) {
	t.Parallel()
	s := shared(t)
	rcv := newReceiver(t)
	coll := s.newCollection(t, "put", nil)

	oldTrigger := nowMs() + 1200
	created := s.createJob(t, coll, rcv.job("later", oldTrigger))
	earlier := nowMs() + 1200
	createdE := s.createJob(t, coll, rcv.job("sooner", earlier+60_000))

	newTrigger := oldTrigger + 1700
	spec := rcv.job("later", newTrigger)
	delete(spec, "id")
	r := s.Do(t, "PUT", jobPath(coll, "later"), spec, "If-Match", strconv.FormatInt(created.Version, 10))
	mustStatus(t, "PUT with If-Match", r, http.StatusOK)
	put := decodeJSON[Job](t, "PUT answer", r.Body)
	if put.TriggerTime != newTrigger || put.Version <= created.Version || put.Status != "scheduled" {
		t.Fatalf("PUT answered %+v, want trigger %d, version > %d, scheduled", put, newTrigger, created.Version)
	}

	// A stale If-Match: 412, and the job keeps the PUT's trigger and version.
	stale := rcv.job("later", oldTrigger)
	delete(stale, "id")
	mustError(t, "PUT with stale If-Match", s.Do(t, "PUT", jobPath(coll, "later"), stale, "If-Match", strconv.FormatInt(created.Version, 10)),
		http.StatusPreconditionFailed, "precondition_failed")
	mustError(t, "PUT with far If-Match", s.Do(t, "PUT", jobPath(coll, "later"), stale, "If-Match", strconv.FormatInt(put.Version+100, 10)),
		http.StatusPreconditionFailed, "precondition_failed")
	if j := s.mustGetJob(t, coll, "later"); j.TriggerTime != newTrigger || j.Version != put.Version {
		t.Fatalf("after rejected PUTs: %+v, want trigger %d version %d", j, newTrigger, put.Version)
	}

	// Bring "sooner" forward (PUT without If-Match is an unconditional upsert).
	specE := rcv.job("sooner", earlier)
	delete(specE, "id")
	r = s.Do(t, "PUT", jobPath(coll, "sooner"), specE)
	mustStatus(t, "PUT sooner", r, http.StatusOK)
	if j := decodeJSON[Job](t, "PUT answer", r.Body); j.TriggerTime != earlier || j.Version <= createdE.Version {
		t.Fatalf("PUT sooner answered %+v", j)
	}

	// Nothing at the old time.
	rcv.ExpectNone(t, coll, "later", time.Until(time.UnixMilli(oldTrigger))+700*time.Millisecond)

	ds := rcv.WaitN(t, coll, "sooner", 1, time.Until(time.UnixMilli(earlier))+lateBound+waitSlack)
	if msg := checkOnTime(ds[0], earlier); msg != "" {
		t.Error(msg)
	}
	ds = rcv.WaitN(t, coll, "later", 1, time.Until(time.UnixMilli(newTrigger))+lateBound+waitSlack)
	if msg := checkOnTime(ds[0], newTrigger); msg != "" {
		t.Error(msg)
	}
	if ds[0].Payload.TriggerTime != newTrigger || ds[0].Header.Get("Idempotency-Key") != idemKey(coll, "later", newTrigger) {
		t.Errorf("delivery carries trigger %d / key %q, want %d", ds[0].Payload.TriggerTime, ds[0].Header.Get("Idempotency-Key"), newTrigger)
	}
	rcv.ExpectNoMore(t, coll, "later", 1, 700*time.Millisecond)
	rcv.ExpectNoMore(t, coll, "sooner", 1, 0)
	s.waitStatus(t, coll, "later", "succeeded", 5*time.Second)

	// PUT of a new id creates it: 201. If-Match on a job that does not
	// exist is 412.
	fresh := rcv.job("fresh", nowMs()+3_600_000)
	delete(fresh, "id")
	mustError(t, "PUT new id with If-Match", s.Do(t, "PUT", jobPath(coll, "fresh"), fresh, "If-Match", "1"),
		http.StatusPreconditionFailed, "precondition_failed")
	if _, ok := s.getJob(t, coll, "fresh"); ok {
		t.Fatalf("a PUT answered 412 created the job")
	}
	mustStatus(t, "PUT new id", s.Do(t, "PUT", jobPath(coll, "fresh"), fresh), http.StatusCreated)
}
