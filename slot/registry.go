package slot

import (
	"sort"
	"sync"
)

// Registry is the set of slot replicas open on this node. The cluster's
// reconciler adds and removes them; request forwarding, the cluster view
// and metrics read them. Lookups take a read lock only.
type Registry struct {
	mu sync.RWMutex
	m  map[int]*Replica
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{m: map[int]*Replica{}} }

// Get returns the local replica of slot s, or nil.
func (g *Registry) Get(s int) *Replica {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.m[s]
}

// Leader returns the local replica of slot s if it leads the slot, or nil.
func (g *Registry) Leader(s int) *Replica {
	if r := g.Get(s); r != nil && r.IsLeader() {
		return r
	}
	return nil
}

// Reader returns the local replica of slot s if it may serve reads
// (Replica.Readable), or nil.
func (g *Registry) Reader(s int) *Replica {
	if r := g.Get(s); r != nil && r.Readable() {
		return r
	}
	return nil
}

// Put records r as the local replica of slot s.
func (g *Registry) Put(s int, r *Replica) {
	g.mu.Lock()
	g.m[s] = r
	g.mu.Unlock()
}

// Remove forgets slot s's replica if it still is r (a newer replica of the
// same slot stays), and reports whether it did.
func (g *Registry) Remove(s int, r *Replica) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m[s] != r {
		return false
	}
	delete(g.m, s)
	return true
}

// Slots lists the slots with a local replica, in order.
func (g *Registry) Slots() []int {
	g.mu.RLock()
	out := make([]int, 0, len(g.m))
	for s := range g.m {
		out = append(out, s)
	}
	g.mu.RUnlock()
	sort.Ints(out)
	return out
}

// All returns the local replicas, by slot.
func (g *Registry) All() []*Replica {
	g.mu.RLock()
	defer g.mu.RUnlock()
	slots := make([]int, 0, len(g.m))
	for s := range g.m {
		slots = append(slots, s)
	}
	sort.Ints(slots)
	out := make([]*Replica, len(slots))
	for i, s := range slots {
		out[i] = g.m[s]
	}
	return out
}

// Len is the number of local replicas.
func (g *Registry) Len() int {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return len(g.m)
}
