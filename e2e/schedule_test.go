package e2e

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The real binary: PUT an every-1s schedule, two occurrences arrive with
// the occurrence id, the schedule field and the Idempotency-Key of their
// occurrence time, never early; GET shows the schedule's progress, the
// occurrences are listed by schedule, and DELETE stops it.
func TestScheduleOccurrencesArriveAndDeleteStops(t *testing.T) {
	t.Parallel()
	s := shared(t)
	rcv := newReceiver(t)
	coll := s.newCollection(t, "sched", nil)
	path := "/v1/collections/" + coll + "/schedules/tick"
	r := s.Do(t, "PUT", path, map[string]any{"every": "1s", "callback_url": rcv.URL + "/tick", "meta": map[string]any{"k": 1}})
	mustStatus(t, "PUT schedule", r, http.StatusCreated)
	put := decodeJSON[map[string]any](t, "PUT schedule", r.Body)
	if put["every"] != "1s" || put["next_fire_at"].(float64) == 0 {
		t.Fatalf("PUT schedule answered %s", r.Body)
	}
	mustStatus(t, "PUT schedule again", s.Do(t, "PUT", path, map[string]any{"every": "1s", "callback_url": rcv.URL + "/tick", "meta": map[string]any{"k": 1}}), http.StatusOK)

	if n := rcv.WaitKeys(coll, 2, 15*time.Second); n < 2 {
		t.Fatalf("%d occurrences arrived, want 2", n)
	}
	for _, d := range rcv.All() {
		if d.Payload.Collection != coll {
			continue
		}
		sched, atText, ok := strings.Cut(d.Payload.ID, "@")
		at, err := strconv.ParseInt(atText, 10, 64)
		if !ok || sched != "tick" || err != nil || at != d.Payload.TriggerTime {
			t.Fatalf("occurrence id %q, trigger_time %d", d.Payload.ID, d.Payload.TriggerTime)
		}
		var body map[string]json.RawMessage
		if err := json.Unmarshal(d.Body, &body); err != nil || string(body["schedule"]) != `"tick"` || string(body["meta"]) != `{"k":1}` {
			t.Fatalf("callback body %s", d.Body)
		}
		if k := d.Header.Get("Idempotency-Key"); k != idemKey(coll, d.Payload.ID, at) {
			t.Fatalf("Idempotency-Key %q", k)
		}
		if d.AtMs() < at {
			t.Fatalf("%s arrived %d ms early", d.Payload.ID, at-d.AtMs())
		}
		if d.N > 1 {
			t.Fatalf("%s delivered %d times", d.Payload.ID, d.N)
		}
	}

	g := decodeJSON[map[string]any](t, "GET schedule", s.Do(t, "GET", path, nil).Body)
	if g["last_fire_at"].(float64) == 0 || g["version"].(float64) != 1 || g["missed"].(float64) != 0 {
		t.Fatalf("GET schedule: %v", g)
	}
	// A PUT's answer is the schedule as a GET shows it, the latest
	// occurrence's status included (it was "" while GET had it).
	again := s.Do(t, "PUT", path, map[string]any{"every": "1s", "callback_url": rcv.URL + "/tick", "meta": map[string]any{"k": 1}})
	mustStatus(t, "PUT schedule after it fired", again, http.StatusOK)
	if st, _ := decodeJSON[map[string]any](t, "PUT schedule", again.Body)["last_status"].(string); st != "scheduled" && st != "succeeded" {
		t.Fatalf("PUT of a schedule that has fired answered last_status %q: %s", st, again.Body)
	}
	list := s.Do(t, "GET", jobsPath(coll)+"?schedule=tick", nil)
	mustStatus(t, "list occurrences", list, http.StatusOK)
	page := decodeJSON[struct {
		Jobs []map[string]any `json:"jobs"`
	}](t, "list occurrences", list.Body)
	if len(page.Jobs) < 2 || page.Jobs[0]["schedule"] != "tick" {
		t.Fatalf("occurrences listed: %s", list.Body)
	}
	one := s.Do(t, "GET", jobPath(coll, page.Jobs[0]["id"].(string)), nil)
	mustStatus(t, "GET an occurrence", one, http.StatusOK)

	mustStatus(t, "DELETE schedule", s.Do(t, "DELETE", path, nil), http.StatusNoContent)
	deleted := time.Now().UnixMilli()
	mustError(t, "GET deleted schedule", s.Do(t, "GET", path, nil), http.StatusNotFound, "not_found")
	// Nothing due after the 204 arrives: the occurrence created ahead of
	// its time (up to 750 ms) went with the schedule. One due before it
	// may still be on its way.
	time.Sleep(2500 * time.Millisecond) // a window in which nothing may arrive
	for _, d := range rcv.All() {
		if d.Payload.Collection == coll && d.Payload.TriggerTime > deleted {
			t.Fatalf("occurrence %s (due %d ms after the DELETE's 204) arrived", d.Payload.ID, d.Payload.TriggerTime-deleted)
		}
	}
}
