package check

import (
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/internal/nemesis/history"
)

func TestFailovers(t *testing.T) {
	s := func(d time.Duration) int64 { return int64(d) }
	h := &history.History{Failovers: []history.Failover{
		{Cycle: 1, Fault: "kill-leader", Victim: "n1", All: s(1500 * time.Millisecond),
			Probes: []history.SlotProbe{{Slot: 0, After: s(time.Second)}, {Slot: 3, After: s(1500 * time.Millisecond)}}},
		{Cycle: 2, Fault: "pause-leader", Victim: "n2", All: s(2500 * time.Millisecond),
			Probes: []history.SlotProbe{{Slot: 1, After: s(2500 * time.Millisecond)}, {Slot: 4, After: s(time.Second)}}},
		{Cycle: 3, Fault: "kill-leader", Victim: "n3", All: -1,
			Probes: []history.SlotProbe{{Slot: 2, After: -1}, {Slot: 5, After: s(time.Second)}}},
		{Cycle: 4, Fault: "kill-one", Victim: "n3"}, // led nothing: no probes
	}}
	r := Failovers(h, 2*time.Second)
	if r.Violations() != 2 || len(r.OverTarget) != 1 || len(r.Never) != 1 {
		t.Fatalf("%+v", r)
	}
	if r.All.N != 2 || r.All.Max != 2500*time.Millisecond || r.ByFault["kill-leader"].N != 1 {
		t.Fatalf("%+v", r)
	}
	if r := Failovers(&history.History{Failovers: h.Failovers[:1]}, 2*time.Second); r.Violations() != 0 {
		t.Fatalf("%+v", r)
	}
}

func TestFailoverOwnTarget(t *testing.T) {
	h := &history.History{Failovers: []history.Failover{{Cycle: 1, Fault: "partition-one", Victim: "n1",
		All: int64(4 * time.Second), TargetNs: int64(5 * time.Second), Probes: []history.SlotProbe{{Slot: 0, After: int64(4 * time.Second)}}}}}
	if r := Failovers(h, 2*time.Second); r.Violations() != 0 {
		t.Fatalf("a partition held to 5 s: %+v", r)
	}
	h.Failovers[0].TargetNs = 0
	if r := Failovers(h, 2*time.Second); r.Violations() != 1 {
		t.Fatalf("%+v", r)
	}
}

func TestFailoverHealedBeforeTheTarget(t *testing.T) {
	h := &history.History{Failovers: []history.Failover{{Cycle: 1, Fault: "partition-one", Victim: "n1",
		All: int64(3200 * time.Millisecond), TargetNs: int64(5 * time.Second), HealedNs: int64(3 * time.Second),
		Probes: []history.SlotProbe{{Slot: 0, After: int64(3200 * time.Millisecond)}}}}}
	r := Failovers(h, 2*time.Second)
	if r.Violations() != 0 || len(r.Inconclusive) != 1 || r.All.N != 0 {
		t.Fatalf("healed at 3 s, writable at 3.2 s, target 5 s: inconclusive, got %+v", r)
	}
	// Healed after the target: the measurement counts.
	h.Failovers[0].TargetNs = int64(2 * time.Second)
	if r := Failovers(h, 2*time.Second); r.Violations() != 1 || len(r.Inconclusive) != 0 {
		t.Fatalf("%+v", r)
	}
}
