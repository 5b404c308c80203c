package raftgroup

import "github.com/hashicorp/raft"

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
func (g *Group) observe() {
	if g.cfg.OnEvent == nil {
		return
	}
	ch := make(chan raft.Observation, 64)
	g.obs = raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		switch d := o.Data.(type) {
		case raft.RaftState:
			return d == raft.Candidate
		case raft.LeaderObservation:
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
					g.cfg.OnEvent(EventElection)
				case raft.LeaderObservation:
					id := string(d.LeaderID)
					if id != "" && id != last {
						if last != "" {
							g.cfg.OnEvent(EventLeaderChange)
						}
						last = id
					}
				}
			}
		}
	}()
}
