package raftfsm

import (
	"bytes"
	"io"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/timemachine-db/timemachine/model"
)

// The schedule-record cache answers what storage holds across a replace,
// a delete and a restore (verifySchedRecs panics otherwise), and Release
// gives its bytes back.
func TestScheduleRecordCache(t *testing.T) {
	const t0 = int64(1_795_000_000_000)
	before := schedRecBytes.Load()
	a := openFSM(t, memDB(t), 7)
	apply := func(f *SlotFSM, index uint64, cmds ...Command) []model.Result {
		return results(t, f.ApplyBatch([]*raft.Log{{Index: index, Term: 1, Type: raft.LogCommand, Data: Encode(cmds...)}})[0])
	}
	apply(a, 1, &PutSchedule{Coll: "c", ID: "s", Spec: schedSpec(1), Anchor: t0, Next: t0 + 1000, Now: t0})
	apply(a, 2, &ScheduleAdvance{Coll: "c", ID: "s", Version: 1, Expected: t0 + 1000, Occurrence: t0 + 1000, Next: t0 + 2000, Now: t0 + 900})
	if len(a.schedRecs) != 1 || schedRecBytes.Load() <= before {
		t.Fatalf("nothing cached: %d entries, %d bytes", len(a.schedRecs), schedRecBytes.Load()-before)
	}
	// Replaced, then advanced by the new version in the same batch.
	r := apply(a, 3, &PutSchedule{Coll: "c", ID: "s", Spec: schedSpec(2), Anchor: t0, Next: t0 + 3000, Now: t0 + 950},
		&ScheduleAdvance{Coll: "c", ID: "s", Version: 2, Expected: t0 + 3000, Occurrence: t0 + 3000, Next: t0 + 4000, Now: t0 + 2900})
	if r[1].Code != model.CodeOK || r[1].Schedule.Version != 2 || r[1].Schedule.NextFireAt != t0+4000 {
		t.Fatalf("advance of the replaced schedule: %+v", r[1])
	}
	// A restore from a replica where s is at another version.
	c := openFSM(t, memDB(t), 7)
	apply(c, 1, &PutSchedule{Coll: "c", ID: "s", Spec: schedSpec(5), Anchor: t0, Next: t0 + 9000, Now: t0})
	var sk sink
	if _, err := c.StreamState(&sk); err != nil {
		t.Fatal(err)
	}
	if err := a.Restore(io.NopCloser(bytes.NewReader(sk.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if r := apply(a, 2, &ScheduleAdvance{Coll: "c", ID: "s", Version: 1, Expected: t0 + 9000, Occurrence: t0 + 9000, Next: t0 + 10000, Now: t0 + 8900}); r[0].Code != model.CodeOK {
		t.Fatalf("advance after the restore: %+v", r[0])
	}
	if r := apply(a, 3, &DeleteSchedule{Coll: "c", ID: "s"}); r[0].Code != model.CodeOK || len(a.schedRecs) != 0 {
		t.Fatalf("delete: %+v, %d cached", r[0], len(a.schedRecs))
	}
	if r := apply(a, 4, &ScheduleAdvance{Coll: "c", ID: "s", Version: 1, Expected: t0 + 10000, Occurrence: t0 + 10000, Next: t0 + 11000, Now: t0 + 9900}); r[0].Code != model.CodeStale {
		t.Fatalf("advance of a deleted schedule: %+v", r[0])
	}
	apply(c, 2, &ScheduleAdvance{Coll: "c", ID: "s", Version: 1, Expected: t0 + 9000, Occurrence: t0 + 9000, Next: t0 + 10000, Now: t0 + 8900})
	a.Release()
	c.Release()
	if got := schedRecBytes.Load(); got != before {
		t.Fatalf("%d bytes still counted after Release", got-before)
	}
}
