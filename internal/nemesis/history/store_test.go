package history

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	r, err := NewRecorder(dir, NewClock())
	if err != nil {
		t.Fatal(err)
	}
	r.Meta(Meta{Seed: 42, Nodes: 3, Mode: "netns"})
	a := r.Invoke(Op{Client: 1, Kind: Create, Coll: "c", JobID: "j1", Trigger: 1000, Spec: "s1", Via: "n1"})
	b := r.Invoke(Op{Client: 2, Kind: Delete, Coll: "c", JobID: "j1", Via: "n2"})
	lost := r.Invoke(Op{Client: 3, Kind: Put, Coll: "c", JobID: "j1", IfMatch: 1, Trigger: 2000, Spec: "s2"})
	r.Complete(a, Completion{Outcome: OK, Status: 201, Version: 1, JobStatus: "scheduled", JobTrigger: 1000})
	r.Complete(b, Completion{Outcome: Unknown, Err: "timeout"})
	r.Fault(Fault{ID: 1, Kind: "pause", Start: r.Clock.Now(), End: Never})
	r.Fault(Fault{ID: 1, Kind: "pause", Start: Stamp{Mono: 1}, End: Stamp{Mono: 2}})
	r.Delivery(Delivery{Seq: 1, Coll: "c", JobID: "j1", Trigger: 1000, Answer: "200"})
	r.Failover(Failover{Cycle: 1, Victim: "n1", All: int64(time.Second)})
	r.Cycle(Cycle{N: 1, Fault: "pause", Recovered: true})
	snap := r.Snapshot()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	// A line cut short at the end (the runner killed mid-write) is ignored.
	f, err := os.OpenFile(filepath.Join(dir, HistoryFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"type":"complete","done":{"id":`); err != nil {
		t.Fatal(err)
	}
	f.Close()

	h, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if h.Meta.Seed != 42 || len(h.Ops) != 3 || len(h.Deliveries) != 1 || len(h.Faults) != 1 || len(h.Failovers) != 1 || len(h.Cycles) != 1 {
		t.Fatalf("loaded %+v", h)
	}
	if op := h.Ops[0]; op.ID != a || op.Outcome != OK || op.Status != 201 || op.Version != 1 || op.Ret == Never || op.Ret.Mono < op.Call.Mono {
		t.Errorf("create: %+v", op)
	}
	if op := h.Ops[1]; op.Outcome != Unknown || op.Ret != Never {
		t.Errorf("timed-out delete must load as indeterminate with return Never: %+v", op)
	}
	if op := h.Ops[2]; op.ID != lost || op.Outcome != Unknown || op.Ret != Never || op.IfMatch != 1 {
		t.Errorf("an invoke without completion must load as indeterminate: %+v", op)
	}
	if f := h.Faults[0]; f.End.Mono != 2 {
		t.Errorf("the fault's last record wins: %+v", f)
	}
	// The snapshot taken in memory is what was loaded from the files.
	snap.Meta = h.Meta
	if !reflect.DeepEqual(snap, h) {
		t.Errorf("snapshot\n%+v\nloaded\n%+v", snap, h)
	}
}

func TestLoadRejectsGarbage(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, HistoryFile), []byte("{\"type\":\"bogus\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, DeliveriesFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil {
		t.Fatal("an unknown record type must be an error")
	}
}

func TestClockDerivesWallFromMonotonic(t *testing.T) {
	c := NewClock()
	a := c.Now()
	b := c.Now()
	if b.Mono < a.Mono || b.Wall-a.Wall != b.Mono-a.Mono {
		t.Fatalf("a %+v b %+v", a, b)
	}
	if a.Wall-c.StartWall() != a.Mono {
		t.Fatalf("wall %d start %d mono %d", a.Wall, c.StartWall(), a.Mono)
	}
}
