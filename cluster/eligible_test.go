package cluster

import (
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
)

// An alive node that this node's liveness check cannot reach and that
// votes in no slot (a node whose certificate the cluster's CA did not
// sign: gossip lists it, its internal port refuses everyone) holds no
// replicas: counted, it raised the replication factor and no move onto
// it could finish. A node that votes somewhere keeps its replicas while
// unreachable, and without a view (not the meta leader) or a liveness
// check every alive node counts, as before.
func TestEligibleLeavesOutAnUnreachableNewcomer(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	st := &raftfsm.MetaState{SlotCount: 2, ReplicationFactor: 3, Nodes: map[string]*model.Node{
		"a": {ID: "a", Status: model.NodeAlive},
		"b": {ID: "b", Status: model.NodeAlive},
		"c": {ID: "c", Status: model.NodeAlive},
		"d": {ID: "d", Status: model.NodeAlive},
		"e": {ID: "e", Status: model.NodeFailed, Since: now.Add(-time.Second).UnixMilli()},
		"f": {ID: "f", Status: model.NodeFailed, Since: now.Add(-time.Hour).UnixMilli()},
		"g": {ID: "g", Status: model.NodeDraining},
	}}
	// The slots' configurations as the last view reports them: a, b and c
	// vote; d was added as a nonvoter and never caught up.
	v := view(map[string]map[int]SlotReplicaState{
		"a": {0: rep(raft.Leader, 2, 5, 9, abc, []string{"d"}, "a"), 1: rep(raft.Follower, 2, 5, 9, abc, nil, "a")},
		"b": {0: rep(raft.Follower, 2, 5, 9, abc, []string{"d"}, "b"), 1: rep(raft.Leader, 2, 5, 9, abc, nil, "b")},
	})
	for _, tc := range []struct {
		name        string
		unreachable func(string) bool
		view        bool
		want        []string
	}{
		{"every peer heard", func(string) bool { return false }, true, []string{"a", "b", "c", "d", "e"}},
		{"the newcomer unreachable", func(id string) bool { return id == "d" }, true, []string{"a", "b", "c", "e"}},
		{"a voter unreachable keeps its replicas", func(id string) bool { return id == "c" }, true, []string{"a", "b", "c", "d", "e"}},
		{"no peer heard: voters stay", func(string) bool { return true }, true, []string{"a", "b", "c", "e"}},
		{"no view: every alive node", func(id string) bool { return id == "d" }, false, []string{"a", "b", "c", "d", "e"}},
		{"no liveness check: every alive node", nil, true, []string{"a", "b", "c", "d", "e"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Config{NodeID: "a", FailureGrace: 30 * time.Second, Unreachable: tc.unreachable,
				Clock: func() time.Time { return now }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if tc.view {
				c.view.at, c.view.nodes = now, v.Nodes
			}
			got := c.eligible(st)
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("eligible = %v, want %v", got, tc.want)
			}
		})
	}
}

// A node gone past the failure grace keeps its replicas while no spare
// node could take them: with three nodes and replication factor 3 it
// stays eligible (dropped, every slot ran on two members, healthy by every
// check, and could not take it back once a second node failed); with a
// spare node it is replaced. Among several lapsed nodes, those holding
// the most replicas are kept, only as many as are missing, and never one
// holding none.
func TestEligibleKeepsALapsedNodeWithoutASpare(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	gone := now.Add(-time.Hour).UnixMilli()
	abcSlots := []model.SlotEntry{{Replicas: []string{"a", "b", "c"}}, {Replicas: []string{"c", "a", "b"}}}
	for _, tc := range []struct {
		name  string
		rf    int
		nodes map[string]*model.Node
		slots []model.SlotEntry
		want  []string
	}{
		{"three nodes, one lapsed", 3, map[string]*model.Node{
			"a": {ID: "a", Status: model.NodeAlive}, "b": {ID: "b", Status: model.NodeAlive},
			"c": {ID: "c", Status: model.NodeFailed, Since: gone}}, abcSlots, []string{"a", "b", "c"}},
		{"three nodes, RF by default", 0, map[string]*model.Node{
			"a": {ID: "a", Status: model.NodeAlive}, "b": {ID: "b", Status: model.NodeAlive},
			"c": {ID: "c", Status: model.NodeLeft, Since: gone}}, abcSlots, []string{"a", "b", "c"}},
		{"a spare node takes its place", 3, map[string]*model.Node{
			"a": {ID: "a", Status: model.NodeAlive}, "b": {ID: "b", Status: model.NodeAlive},
			"c": {ID: "c", Status: model.NodeFailed, Since: gone}, "d": {ID: "d", Status: model.NodeAlive}}, abcSlots, []string{"a", "b", "d"}},
		{"two lapsed, one missing: the one holding more", 3, map[string]*model.Node{
			"a": {ID: "a", Status: model.NodeAlive}, "b": {ID: "b", Status: model.NodeAlive},
			"c": {ID: "c", Status: model.NodeFailed, Since: gone}, "e": {ID: "e", Status: model.NodeFailed, Since: gone}},
			[]model.SlotEntry{{Replicas: []string{"a", "b", "e"}}, {Replicas: []string{"e", "a", "b"}}, {Replicas: []string{"c", "a", "b"}}}, []string{"a", "b", "e"}},
		{"a lapsed node holding nothing is not kept", 3, map[string]*model.Node{
			"a": {ID: "a", Status: model.NodeAlive}, "b": {ID: "b", Status: model.NodeAlive},
			"z": {ID: "z", Status: model.NodeFailed, Since: gone}}, []model.SlotEntry{{Replicas: []string{"a", "b"}}}, []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &raftfsm.MetaState{SlotCount: len(tc.slots), ReplicationFactor: tc.rf, Nodes: tc.nodes, Slots: tc.slots}
			c := New(Config{NodeID: "a", FailureGrace: 30 * time.Second,
				Clock: func() time.Time { return now }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			got := c.eligible(st)
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("eligible = %v, want %v", got, tc.want)
			}
		})
	}
}
