package raftfsm

import (
	"bytes"
	"io"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/timemachine-db/timemachine/model"
)

// A purge with a fence refuses every later write of the deleted
// incarnation — a create, a PUT, a schedule, also without an incarnation
// (an older proposer) — and takes those of a collection made again, on
// the replica that applied it, after a reopen and after a restore. A
// purge without a fence (an older binary's) fences nothing. A black-box
// review found jobs made through a node whose meta state trailed a
// collection's deletion outliving it, and firing once the name was made
// again.
func TestCollectionFence(t *testing.T) {
	const slot = 4
	db := memDB(t)
	f := openFSM(t, db, slot)
	idx := uint64(0)
	apply := func(f *SlotFSM, cmds ...Command) []model.Result {
		t.Helper()
		idx++
		return results(t, f.ApplyBatch([]*raft.Log{{Index: idx, Term: 1, Type: raft.LogCommand, Data: Encode(cmds...)}})[0])
	}
	old := func(id string) []Command {
		return []Command{
			&Create{Coll: "c", ID: id, Spec: spec(100, 1), Now: 1, CollInc: 5},
			&Upsert{Coll: "c", ID: id + "-put", Spec: spec(100, 1), Now: 1, CollInc: 5},
			&PutSchedule{Coll: "c", ID: id + "-sched", Spec: schedSpec(1), Next: 1000, Now: 1, CollInc: 5},
			&Create{Coll: "c", ID: id + "-noinc", Spec: spec(100, 1), Now: 1},
		}
	}
	for _, r := range apply(f, old("a")...) {
		if r.Code != model.CodeCreated {
			t.Fatalf("before any purge: %v", r.Code)
		}
	}
	// An older binary's purge (no fence) fences nothing.
	apply(f, &PurgeCollection{Coll: "c", Limit: 100})
	if r := apply(f, &Create{Coll: "c", ID: "after-old-purge", Spec: spec(100, 1), Now: 1, CollInc: 5}); r[0].Code != model.CodeCreated {
		t.Fatalf("after a purge without a fence: %v", r[0].Code)
	}
	// The deletion of incarnation 5.
	if r := apply(f, &PurgeCollection{Coll: "c", Limit: 100, Fence: 6}); r[0].Code != model.CodeOK || r[0].More {
		t.Fatalf("purge: %+v", r[0])
	}
	if got := dump(t, db, slot); bytes.Contains([]byte(got), []byte("after-old-purge")) {
		t.Fatal("the purge left a job")
	}
	refused := func(f *SlotFSM, id string) {
		t.Helper()
		for i, r := range apply(f, old(id)...) {
			if r.Code != model.CodeRejected {
				t.Fatalf("write %d of the deleted incarnation: %v, want rejected", i, r.Code)
			}
		}
		if _, ok, _ := GetJob(f.db, slot, "c", id); ok {
			t.Fatal("a refused create made a job")
		}
		if _, ok, _ := GetSchedule(f.db, slot, "c", id+"-sched"); ok {
			t.Fatal("a refused schedule was made")
		}
	}
	taken := func(f *SlotFSM, id string) {
		t.Helper()
		r := apply(f, &Create{Coll: "c", ID: id, Spec: spec(100, 1), Now: 1, CollInc: 9},
			&PutSchedule{Coll: "c", ID: id + "-sched", Spec: schedSpec(1), Next: 1000, Now: 1, CollInc: 9},
			&Create{Coll: "other", ID: id, Spec: spec(100, 1), Now: 1})
		for i, x := range r {
			if x.Code != model.CodeCreated {
				t.Fatalf("write %d of a collection made again (or of another): %v", i, x.Code)
			}
		}
	}
	refused(f, "b")
	taken(f, "new1")
	// A lower fence later (a resumed deletion racing) does not lower it.
	apply(f, &PurgeCollection{Coll: "c", Limit: 100, Fence: 2})
	refused(f, "b2")

	// Reopened: the fence is read back from storage.
	g := openFSM(t, db, slot)
	idx = f.applied.Load()
	refused(g, "c")
	taken(g, "new2")

	// Restored on another replica from a full snapshot.
	var s sink
	if _, err := g.StreamState(&s); err != nil {
		t.Fatal(err)
	}
	dst := memDB(t)
	h := openFSM(t, dst, slot)
	if err := h.Restore(io.NopCloser(bytes.NewReader(s.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if dump(t, dst, slot) != dump(t, db, slot) {
		t.Fatal("the restored replica differs from its source")
	}
	refused(h, "d")
	taken(h, "new3")
}

func TestPutScheduleIncarnationRoundTrip(t *testing.T) {
	for _, c := range []*PutSchedule{
		{Coll: "c", ID: "s", Spec: schedSpec(1), Next: 1000, Now: 1},
		{Coll: "c", ID: "s", Spec: schedSpec(1), Next: 1000, Now: 1, IfMatch: 3},
		{Coll: "c", ID: "s", Spec: schedSpec(1), Next: 1000, Now: 1, CollInc: 7},
		{Coll: "c", ID: "s", Spec: schedSpec(1), Next: 1000, Now: 1, IfMatch: 3, CollInc: 7},
	} {
		got, err := Decode(Encode(c))
		if err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], Command(c)) {
			t.Fatalf("round trip of %+v: %+v, %v", c, got, err)
		}
	}
}

// A collection's incarnation is the meta index of the entry that made it:
// kept by updates, new (and larger) when the name is made again after a
// deletion, and carried by the meta snapshot.
func TestCollectionIncarnation(t *testing.T) {
	f := NewMetaFSM()
	inc := func() uint64 {
		t.Helper()
		c, ok := f.State().Collection("c")
		if !ok {
			t.Fatal("no collection c")
		}
		return c.Incarnation
	}
	applyMeta(t, f, 3, &PutCollection{C: model.Collection{Name: "c"}, Now: 1})
	if inc() != 3 {
		t.Fatalf("incarnation %d, want 3 (the entry that made it)", inc())
	}
	applyMeta(t, f, 4, &PutCollection{C: model.Collection{Name: "c", RetentionMs: 5000}, Now: 2})
	if inc() != 3 {
		t.Fatalf("an update changed the incarnation to %d", inc())
	}
	applyMeta(t, f, 5, &MarkCollectionDeleting{Name: "c", Now: 3})
	applyMeta(t, f, 6, &ForgetCollection{Name: "c"})
	applyMeta(t, f, 9, &PutCollection{C: model.Collection{Name: "c"}, Now: 4})
	if inc() != 9 {
		t.Fatalf("made again: incarnation %d, want 9", inc())
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var s sink
	if err := snap.Persist(&s); err != nil {
		t.Fatal(err)
	}
	g := NewMetaFSM()
	if err := g.Restore(io.NopCloser(bytes.NewReader(s.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if c, _ := g.State().Collection("c"); c.Incarnation != 9 {
		t.Fatalf("restored incarnation %d", c.Incarnation)
	}
}
