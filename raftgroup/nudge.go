package raftgroup

import (
	"sync"
	"time"
)

// nudger serialises Nudge's barriers: at most one runs per group, and
// nudges that arrive while it runs fold into one more after it.
type nudger struct {
	mu      sync.Mutex
	running bool
	again   bool
}

// Nudge makes the followers learn, now rather than at the next
// CommitTimeout tick, that everything this leader has applied so far is
// committed: it appends a barrier entry in the background, and the
// AppendEntries that carries it to each follower carries the leader's
// commit index too (hashicorp/raft tells an idle follower the commit index
// only on that tick or with the next entry). A group with a long
// CommitTimeout whose followers must apply a write soon after the leader
// did (the meta group: a node that forwarded a meta write waits until its
// own copy has it) calls it after each write. A no-op on a follower;
// never blocks.
func (g *Group) Nudge() {
	n := &g.nudge
	n.mu.Lock()
	if n.running {
		n.again = true
		n.mu.Unlock()
		return
	}
	n.running = true
	n.mu.Unlock()
	if !g.background(g.runNudges) {
		n.mu.Lock()
		n.running = false
		n.mu.Unlock()
	}
}

// runNudges issues barriers until no nudge is left.
func (g *Group) runNudges() {
	n := &g.nudge
	for {
		if g.IsLeader() {
			_ = g.raft.Barrier(nudgeTimeout).Error()
		}
		n.mu.Lock()
		if !n.again {
			n.running = false
			n.mu.Unlock()
			return
		}
		n.again = false
		n.mu.Unlock()
	}
}

// nudgeTimeout bounds one nudge's barrier (it only waits for the leader to
// take it; the followers learn of the commit as it is replicated).
const nudgeTimeout = time.Second
