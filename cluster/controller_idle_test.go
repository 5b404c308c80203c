package cluster

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/raftgroup"
)

// The controller's waits: 250 ms while slots move, a second after a
// change, then doubling up to controllerIdle while nothing changes.
func TestNextPass(t *testing.T) {
	idle := time.Second
	var got []time.Duration
	for _, step := range []struct{ busy, changed bool }{
		{false, false}, {false, false}, {false, false}, {false, false},
		{false, true}, {false, false}, {true, false}, {false, false},
	} {
		var next time.Duration
		next, idle = nextPass(step.busy, step.changed, idle)
		got = append(got, next)
	}
	want := []time.Duration{2 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second,
		time.Second, 2 * time.Second, 250 * time.Millisecond, 2 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("waits %v, want %v", got, want)
		}
	}
}

// The shape a pass acted on changes with a slot's leader, its
// configuration, the meta state and the nodes that answered — and not
// with what a pass ignores (applied indexes).
func TestShapeOf(t *testing.T) {
	st := &raftfsm.MetaState{Index: 7, SlotCount: 2}
	view := func(leader0 string, cfg uint64, applied uint64, nodes ...string) View {
		v := View{Nodes: map[string]NodeStatus{}}
		for _, n := range nodes {
			ns := NodeStatus{ID: n, Slots: map[int]SlotReplicaState{}}
			for s := 0; s < 2; s++ {
				state := raft.Follower.String()
				if (s == 0 && n == leader0) || (s == 1 && n == "n1") {
					state = raft.Leader.String()
				}
				ns.Slots[s] = SlotReplicaState{Status: raftgroup.Status{State: state, Term: 2, Voters: nodes, ConfigIndex: cfg, Applied: applied, Member: true}}
			}
			v.Nodes[n] = ns
		}
		return v
	}
	base := shapeOf(st, view("n1", 3, 10, "n1", "n2", "n3"))
	if shapeOf(st, view("n1", 3, 99, "n1", "n2", "n3")) != base {
		t.Fatal("applied indexes changed the shape")
	}
	for name, other := range map[string]uint64{
		"leader":        shapeOf(st, view("n2", 3, 10, "n1", "n2", "n3")),
		"configuration": shapeOf(st, view("n1", 4, 10, "n1", "n2", "n3")),
		"nodes":         shapeOf(st, view("n1", 3, 10, "n1", "n2")),
		"meta index":    shapeOf(&raftfsm.MetaState{Index: 8, SlotCount: 2}, view("n1", 3, 10, "n1", "n2", "n3")),
	} {
		if other == base {
			t.Errorf("a change of %s left the shape as it was", name)
		}
	}
}
