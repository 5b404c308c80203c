package raftgroup

import "github.com/hashicorp/raft"

// Status is what a replica reports about itself (for catch-up checks and
// the cluster view). It travels between nodes as JSON.
type Status struct {
	State       string   `json:"state"`
	Leader      string   `json:"leader"`
	Term        uint64   `json:"term"`
	LastIndex   uint64   `json:"last_index"`
	CommitIndex uint64   `json:"commit_index"`
	Applied     uint64   `json:"applied"`
	Voters      []string `json:"voters"`
	Nonvoters   []string `json:"nonvoters"`
	// ConfigIndex is the log index of the configuration above: a
	// membership step taken against it fails if it changed meanwhile.
	ConfigIndex uint64 `json:"config_index"`
	Member      bool   `json:"member"` // this node is in the group's configuration
	Shutdown    bool   `json:"shutdown"`
	// Gated: the replica refuses votes until it has caught up (it started
	// with nothing stored, or replaced a deleted one: votegate.go), so its
	// group cannot count on it yet. Older binaries leave it out.
	Gated bool `json:"gated,omitempty"`
}

// Status reports the replica's raft state. Applied is raft's applied
// index; a replica whose FSM tracks its own applied index reports that
// instead.
func (g *Group) Status() Status {
	st := Status{
		State:       g.raft.State().String(),
		Term:        g.raft.CurrentTerm(),
		LastIndex:   g.raft.LastIndex(),
		CommitIndex: g.raft.CommitIndex(),
		Applied:     g.raft.AppliedIndex(),
		Shutdown:    g.raft.State() == raft.Shutdown,
	}
	st.Leader, _ = g.Leader()
	if g.gate != nil {
		st.Gated = g.gate.gated()
	}
	if f := g.raft.GetConfiguration(); f.Error() == nil {
		st.ConfigIndex = f.Index()
		for _, s := range f.Configuration().Servers {
			if string(s.ID) == g.cfg.NodeID {
				st.Member = true
			}
			if s.Suffrage == raft.Voter {
				st.Voters = append(st.Voters, string(s.ID))
			} else {
				st.Nonvoters = append(st.Nonvoters, string(s.ID))
			}
		}
	}
	return st
}

// CaughtUpSlack is how far (in log entries) a follower may trail its
// leader and still count as caught up.
const CaughtUpSlack = 64

// CaughtUp judges a follower's reported status against its leader's. A
// gated follower is not caught up, however close its log: it would not
// vote for a new leader if this one failed.
func CaughtUp(leader, follower Status) bool {
	return !follower.Gated && follower.Applied+CaughtUpSlack >= leader.CommitIndex && follower.LastIndex+CaughtUpSlack >= leader.LastIndex
}
