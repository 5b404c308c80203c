package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// quick is a config that finishes in well under a second against a fake.
func quick(addrs ...string) Config {
	return Config{
		Addrs:       addrs,
		Jobs:        60,
		Window:      300 * time.Millisecond,
		Lead:        300 * time.Millisecond,
		Concurrency: 8,
		Settle:      20 * time.Millisecond,
		WaitTimeout: 5 * time.Second,
	}
}

func run(t *testing.T, cfg Config) *Report {
	t.Helper()
	var out bytes.Buffer
	rep, err := Run(context.Background(), cfg, &out)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	t.Logf("\n%s", rep)
	return rep
}

func TestRunSingleJobsOverWindow(t *testing.T) {
	f := newFakeTM(t, nil)
	cfg := quick(f.addr())
	cfg.IDPrefix = "w1"
	rep := run(t, cfg)

	want := Report{JobsCreated: 60, Fired: 60, Deliveries: 60}
	if rep.JobsCreated != want.JobsCreated || rep.Fired != want.Fired || rep.Deliveries != want.Deliveries ||
		rep.Missing != 0 || rep.Duplicates != 0 || rep.Early != 0 || rep.CreatedLate != 0 ||
		rep.TriggerMismatch != 0 || rep.Foreign != 0 || rep.TimedOut || len(rep.CreateErrors) != 0 {
		t.Errorf("report = %+v", rep)
	}
	if rep.Mode != "window" || rep.Batch != 1 || rep.Concurrency != 8 || rep.Collection != "bench" {
		t.Errorf("echoed config = %+v", rep)
	}
	if rep.Lateness.Samples != 60 || rep.Lateness.Min < 0 || rep.Lateness.P50 > rep.Lateness.P99 || rep.Lateness.P99 > rep.Lateness.Max {
		t.Errorf("lateness = %+v", rep.Lateness)
	}
	if rep.CreateRate <= 0 || rep.CreateSeconds <= 0 || rep.FireRate <= 0 || rep.FireSpanSeconds < 0.3 {
		t.Errorf("rates: create %.0f/s over %.3fs, fire %.0f/s over %.3fs", rep.CreateRate, rep.CreateSeconds, rep.FireRate, rep.FireSpanSeconds)
	}
	// The 300 ms window is one (partial) second holding every job.
	if len(rep.PerSecond) != 1 || rep.PerSecond[0].N != 60 || rep.PerSecond[0].P99 > rep.Lateness.Max {
		t.Errorf("per second = %+v", rep.PerSecond)
	}
	if s := rep.String(); !strings.Contains(s, "lateness p99 ms by second of the window: ") {
		t.Errorf("String() has no per-second line:\n%s", s)
	}
	// Fire rate is measured, not estimated: fired / span.
	if got := float64(rep.Fired) / rep.FireSpanSeconds; got != rep.FireRate {
		t.Errorf("fire rate %v != fired/span %v", rep.FireRate, got)
	}

	jobs, singles, batches, colls := f.snapshot()
	if singles != 60 || len(batches) != 0 {
		t.Errorf("fake saw %d single and %d batch POSTs", singles, len(batches))
	}
	var coll map[string]any
	if err := json.Unmarshal([]byte(colls["bench"]), &coll); err != nil || coll["retention"] != "1h" {
		t.Errorf("collection PUT body = %q", colls["bench"])
	}
	first := jobs["w1-0"].TriggerTime
	for i := range 60 {
		j, ok := jobs["w1-"+itoa(i)]
		if !ok {
			t.Fatalf("job w1-%d not created", i)
		}
		// Evenly spread, exact ms: job i at first + i*300/59.
		if want := first + int64(i)*300/59; j.TriggerTime != want {
			t.Errorf("job %d trigger %d, want %d", i, j.TriggerTime, want)
		}
		if j.CallbackURL != "http://"+rep.ReceiverAddr+"/hook" {
			t.Errorf("callback_url = %q", j.CallbackURL)
		}
		if string(j.Meta) != `{"p":"`+strings.Repeat("x", 16)+`"}` {
			t.Errorf("meta = %s", j.Meta)
		}
	}
	if s := rep.String(); !strings.Contains(s, "60 fired, 0 missing, 0 duplicates, 0 early") {
		t.Errorf("String() =\n%s", s)
	}
}

// TestRunThroughPipelinedRoute: --pipeline alone (no limit) still makes
// the run deliver through a route, created with pipeline: true and the
// receiver as its webhook_url, named by every job, deleted at the end.
func TestRunThroughPipelinedRoute(t *testing.T) {
	f := newFakeTM(t, nil)
	cfg := quick(f.addr())
	cfg.IDPrefix = "p1"
	cfg.Pipeline = true
	rep := run(t, cfg)
	if rep.JobsCreated != 60 || rep.Fired != 60 || rep.Missing != 0 || rep.Route != "bench-p1" {
		t.Errorf("report = %+v", rep)
	}
	f.mu.Lock()
	put, left := f.routePuts["bench-p1"], len(f.routes)
	f.mu.Unlock()
	var rt map[string]any
	if err := json.Unmarshal([]byte(put), &rt); err != nil || rt["pipeline"] != true || rt["webhook_url"] != "http://"+rep.ReceiverAddr+"/hook" {
		t.Errorf("route PUT body = %q", put)
	}
	if _, ok := rt["max_in_flight"]; ok {
		t.Errorf("route PUT body = %q: a pipelined run sets no in-flight cap", put)
	}
	if left != 0 {
		t.Errorf("%d routes left after the run", left)
	}
	jobs, _, _, _ := f.snapshot()
	for id, j := range jobs {
		if j.Route != "bench-p1" {
			t.Fatalf("job %s names route %q", id, j.Route)
		}
	}
}

func TestRunBatchesAtOnce(t *testing.T) {
	f := newFakeTM(t, nil)
	cfg := quick(f.addr())
	cfg.Jobs, cfg.Batch, cfg.AtOnce, cfg.Concurrency = 250, 100, true, 0
	cfg.MetaBytes = -1
	rep := run(t, cfg)

	if rep.Mode != "at_once" || rep.Concurrency != DefaultBatchConcurrency || rep.JobsCreated != 250 || rep.Fired != 250 || rep.Missing != 0 || rep.Duplicates != 0 {
		t.Errorf("report = %+v", rep)
	}
	if rep.DrainSeconds <= 0 || rep.DrainSeconds != rep.FireSpanSeconds {
		t.Errorf("drain %v, span %v", rep.DrainSeconds, rep.FireSpanSeconds)
	}
	jobs, singles, batches, _ := f.snapshot()
	slices.Sort(batches)
	if singles != 0 || !slices.Equal(batches, []int{50, 100, 100}) {
		t.Errorf("fake saw %d singles, batches %v", singles, batches)
	}
	var trig int64
	for _, j := range jobs {
		if trig == 0 {
			trig = j.TriggerTime
		}
		if j.TriggerTime != trig || j.Meta != nil {
			t.Fatalf("job %+v: want every trigger at %d and no meta", j, trig)
		}
	}
	if rep.PerSecond != nil {
		t.Errorf("a burst has no seconds: %+v", rep.PerSecond)
	}
	if !strings.Contains(rep.String(), "burst drained in") {
		t.Errorf("String() =\n%s", rep)
	}
}

// The fake fires job 5 early, job 10 twice and never fires job 20: the
// report must count exactly that.
func TestRunCountsEarlyDuplicateAndMissing(t *testing.T) {
	f := newFakeTM(t, func(f *fakeTM) {
		f.early = func(n int) time.Duration {
			if n == 5 {
				return 500 * time.Millisecond
			}
			return 0
		}
		f.copies = func(n int) int {
			switch n {
			case 10:
				return 2
			case 20:
				return 0
			}
			return 1
		}
	})
	cfg := quick(f.addr())
	cfg.Jobs = 40
	cfg.Lead = time.Second // room to fire job 5 half a second early
	cfg.WaitTimeout = 200 * time.Millisecond
	start := time.Now()
	rep := run(t, cfg)

	if rep.JobsCreated != 40 || rep.Fired != 39 || rep.Missing != 1 || rep.Duplicates != 1 || rep.Deliveries != 40 {
		t.Errorf("fired %d missing %d duplicates %d deliveries %d", rep.Fired, rep.Missing, rep.Duplicates, rep.Deliveries)
	}
	// At most 500 ms early by construction; a loaded machine may deliver
	// it somewhat later than planned.
	if rep.Early != 1 || rep.WorstEarlyMs < 250 || rep.WorstEarlyMs > 500 {
		t.Errorf("early %d, worst %.1f ms; want 1 up to 500 ms early", rep.Early, rep.WorstEarlyMs)
	}
	if !rep.TimedOut {
		t.Error("want TimedOut with a job missing")
	}
	// The early job is a lateness sample, negative; the missing one is not.
	if rep.Lateness.Samples != 39 || rep.Lateness.Min != -rep.WorstEarlyMs {
		t.Errorf("lateness = %+v", rep.Lateness)
	}
	// Bounded: the run ended WaitTimeout after the last trigger.
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("run took %v", el)
	}
}

func TestRunCreateErrorsAndCreatedLate(t *testing.T) {
	for _, batch := range []int{1, 5} {
		t.Run("batch="+itoa(batch), func(t *testing.T) {
			f := newFakeTM(t, func(f *fakeTM) {
				f.createDelay = 30 * time.Millisecond
				f.reject = func(n int) (int, string) {
					if n%10 == 3 {
						return 409, "conflict"
					}
					return 0, ""
				}
			})
			cfg := quick(f.addr())
			// Every trigger passes before the slow fake acknowledges a create.
			cfg.Jobs, cfg.Batch, cfg.Concurrency = 20, batch, 4
			cfg.Lead, cfg.Window = time.Millisecond, time.Millisecond
			rep := run(t, cfg)
			if rep.JobsCreated != 18 || rep.CreateErrors["conflict"] != 2 || len(rep.CreateErrors) != 1 ||
				rep.CreateErrorSamples["conflict"] != "refused by the fake" {
				t.Errorf("created %d, errors %v %v", rep.JobsCreated, rep.CreateErrors, rep.CreateErrorSamples)
			}
			if rep.CreatedLate != 18 || rep.Lateness.Samples != 0 {
				t.Errorf("created late %d, lateness samples %d; want 18 and 0", rep.CreatedLate, rep.Lateness.Samples)
			}
			// Refused jobs are not missing: they were never created.
			if rep.Fired != 18 || rep.Missing != 0 {
				t.Errorf("fired %d missing %d", rep.Fired, rep.Missing)
			}
			if !strings.Contains(rep.String(), "conflict") {
				t.Errorf("String() =\n%s", rep)
			}
		})
	}
}

func TestRunCreateOnly(t *testing.T) {
	f := newFakeTM(t, nil)
	cfg := quick(f.addr())
	cfg.Jobs, cfg.Batch, cfg.CreateOnly = 100, 10, true
	cfg.Lead, cfg.Window = time.Second, time.Minute
	before := time.Now()
	rep := run(t, cfg)
	if rep.Mode != "create_only" || rep.JobsCreated != 100 || rep.CreateRate <= 0 || rep.ReceiverAddr != "" || rep.Fired != 0 {
		t.Errorf("report = %+v", rep)
	}
	jobs, _, batches, _ := f.snapshot()
	if len(batches) != 10 || len(jobs) != 100 {
		t.Errorf("%d batches, %d jobs", len(batches), len(jobs))
	}
	far := before.Add(DefaultFarFuture + time.Second).UnixMilli()
	for _, j := range jobs {
		if j.TriggerTime < far || j.TriggerTime > far+time.Minute.Milliseconds()+5000 {
			t.Fatalf("trigger %d, want in [%d, +1m]", j.TriggerTime, far)
		}
	}
	if s := rep.String(); strings.Contains(s, "fired") {
		t.Errorf("create-only report mentions firing:\n%s", s)
	}
}

func TestRunSpreadsOverAddrs(t *testing.T) {
	a, b := newFakeTM(t, nil), newFakeTM(t, nil)
	cfg := quick(a.addr(), b.addr())
	cfg.Jobs = 40
	rep := run(t, cfg)
	_, sa, _, _ := a.snapshot()
	_, sb, _, _ := b.snapshot()
	if sa == 0 || sb == 0 || sa+sb != 40 {
		t.Errorf("creates per node: %d and %d", sa, sb)
	}
	if rep.Fired != 40 || rep.Missing != 0 {
		t.Errorf("fired %d missing %d", rep.Fired, rep.Missing)
	}
}

func TestRunStopsOnCancel(t *testing.T) {
	f := newFakeTM(t, func(f *fakeTM) { f.copies = func(int) int { return 0 } })
	cfg := quick(f.addr())
	cfg.Jobs, cfg.WaitTimeout = 10, time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type ret struct {
		rep *Report
		err error
	}
	done := make(chan ret, 1)
	go func() {
		rep, err := Run(ctx, cfg, nil)
		done <- ret{rep, err}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if jobs, _, _, _ := f.snapshot(); len(jobs) == 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("jobs were not created")
		}
		time.Sleep(time.Millisecond) // polling a condition
	}
	cancel()
	select {
	case r := <-done:
		// Every create the bench saw acknowledged is missing (the fake never
		// fires). A create the fake took but whose answer the cancel cut
		// off is not acknowledged, so it is not counted either way.
		if !errors.Is(r.err, context.Canceled) || r.rep == nil || !r.rep.Interrupted || r.rep.JobsCreated == 0 ||
			r.rep.Missing != r.rep.JobsCreated || r.rep.TimedOut {
			t.Errorf("Run = %+v, %v", r.rep, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop after cancel")
	}
}

func TestConfigDefaultsAndValidation(t *testing.T) {
	cfg, err := Config{Addrs: []string{"127.0.0.1:1"}, Jobs: 1}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Collection != "bench" || cfg.Lead != 3*time.Second || cfg.Batch != 1 || cfg.Concurrency != 64 ||
		cfg.MetaBytes != 16 || cfg.ReceiverAddr != "127.0.0.1:0" || cfg.ReceiverStatus != 200 ||
		cfg.WaitTimeout != 30*time.Second || !cfg.AtOnce || len(cfg.IDPrefix) != 13 {
		t.Errorf("defaults = %+v", cfg)
	}
	other, _ := Config{Addrs: []string{"127.0.0.1:1"}, Jobs: 1}.withDefaults()
	if other.IDPrefix == cfg.IDPrefix {
		t.Error("id prefix must be random per run")
	}
	for name, bad := range map[string]Config{
		"no addrs":      {Jobs: 1},
		"no jobs":       {Addrs: []string{"a:1"}},
		"too many jobs": {Addrs: []string{"a:1"}, Jobs: MaxJobs + 1},
		"batch 1001":    {Addrs: []string{"a:1"}, Jobs: 1, Batch: 1001},
		"bad prefix":    {Addrs: []string{"a:1"}, Jobs: 1, IDPrefix: "a/b"},
		"quote prefix":  {Addrs: []string{"a:1"}, Jobs: 1, IDPrefix: `a"`},
		"long prefix":   {Addrs: []string{"a:1"}, Jobs: 1, IDPrefix: strings.Repeat("a", 254)},
		"bad status":    {Addrs: []string{"a:1"}, Jobs: 1, ReceiverStatus: 42},
		"negative":      {Addrs: []string{"a:1"}, Jobs: 1, Window: -time.Second},
	} {
		if _, err := bad.withDefaults(); err == nil {
			t.Errorf("%s: want an error", name)
		}
		if _, err := Run(context.Background(), bad, nil); err == nil {
			t.Errorf("%s: Run must refuse it", name)
		}
	}
}

func TestSchedule(t *testing.T) {
	s := schedule{firstMs: 1000, windowMs: 10, n: 3}
	if s.at(0) != 1000 || s.at(1) != 1005 || s.at(2) != 1010 || s.last() != 1010 {
		t.Errorf("window schedule: %d %d %d", s.at(0), s.at(1), s.at(2))
	}
	one := schedule{firstMs: 7, windowMs: 10, n: 1}
	burst := schedule{firstMs: 7, n: 5}
	if one.at(0) != 7 || burst.at(4) != 7 {
		t.Error("one job / burst must fire at first")
	}
}

func TestSummarize(t *testing.T) {
	ns := make([]int64, 1000)
	for i := range ns {
		ns[i] = int64(1000-i) * int64(time.Millisecond) // 1..1000 ms, unsorted
	}
	l := summarize(ns)
	if l.Samples != 1000 || l.Min != 1 || l.P50 != 500 || l.P90 != 900 || l.P99 != 990 || l.P999 != 999 || l.Max != 1000 || l.Mean != 500.5 {
		t.Errorf("summary = %+v", l)
	}
	if (summarize(nil) != Latency{}) {
		t.Error("empty summary must be zero")
	}
	if l := summarize([]int64{3e6}); l.P50 != 3 || l.P999 != 3 {
		t.Errorf("one sample = %+v", l)
	}
}

func TestParsePayload(t *testing.T) {
	prefix := []byte("run1-")
	tests := []struct {
		name    string
		body    string
		idx     int
		trig    int64
		ok      bool
		comment string
	}{
		{"compact", `{"id":"run1-42","collection":"bench","trigger_time":1767225600123,"attempt":1,"meta":{"p":"x"}}`, 42, 1767225600123, true, ""},
		{"spaced", `{ "id" : "run1-7", "trigger_time" : 99 }`, 7, 99, true, ""},
		{"collection named id first", `{"collection":"id","id":"run1-3","trigger_time":5}`, 3, 5, true, ""},
		{"trigger before id", `{"trigger_time":5,"id":"run1-0"}`, 0, 5, true, ""},
		{"no trigger", `{"id":"run1-1"}`, 1, -1, true, "a mismatch, still counted"},
		{"other run", `{"id":"run2-1","trigger_time":5}`, 0, 0, false, ""},
		{"prefix only", `{"id":"run1-","trigger_time":5}`, 0, 0, false, ""},
		{"suffix after number", `{"id":"run1-1x","trigger_time":5}`, 0, 0, false, ""},
		{"out of range", `{"id":"run1-100","trigger_time":5}`, 0, 0, false, ""},
		{"huge number", `{"id":"run1-99999999999999999999999","trigger_time":5}`, 0, 0, false, ""},
		{"id not a string", `{"id":12}`, 0, 0, false, ""},
		{"empty", ``, 0, 0, false, ""},
		{"not json", `hello`, 0, 0, false, ""},
	}
	for _, tc := range tests {
		idx, trig, ok := parsePayload([]byte(tc.body), prefix, 100)
		if ok != tc.ok || (ok && (idx != tc.idx || trig != tc.trig)) {
			t.Errorf("%s: got (%d, %d, %v), want (%d, %d, %v) %s", tc.name, idx, trig, ok, tc.idx, tc.trig, tc.ok, tc.comment)
		}
	}
}

// The receiver answers with the configured status and counts each kind of
// delivery where it belongs.
func TestReceiverRecords(t *testing.T) {
	r := newReceiver("p", 4, 503)
	if err := r.start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer r.close(time.Second)
	future := time.Now().Add(time.Hour).UnixMilli()
	r.sched.Store(&schedule{firstMs: future, n: 4})
	post := func(body string) {
		t.Helper()
		resp, err := http.Post("http://"+r.addr()+"/hook", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != 503 {
			t.Errorf("status %d, want 503", resp.StatusCode)
		}
	}
	post(`{"id":"p-1","trigger_time":` + itoa64(future) + `}`) // an hour early
	post(`{"id":"p-1","trigger_time":` + itoa64(future) + `}`) // duplicate
	post(`{"id":"p-2","trigger_time":1}`)                      // mismatch
	post(`{"id":"q-1","trigger_time":1}`)                      // foreign
	if r.distinct.Load() != 2 || r.count[1].Load() != 2 || r.first[1].Load() == 0 || r.first[0].Load() != 0 {
		t.Errorf("distinct %d count[1] %d", r.distinct.Load(), r.count[1].Load())
	}
	if r.early.Load() != 3 || r.worstEarlyNs.Load() < int64(59*time.Minute) || r.mismatch.Load() != 1 || r.foreign.Load() != 1 {
		t.Errorf("early %d worst %v mismatch %d foreign %d", r.early.Load(), time.Duration(r.worstEarlyNs.Load()), r.mismatch.Load(), r.foreign.Load())
	}
}

func itoa(i int) string     { return itoa64(int64(i)) }
func itoa64(i int64) string { b, _ := json.Marshal(i); return string(b) }

// perSecond puts each occurrence's lateness in the second of the window it
// was due in; one outside the window counts nowhere, and a second with no
// occurrence is there, empty.
func TestPerSecond(t *testing.T) {
	const from, to = 10_000, 13_000
	ms := int64(time.Millisecond)
	at := []int64{10_000, 10_999, 11_500, 9_999, 13_000, 10_500}
	late := []int64{5 * ms, 7 * ms, 400 * ms, 1 * ms, 1 * ms, 6 * ms}
	got := perSecond(from, to, at, late)
	want := []SecondLateness{
		{Second: 0, N: 3, P50: 6, P99: 7, Max: 7},
		{Second: 1, N: 1, P50: 400, P99: 400, Max: 400},
		{Second: 2},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("perSecond =\n %+v\nwant\n %+v", got, want)
	}
	if perSecond(5, 5, nil, nil) != nil {
		t.Fatal("an empty window has seconds")
	}
}
