package cluster

import (
	"context"
	"time"

	"github.com/hashicorp/raft"

	"github.com/timemachine-db/timemachine/model"
)

// Measurements is what the cluster reports to the node's metrics at
// scrape time.
type Measurements struct {
	// Followers are the followers of the slots this node leads, with how
	// far behind they are (from the view: the leader's commit index minus
	// what the follower reports applied).
	Followers []FollowerLag
	// Moves: slots moving, of those being worked on, and slot moves done
	// while this node led the meta group (non-zero on the meta leader).
	MovesPending, MovesActive int
	MovesDone                 uint64
	// Nodes counts the nodes of the node table by status as /v1/cluster
	// shows it (alive, draining, failed, left, unreachable).
	Nodes map[string]int
}

// FollowerLag is one follower of a slot led by this node.
type FollowerLag struct {
	Slot      int
	Follower  string
	Reachable bool
	Behind    uint64 // entries
}

// Measure gathers the measurements (from the cached view, at most a
// couple of seconds old).
func (c *Cluster) Measure(ctx context.Context) Measurements {
	view := c.CachedView(ctx, 2*time.Second)
	var m Measurements
	m.MovesPending, m.MovesActive, m.MovesDone = c.moves.counts()
	self := view.Nodes[c.cfg.NodeID]
	for s, ls := range self.Slots {
		if ls.State != raft.Leader.String() {
			continue
		}
		t := view.Truth(s)
		for _, id := range t.Members() {
			if id == c.cfg.NodeID {
				continue
			}
			fl := FollowerLag{Slot: s, Follower: id}
			if fs, ok := view.Replica(id, s); ok {
				fl.Reachable = true
				if ls.CommitIndex > fs.Applied {
					fl.Behind = ls.CommitIndex - fs.Applied
				}
			}
			m.Followers = append(m.Followers, fl)
		}
	}
	m.Nodes = map[string]int{}
	for _, nd := range c.cfg.Meta.State().NodeList() {
		status := string(nd.Status)
		if _, ok := view.Nodes[nd.ID]; !ok && (nd.Status == model.NodeAlive || nd.Status == model.NodeDraining) {
			status = "unreachable"
		}
		m.Nodes[status]++
	}
	return m
}
