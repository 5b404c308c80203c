package cluster

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/raftgroup"
)

// DefaultReplicaWarnAfter is how long a replica may stay unreachable or
// behind before the controller warns.
const DefaultReplicaWarnAfter = 30 * time.Second

// replicaWatch is the meta leader's watch on replicas that are supposed
// to be in their slot's configuration (they are in the target and in the
// configuration): a node whose replicas stay unreachable, or stay behind
// their leader, for longer than ReplicaWarnAfter gets one WARN — an
// operator must act then — and one INFO when it recovers. The per-RPC
// failures raft itself reports are DEBUG (raftgroup/logger.go); brief
// problems during a move or a restart are routine and say nothing.
type replicaWatch struct {
	mu     sync.Mutex
	since  map[string]time.Time // node → when its current problem began
	warned map[string]bool
}

func (w *replicaWatch) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.since, w.warned = nil, nil
}

// watchReplicas updates the watch from a fresh view taken at now.
func (c *Cluster) watchReplicas(st *raftfsm.MetaState, view View, now time.Time) {
	threshold := c.cfg.ReplicaWarnAfter
	if threshold <= 0 {
		threshold = DefaultReplicaWarnAfter
	}
	problems := map[string][]string{} // node → "slot 3 unreachable", …
	for s := 0; s < st.SlotCount && s < len(st.Slots); s++ {
		t := view.Truth(s)
		if t.Leader == "" {
			continue
		}
		ls, _ := view.Replica(t.Leader, s)
		for _, id := range t.Members() {
			if id == t.Leader {
				continue
			}
			fs, ok := view.Replica(id, s)
			if !st.Slots[s].Has(id) {
				continue // being removed: whatever it does is no concern
			}
			switch {
			case !ok:
				problems[id] = append(problems[id], fmt.Sprintf("slot %d unreachable", s))
			case contains(t.Voters, id) && !raftgroup.CaughtUp(ls.Status, fs.Status):
				behind := ls.CommitIndex - min(ls.CommitIndex, fs.Applied)
				if fs.Gated {
					// It started empty (or replaced a deleted replica)
					// and does not vote until it has caught up.
					problems[id] = append(problems[id], fmt.Sprintf("slot %d not voting until caught up (behind by %d entries)", s, behind))
					break
				}
				problems[id] = append(problems[id], fmt.Sprintf("slot %d behind by %d entries", s, behind))
			}
		}
	}
	w := &c.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.since == nil {
		w.since, w.warned = map[string]time.Time{}, map[string]bool{}
	}
	for id, ps := range problems {
		if _, ok := w.since[id]; !ok {
			w.since[id] = now
		}
		if !w.warned[id] && now.Sub(w.since[id]) >= threshold {
			w.warned[id] = true
			sort.Strings(ps)
			c.log.Warn("replicas of a node have been unreachable or behind for too long; check the node and its network",
				"node", id, "for", now.Sub(w.since[id]).Round(time.Second).String(), "replicas", strings.Join(ps, ", "))
		}
	}
	for id, since := range w.since {
		if _, still := problems[id]; still {
			continue
		}
		if w.warned[id] {
			c.log.Info("replicas of a node are reachable and caught up again", "node", id, "after", now.Sub(since).Round(time.Second).String())
		}
		delete(w.since, id)
		delete(w.warned, id)
	}
}
