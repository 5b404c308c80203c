package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestSummarizeNearestRank(t *testing.T) {
	ns := make([]int64, 100)
	for i := range ns {
		ns[i] = int64(100-i) * int64(time.Millisecond) // 100 … 1 ms, unsorted
	}
	l := summarize(ns)
	if l.Samples != 100 || l.Min != 1 || l.Max != 100 || l.P50 != 50 || l.P99 != 99 || l.Mean != 50.5 {
		t.Fatalf("summary %+v", l)
	}
	if (summarize(nil) != Latency{}) {
		t.Fatal("empty input should give a zero summary")
	}
}

func TestDeliveriesResult(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	d := &deliveries{
		due:        []time.Time{ms(0), ms(100), ms(200), ms(300), ms(400)},
		acked:      []time.Time{ms(-50), ms(-50), ms(250), ms(-50), {}},
		first:      []time.Time{ms(10), ms(90), ms(260), {}, ms(500)},
		duplicates: 2,
	}
	r := d.result("window")
	// Job 4 was never acknowledged: not counted. Job 3 is missing. Job 1
	// came 10 ms early. Job 2 was created after its due time: fired, but
	// not a lateness sample.
	if r.JobsRequested != 5 || r.JobsCreated != 4 || r.Fired != 3 || r.Missing != 1 || r.Duplicates != 2 {
		t.Fatalf("counts %+v", r)
	}
	if r.Early != 1 || r.WorstEarlyMs != 10 || r.CreatedLate != 1 {
		t.Fatalf("early/late %+v", r)
	}
	if r.Lateness.Samples != 2 || r.Lateness.Min != -10 || r.Lateness.Max != 10 {
		t.Fatalf("lateness %+v", r.Lateness)
	}
	// Fired 3 over first due (0 ms) → last first delivery (260 ms).
	if want := 3 / 0.26; r.FireRate < want-0.01 || r.FireRate > want+0.01 {
		t.Fatalf("fire rate %v, want %v", r.FireRate, want)
	}
	if r.DrainSeconds != 0 {
		t.Fatal("drain time is for at_once only")
	}
	if r := d.result("at_once"); r.DrainSeconds != 0.26 {
		t.Fatalf("drain %v", r.DrainSeconds)
	}
}

func TestTablePairsBothSides(t *testing.T) {
	tm := `{"mode":"create_only","jobs_requested":100000,"batch":1,"concurrency":64,"jobs_created":100000,"create_rate":20900}`
	as := `{"mode":"create_only","jobs_requested":100000,"batch":1,"concurrency":64,"jobs_created":100000,"create_rate":66900,"system":"asynq"}`
	burstTM := `{"mode":"at_once","jobs_requested":100000,"batch":1000,"jobs_created":100000,"fired":100000,"drain_seconds":3.2}`
	burstA := `{"mode":"at_once","jobs_requested":100000,"batch":1,"jobs_created":100000,"fired":100000,"early":12000,"drain_seconds":7.0}`
	var rs []*Result
	for _, in := range []struct{ sys, js string }{{"timemachine", tm}, {"asynq", as}, {"timemachine", burstTM}, {"asynq", burstA}} {
		r, err := decodeResult(strings.NewReader(in.js), in.sys)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	var b bytes.Buffer
	writeTable(&b, rs)
	want := "| workload | asynq | timemachine | timemachine ÷ asynq |\n" +
		"|---|---|---|---|\n" +
		"| create, one job per request, 64 clients | 66.9k/s | 20.9k/s | 0.31× |\n" +
		"| 100k due at one instant: drained in / early | 7.00 s / 12000 early (12%) | 3.20 s / 0 early | 2.19× |\n"
	if b.String() != want {
		t.Fatalf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestWorkloadNamesWindow(t *testing.T) {
	r := &Result{Mode: "window", JobsRequested: 40000, WindowSeconds: 20}
	if got := workload(r); got != "40k timers over 20s: fire rate / lateness p99 / early" {
		t.Fatal(got)
	}
	if got := ms(1588.2); got != "1,588" {
		t.Fatal(got)
	}
	if _, _, ok := cutEq("asynq="); ok {
		t.Fatal("empty file accepted")
	}
}
