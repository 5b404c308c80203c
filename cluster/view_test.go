package cluster

import (
	"testing"

	"github.com/hashicorp/raft"

	"github.com/timemachine-db/timemachine/raftgroup"
)

func replicaState(state raft.RaftState, term uint64) SlotReplicaState {
	return SlotReplicaState{Status: raftgroup.Status{State: state.String(), Term: term}}
}

// The view's leader of a slot is the node whose replica says it leads; in
// a transition where two say so, the higher term wins.
func TestViewLeaderOf(t *testing.T) {
	v := View{Nodes: map[string]NodeStatus{
		"n1": {ID: "n1", Slots: map[int]SlotReplicaState{0: replicaState(raft.Leader, 3), 1: replicaState(raft.Follower, 4)}},
		"n2": {ID: "n2", Slots: map[int]SlotReplicaState{0: replicaState(raft.Follower, 3), 1: replicaState(raft.Leader, 5)}},
		"n3": {ID: "n3", Slots: map[int]SlotReplicaState{1: replicaState(raft.Leader, 4), 2: replicaState(raft.Candidate, 6)}},
	}}
	for s, want := range map[int]string{0: "n1", 1: "n2", 2: "", 3: ""} {
		if got := v.LeaderOf(s); got != want {
			t.Errorf("slot %d: leader %q, want %q", s, got, want)
		}
	}
	if r, ok := v.Replica("n3", 2); !ok || r.State != raft.Candidate.String() {
		t.Errorf("n3's replica of slot 2: %+v %v", r, ok)
	}
	if _, ok := v.Replica("n3", 0); ok {
		t.Error("n3 holds no replica of slot 0")
	}
	if _, ok := v.Replica("n9", 0); ok {
		t.Error("n9 is not in the view")
	}
}

func TestSameSetAndReplicas(t *testing.T) {
	if !sameSet([]string{"a", "b"}, []string{"b", "a"}) || sameSet([]string{"a"}, []string{"a", "b"}) || sameSet([]string{"a", "c"}, []string{"a", "b"}) {
		t.Error("sameSet")
	}
	if !sameReplicas([]string{"a", "b"}, []string{"a", "b"}) || sameReplicas([]string{"a", "b"}, []string{"b", "a"}) {
		t.Error("sameReplicas: order matters (the first is the preferred leader)")
	}
}
