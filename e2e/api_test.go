package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/internal/testutil"
)

var idRe = regexp.MustCompile(`^[A-Za-z0-9._:@~=+-]{1,255}$`)

// TestIdempotentCreate: POST of an existing id with the same spec answers
// 200 with the existing job; a different spec is 409 and changes nothing.
func TestIdempotentCreate(t *testing.T) {
	t.Parallel()
	s := shared(t)
	rcv := newReceiver(t)
	coll := s.newCollection(t, "idem", nil)

	trigger := nowMs() + 3_600_000
	spec := map[string]any{"id": "once", "trigger_time": trigger, "callback_url": rcv.URL + "/h", "meta": map[string]any{"n": 1},
		"retry_policy": policy(3, "2s", 2)}
	first := s.createJob(t, coll, spec)
	if first.Version == 0 || first.CreatedAt == 0 || first.Status != "scheduled" || first.Attempts != 0 {
		t.Fatalf("created %+v", first)
	}
	r := s.Do(t, "POST", jobsPath(coll), spec)
	mustStatus(t, "POST the same spec again", r, http.StatusOK)
	again := decodeJSON[Job](t, "repeat", r.Body)
	if again.ID != "once" || again.Version != first.Version || again.CreatedAt != first.CreatedAt || again.TriggerTime != trigger {
		t.Errorf("repeat answered %+v, want the existing job %+v", again, first)
	}

	for name, change := range map[string][2]any{
		"trigger_time": {"trigger_time", trigger + 1},
		"meta":         {"meta", map[string]any{"n": 2}},
		"callback_url": {"callback_url", rcv.URL + "/other"},
		"retry_policy": {"retry_policy", policy(4, "2s", 2)},
	} {
		diff := map[string]any{}
		for k, v := range spec {
			diff[k] = v
		}
		diff[change[0].(string)] = change[1]
		mustError(t, "POST with a different "+name, s.Do(t, "POST", jobsPath(coll), diff), http.StatusConflict, "conflict")
	}
	if j := s.mustGetJob(t, coll, "once"); j.Version != first.Version || j.TriggerTime != trigger || !sameJSON(j.Meta, []byte(`{"n":1}`)) {
		t.Errorf("after the conflicts: %+v, want unchanged %+v", j, first)
	}

	// The same in a batch: 200 for the same spec, 409 for another, 201 for new.
	diff := map[string]any{}
	for k, v := range spec {
		diff[k] = v
	}
	diff["trigger_time"] = trigger + 5
	res := s.createBatch(t, coll, []map[string]any{spec, diff, rcv.job("batch-new", trigger)})
	for i, want := range []int{200, 409, 201} {
		if res[i].Status != want {
			t.Errorf("batch item %d: status %d, want %d (%s)", i, res[i].Status, want, res[i].Error)
		}
	}
	if res[0].Job == nil || res[0].Job.Version != first.Version {
		t.Errorf("batch repeat: job %+v", res[0].Job)
	}

	// Without an id, POST generates one (valid and distinct each time).
	anon := map[string]any{"trigger_time": trigger, "callback_url": rcv.URL + "/h"}
	a := s.createJob(t, coll, anon)
	b := s.createJob(t, coll, anon)
	if !idRe.MatchString(a.ID) || !idRe.MatchString(b.ID) || a.ID == b.ID {
		t.Errorf("generated ids %q and %q", a.ID, b.ID)
	}
	s.mustGetJob(t, coll, a.ID)
}

// TestCollectionsAndRoutes: PUT is 201 then 200; GET never shows secrets;
// deleting a collection removes its jobs (a scheduled one never fires);
// default cannot be deleted.
func TestCollectionsAndRoutes(t *testing.T) {
	t.Parallel()
	s := shared(t)
	rcv := newReceiver(t)

	name := uniq("cfg")
	secret := newSecret(t)
	cfg := map[string]any{"retry_policy": policy(3, "2s", 1.5), "callback_timeout": "5s", "retention": "1h", "signing_secret": secret}
	mustStatus(t, "PUT new collection", s.Do(t, "PUT", "/v1/collections/"+name, cfg), http.StatusCreated)
	cfg["retention"] = "2h"
	mustStatus(t, "PUT it again", s.Do(t, "PUT", "/v1/collections/"+name, cfg), http.StatusOK)
	g := s.Do(t, "GET", "/v1/collections/"+name, nil)
	mustStatus(t, "GET collection", g, http.StatusOK)
	if bytes.Contains(g.Body, []byte(strings.TrimPrefix(secret, "whsec_"))) {
		t.Errorf("GET collection echoes the secret: %s", g.Body)
	}
	var got struct {
		RetryPolicy     map[string]any `json:"retry_policy"`
		CallbackTimeout string         `json:"callback_timeout"`
		Retention       string         `json:"retention"`
	}
	if err := json.Unmarshal(g.Body, &got); err != nil {
		t.Fatalf("GET collection: %s: %v", g.Body, err)
	}
	if d, err := time.ParseDuration(got.Retention); err != nil || d != 2*time.Hour {
		t.Errorf("retention %q after the update, want 2h", got.Retention)
	}
	if d, err := time.ParseDuration(got.CallbackTimeout); err != nil || d != 5*time.Second {
		t.Errorf("callback_timeout %q, want 5s", got.CallbackTimeout)
	}
	if got.RetryPolicy["max_attempts"] != float64(3) {
		t.Errorf("retry_policy %v, want max_attempts 3", got.RetryPolicy)
	}
	l := s.Do(t, "GET", "/v1/collections", nil)
	mustStatus(t, "GET /v1/collections", l, http.StatusOK)
	if !bytes.Contains(l.Body, []byte(`"`+name+`"`)) || !bytes.Contains(l.Body, []byte(`"default"`)) {
		t.Errorf("GET /v1/collections does not list %s and default: %.500s", name, l.Body)
	}
	if bytes.Contains(l.Body, []byte(strings.TrimPrefix(secret, "whsec_"))) {
		t.Errorf("GET /v1/collections echoes a secret")
	}

	// A job in it, due soon, and one far away; then delete the collection.
	trigger := nowMs() + 1000
	s.createJob(t, name, rcv.job("gone-soon", trigger))
	s.createJob(t, name, rcv.job("gone-later", nowMs()+3_600_000))
	r := s.Do(t, "DELETE", "/v1/collections/"+name, nil)
	if r.Status != http.StatusNoContent && r.Status != http.StatusOK {
		t.Fatalf("DELETE collection: %s", r)
	}
	mustError(t, "GET deleted collection", s.Do(t, "GET", "/v1/collections/"+name, nil), http.StatusNotFound, "not_found")
	mustError(t, "GET job of deleted collection", s.Do(t, "GET", jobPath(name, "gone-later"), nil), http.StatusNotFound, "not_found")
	mustError(t, "POST to deleted collection", s.Do(t, "POST", jobsPath(name), rcv.job("x", trigger)), http.StatusNotFound, "not_found")
	mustError(t, "DELETE it again", s.Do(t, "DELETE", "/v1/collections/"+name, nil), http.StatusNotFound, "not_found")
	rcv.ExpectNone(t, name, "gone-soon", time.Until(time.UnixMilli(trigger))+quietWindow)
	// Made again, it is empty.
	mustStatus(t, "PUT the collection again", s.Do(t, "PUT", "/v1/collections/"+name, map[string]any{}), http.StatusCreated)
	if jobs := s.listAll(t, name, ""); len(jobs) != 0 {
		t.Errorf("re-created collection lists %d old jobs", len(jobs))
	}
	if _, found := s.getJob(t, name, "gone-later"); found {
		t.Errorf("a job of the deleted collection came back with it")
	}

	// default always exists and cannot be deleted.
	r = s.Do(t, "DELETE", "/v1/collections/default", nil)
	if r.Status < 400 || r.Status > 499 {
		t.Errorf("DELETE default: %s, want 4xx", r)
	} else if msg := checkError(r, r.Status, ""); msg != "" {
		t.Errorf("DELETE default: %s", msg)
	}
	mustStatus(t, "GET default", s.Do(t, "GET", "/v1/collections/default", nil), http.StatusOK)

	// Routes.
	route := uniq("rt")
	rsecret := newSecret(t)
	rbody := map[string]any{"webhook_url": rcv.URL + "/a", "headers": map[string]string{"X-A": "1"}, "signing_secret": rsecret, "timeout": "3s"}
	mustStatus(t, "PUT new route", s.Do(t, "PUT", "/v1/routes/"+route, rbody), http.StatusCreated)
	rbody["webhook_url"] = rcv.URL + "/b"
	mustStatus(t, "PUT route again", s.Do(t, "PUT", "/v1/routes/"+route, rbody), http.StatusOK)
	g = s.Do(t, "GET", "/v1/routes/"+route, nil)
	mustStatus(t, "GET route", g, http.StatusOK)
	if bytes.Contains(g.Body, []byte(strings.TrimPrefix(rsecret, "whsec_"))) {
		t.Errorf("GET route echoes the secret: %s", g.Body)
	}
	rv := decodeJSON[struct {
		WebhookURL string            `json:"webhook_url"`
		Headers    map[string]string `json:"headers"`
	}](t, "route", g.Body)
	if rv.WebhookURL != rcv.URL+"/b" || rv.Headers["X-A"] != "1" {
		t.Errorf("GET route: %s", g.Body)
	}
	l = s.Do(t, "GET", "/v1/routes", nil)
	mustStatus(t, "GET /v1/routes", l, http.StatusOK)
	if !bytes.Contains(l.Body, []byte(`"`+route+`"`)) || bytes.Contains(l.Body, []byte(strings.TrimPrefix(rsecret, "whsec_"))) {
		t.Errorf("GET /v1/routes: %.500s", l.Body)
	}
	// A routed job without a timeout of its own shows (and is delivered
	// with) its route's, before its collection's (the default 10s here).
	rj := s.createJob(t, name, map[string]any{"id": "routed", "delay": "1h", "route": route})
	if rj.CallbackTimeout != "3s" {
		t.Errorf("routed job's effective callback_timeout %q, want the route's 3s", rj.CallbackTimeout)
	}
	mustStatus(t, "DELETE the routed job", s.Do(t, "DELETE", jobPath(name, "routed"), nil), http.StatusNoContent)
	r = s.Do(t, "DELETE", "/v1/routes/"+route, nil)
	if r.Status != http.StatusNoContent && r.Status != http.StatusOK {
		t.Errorf("DELETE route: %s", r)
	}
	mustError(t, "GET deleted route", s.Do(t, "GET", "/v1/routes/"+route, nil), http.StatusNotFound, "not_found")
	mustError(t, "DELETE route again", s.Do(t, "DELETE", "/v1/routes/"+route, nil), http.StatusNotFound, "not_found")
	mustError(t, "job naming the deleted route", s.Do(t, "POST", jobsPath("default"),
		map[string]any{"id": uniq("deadroute"), "delay": "1h", "route": route}), http.StatusNotFound, "not_found")
}

// TestListJobs: ordered by (trigger_time, id), filtered by status and
// trigger range, paged with cursors.
func TestListJobs(t *testing.T) {
	t.Parallel()
	s := shared(t)
	rcv := newReceiver(t)
	coll := s.newCollection(t, "list", nil)
	base := nowMs() + 3_600_000
	var jobs []map[string]any
	for i := 0; i < 25; i++ {
		// Pairs share a trigger time, to check the id tie-break.
		jobs = append(jobs, rcv.job("l"+strconv.Itoa(24-i), base+int64(i/2)*1000))
	}
	s.createBatch(t, coll, jobs)
	all := s.listAll(t, coll, "")
	if len(all) != 25 {
		t.Fatalf("listed %d, want 25", len(all))
	}
	for i := 1; i < len(all); i++ {
		p, c := all[i-1], all[i]
		if p.TriggerTime > c.TriggerTime || (p.TriggerTime == c.TriggerTime && p.ID >= c.ID) {
			t.Errorf("list not ordered by (trigger_time, id): %s@%d before %s@%d", p.ID, p.TriggerTime, c.ID, c.TriggerTime)
		}
	}
	// Pages of 7 give the same sequence.
	var paged []Job
	cursor := ""
	for page := 0; page < 10; page++ {
		q := "?limit=7"
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		r := s.Do(t, "GET", jobsPath(coll)+q, nil)
		mustStatus(t, "list page", r, http.StatusOK)
		out := decodeJSON[struct {
			Jobs       []Job  `json:"jobs"`
			NextCursor string `json:"next_cursor"`
		}](t, "page", r.Body)
		if len(out.Jobs) > 7 {
			t.Fatalf("page of %d with limit 7", len(out.Jobs))
		}
		paged = append(paged, out.Jobs...)
		if out.NextCursor == "" {
			break
		}
		cursor = out.NextCursor
	}
	if len(paged) != len(all) {
		t.Fatalf("paging gave %d jobs, want %d", len(paged), len(all))
	}
	for i := range all {
		if paged[i].ID != all[i].ID {
			t.Fatalf("paging order differs at %d: %s vs %s", i, paged[i].ID, all[i].ID)
		}
	}
	// from is inclusive, to exclusive.
	ranged := s.listAll(t, coll, "from="+strconv.FormatInt(base+2000, 10)+"&to="+strconv.FormatInt(base+4000, 10))
	if len(ranged) != 4 {
		t.Errorf("from/to listed %d jobs, want 4", len(ranged))
	}
	for _, j := range ranged {
		if j.TriggerTime < base+2000 || j.TriggerTime >= base+4000 {
			t.Errorf("from/to listed %s at %d", j.ID, j.TriggerTime)
		}
	}
	if n := len(s.listAll(t, coll, "status=scheduled")); n != 25 {
		t.Errorf("status=scheduled: %d, want 25", n)
	}
	if n := len(s.listAll(t, coll, "status=failed")); n != 0 {
		t.Errorf("status=failed: %d, want 0", n)
	}
	mustError(t, "list with a bad status", s.Do(t, "GET", jobsPath(coll)+"?status=done", nil), 400, "invalid_argument")
	mustError(t, "list with a bad limit", s.Do(t, "GET", jobsPath(coll)+"?limit=0", nil), 400, "invalid_argument")
	mustError(t, "list with a bad cursor", s.Do(t, "GET", jobsPath(coll)+"?cursor=%%%", nil), 400, "invalid_argument")
	mustError(t, "list an unknown collection", s.Do(t, "GET", jobsPath(uniq("nolist")), nil), 404, "not_found")
}

// TestHealthClusterMetrics: /healthz, /readyz, /v1/cluster of a single
// node with 12 slots, Prometheus /metrics.
func TestHealthClusterMetrics(t *testing.T) {
	t.Parallel()
	s := shared(t)
	mustStatus(t, "GET /healthz", s.Do(t, "GET", "/healthz", nil), http.StatusOK)
	mustStatus(t, "GET /readyz", s.Do(t, "GET", "/readyz", nil), http.StatusOK)

	r := s.Do(t, "GET", "/v1/cluster", nil)
	mustStatus(t, "GET /v1/cluster", r, http.StatusOK)
	c := decodeJSON[struct {
		SlotCount         int `json:"slot_count"`
		ReplicationFactor int `json:"replication_factor"`
		Nodes             []struct {
			ID       string `json:"id"`
			HTTPAddr string `json:"http_addr"`
			Status   string `json:"status"`
			SlotsLed *int   `json:"slots_led"`
			Replicas *int   `json:"replicas"`
		} `json:"nodes"`
		Slots []struct {
			Slot     *int     `json:"slot"`
			Leader   string   `json:"leader"`
			Replicas []string `json:"replicas"`
			State    string   `json:"state"`
		} `json:"slots"`
	}](t, "cluster", r.Body)
	if c.SlotCount != 12 || c.ReplicationFactor != 1 {
		t.Errorf("slot_count %d replication_factor %d, want 12 and 1", c.SlotCount, c.ReplicationFactor)
	}
	if len(c.Nodes) != 1 {
		t.Fatalf("%d nodes, want 1: %s", len(c.Nodes), r.Body)
	}
	n := c.Nodes[0]
	if n.ID == "" || n.HTTPAddr != s.HTTPAddr || n.Status == "" || n.SlotsLed == nil || *n.SlotsLed != 12 || n.Replicas == nil || *n.Replicas != 12 {
		t.Errorf("node %+v, want id, http_addr %s, status, slots_led 12, replicas 12", n, s.HTTPAddr)
	}
	if len(c.Slots) != 12 {
		t.Fatalf("%d slots, want 12", len(c.Slots))
	}
	for i, sl := range c.Slots {
		if sl.Slot == nil || *sl.Slot != i || sl.Leader != n.ID || len(sl.Replicas) != 1 || sl.Replicas[0] != n.ID || sl.State == "" {
			t.Errorf("slot %d: %+v", i, sl)
		}
	}

	coll := s.newCollection(t, "metrics", nil)
	s.createJob(t, coll, map[string]any{"id": "m", "delay": "1h", "callback_url": "http://127.0.0.1:9/x"})
	m := s.Do(t, "GET", "/metrics", nil)
	mustStatus(t, "GET /metrics", m, http.StatusOK)
	if ct := m.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") && !strings.HasPrefix(ct, "application/openmetrics-text") {
		t.Errorf("/metrics Content-Type %q", ct)
	}
	body := string(m.Body)
	if !strings.Contains(body, "# TYPE timemachine_jobs_created_total counter") {
		t.Errorf("/metrics has no counter timemachine_jobs_created_total")
	}
	found := false
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "timemachine_jobs_created_total") {
			f := strings.Fields(line)
			if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil && v >= 1 {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("timemachine_jobs_created_total is not >= 1 after a create")
	}

	// Unknown paths and methods answer with the error body too.
	r = s.Do(t, "GET", "/v1/nothing-here", nil)
	if msg := checkError(r, 404, ""); msg != "" {
		t.Errorf("unknown path: %s", msg)
	}
	r = s.Do(t, "PATCH", jobPath(coll, "m"), `{}`)
	if r.Status != 405 && r.Status != 404 && r.Status != 400 {
		t.Errorf("PATCH a job: %s, want 405", r)
	} else if msg := checkError(r, r.Status, ""); msg != "" {
		t.Errorf("PATCH a job: %s", msg)
	}
}

// TestFinishedJobsDisappearAfterRetention: a finished job stays readable
// for its collection's retention, then disappears (API.md §3) from GET and
// from the list at once, not only when the slot leader's upkeep (every
// 30 s) removes it.
func TestFinishedJobsDisappearAfterRetention(t *testing.T) {
	t.Parallel()
	s := shared(t)
	rcv := newReceiver(t)
	coll := s.newCollection(t, "ret", map[string]any{"retention": "3s"})
	s.createJob(t, coll, map[string]any{"id": "short", "delay": "50ms", "callback_url": rcv.URL + "/hook"})
	j := s.waitStatus(t, coll, "short", "succeeded", 10*time.Second)
	if len(s.listAll(t, coll, "")) != 1 {
		t.Fatal("the succeeded job is not listed within its retention")
	}
	gone := time.UnixMilli(j.FinishedAt).Add(3 * time.Second)
	err := testutil.Poll(10*time.Second, func() error {
		if _, ok := s.getJob(t, coll, "short"); ok {
			return errors.New("still readable")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("finished at %d, retention 3s: %v", j.FinishedAt, err)
	}
	if late := time.Since(gone); late > 2*time.Second {
		t.Errorf("readable until %v after its retention ended", late)
	}
	if time.Now().Before(gone) {
		t.Errorf("gone %v before its retention ended", time.Until(gone))
	}
	if n := len(s.listAll(t, coll, "")); n != 0 {
		t.Errorf("listed %d jobs after the retention", n)
	}
}

// A write that names a finished job past its retention finds it gone, as
// reads do, before the slot leader's upkeep pass (every 30 s) removes it:
// a POST of the id creates a new job (201, not 200 or 409 with the old
// one), a DELETE answers 404, a PUT with If-Match 412 and a PUT without
// creates, and a redrive by id sends nothing.
func TestWritesFindExpiredJobsGone(t *testing.T) {
	t.Parallel()
	s := shared(t)
	rcv := newReceiver(t)
	coll := s.newCollection(t, "retw", map[string]any{"retention": "2s"})
	ids := []string{"again", "changed", "del", "putif", "put"}
	for _, id := range ids {
		s.createJob(t, coll, map[string]any{"id": id, "delay": "10ms", "callback_url": rcv.URL + "/hook"})
	}
	rcv.Script(coll, "dead", func(*Delivery) Reply { return Reply{Status: http.StatusInternalServerError} })
	s.createJob(t, coll, map[string]any{"id": "dead", "delay": "10ms", "callback_url": rcv.URL + "/hook",
		"retry_policy": map[string]any{"max_attempts": 1}})
	var last int64
	for _, id := range ids {
		last = max(last, s.waitStatus(t, coll, id, "succeeded", 10*time.Second).FinishedAt)
	}
	last = max(last, s.waitStatus(t, coll, "dead", "failed", 10*time.Second).FinishedAt)
	// An hourly schedule starting now fires once; that occurrence's status
	// is the schedule's last_status until the occurrence expires too.
	sched := "/v1/collections/" + coll + "/schedules/hourly"
	mustStatus(t, "PUT schedule", s.Do(t, "PUT", sched, map[string]any{"every": "1h", "callback_url": rcv.URL + "/hook",
		"start_at": time.Now().Add(200 * time.Millisecond).UnixMilli()}), http.StatusCreated)
	var fired int64
	if err := testutil.Poll(10*time.Second, func() error {
		g := decodeJSON[map[string]any](t, "GET schedule", s.Do(t, "GET", sched, nil).Body)
		if g["last_status"] != "succeeded" {
			return fmt.Errorf("last_status %v", g["last_status"])
		}
		fired = int64(g["last_fire_at"].(float64))
		return nil
	}); err != nil {
		t.Fatalf("the schedule's first occurrence: %v", err)
	}
	last = max(last, s.mustGetJob(t, coll, "hourly@"+strconv.FormatInt(fired, 10)).FinishedAt)
	// Wait out the retention of every one of them (reads go first).
	err := testutil.Poll(10*time.Second, func() error {
		if time.Now().UnixMilli() <= last+2000 {
			return errors.New("retention not over")
		}
		for _, id := range append(ids, "dead") {
			if _, ok := s.getJob(t, coll, id); ok {
				return fmt.Errorf("%s still readable", id)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The same spec, and another one: both are new jobs.
	for _, id := range []string{"again", "changed"} {
		delay := "1h"
		if id == "again" {
			delay = "10ms"
		}
		r := s.Do(t, "POST", "/v1/collections/"+coll+"/jobs", map[string]any{"id": id, "delay": delay, "callback_url": rcv.URL + "/hook"})
		var j Job
		if r.Status != http.StatusCreated || json.Unmarshal(r.Body, &j) != nil || j.Version != 1 || j.Status != "scheduled" || j.Attempts != 0 {
			t.Errorf("POST %s over its expired job: %v, want 201 with a new job", id, r)
		}
	}
	if r := s.Do(t, "DELETE", "/v1/collections/"+coll+"/jobs/del", nil); r.Status != http.StatusNotFound {
		t.Errorf("DELETE of an expired job: %v, want 404", r)
	}
	body := map[string]any{"trigger_time": time.Now().Add(time.Hour).UnixMilli(), "callback_url": rcv.URL + "/hook"}
	if r := s.Do(t, "PUT", "/v1/collections/"+coll+"/jobs/putif", body, "If-Match", "2"); r.Status != http.StatusPreconditionFailed {
		t.Errorf("PUT If-Match: 2 of an expired job: %v, want 412", r)
	}
	if r := s.Do(t, "PUT", "/v1/collections/"+coll+"/jobs/put", body); r.Status != http.StatusCreated {
		t.Errorf("PUT of an expired job: %v, want 201", r)
	}
	r := s.Do(t, "POST", "/v1/collections/"+coll+"/redrive", map[string]any{"ids": []string{"dead"}})
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"redriven":0`) {
		t.Errorf("redrive of an expired dead letter: %v, want redriven 0", r)
	}
	if _, ok := s.getJob(t, coll, "dead"); ok {
		t.Error("the expired dead letter is readable again after a redrive")
	}
	if g := decodeJSON[map[string]any](t, "GET schedule", s.Do(t, "GET", sched, nil).Body); g["last_status"] != "" {
		t.Errorf("the schedule's last_status reads its expired occurrence: %v", g["last_status"])
	}
	// The re-created job is delivered as a job of its own.
	s.waitStatus(t, coll, "again", "succeeded", 10*time.Second)
}
