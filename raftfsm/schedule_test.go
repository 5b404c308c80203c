package raftfsm

import (
	"bytes"
	"io"
	"math"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/storage"
)

func schedSpec(hash uint64) model.ScheduleSpec {
	return model.ScheduleSpec{EveryMs: 1000, CallbackURL: "http://127.0.0.1/hook", Meta: []byte(`{"k":1}`), Hash: hash}
}

// scheduleWorkload exercises every schedule command, including advances
// that must be refused (stale version, stale next, repeated).
func scheduleWorkload() []*raft.Log {
	return logOf(
		[]Command{&PutSchedule{Coll: "c", ID: "s", Spec: schedSpec(1), Anchor: 0, Next: 1000, Now: 1}},
		[]Command{&PutSchedule{Coll: "c", ID: "s", Spec: schedSpec(1), Anchor: 5, Next: 9999, Now: 2}}, // same spec: unchanged
		[]Command{&ScheduleAdvance{Coll: "c", ID: "s", Version: 1, Expected: 1000, Occurrence: 1000, Next: 2000, Now: 1001}},
		[]Command{&ScheduleAdvance{Coll: "c", ID: "s", Version: 1, Expected: 1000, Occurrence: 1000, Next: 2000, Now: 1002}}, // repeated: stale
		[]Command{&ScheduleAdvance{Coll: "c", ID: "s", Version: 1, Expected: 2000, Occurrence: 5000, Missed: 3, Next: 6000, Now: 5003}},
		[]Command{&PutSchedule{Coll: "c", ID: "t", Spec: schedSpec(2), Next: 3000, Now: 3}},
		[]Command{&PutSchedule{Coll: "c", ID: "t", Spec: schedSpec(3), Next: 7000, Now: 4}},                                  // replaced: version 2
		[]Command{&ScheduleAdvance{Coll: "c", ID: "t", Version: 1, Expected: 7000, Occurrence: 7000, Next: 8000, Now: 7001}}, // old version: stale
		[]Command{&DeleteSchedule{Coll: "c", ID: "t"}},
		[]Command{&DeleteSchedule{Coll: "c", ID: "t"}}, // not found
		[]Command{&Ack{Coll: "c", ID: "s@1000", Version: 1, Attempts: 5, LastError: "500", Now: 1500}},
		[]Command{&Redrive{Coll: "c", IDs: []string{"s@1000", "s@5000", "nope"}, Now: 8000}},
		[]Command{&Ack{Coll: "c", ID: "s@5000", Version: 1, Attempts: 1, LastError: "404", Now: 5100}},
		[]Command{&Redrive{Coll: "c", From: 0, To: 6000, Limit: 10, Now: 9000}},
		[]Command{&Upsert{Coll: "c", ID: "s@1000", Spec: spec(9500, 77), Now: 9001}}, // a PUT keeps the schedule
	)
}

func TestScheduleCommands(t *testing.T) {
	db := memDB(t)
	f := openFSM(t, db, 2)
	var codes []model.Code
	var ns []int64
	for _, o := range f.ApplyBatch(scheduleWorkload()) {
		for _, r := range results(t, o) {
			codes = append(codes, r.Code)
			ns = append(ns, r.N)
		}
	}
	want := []model.Code{model.CodeCreated, model.CodeExists, model.CodeOK, model.CodeStale, model.CodeOK,
		model.CodeCreated, model.CodeOK, model.CodeStale, model.CodeOK, model.CodeNotFound,
		model.CodeOK, model.CodeOK, model.CodeOK, model.CodeOK, model.CodeOK}
	if !reflect.DeepEqual(codes, want) {
		t.Fatalf("codes\n got %v\nwant %v", codes, want)
	}
	// The first redrive finds one dead letter (s@1000); s@5000 was still
	// scheduled. The range redrive finds s@5000 (failed since).
	if ns[11] != 1 || ns[13] != 1 {
		t.Fatalf("redriven counts %d, %d; want 1, 1", ns[11], ns[13])
	}
	s, ok, err := GetSchedule(db, 2, "c", "s")
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if s.Version != 1 || s.NextFireAt != 6000 || s.LastFireAt != 5000 || s.Missed != 3 || s.CreatedAt != 1 {
		t.Fatalf("schedule s: %+v", s)
	}
	if _, ok, _ := GetSchedule(db, 2, "c", "t"); ok {
		t.Fatal("deleted schedule t is still there")
	}
	for _, id := range []string{"s@1000", "s@5000"} {
		j, ok, err := GetJob(db, 2, "c", id)
		if err != nil || !ok {
			t.Fatalf("occurrence %s: %v %v", id, ok, err)
		}
		if id == "s@1000" {
			if j.Schedule != "s" || j.TriggerTime != 9500 {
				t.Fatalf("replaced occurrence: %+v", j)
			}
			continue
		}
		if j.Schedule != "s" || j.Status != model.StatusScheduled || j.Attempts != 0 || string(j.Meta) != `{"k":1}` {
			t.Fatalf("occurrence %s: %+v", id, j)
		}
	}
	if _, ok, _ := GetJob(db, 2, "c", "s@2000"); ok {
		t.Fatal("a missed occurrence was created")
	}
	// Exactly one schedule due entry is left: s at 6000.
	var due []storage.DueEntry
	if err := ScanScheduleDue(db, 2, math.MinInt64, 1<<62, 100, func(e storage.DueEntry) bool { due = append(due, e); return true }); err != nil {
		t.Fatal(err)
	}
	if len(due) != 1 || due[0] != (storage.DueEntry{Due: 6000, Coll: "c", ID: "s"}) {
		t.Fatalf("schedule due index: %+v", due)
	}
	page, err := ListSchedules(db, 2, "c", "", 10)
	if err != nil || len(page.Schedules) != 1 || page.More {
		t.Fatalf("list: %+v %v", page, err)
	}
}

func TestScheduleReplayAndSnapshot(t *testing.T) {
	db1 := memDB(t)
	f1 := openFSM(t, db1, 4)
	f1.ApplyBatch(scheduleWorkload())
	first := dump(t, db1, 4)
	for _, l := range scheduleWorkload() { // replayed: no change
		f1.Apply(l)
	}
	if dump(t, db1, 4) != first {
		t.Fatal("replaying the log changed the state")
	}
	db2 := memDB(t)
	f2 := openFSM(t, db2, 4)
	for _, l := range scheduleWorkload() {
		f2.Apply(l)
	}
	if dump(t, db2, 4) != first {
		t.Fatal("two replicas diverged")
	}
	// The offset is derived on restore: move the source's to where the
	// derivation puts it, so the dumps compare.
	f1.ApplyBatch([]*raft.Log{{Index: uint64(len(scheduleWorkload()) + 1), Type: raft.LogCommand, Data: Encode(&AdvanceOffset{Offset: 1 << 40})}})
	first = dump(t, db1, 4)
	var s sink
	if _, err := f1.StreamState(&s); err != nil {
		t.Fatal(err)
	}
	dst := memDB(t)
	other := openFSM(t, dst, 5)
	other.ApplyBatch(logOf([]Command{&PutSchedule{Coll: "c", ID: "neighbour", Spec: schedSpec(7), Next: 1, Now: 1}}))
	neighbour := dump(t, dst, 5)
	g := openFSM(t, dst, 4)
	g.ApplyBatch(logOf([]Command{&PutSchedule{Coll: "c", ID: "stale", Spec: schedSpec(8), Next: 1, Now: 1}}))
	if err := g.Restore(io.NopCloser(bytes.NewReader(s.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if got := dump(t, dst, 4); got != first {
		t.Fatalf("restored state differs:\n got %s\nwant %s", got, first)
	}
	if dump(t, dst, 5) != neighbour {
		t.Fatal("restore touched another slot")
	}
}

func TestScheduleCodecs(t *testing.T) {
	spec := schedSpec(9)
	spec.Cron, spec.EveryMs, spec.Timezone, spec.Route, spec.CallbackURL = "*/5 * * * *", 0, "Europe/Berlin", "r", ""
	spec.Retry = model.RetryPolicy{MaxAttempts: 2}
	spec.StartAt, spec.EndAt, spec.Paused, spec.CallbackTimeoutMs = 5, 6, true, 7
	for _, c := range []Command{
		&PutSchedule{Coll: "c", ID: "s", Spec: spec, Anchor: 1, Next: 2, Now: 3},
		&DeleteSchedule{Coll: "c", ID: "s"},
		&ScheduleAdvance{Coll: "c", ID: "s", Version: 4, Expected: 5, Occurrence: 6, Missed: 7, Next: 8, Now: 9},
		&Redrive{Coll: "c", IDs: []string{"a", "b"}, Now: 1},
		&Redrive{Coll: "c", From: 1, To: 2, Limit: 3, Now: 4},
	} {
		got, err := Decode(Encode(c))
		if err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], c) {
			t.Fatalf("%T round trip: %v\n got %#v\nwant %#v", c, err, got, c)
		}
	}
	sc := &model.Schedule{Collection: "c", ID: "s", Spec: spec, Version: 2, Anchor: 1, NextFireAt: 3, LastFireAt: 4, Missed: 5, CreatedAt: 6, UpdatedAt: 7}
	res := []model.Result{{Code: model.CodeCreated, Schedule: sc}, {Code: model.CodeOK, Schedule: sc, Job: &model.Job{Collection: "c", ID: "s@4", Version: 1, Status: model.StatusScheduled, Schedule: "s"}}, {Code: model.CodeNotFound}}
	got, err := DecodeResults(EncodeResults(res))
	if err != nil || !reflect.DeepEqual(got, res) {
		t.Fatalf("results round trip: %v\n got %+v\nwant %+v", err, got, res)
	}
}

func TestPurgeRemovesSchedules(t *testing.T) {
	db := memDB(t)
	f := openFSM(t, db, 1)
	f.ApplyBatch(logOf(
		[]Command{&PutSchedule{Coll: "c", ID: "a", Spec: schedSpec(1), Next: 10, Now: 1}, &PutSchedule{Coll: "c", ID: "b", Spec: schedSpec(2), Next: 20, Now: 1},
			&PutSchedule{Coll: "d", ID: "a", Spec: schedSpec(3), Next: 30, Now: 1}},
		[]Command{&PurgeCollection{Coll: "c", Limit: 1}},
		[]Command{&PurgeCollection{Coll: "c", Limit: 1}},
	))
	for _, id := range []string{"a", "b"} {
		if _, ok, _ := GetSchedule(db, 1, "c", id); ok {
			t.Fatalf("schedule c/%s survived the purge", id)
		}
	}
	if _, ok, _ := GetSchedule(db, 1, "d", "a"); !ok {
		t.Fatal("another collection's schedule was purged")
	}
	n := 0
	_ = ScanScheduleDue(db, 1, 0, 1<<62, 10, func(storage.DueEntry) bool { n++; return true })
	if n != 1 {
		t.Fatalf("%d schedule due entries left, want 1", n)
	}
}

// If-Match on a schedule PUT: applied only at the given version, refused
// (nothing written) otherwise, and for a schedule that does not exist.
// Without it the entry is byte for byte what older binaries write.
func TestPutScheduleIfMatch(t *testing.T) {
	plain := &PutSchedule{Coll: "c", ID: "s", Spec: schedSpec(1), Next: 1000, Now: 1}
	cond := *plain
	cond.IfMatch = 7
	if a, b := EncodeOne(plain), EncodeOne(&cond); len(b) != len(a)+1 || !bytes.Equal(a, b[:len(a)]) {
		t.Fatalf("IfMatch encoding: %x then %x", a, b)
	}
	for _, c := range []*PutSchedule{plain, &cond} {
		got, err := Decode(Encode(c))
		if err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], c) {
			t.Fatalf("round trip of %+v: %+v %v", c, got, err)
		}
	}

	f := openFSM(t, memDB(t), 2)
	steps := []struct {
		cmd         *PutSchedule
		want        model.Code
		wantVersion uint64 // the schedule's version after the step (0: none)
	}{
		{&PutSchedule{Coll: "c", ID: "new", Spec: schedSpec(1), Next: 1000, Now: 1, IfMatch: 1}, model.CodePreconditionFailed, 0},
		{&PutSchedule{Coll: "c", ID: "s", Spec: schedSpec(1), Next: 1000, Now: 1}, model.CodeCreated, 1},
		{&PutSchedule{Coll: "c", ID: "s", Spec: schedSpec(2), Next: 1000, Now: 2, IfMatch: 2}, model.CodePreconditionFailed, 1},
		{&PutSchedule{Coll: "c", ID: "s", Spec: schedSpec(2), Next: 1000, Now: 3, IfMatch: 1}, model.CodeOK, 2},
		{&PutSchedule{Coll: "c", ID: "s", Spec: schedSpec(3), Next: 1000, Now: 4, IfMatch: 1}, model.CodePreconditionFailed, 2},
		{&PutSchedule{Coll: "c", ID: "s", Spec: schedSpec(2), Next: 1000, Now: 5, IfMatch: 2}, model.CodeExists, 2},
	}
	for i, st := range steps {
		l := &raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: Encode(st.cmd)}
		r := results(t, f.ApplyBatch([]*raft.Log{l})[0])[0]
		if r.Code != st.want {
			t.Fatalf("step %d: code %v, want %v", i, r.Code, st.want)
		}
		sc, found, err := GetSchedule(f.db, 2, st.cmd.Coll, st.cmd.ID)
		if err != nil {
			t.Fatal(err)
		}
		var v uint64
		if found {
			v = sc.Version
		}
		if v != st.wantVersion {
			t.Fatalf("step %d: version %d, want %d", i, v, st.wantVersion)
		}
	}
}
