package dht

import (
	"cmp"
	"slices"
)

// Both refinements below are the same problem: items (a slot's leadership,
// or a slot's new replica) each sit on one node and may sit on any of a set
// of candidate nodes, and the per-node totals should be as even as possible.
// An assignment of items to nodes is a semi-matching, and it is optimal
// (it minimises every norm of the load vector at once, so it reaches a
// spread of at most 1 whenever any assignment does) exactly when there is
// no cost-reducing path: a chain u -> x1 -> ... -> v where each hop is an
// item on the node before that may move to the node after, and
// load(u) >= load(v)+2 (Harvey, Ladner, Lovász and Tamir, "Semi-matchings
// for bipartite graphs and load balancing", 2006). Shifting one item along
// every hop moves one unit from u to v and leaves the nodes in between as
// they were; the sum of squared loads falls each time, so the loop ends.
// Starting from a greedy assignment, few paths are needed, so few items
// change. For leaderships this is exact. For new replicas it is a local
// improvement only, since two new replicas of one slot must not land on the
// same node (Rebalance then guarantees the spread with real moves).

// pathFinder finds cost-reducing paths; it holds scratch space only.
type pathFinder struct {
	n      int
	order  []int
	parent []int
	queue  []int
}

func newPathFinder(n int) *pathFinder {
	return &pathFinder{n: n, order: make([]int, n), parent: make([]int, n), queue: make([]int, 0, n)}
}

// find returns a cost-reducing path as the nodes from its end v back to its
// start u, or nil. edge[x*n+y] > 0 means some item on x may move to y.
// Sources are tried from the most loaded (ties: smaller index), the search
// is breadth-first with neighbours in index order, and the end is the least
// loaded node reached (ties: the first reached), so the path is
// deterministic and short.
func (f *pathFinder) find(load, edge []int) []int {
	n := f.n
	for i := range f.order {
		f.order[i] = i
	}
	slices.SortFunc(f.order, func(a, b int) int {
		return cmp.Or(cmp.Compare(load[b], load[a]), cmp.Compare(a, b))
	})
	least := load[f.order[n-1]]
	for _, u := range f.order {
		if load[u]-least < 2 {
			return nil // every later source is lighter still
		}
		for i := range f.parent {
			f.parent[i] = -1
		}
		f.parent[u] = u
		f.queue = append(f.queue[:0], u)
		best := -1
		for qi := 0; qi < len(f.queue); qi++ {
			x := f.queue[qi]
			for y := range n {
				if f.parent[y] < 0 && edge[x*n+y] > 0 {
					f.parent[y] = x
					f.queue = append(f.queue, y)
					if load[y] <= load[u]-2 && (best < 0 || load[y] < load[best]) {
						best = y
					}
				}
			}
		}
		if best >= 0 {
			var path []int
			for y := best; y != u; y = f.parent[y] {
				path = append(path, y)
			}
			return append(path, u)
		}
	}
	return nil
}

// balanceLeaders re-chooses preferred leaders so leaderships are spread as
// evenly as the allowed choices permit: slot s may be led by any node in
// cands(s) (nil or a single node: it keeps its leader). It does nothing
// when the spread is already at most 1.
//
// Hops of a path are applied from its far end back, so that every hop's
// slot is one its leader led before this path began.
func (p *planner) balanceLeaders(cands func(s int) []int) {
	n := len(p.ids)
	if n < 2 {
		return
	}
	// edge[x*n+y]: how many changeable slots led by x may be led by y;
	// kept up to date as leaderships shift.
	edge := make([]int, n*n)
	addEdges := func(s, d int) {
		c := cands(s)
		if len(c) < 2 {
			return
		}
		x := p.reps[s][0]
		for _, y := range c {
			if y != x {
				edge[x*n+y] += d
			}
		}
	}
	for s := range p.reps {
		addEdges(s, 1)
	}
	f := newPathFinder(n)
	for {
		path := f.find(p.leads, edge)
		if path == nil {
			return
		}
		for i := 0; i+1 < len(path); i++ {
			y, x := path[i], path[i+1]
			s := p.ledSlotWith(x, y, cands)
			addEdges(s, -1)
			p.leads[x]--
			p.promote(s, slices.Index(p.reps[s], y))
			addEdges(s, 1)
		}
	}
}

// ledSlotWith is the lowest slot led by x that may be led by y.
func (p *planner) ledSlotWith(x, y int, cands func(int) []int) int {
	for s, r := range p.reps {
		if len(r) > 0 && r[0] == x && slices.Contains(cands(s), y) {
			return s
		}
	}
	panic("dht: leader graph out of sync with the placement")
}

// spreadFills re-chooses the nodes of the replicas Repair added to slots
// that kept some replicas, so replica counts end as even as the slots'
// existing members allow: filling slot by slot, the fewest-replicas rule
// can leave the last slots no choice but an already loaded node. A new
// replica may go to any eligible node its slot does not hold. Slots placed
// whole keep placeNew's choice. The number of moves does not change, only
// their destinations.
func (p *planner) spreadFills() {
	n := len(p.ids)
	if n < 2 {
		return
	}
	type item struct{ slot, pos int }
	var items []item
	for s, r := range p.reps {
		if p.kept[s] > 0 {
			for pos := p.kept[s]; pos < len(r); pos++ {
				items = append(items, item{s, pos})
			}
		}
	}
	if len(items) == 0 {
		return
	}
	edge := make([]int, n*n)
	in := make([]bool, n)
	f := newPathFinder(n)
	for {
		// Moving one item changes what its slot's other items may do, so
		// the graph is rebuilt per path (items are few: only new replicas).
		clear(edge)
		for _, it := range items {
			r := p.reps[it.slot]
			for _, x := range r {
				in[x] = true
			}
			x := r[it.pos]
			for y := range n {
				if !in[y] {
					edge[x*n+y]++
				}
			}
			for _, x := range r {
				in[x] = false
			}
		}
		path := f.find(p.count, edge)
		if path == nil {
			return
		}
		for i := 0; i+1 < len(path); i++ {
			y, x := path[i], path[i+1]
			k := slices.IndexFunc(items, func(it item) bool {
				r := p.reps[it.slot]
				return r[it.pos] == x && !slices.Contains(r, y)
			})
			p.reps[items[k].slot][items[k].pos] = y
			p.count[x]--
			p.count[y]++
		}
	}
}
