package raftgroup

import (
	"time"

	"github.com/hashicorp/raft"
)

// Event is something a replica saw happen to its group, for metrics.
type Event uint8

// The events a replica reports through Config.OnEvent.
const (
	// EventElection: this replica became a candidate (it started an
	// election, pre-vote included).
	EventElection Event = iota + 1
	// EventLeaderChange: the leader this replica knows changed to another
	// node (an election or a transfer ended).
	EventLeaderChange
)

// observe reports elections and leader changes to Config.OnEvent from
// raft's observations. The observer never blocks raft: a full channel
// drops observations (an undercount of a metric, never a stall).
//
// It also catches a follower up as soon as it answers heartbeats again
// (ResumedHeartbeatObservation; see catchUp).
func (g *Group) observe() {
	event := g.cfg.OnEvent
	if event == nil {
		event = func(Event) {}
	}
	ch := make(chan raft.Observation, 64)
	g.obs = raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		switch d := o.Data.(type) {
		case raft.RaftState:
			return d == raft.Candidate
		case raft.LeaderObservation, raft.ResumedHeartbeatObservation:
			return true
		}
		return false
	})
	g.raft.RegisterObserver(g.obs)
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		last := ""
		for {
			select {
			case <-g.closed:
				return
			case o := <-ch:
				switch d := o.Data.(type) {
				case raft.RaftState:
					event(EventElection)
				case raft.LeaderObservation:
					id := string(d.LeaderID)
					if id != "" && id != last {
						if last != "" {
							event(EventLeaderChange)
						}
						last = id
					}
				case raft.ResumedHeartbeatObservation:
					g.catchUp()
				}
			}
		}
	}()
}

// catchUp makes the leader replicate to a follower that answers heartbeats
// again (it restarted, or a partition healed) now rather than at its next
// CommitTimeout tick, which is up to 30 s for a slot: raft retries a failed
// follower only on that tick or when a new entry is appended, so it
// appends one (a barrier). Without it a node restarted moments before the
// next failure could still be behind when it is needed for a quorum.
func (g *Group) catchUp() {
	if !g.IsLeader() {
		return
	}
	g.background(func() { _ = g.raft.Barrier(time.Second).Error() })
}
