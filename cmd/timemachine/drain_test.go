package main

import (
	"strings"
	"testing"

	"github.com/timemachine-db/timemachine/client"
)

// A drain that leaves fewer serving nodes than the replication factor is
// announced with what it costs (a black-box review: draining one of three
// nodes dropped every slot to two replicas without a word).
func TestDrainWarning(t *testing.T) {
	nodes := func(statuses ...string) []client.NodeInfo {
		var out []client.NodeInfo
		for i, s := range statuses {
			out = append(out, client.NodeInfo{ID: string(rune('a' + i)), Status: s})
		}
		return out
	}
	for _, c := range []struct {
		name  string
		rf    int
		nodes []client.NodeInfo
		want  string // "" for no warning, else a part of it
	}{
		{"four nodes, RF 3", 3, nodes("alive", "alive", "alive", "alive"), ""},
		{"three nodes, RF 3", 3, nodes("alive", "alive", "alive"), "2 serving node(s) remain: every slot keeps 2 replica(s) instead of 3 and survives the loss of 0 node(s) (it survives 1 now)"},
		{"a failed node does not count", 3, nodes("alive", "alive", "alive", "failed"), "keeps 2 replica(s)"},
		{"a draining node does not count", 3, nodes("alive", "alive", "alive", "draining"), "keeps 2 replica(s)"},
		{"two nodes, RF 2", 2, nodes("alive", "alive"), "keeps 1 replica(s) instead of 2"},
		{"single node", 1, nodes("alive"), "no serving node but a remains"},
	} {
		got := drainWarning(&client.ClusterInfo{ReplicationFactor: c.rf, Nodes: c.nodes}, "a")
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
