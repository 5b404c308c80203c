package node

import (
	"sync"

	"github.com/timemachine-db/timemachine/raftfsm"
)

// hostsCache remembers how many nodes hold slot replicas in one meta
// state, so that a lane asking for every job does not walk the slot table.
type hostsCache struct {
	mu sync.Mutex
	of *raftfsm.MetaState
	n  int
}

// slotHosts returns the number of nodes that hold a replica of some slot:
// each may lead slots and deliver, so a route's max_in_flight below it is
// held through cluster-wide places (package inflight), at or above it by
// shares (slot.Lanes).
func (n *Node) slotHosts() int {
	st := n.meta.State()
	c := &n.hosts
	c.mu.Lock()
	defer c.mu.Unlock()
	if st != c.of {
		seen := make(map[string]struct{}, len(st.Nodes))
		for _, e := range st.Slots {
			for _, id := range e.Replicas {
				seen[id] = struct{}{}
			}
		}
		c.of, c.n = st, max(len(seen), 1)
	}
	return c.n
}
