package raftfsm

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/timemachine-db/timemachine/model"
)

func TestCanonicalOccurrence(t *testing.T) {
	for _, c := range []struct {
		id    string
		sched string
		t     int64
		ok    bool
	}{
		{"s@1795000000000", "s", 1795000000000, true},
		{"a@b@1000000000000", "a@b", 1000000000000, true},
		{"s@9999999999999", "s", 9999999999999, true},
		{"@1795000000000", "", 0, false},    // no schedule id
		{"s@0795000000000", "", 0, false},   // a leading zero: not OccurrenceID's form
		{"s@179500000000", "", 0, false},    // 12 digits
		{"s@17950000000000", "", 0, false},  // 14 digits
		{"s@17950000000x0", "", 0, false},   // not a number
		{"s_1795000000000", "", 0, false},   // no '@'
		{"s@1795000000000@1", "", 0, false}, // the last part is the time
		{"1795000000000", "", 0, false},     // too short
		{"x@1795000000000 ", "", 0, false},  // trailing byte
		{"s@+795000000000", "", 0, false},   // a sign
		{"sched-9@1795000000123", "sched-9", 1795000000123, true},
	} {
		sched, tm, ok := canonicalOccurrence(c.id)
		if sched != c.sched || tm != c.t || ok != c.ok {
			t.Errorf("canonicalOccurrence(%q) = %q, %d, %v; want %q, %d, %v", c.id, sched, tm, ok, c.sched, c.t, c.ok)
		}
		if ok {
			if got := model.OccurrenceID(sched, tm); got != c.id {
				t.Errorf("%q is not OccurrenceID's form (%q)", c.id, got)
			}
		}
	}
}

// The advance skips its lookup only where no job of the occurrence's id
// can exist: each case below has one that must be found, not replaced.
func TestOccurrenceFloorFindsExistingJobs(t *testing.T) {
	const t0 = int64(1_795_000_000_000)
	sched := func(hash uint64, next int64, now int64) Command {
		return &PutSchedule{Coll: "c", ID: "s", Spec: schedSpec(hash), Anchor: now, Next: next, Now: now}
	}
	adv := func(version uint64, at, now int64) Command {
		return &ScheduleAdvance{Coll: "c", ID: "s", Version: version, Expected: at, Occurrence: at, Next: at + 1000, Now: now}
	}
	user := func(at int64, now int64) Command {
		return &Create{Coll: "c", ID: model.OccurrenceID("s", at), Spec: model.JobSpec{TriggerTime: at + 7, CallbackURL: "http://127.0.0.1/user", Hash: 77}, Now: now}
	}
	for _, c := range []struct {
		name  string
		steps [][]Command
		at    int64 // the occurrence that must be the user's (or the earlier version's) job
	}{
		{"a user's job made before the schedule", [][]Command{
			{user(t0+1000, t0)}, {sched(1, t0+1000, t0)}, {adv(1, t0+1000, t0+900)},
		}, t0 + 1000},
		{"a user's job made after the floor was read", [][]Command{
			{sched(1, t0+1000, t0)}, {adv(1, t0+1000, t0+900)}, {user(t0+2000, t0+1000)}, {adv(1, t0+2000, t0+1900)},
		}, t0 + 2000},
		{"the same, in one batch", [][]Command{
			{sched(1, t0+1000, t0)}, {adv(1, t0+1000, t0+900), user(t0+2000, t0+1000), adv(1, t0+2000, t0+1900)},
		}, t0 + 2000},
		{"a deleted schedule's occurrence", [][]Command{
			{sched(1, t0+1000, t0)}, {adv(1, t0+1000, t0+900)}, {&DeleteSchedule{Coll: "c", ID: "s"}},
			{sched(2, t0+1000, t0+950)}, {adv(1, t0+1000, t0+990)},
		}, t0 + 1000},
		{"a replacing version at the very time", [][]Command{
			{sched(1, t0+1000, t0)}, {adv(1, t0+1000, t0+900)}, {sched(2, t0+1000, t0+950)}, {adv(2, t0+1000, t0+990)},
		}, t0 + 1000},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := memDB(t)
			f := openFSM(t, db, 3)
			var logs []*raft.Log
			for i, cmds := range c.steps {
				logs = append(logs, &raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: Encode(cmds...)})
			}
			for _, o := range f.ApplyBatch(logs) {
				results(t, o)
			}
			id := model.OccurrenceID("s", c.at)
			j, ok, err := GetJob(db, 3, "c", id)
			if err != nil || !ok {
				t.Fatalf("%s: %v %v", id, ok, err)
			}
			if j.Version != 1 {
				t.Fatalf("%s was written again: %+v", id, j)
			}
			if c.name != "a deleted schedule's occurrence" && c.name != "a replacing version at the very time" && j.CallbackURL != "http://127.0.0.1/user" {
				t.Fatalf("%s is not the user's job: %+v", id, j)
			}
		})
	}
}

// TestScheduleApplyCachesChangeNothing applies the same random log of
// schedule writes, advances, user jobs with occurrence ids (ahead of,
// at and behind the schedules' times), outcomes, deletes and a snapshot
// restore to a slot with occurrence floors, born records and the
// schedule-record cache and to one with none of them: every result and
// the final contents must be the same.
func TestScheduleApplyCachesChangeNothing(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			dbA, dbB := memDB(t), memDB(t)
			a, b := openFSM(t, dbA, 4), openFSM(t, dbB, 4)
			b.noOccFloors, b.noBorn, b.noSchedRecs = true, true, true
			const t0 = int64(1_795_000_000_000)
			now := t0
			ids := []string{"s", "t", "s@x"}
			var index uint64
			kept := 0             // the most floors A kept at once
			var made []*model.Job // occurrences the advances created
			apply := func(cmds ...Command) {
				index++
				l := []*raft.Log{{Index: index, Term: 1, Type: raft.LogCommand, Data: Encode(cmds...)}}
				ra, rb := a.ApplyBatch(l), b.ApplyBatch(l)
				if !reflect.DeepEqual(ra, rb) {
					t.Fatalf("entry %d %#v:\nwith floors %+v\nwithout     %+v", index, cmds, ra, rb)
				}
				kept = max(kept, len(a.occFloors))
				for i, c := range cmds {
					if _, ok := c.(*ScheduleAdvance); ok {
						if r := ra[0].([]model.Result)[i]; r.Code == model.CodeOK && r.Job != nil && r.Job.Version == 1 {
							made = append(made, r.Job)
						}
					}
				}
			}
			for step := 0; step < 400; step++ {
				now += int64(rng.IntN(400))
				id := ids[rng.IntN(len(ids))]
				var batch []Command
				for n := 1 + rng.IntN(3); n > 0; n-- {
					switch op := rng.IntN(10); {
					case op < 2:
						batch = append(batch, &PutSchedule{Coll: "c", ID: id, Spec: schedSpec(uint64(rng.IntN(3))), Anchor: now,
							Next: now + int64(rng.IntN(3000)) - 500, Now: now})
					case op < 5:
						// An advance at the schedule's next time as A has it
						// (B has the same: the results are compared).
						sc, ok, err := GetSchedule(dbA, 4, "c", id)
						if err != nil {
							t.Fatal(err)
						}
						if !ok || sc.NextFireAt == 0 {
							continue
						}
						occ := sc.NextFireAt
						if rng.IntN(4) == 0 {
							occ += 1000 * int64(rng.IntN(3)) // a catch-up
						}
						batch = append(batch, &ScheduleAdvance{Coll: "c", ID: id, Version: sc.Version, Expected: sc.NextFireAt,
							Occurrence: occ, Next: occ + 1000, Now: now})
					case op < 7:
						at := now + int64(rng.IntN(4000)) - 1000
						batch = append(batch, &Create{Coll: "c", ID: model.OccurrenceID(id, at),
							Spec: model.JobSpec{TriggerTime: at, CallbackURL: "http://127.0.0.1/u", Hash: uint64(rng.IntN(2))}, Now: now})
					case op < 8:
						batch = append(batch, &DeleteSchedule{Coll: "c", ID: id})
					case op < 9:
						// An outcome or a delete of an occurrence an
						// advance made (taken from the born records).
						if len(made) == 0 {
							continue
						}
						j := made[rng.IntN(len(made))]
						switch rng.IntN(3) {
						case 0:
							batch = append(batch, &Delete{Coll: "c", ID: j.ID})
						case 1:
							batch = append(batch, &Retry{Coll: "c", ID: j.ID, Version: j.Version, NextDue: now + 500, Attempts: 1, LastError: "503", Now: now})
						default:
							batch = append(batch, &Ack{Coll: "c", ID: j.ID, Version: j.Version, Success: true, Attempts: 1, Now: now})
						}
					default:
						batch = append(batch, &Upsert{Coll: "c", ID: model.OccurrenceID(id, now+int64(rng.IntN(2000))),
							Spec: model.JobSpec{TriggerTime: now + 5000, CallbackURL: "http://127.0.0.1/p", Hash: 5}, Now: now})
					}
				}
				if len(batch) > 0 {
					apply(batch...)
				}
				if step == 200 {
					// Restore both from A's snapshot: floors start again.
					var sk sink
					if _, err := a.StreamState(&sk); err != nil {
						t.Fatal(err)
					}
					for _, f := range []*SlotFSM{a, b} {
						if err := f.Restore(io.NopCloser(bytes.NewReader(sk.Bytes()))); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			if da, db := dump(t, dbA, 4), dump(t, dbB, 4); da != db {
				t.Fatal("the slots differ at the end")
			}
			if kept == 0 || a.fired.hits.Load() == 0 {
				t.Fatalf("floors kept %d, born records taken %d: the test did not exercise them", kept, a.fired.hits.Load())
			}
		})
	}
}

// A restore brings records the replica's floors do not bound (a
// follower catching up from its leader's snapshot): they start again.
func TestOccurrenceFloorsAfterARestore(t *testing.T) {
	const t0 = int64(1_795_000_000_000)
	put := &PutSchedule{Coll: "c", ID: "s", Spec: schedSpec(1), Anchor: t0, Next: t0 + 1000, Now: t0}
	a := openFSM(t, memDB(t), 5)
	for _, o := range a.ApplyBatch(logOf(
		[]Command{put},
		[]Command{&ScheduleAdvance{Coll: "c", ID: "s", Version: 1, Expected: t0 + 1000, Occurrence: t0 + 1000, Next: t0 + 2000, Now: t0 + 900}},
	)) {
		results(t, o)
	}
	// The leader's state: the same schedule, and a job of the id of its
	// next occurrence.
	dbC := memDB(t)
	c := openFSM(t, dbC, 5)
	for _, o := range c.ApplyBatch(logOf(
		[]Command{put},
		[]Command{&ScheduleAdvance{Coll: "c", ID: "s", Version: 1, Expected: t0 + 1000, Occurrence: t0 + 1000, Next: t0 + 2000, Now: t0 + 900}},
		[]Command{&Create{Coll: "c", ID: "s@1795000002000", Spec: model.JobSpec{TriggerTime: t0 + 5000, CallbackURL: "http://127.0.0.1/user", Hash: 3}, Now: t0 + 950}},
	)) {
		results(t, o)
	}
	var sk sink
	if _, err := c.StreamState(&sk); err != nil {
		t.Fatal(err)
	}
	if err := a.Restore(io.NopCloser(bytes.NewReader(sk.Bytes()))); err != nil {
		t.Fatal(err)
	}
	l := &raft.Log{Index: 4, Term: 1, Type: raft.LogCommand, Data: Encode(
		&ScheduleAdvance{Coll: "c", ID: "s", Version: 1, Expected: t0 + 2000, Occurrence: t0 + 2000, Next: t0 + 3000, Now: t0 + 1900})}
	results(t, a.ApplyBatch([]*raft.Log{l})[0])
	j, ok, err := GetJob(a.db, 5, "c", "s@1795000002000")
	if err != nil || !ok || j.CallbackURL != "http://127.0.0.1/user" || j.Version != 1 {
		t.Fatalf("the job of the occurrence's id after the restore: %+v %v %v", j, ok, err)
	}
}
