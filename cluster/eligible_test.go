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
