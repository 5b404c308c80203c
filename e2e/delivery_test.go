package e2e

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	cw "github.com/timemachine-db/timemachine/client/webhook"
	"github.com/timemachine-db/timemachine/internal/testutil"
)

// TestBatchedRouteEndToEnd: a route with "batch" gets its due jobs in
// signed batches of at most max_jobs, none before its trigger time, and
// the jobs succeed; GET echoes the delivery control.
func TestBatchedRouteEndToEnd(t *testing.T) {
	t.Parallel()
	s := shared(t)
	rcv := newReceiver(t)
	secret := newSecret(t)
	coll := s.newCollection(t, "batched", nil)
	route := uniq("bulk")
	r := s.Do(t, "PUT", "/v1/routes/"+route, map[string]any{
		"webhook_url":    rcv.URL + "/bulk",
		"signing_secret": secret,
		"rate_limit":     map[string]any{"per_second": 1000, "burst": 50},
		"max_in_flight":  4,
		"batch":          map[string]any{"max_jobs": 5, "max_wait": "100ms"},
	})
	mustStatus(t, "PUT route", r, http.StatusCreated)
	got := decodeJSON[map[string]any](t, "route", s.Do(t, "GET", "/v1/routes/"+route, nil).Body)
	if fmt.Sprint(got["rate_limit"]) != "map[burst:50 per_second:1000]" || fmt.Sprint(got["max_in_flight"]) != "4" ||
		fmt.Sprint(got["batch"]) != "map[max_jobs:5 max_wait:100ms]" {
		t.Fatalf("GET route: %v", got)
	}

	trigger := time.Now().Add(1500 * time.Millisecond).UnixMilli()
	const n = 12
	for i := 0; i < n; i++ {
		s.createJob(t, coll, map[string]any{"id": "b" + strconv.Itoa(i), "trigger_time": trigger, "route": route, "meta": map[string]any{"i": i}})
	}
	v, err := cw.NewVerifier(secret)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	count := func() int {
		for _, d := range rcv.All() {
			if d.Header.Get("X-Timemachine-Batch") == "" {
				continue
			}
			p, err := cw.Parse(d.Body, d.Header)
			if err != nil {
				t.Fatalf("batch body: %v", err)
			}
			for _, cb := range p.Callbacks {
				if cb.Collection == coll {
					seen[cb.ID] = true
				}
			}
		}
		return len(seen)
	}
	testutil.Eventually(t, 30*time.Second, "every job delivered in a batch", func() error {
		if c := count(); c != n {
			return fmt.Errorf("%d of %d", c, n)
		}
		return nil
	})
	batches := 0
	for _, d := range rcv.All() {
		if d.Path != "/bulk" {
			continue
		}
		batches++
		if err := v.Verify(d.Body, d.Header); err != nil {
			t.Fatalf("batch signature: %v", err)
		}
		p, _ := cw.Parse(d.Body, d.Header)
		if len(p.Callbacks) > 5 || d.Header.Get("X-Timemachine-Batch") != strconv.Itoa(len(p.Callbacks)) {
			t.Fatalf("batch of %d, header %q", len(p.Callbacks), d.Header.Get("X-Timemachine-Batch"))
		}
		if d.At.UnixMilli() < trigger {
			t.Fatalf("batch %v early", time.UnixMilli(trigger).Sub(d.At))
		}
		for _, cb := range p.Callbacks {
			if cb.IdempotencyKey != fmt.Sprintf("%s:%s:%d", coll, cb.ID, trigger) {
				t.Fatalf("idempotency key %q", cb.IdempotencyKey)
			}
		}
	}
	if batches < 3 || batches > n {
		t.Errorf("%d jobs in %d batches (max_jobs 5)", n, batches)
	}
	for i := 0; i < n; i++ {
		id := "b" + strconv.Itoa(i)
		testutil.Eventually(t, 10*time.Second, id+" succeeded", func() error {
			if j := s.mustGetJob(t, coll, id); j.Status != "succeeded" {
				return fmt.Errorf("%+v", j)
			}
			return nil
		})
	}
}

// TestPipelinedRouteEndToEnd: a route with "pipeline" gets each due job
// as its own signed callback, once, none before its trigger time, over
// pipelined connections (net/http's server answers them in order), and
// the jobs succeed; GET echoes the setting.
func TestPipelinedRouteEndToEnd(t *testing.T) {
	t.Parallel()
	s := shared(t)
	rcv := newReceiver(t)
	secret := newSecret(t)
	coll := s.newCollection(t, "pipelined", nil)
	route := uniq("piped")
	r := s.Do(t, "PUT", "/v1/routes/"+route, map[string]any{
		"webhook_url":    rcv.URL + "/piped",
		"signing_secret": secret,
		"pipeline":       true,
	})
	mustStatus(t, "PUT route", r, http.StatusCreated)
	got := decodeJSON[map[string]any](t, "route", s.Do(t, "GET", "/v1/routes/"+route, nil).Body)
	if got["pipeline"] != true {
		t.Fatalf("GET route: %v", got)
	}
	r = s.Do(t, "PUT", "/v1/routes/"+uniq("both"), map[string]any{
		"webhook_url": rcv.URL + "/x", "pipeline": true, "batch": map[string]any{"max_jobs": 5},
	})
	mustStatus(t, "PUT route with pipeline and batch", r, http.StatusBadRequest)

	trigger := time.Now().Add(1500 * time.Millisecond).UnixMilli()
	const n = 60
	for i := 0; i < n; i++ {
		s.createJob(t, coll, map[string]any{"id": "p" + strconv.Itoa(i), "trigger_time": trigger, "route": route, "meta": map[string]any{"i": i}})
	}
	v, err := cw.NewVerifier(secret)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "every job delivered", func() error {
		if c := len(rcv.All()); c < n {
			return fmt.Errorf("%d of %d", c, n)
		}
		return nil
	})
	seen := map[string]int{}
	for _, d := range rcv.All() {
		if d.Path != "/piped" || d.Header.Get("X-Timemachine-Batch") != "" {
			t.Fatalf("delivery to %s, batch header %q", d.Path, d.Header.Get("X-Timemachine-Batch"))
		}
		if err := v.Verify(d.Body, d.Header); err != nil {
			t.Fatalf("signature: %v", err)
		}
		if d.At.UnixMilli() < trigger {
			t.Fatalf("delivered %v early", time.UnixMilli(trigger).Sub(d.At))
		}
		p, err := cw.Parse(d.Body, d.Header)
		if err != nil || len(p.Callbacks) != 1 {
			t.Fatalf("callback body: %v, %d callbacks", err, len(p.Callbacks))
		}
		seen[p.Callbacks[0].ID]++
	}
	for i := 0; i < n; i++ {
		id := "p" + strconv.Itoa(i)
		if seen[id] != 1 {
			t.Fatalf("%s delivered %d times", id, seen[id])
		}
		testutil.Eventually(t, 10*time.Second, id+" succeeded", func() error {
			if j := s.mustGetJob(t, coll, id); j.Status != "succeeded" {
				return fmt.Errorf("%+v", j)
			}
			return nil
		})
	}
	// The node's pipelining counters saw them (other tests of the shared
	// server may add to them, none take away).
	m := s.Do(t, "GET", "/metrics", nil)
	mustStatus(t, "GET /metrics", m, http.StatusOK)
	pm := map[string]float64{}
	for _, line := range strings.Split(string(m.Body), "\n") {
		if f := strings.Fields(line); len(f) == 2 && strings.HasPrefix(f[0], "timemachine_callback_pipeline_") {
			pm[f[0]], _ = strconv.ParseFloat(f[1], 64)
		}
	}
	if pm["timemachine_callback_pipeline_requests_total"] < n || pm["timemachine_callback_pipeline_writes_total"] < 1 ||
		pm["timemachine_callback_pipeline_connections_opened_total"] < 1 {
		t.Fatalf("pipeline metrics %v", pm)
	}
}
