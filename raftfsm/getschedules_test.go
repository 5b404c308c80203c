package raftfsm

import (
	"testing"

	"github.com/timemachine-db/timemachine/storage"
)

// TestGetSchedules: the schedule loop's batched read returns what
// GetSchedule returns for each entry, in the entries' order (not key
// order), nil for a schedule that is gone.
func TestGetSchedules(t *testing.T) {
	f := openFSM(t, memDB(t), 3)
	f.ApplyBatch(logOf(
		[]Command{
			&PutSchedule{Coll: "c", ID: "s2", Spec: schedSpec(1), Next: 2000, Now: 1},
			&PutSchedule{Coll: "c", ID: "s1", Spec: schedSpec(2), Next: 1000, Now: 1},
			&PutSchedule{Coll: "b", ID: "s9", Spec: schedSpec(3), Next: 1500, Now: 1},
			&PutSchedule{Coll: "c", ID: "gone", Spec: schedSpec(4), Next: 1500, Now: 1},
		},
		[]Command{&DeleteSchedule{Coll: "c", ID: "gone"}},
	))
	refs := []storage.DueEntry{{Due: 1000, Coll: "c", ID: "s1"}, {Due: 1500, Coll: "c", ID: "gone"}, {Due: 1500, Coll: "b", ID: "s9"}, {Due: 2000, Coll: "c", ID: "s2"}, {Coll: "x", ID: "never"}}
	got, err := GetSchedules(f.db, 3, refs)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(refs) {
		t.Fatalf("%d results for %d refs", len(got), len(refs))
	}
	for i, e := range refs {
		want, ok, err := GetSchedule(f.db, 3, e.Coll, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case !ok && got[i] != nil:
			t.Errorf("%s/%s: got %+v, want none", e.Coll, e.ID, got[i])
		case ok && (got[i] == nil || got[i].ID != e.ID || got[i].Collection != e.Coll || got[i].NextFireAt != want.NextFireAt || got[i].Version != want.Version):
			t.Errorf("%s/%s: got %+v, want %+v", e.Coll, e.ID, got[i], want)
		}
	}
	if got, err := GetSchedules(f.db, 3, nil); err != nil || len(got) != 0 {
		t.Fatalf("no refs: %v, %v", got, err)
	}
}
