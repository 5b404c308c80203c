package e2e

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// massLateBound bounds lateness in the 2000-job tests, where a whole
// second's worth of jobs fire on 2 busy cores.
const massLateBound = 5 * time.Second

// createMany creates n jobs named prefix-i in coll, the first ones with
// batch POSTs of batchSize and the last `singles` with concurrent single
// POSTs (which the server may coalesce). trigger(i) gives each trigger. It
// returns the trigger of every acknowledged id; any unacknowledged create
// fails the test.
func createMany(t *testing.T, s *Server, rcv *Receiver, coll, prefix string, n, batchSize, singles int, trigger func(i int) int64) map[string]int64 {
	t.Helper()
	acked := make(map[string]int64, n)
	var mu sync.Mutex
	nb := n - singles
	for start := 0; start < nb; start += batchSize {
		end := min(start+batchSize, nb)
		var jobs []map[string]any
		for i := start; i < end; i++ {
			jobs = append(jobs, rcv.job(fmt.Sprintf("%s-%05d", prefix, i), trigger(i)))
		}
		for i, res := range s.createBatch(t, coll, jobs) {
			if res.Status != http.StatusCreated {
				t.Fatalf("batch item %v: status %d %s", jobs[i]["id"], res.Status, res.Error)
			}
			acked[res.ID] = jobs[i]["trigger_time"].(int64)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan string, singles)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := nb + w; i < n; i += 8 {
				id := fmt.Sprintf("%s-%05d", prefix, i)
				r, err := s.TryDo("POST", jobsPath(coll), rcv.job(id, trigger(i)))
				if err != nil || r.Status != http.StatusCreated {
					errs <- fmt.Sprintf("POST %s: %v %v", id, r, err)
					continue
				}
				mu.Lock()
				acked[id] = trigger(i)
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	return acked
}

// TestKill9BeforeTriggersLosesNothing: ~2000 acknowledged creates survive a
// SIGKILL right after the last ack and a restart on the same data
// directory; each is delivered exactly once (no callback was in flight at
// the kill), none early.
func TestKill9BeforeTriggersLosesNothing(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	rcv := newReceiver(t)
	coll := s.newCollection(t, "kill", nil)

	const n = 2000
	base := nowMs() + 5000
	acked := createMany(t, s, rcv, coll, "k", n, 250, 100, func(i int) int64 { return base + int64(i/2) })
	if err := s.Kill(); err != nil {
		t.Fatalf("kill -9: %v", err)
	}
	killedAt := nowMs()
	if len(acked) != n {
		t.Fatalf("%d creates acknowledged, want %d", len(acked), n)
	}
	if killedAt >= base {
		t.Fatalf("creating %d jobs took until %d ms past the first trigger; the test needs the kill before any trigger", n, killedAt-base)
	}
	if got := rcv.All(); len(got) != 0 {
		t.Fatalf("deliveries before the first trigger: %s", describe(got))
	}
	t.Logf("killed %d ms after the last ack, %d ms before the first trigger", nowMs()-killedAt, base-killedAt)

	if err := s.Restart(); err != nil {
		t.Fatalf("restart: %v", err)
	}
	t.Logf("restarted and ready %d ms after the kill", nowMs()-killedAt)
	lastTrigger := base + n/2
	if got := rcv.WaitKeys(coll, n, time.Until(time.UnixMilli(lastTrigger))+massLateBound+waitSlack); got != n {
		t.Errorf("%d of %d acknowledged jobs delivered after kill -9 and restart", got, n)
		reportMissing(t, s, rcv, coll, acked, killedAt, "the kill")
		t.Logf("GET /v1/cluster: %s", s.Do(t, "GET", "/v1/cluster", nil).Body)
		t.FailNow()
	}
	time.Sleep(time.Second) // room for duplicates to show
	checkMass(t, rcv, coll, acked, true, true)

	// Every job is recorded as succeeded.
	deadline := time.Now().Add(10 * time.Second)
	for {
		done := s.listAll(t, coll, "status=succeeded")
		if len(done) == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs succeeded", len(done), n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestKill9WhileFiring: a SIGKILL while jobs are firing. Every acknowledged
// job is delivered at least once, none early; a repeat carries the same
// Idempotency-Key (and trigger_time) as the first delivery.
func TestKill9WhileFiring(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	rcv := newReceiver(t)
	coll := s.newCollection(t, "killfire", nil)

	const n = 2000
	base := nowMs() + 1500
	acked := createMany(t, s, rcv, coll, "f", n, 500, 40, func(i int) int64 { return base + int64(i) })
	if len(acked) != n {
		t.Fatalf("%d creates acknowledged, want %d", len(acked), n)
	}
	// Kill when about a third has been delivered.
	if got := rcv.WaitKeys(coll, n/3, time.Until(time.UnixMilli(base+n))+massLateBound+waitSlack); got < n/3 {
		t.Fatalf("only %d deliveries before the kill", got)
	}
	if err := s.Kill(); err != nil {
		t.Fatalf("kill -9: %v", err)
	}
	killedAt := nowMs()
	before := len(rcv.All())
	t.Logf("killed with %d deliveries made", before)
	if err := s.Restart(); err != nil {
		t.Fatalf("restart: %v", err)
	}
	t.Logf("restarted and ready %d ms after the kill", nowMs()-killedAt)
	if got := rcv.WaitKeys(coll, n, time.Until(time.UnixMilli(base+n))+massLateBound+waitSlack); got != n {
		t.Errorf("%d of %d acknowledged jobs delivered after a kill -9 while firing", got, n)
		reportMissing(t, s, rcv, coll, acked, killedAt, "the kill")
		t.Logf("GET /v1/cluster: %s", s.Do(t, "GET", "/v1/cluster", nil).Body)
		t.FailNow()
	}
	time.Sleep(time.Second)
	checkMass(t, rcv, coll, acked, false, false)

	deadline := time.Now().Add(10 * time.Second)
	for {
		done := s.listAll(t, coll, "status=succeeded")
		if len(done) == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs succeeded", len(done), n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// reportMissing describes the acknowledged jobs that were never delivered:
// their triggers relative to ref (a moment called refName) and what the
// server says of them.
func reportMissing(t *testing.T, s *Server, rcv *Receiver, coll string, acked map[string]int64, ref int64, refName string) {
	t.Helper()
	var missing []string
	for id := range acked {
		if len(rcv.Of(coll, id)) == 0 {
			missing = append(missing, id)
		}
	}
	sort.Strings(missing)
	minT, maxT := int64(math.MaxInt64), int64(math.MinInt64)
	statuses := map[string]int{}
	for i, id := range missing {
		tr := acked[id]
		minT, maxT = min(minT, tr), max(maxT, tr)
		j, ok := s.getJob(t, coll, id)
		st := "404"
		if ok {
			st = fmt.Sprintf("%s/attempts=%d", j.Status, j.Attempts)
		}
		statuses[st]++
		if i < 10 {
			t.Logf("never delivered: %s trigger %d (%+d ms from %s): GET says %s %+v", id, tr, tr-ref, refName, st, j)
		}
	}
	if len(missing) > 0 {
		t.Logf("%d never delivered; triggers from %+d to %+d ms from %s; server statuses %v",
			len(missing), minT-ref, maxT-ref, refName, statuses)
	}
}

// checkMass checks the deliveries of the acknowledged jobs: never early,
// payload and Idempotency-Key consistent, exactly once when exactlyOnce
// (else repeats must repeat the same key), within massLateBound when
// onTime.
func checkMass(t *testing.T, rcv *Receiver, coll string, acked map[string]int64, exactlyOnce, onTime bool) {
	t.Helper()
	dups, errs := 0, 0
	var lateness []time.Duration
	report := func(format string, args ...any) {
		errs++
		if errs <= 20 {
			t.Errorf(format, args...)
		}
	}
	for id, tr := range acked {
		ds := rcv.Of(coll, id)
		if len(ds) == 0 {
			report("%s: never delivered", id)
			continue
		}
		if len(ds) > 1 {
			dups++
			if exactlyOnce {
				report("%s: %d deliveries, want exactly 1%s", id, len(ds), describe(ds))
			}
		}
		lateness = append(lateness, ds[0].At.Sub(time.UnixMilli(tr)))
		want := idemKey(coll, id, tr)
		for _, d := range ds {
			if d.AtMs() < tr {
				report("%s delivered EARLY: at %d, trigger_time %d", id, d.AtMs(), tr)
			}
			if onTime && d.N == 1 && d.At.Sub(time.UnixMilli(tr)) > massLateBound {
				report("%s delivered %v late", id, d.At.Sub(time.UnixMilli(tr)))
			}
			if k := d.Header.Get("Idempotency-Key"); k != want {
				report("%s: delivery #%d has Idempotency-Key %q, want %q", id, d.N, k, want)
			}
			if d.Payload.TriggerTime != tr || d.Payload.ID != id || d.Payload.Collection != coll {
				report("%s: delivery #%d payload %s", id, d.N, d.Body)
			}
		}
	}
	if errs > 20 {
		t.Errorf("… and %d more errors", errs-20)
	}
	if stray := len(rcv.All()) - countOf(rcv, coll); stray != 0 { // nothing else uses this receiver
		t.Errorf("%d deliveries of jobs never created", stray)
	}
	sort.Slice(lateness, func(i, j int) bool { return lateness[i] < lateness[j] })
	if n := len(lateness); n > 0 {
		t.Logf("%d jobs, %d delivered more than once; first-delivery lateness p50 %v p99 %v max %v", len(acked), dups,
			lateness[n/2].Round(time.Millisecond), lateness[n*99/100].Round(time.Millisecond), lateness[n-1].Round(time.Millisecond))
	}
}

func countOf(rcv *Receiver, coll string) int {
	c := 0
	for _, d := range rcv.All() {
		if strings.HasPrefix(d.Key, coll+"/") {
			c++
		}
	}
	return c
}

// TestSigtermStopsCleanlyAndKeepsJobs: SIGTERM exits 0; a restart keeps the
// jobs, the collection and the route; jobs due later fire exactly once. A
// callback in flight at the SIGTERM is finished and recorded, not repeated.
func TestSigtermStopsCleanlyAndKeepsJobs(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	rcv := newReceiver(t)
	secret := newSecret(t)
	coll := s.newCollection(t, "term", map[string]any{
		"retry_policy": map[string]any{"max_attempts": 7}, "retention": "48h", "signing_secret": secret,
	})
	route := uniq("termroute")
	mustStatus(t, "PUT route", s.Do(t, "PUT", "/v1/routes/"+route, map[string]any{"webhook_url": rcv.URL + "/route"}), http.StatusCreated)

	far := map[string]any{"id": "far", "delay": "1h", "route": route, "meta": map[string]any{"keep": []any{1, "two", true}}}
	farJob := s.createJob(t, coll, far)

	// One callback is in flight when SIGTERM arrives: the receiver holds
	// it for a while.
	inflight := s.createJob(t, coll, rcv.job("inflight", nowMs()))
	rcv.Script(coll, "inflight", func(d *Delivery) Reply { return Reply{Delay: 700 * time.Millisecond} })
	rcv.WaitN(t, coll, "inflight", 1, lateBound+waitSlack)
	_ = inflight

	base := nowMs() + 5000
	var jobs []map[string]any
	for i := 0; i < 50; i++ {
		jobs = append(jobs, rcv.job(fmt.Sprintf("soon-%02d", i), base+int64(i*10)))
	}
	for _, r := range s.createBatch(t, coll, jobs) {
		if r.Status != http.StatusCreated {
			t.Fatalf("batch: %+v", r)
		}
	}

	start := time.Now()
	code, err := s.Stop(stopTimeout)
	if err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	if code != 0 {
		t.Fatalf("SIGTERM: exit code %d, want 0", code)
	}
	t.Logf("stopped in %v", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(s.LogTail(0, 1<<20), "stopped") {
		t.Errorf("no \"stopped\" in the log after SIGTERM")
	}
	if err := s.Restart(); err != nil {
		t.Fatalf("restart: %v", err)
	}

	j := s.mustGetJob(t, coll, "far")
	if j.TriggerTime != farJob.TriggerTime || j.Version != farJob.Version || j.Status != "scheduled" ||
		j.Route != route || string(j.Meta) != string(farJob.Meta) {
		t.Errorf("after restart far = %+v, want %+v", j, farJob)
	}
	mustStatus(t, "GET collection after restart", s.Do(t, "GET", "/v1/collections/"+coll, nil), http.StatusOK)
	rr := s.Do(t, "GET", "/v1/routes/"+route, nil)
	mustStatus(t, "GET route after restart", rr, http.StatusOK)
	if !strings.Contains(string(rr.Body), rcv.URL+"/route") {
		t.Errorf("route after restart: %s", rr.Body)
	}

	for i := range jobs {
		id := jobs[i]["id"].(string)
		ds := rcv.WaitN(t, coll, id, 1, time.Until(time.UnixMilli(base+500))+lateBound+waitSlack)
		if msg := checkOnTime(ds[0], jobs[i]["trigger_time"].(int64)); msg != "" {
			t.Error(msg)
		}
	}
	time.Sleep(500 * time.Millisecond)
	for i := range jobs {
		if ds := rcv.Of(coll, jobs[i]["id"].(string)); len(ds) != 1 {
			t.Errorf("%s: %d deliveries, want 1%s", jobs[i]["id"], len(ds), describe(ds))
		}
	}
	// The in-flight callback was answered 200 before the node stopped;
	// a clean stop is not a failure, so it must not be sent again.
	rcv.ExpectNoMore(t, coll, "inflight", 1, 0)
	if j := s.mustGetJob(t, coll, "inflight"); j.Status != "succeeded" || j.Attempts != 1 {
		t.Errorf("in-flight job after SIGTERM and restart: %+v, want succeeded after 1 attempt", j)
	}

	// And a second clean stop right away is clean too.
	if code, err := s.Stop(stopTimeout); err != nil || code != 0 {
		t.Fatalf("second SIGTERM: exit %d, %v", code, err)
	}
}

// TestStartupErrorsAreClean: a server that cannot start (HTTP port taken,
// data directory in use) exits non-zero with a message naming the cause,
// without a Go panic, and does not disturb the server that owns the data
// directory.
func TestStartupErrorsAreClean(t *testing.T) {
	t.Parallel()
	t.Run("http port taken", func(t *testing.T) {
		s, err := newServerIn(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		s.HTTPAddr = ln.Addr().String()
		expectStartFailure(t, s, "http")
	})
	t.Run("bind port taken", func(t *testing.T) {
		s, err := newServerIn(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		s.BindAddr = ln.Addr().String()
		expectStartFailure(t, s, "bind")
	})
	t.Run("data dir in use", func(t *testing.T) {
		owner := startServer(t)
		s, err := newServerIn(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		s.DataDir = owner.DataDir
		expectStartFailure(t, s, "in use")
		if err := owner.WaitReady(5 * time.Second); err != nil {
			t.Fatalf("the owner of the data directory is no longer ready: %v", err)
		}
	})
}

func expectStartFailure(t *testing.T, s *Server, mention string) {
	t.Helper()
	t.Cleanup(func() {
		if s.Running() {
			_ = s.Kill()
		}
	})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	code, err := s.Wait(20 * time.Second)
	if err != nil {
		t.Fatalf("the server did not exit: %v", err)
	}
	log := s.LogTail(0, 16<<10)
	if code == 0 {
		t.Errorf("exit code 0, want non-zero; log:\n%s", log)
	}
	if strings.Contains(log, "panic:") || strings.Contains(log, "goroutine ") {
		t.Errorf("BUG: the server panicked instead of reporting the error (exit code %d); log:\n%s", code, log)
	} else if !strings.Contains(strings.ToLower(log), mention) {
		t.Errorf("the error does not mention %q; log:\n%s", mention, log)
	}
}

// TestJobsDueDuringDowntimeFireAfterRestart: jobs whose trigger_time passes
// while the node is down (stopped cleanly or killed) are past due when it
// comes back, so they fire at once after the restart, each exactly once.
func TestJobsDueDuringDowntimeFireAfterRestart(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"SIGTERM", "SIGKILL"} {
		t.Run(how, func(t *testing.T) {
			s := startServer(t)
			rcv := newReceiver(t)
			coll := s.newCollection(t, "down", nil)
			base := nowMs() + 1000
			var jobs []map[string]any
			for i := 0; i < 60; i++ {
				jobs = append(jobs, rcv.job(fmt.Sprintf("d%02d", i), base+int64(i*10)))
			}
			for _, r := range s.createBatch(t, coll, jobs) {
				if r.Status != http.StatusCreated {
					t.Fatalf("batch: %+v", r)
				}
			}
			if how == "SIGKILL" {
				if err := s.Kill(); err != nil {
					t.Fatal(err)
				}
			} else if code, err := s.Stop(stopTimeout); err != nil || code != 0 {
				t.Fatalf("SIGTERM: exit %d, %v", code, err)
			}
			if got := rcv.All(); len(got) != 0 {
				t.Fatalf("deliveries before the stop: %s", describe(got))
			}
			// Stay down until every trigger has passed.
			time.Sleep(time.Until(time.UnixMilli(base + 600 + 200)))
			if err := s.Restart(); err != nil {
				t.Fatalf("restart: %v", err)
			}
			ready := time.Now()
			if got := rcv.WaitKeys(coll, len(jobs), lateBound+waitSlack); got != len(jobs) {
				acked := map[string]int64{}
				for _, j := range jobs {
					acked[j["id"].(string)] = j["trigger_time"].(int64)
				}
				t.Errorf("after %s and a restart, %d of %d jobs that fell due while the node was down were delivered", how, got, len(jobs))
				reportMissing(t, s, rcv, coll, acked, ready.UnixMilli(), "the restart")
				t.Logf("GET /v1/cluster: %s", s.Do(t, "GET", "/v1/cluster", nil).Body)
				t.FailNow()
			}
			time.Sleep(300 * time.Millisecond)
			for _, j := range jobs {
				ds := rcv.Of(coll, j["id"].(string))
				if len(ds) != 1 {
					t.Errorf("%s: %d deliveries, want 1%s", j["id"], len(ds), describe(ds))
				}
				if ds[0].At.Sub(ready) > lateBound {
					t.Errorf("%s: delivered %v after the restart, want at once", j["id"], ds[0].At.Sub(ready))
				}
			}
		})
	}
}
