package cluster

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/timemachine-db/timemachine/raftgroup"
	"github.com/timemachine-db/timemachine/rpc/peer"
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

// hangingCaller answers the nodes in ok at once and leaves every other
// call waiting until its context ends, as a node whose handler is stuck
// behind a lock, on a connection that stays open, would.
type hangingCaller struct{ ok map[string]NodeStatus }

func (h hangingCaller) Call(ctx context.Context, addr string, _ peer.Method, _ []byte) ([]byte, error) {
	if ns, ok := h.ok[addr]; ok {
		return json.Marshal(ns)
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// A node that never answers its status call is left out of the view once
// the timeout passes, even for a caller without a deadline of its own (an
// admin call or a test with context.Background once waited forever); the
// nodes that answered are in it.
func TestAskStatusesBoundsASilentNode(t *testing.T) {
	cl := hangingCaller{ok: map[string]NodeStatus{"a1": {ID: "n1"}, "a2": {ID: "n2"}}}
	addrs := map[string]string{"n1": "a1", "n2": "a2", "n3": "a3", "n4": ""}
	start := time.Now()
	got := askStatuses(context.Background(), cl, addrs, 200*time.Millisecond)
	if d := time.Since(start); d < 200*time.Millisecond || d > 5*time.Second {
		t.Fatalf("askStatuses returned after %v, want the 200 ms timeout", d)
	}
	if len(got) != 2 || got["n1"].ID != "n1" || got["n2"].ID != "n2" {
		t.Fatalf("got %v, want n1 and n2 only", got)
	}
	// The caller's own, shorter deadline still wins.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start = time.Now()
	askStatuses(ctx, cl, addrs, time.Hour)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("askStatuses ignored its caller's deadline: %v", d)
	}
}

// A fresh report of this node is combined with the cached view only while
// it agrees with the cached report of it on every slot's state and term.
func TestSameLeadership(t *testing.T) {
	at := func(slots map[int]SlotReplicaState) NodeStatus { return NodeStatus{ID: "a", Slots: slots} }
	cached := at(map[int]SlotReplicaState{
		0: rep(raft.Leader, 2, 5, 9, abc, nil, "a"),
		1: rep(raft.Follower, 3, 5, 9, abc, nil, "a"),
	})
	for _, tc := range []struct {
		name  string
		fresh NodeStatus
		same  bool
	}{
		{"nothing changed but indexes", at(map[int]SlotReplicaState{
			0: rep(raft.Leader, 2, 5, 12, abc, nil, "a"), 1: rep(raft.Follower, 3, 5, 12, abc, nil, "a")}), true},
		{"handed slot 0 away", at(map[int]SlotReplicaState{
			0: rep(raft.Follower, 3, 5, 12, abc, nil, "a"), 1: rep(raft.Follower, 3, 5, 12, abc, nil, "a")}), false},
		{"slot 1 has a new term", at(map[int]SlotReplicaState{
			0: rep(raft.Leader, 2, 5, 12, abc, nil, "a"), 1: rep(raft.Follower, 4, 5, 12, abc, nil, "a")}), false},
		{"a replica opened", at(map[int]SlotReplicaState{
			0: rep(raft.Leader, 2, 5, 12, abc, nil, "a"), 1: rep(raft.Follower, 3, 5, 12, abc, nil, "a"), 2: rep(raft.Follower, 1, 1, 1, abc, nil, "a")}), false},
		{"a replica closed", at(map[int]SlotReplicaState{0: rep(raft.Leader, 2, 5, 12, abc, nil, "a")}), false},
	} {
		if got := sameLeadership(cached, tc.fresh); got != tc.same {
			t.Errorf("%s: sameLeadership = %v, want %v", tc.name, got, tc.same)
		}
	}
}
