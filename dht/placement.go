package dht

import (
	"cmp"
	"math/bits"
	"slices"
	"strings"
)

// Assignment is the desired replica set of one slot. Replicas[0] is the
// slot's preferred leader; the order of the rest is stable (the planner never
// reshuffles it), so two placements that differ only where something really
// changed also print and diff the same.
type Assignment struct {
	Slot     int
	Replicas []string // node ids, distinct
}

// EffectiveRF is the replication factor actually used for a cluster of
// `nodes` nodes: rf <= 0 means min(3, nodes), and rf is clamped to nodes
// (two replicas of one slot on one node would add copies, not safety).
func EffectiveRF(rf, nodes int) int {
	if nodes < 0 {
		nodes = 0
	}
	if rf <= 0 {
		rf = 3
	}
	return min(rf, nodes)
}

// Initial places `slots` slots on `nodes` with rf replicas each (rf is
// clamped to len(nodes); rf <= 0 means min(3, len(nodes))). The order of
// `nodes` does not matter (ids are sorted, duplicates and "" dropped).
// Replica counts per node differ by at most 1, and so do preferred
// leaderships: 12 slots on 3 nodes with rf 3 give every node 12 replicas and
// 4 leaderships.
//
// It is Rebalance of an empty placement, so a fresh cluster and a repaired
// one follow the same rules.
func Initial(slots int, nodes []string, rf int) []Assignment {
	return Rebalance(nil, slots, nodes, rf)
}

// Repair returns the desired placement given the current one, changing as
// little as possible: every replica move copies a whole slot (its Pebble span
// and raft snapshot) over the network, so a node failure must cost exactly
// the replicas that node held and nothing more.
//
//   - Replicas on nodes not in `eligible` are dropped (so are duplicates and
//     slots outside [0, slots)).
//   - Slots with more than rf replicas are trimmed, dropping replicas on the
//     most loaded nodes (ties: most leaderships, then the larger id) and never
//     the preferred leader while it is eligible.
//   - A slot whose preferred leader was dropped gets, in that position, the
//     surviving replica that leads the fewest slots (ties: order in
//     Replicas), so a failed node's leaderships spread over the survivors.
//     If, after refining those choices, some node still leads two slots
//     more than another (every survivor of the failed node's slots may
//     already lead its share), leaderships are shifted along chains of
//     slots until the spread is as small as the survivors allow. That
//     reorders a few other slots, which is not a move: it costs a raft
//     leadership transfer, not a copy. A replica added by this Repair never
//     becomes preferred leader (it has yet to copy the slot), and a
//     placement where no slot lost its leader keeps every leader, even an
//     uneven choice an operator made.
//   - Slots with fewer than rf replicas are filled, one replica at a time, on
//     the eligible node with the fewest replicas (ties: fewest preferred
//     leaderships, then node id). Slots missing from `current` (or a nil
//     current) are placed as if new. The new replicas of partly filled
//     slots are then re-chosen where that evens replica counts out (their
//     number stays the same).
//
// Nothing else moves: a placement with nothing wrong is returned unchanged,
// and Repair is idempotent. rf is clamped to len(eligible) (rf <= 0 means
// min(3, len(eligible))). The result is sorted by slot, has exactly `slots`
// entries and shares no memory with `current`.
func Repair(current []Assignment, slots int, eligible []string, rf int) []Assignment {
	return newPlanner(current, slots, eligible, rf).repair().result()
}

// Rebalance is Repair followed by the fewest replica moves that make replica
// counts per eligible node differ by at most 1, and then by a reordering of
// Replicas within slots so that preferred leaderships per node differ by at
// most 1 where the replica sets allow it (reordering is not a move: it only
// changes which replica should lead, which costs a raft leadership transfer,
// not a copy). It is what `admin rebalance` and a node join run.
//
// Each move takes one replica from the most loaded node (ties: most
// leaderships, then node id) to the least loaded one (ties: fewest
// leaderships, then node id), on the lowest-numbered slot that holds the
// first but not the second, preferring slots the first does not lead; the
// new replica takes the old one's position. Rebalance is idempotent.
func Rebalance(current []Assignment, slots int, eligible []string, rf int) []Assignment {
	p := newPlanner(current, slots, eligible, rf).repair()
	p.balanceReplicas()
	p.balanceLeaders(func(s int) []int { return p.reps[s] })
	return p.result()
}

// planner holds a placement in index form: nodes are indexes into the sorted
// eligible ids, so every tie-break is by id without further lookups, and no
// map is ever iterated.
type planner struct {
	ids   []string // sorted, distinct eligible node ids
	rf    int      // effective replication factor
	reps  [][]int  // per slot: node indexes, reps[s][0] is the preferred leader
	count []int    // per node: replicas held
	leads []int    // per node: preferred leaderships held

	// Set by repair: orphan[s] is true when slot s lost (or never had) its
	// preferred leader; kept[s] is how many of its replicas survived, so
	// reps[s][kept[s]:] are new.
	orphan []bool
	kept   []int

	// pair[x*n+y] counts the slots led by x that y follows (n = len(ids)).
	pair []int
}

// sortedNodes returns the distinct non-empty ids of nodes, sorted.
func sortedNodes(nodes []string) []string {
	ids := make([]string, 0, len(nodes))
	for _, id := range nodes {
		if id != "" {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

func newPlanner(current []Assignment, slots int, eligible []string, rf int) *planner {
	slots = max(slots, 0)
	ids := sortedNodes(eligible)
	p := &planner{
		ids:    ids,
		rf:     EffectiveRF(rf, len(ids)),
		reps:   make([][]int, slots),
		count:  make([]int, len(ids)),
		leads:  make([]int, len(ids)),
		orphan: make([]bool, slots),
		kept:   make([]int, slots),
	}
	seen := make([]bool, slots)
	for _, a := range current {
		if a.Slot < 0 || a.Slot >= slots || seen[a.Slot] {
			continue // out of range or listed twice: the first entry wins
		}
		seen[a.Slot] = true
		r := make([]int, 0, max(p.rf, len(a.Replicas)))
		for _, id := range a.Replicas {
			if i, ok := p.index(id); ok && !slices.Contains(r, i) {
				r = append(r, i)
			}
		}
		p.reps[a.Slot] = r
		// The preferred leader survives only if it stayed first.
		p.orphan[a.Slot] = len(a.Replicas) == 0 || len(r) == 0 || p.ids[r[0]] != a.Replicas[0]
	}
	for s := range slots {
		if !seen[s] {
			p.orphan[s] = true
		}
		for _, n := range p.reps[s] {
			p.count[n]++
		}
		if !p.orphan[s] {
			p.leads[p.reps[s][0]]++
		}
	}
	return p
}

// index finds an eligible node by id (binary search: ids are sorted).
func (p *planner) index(id string) (int, bool) {
	if id == "" {
		return 0, false
	}
	return slices.BinarySearchFunc(p.ids, id, strings.Compare)
}

func (p *planner) repair() *planner {
	// 1. Trim over-replicated slots.
	for s, r := range p.reps {
		for len(r) > p.rf {
			first := 0
			if !p.orphan[s] {
				first = 1 // never the eligible preferred leader
			}
			v := first
			for i := first + 1; i < len(r); i++ {
				if p.heavier(r[i], r[v]) {
					v = i
				}
			}
			p.count[r[v]]--
			r = slices.Delete(r, v, v+1)
		}
		p.reps[s] = r
	}
	// 2. Orphaned slots with survivors: the survivor leading the fewest.
	for s, r := range p.reps {
		p.kept[s] = len(r)
		if p.orphan[s] && len(r) > 0 {
			p.promote(s, p.fewestLeads(r))
		}
	}
	// 3. Fill under-replicated slots. A placement with no replica left at
	// all starts with whole rounds of the fixed layout; a slot with no
	// survivor is placed whole (placeNew), so that its leader and followers
	// are chosen together.
	p.pair = make([]int, len(p.ids)*len(p.ids))
	if !slices.ContainsFunc(p.reps, func(r []int) bool { return len(r) > 0 }) {
		p.placeRounds()
	}
	for _, r := range p.reps {
		p.addPairs(r, 1)
	}
	for s, r := range p.reps {
		if len(r) == 0 {
			p.placeNew(s)
			continue
		}
		for len(r) < p.rf {
			best := -1
			for n := range p.ids {
				if !slices.Contains(r, n) && (best < 0 || p.lighter(n, best)) {
					best = n
				}
			}
			p.count[best]++
			p.pair[r[0]*len(p.ids)+best]++
			r = append(r, best)
		}
		p.reps[s] = r
	}
	p.pair = nil
	// 4. Refine. Spread the new replicas of partly filled slots as evenly
	// as the slots' members allow; this changes where moves go, not how
	// many there are.
	p.spreadFills()
	// Then, if any slot lost its preferred leader, spread leaderships:
	// first by re-choosing only among the orphans' survivors, and if that
	// is not enough (every survivor of a failed node's slots may already
	// lead more than its share), along chains through other slots too. A
	// replica Repair has just added never becomes preferred leader: it
	// still has to copy the slot. Changing a preferred leader is a raft
	// leadership transfer, not a move, and happens only while some node
	// leads two more slots than another, so a placement with no orphan
	// keeps every leader, even uneven ones an operator chose.
	survivors := func(s int) []int {
		if p.kept[s] > 0 {
			return p.reps[s][:p.kept[s]]
		}
		return p.reps[s] // placed new: its replicas are equally fresh
	}
	if slices.Contains(p.orphan, true) {
		p.balanceLeaders(func(s int) []int {
			if !p.orphan[s] {
				return nil
			}
			return survivors(s)
		})
		p.balanceLeaders(survivors)
	}
	return p
}

// addPairs counts (d = 1) or uncounts (d = -1) the leader-follower pairs of
// one replica set.
func (p *planner) addPairs(r []int, d int) {
	for _, y := range r[min(1, len(r)):] {
		p.pair[r[0]*len(p.ids)+y] += d
	}
}

// placeRounds lays out a placement from nothing, in rounds of n slots
// (n = number of nodes): slot s is led by node s mod n, and in round
// k = s / n its followers are at the rf-1 offsets 1+((k+j) mod (n-1)),
// j = 0..rf-2, from its leader. Within a round
// every node leads once and follows rf-1 times whatever the offsets, so
// counts stay exact; across rounds the offsets walk through 1..n-1, so
// every node's slots are followed by all the other nodes equally, and when
// a node fails each survivor can take over an equal share of its
// leaderships. (Filling slot by slot from the least loaded nodes would
// instead tend to settle into fixed groups, e.g. two triads of 6 nodes,
// and a failed node's leaderships would all fall to its two partners.)
// The last, partial round is left to placeNew.
func (p *planner) placeRounds() {
	n := len(p.ids)
	if p.rf == 0 {
		return // no node at all
	}
	for s := range len(p.reps) / n * n {
		x, k := s%n, s/n
		r := make([]int, 1, p.rf)
		r[0] = x
		for j := range p.rf - 1 {
			r = append(r, (x+1+(k+j)%(n-1))%n)
		}
		for _, y := range r {
			p.count[y]++
		}
		p.leads[x]++
		p.reps[s] = r
	}
}

// placeNew places a slot that has no replica: rf nodes with the fewest
// replicas, as for any fill, but with the leader chosen first and the ties
// among followers broken by how few slots of that leader they already
// follow. That spreads each leader's slots over all the other nodes, so
// when a node fails its leaderships can be taken over evenly by survivors
// (Repair may only promote survivors: new replicas still have to catch up).
func (p *planner) placeNew(s int) {
	n := len(p.ids)
	if p.rf == 0 {
		return
	}
	// Threshold: the replica count of the rf-th lightest node. Nodes below
	// it must be chosen; nodes at it may be.
	counts := slices.Clone(p.count)
	slices.Sort(counts)
	t := counts[p.rf-1]
	leader := -1
	for x := range n {
		if p.count[x] > t {
			continue
		}
		if leader < 0 || p.leads[x] < p.leads[leader] ||
			(p.leads[x] == p.leads[leader] && p.count[x] < p.count[leader]) {
			leader = x
		}
	}
	var forced, optional []int
	for y := range n {
		switch {
		case y == leader || p.count[y] > t:
		case p.count[y] < t:
			forced = append(forced, y)
		default:
			optional = append(optional, y)
		}
	}
	byPair := func(a, b int) int {
		return cmp.Or(
			cmp.Compare(p.pair[leader*n+a], p.pair[leader*n+b]),
			cmp.Compare(p.leads[a], p.leads[b]),
			cmp.Compare(a, b))
	}
	slices.SortFunc(optional, byPair)
	followers := append(forced, optional[:p.rf-1-len(forced)]...)
	slices.SortFunc(followers, byPair)
	r := append(make([]int, 0, p.rf), leader)
	r = append(r, followers...)
	for _, x := range r {
		p.count[x]++
	}
	p.leads[leader]++
	p.addPairs(r, 1)
	p.reps[s] = r
}

// heavier orders trim victims: more replicas, then more leaderships, then
// the larger id.
func (p *planner) heavier(a, b int) bool {
	if p.count[a] != p.count[b] {
		return p.count[a] > p.count[b]
	}
	if p.leads[a] != p.leads[b] {
		return p.leads[a] > p.leads[b]
	}
	return a > b
}

// lighter orders destinations of new replicas: fewer replicas, then fewer
// leaderships, then the smaller id.
func (p *planner) lighter(a, b int) bool {
	if p.count[a] != p.count[b] {
		return p.count[a] < p.count[b]
	}
	if p.leads[a] != p.leads[b] {
		return p.leads[a] < p.leads[b]
	}
	return a < b
}

// fewestLeads is the position in r of the node leading the fewest slots
// (ties: the earlier position).
func (p *planner) fewestLeads(r []int) int {
	best := 0
	for i := 1; i < len(r); i++ {
		if p.leads[r[i]] < p.leads[r[best]] {
			best = i
		}
	}
	return best
}

// promote makes reps[s][i] the preferred leader, keeping the others in their
// order, and counts the new leadership (the slot must have had none).
func (p *planner) promote(s, i int) {
	r := p.reps[s]
	n := r[i]
	copy(r[1:i+1], r[:i])
	r[0] = n
	p.leads[n]++
}

// balanceReplicas moves single replicas from the most to the least loaded
// node until counts differ by at most 1. Each move lowers the excess over
// the even share by one and a source node never receives, so the number of
// moves is the minimum.
func (p *planner) balanceReplicas() {
	n := len(p.ids)
	if n < 2 {
		return
	}
	// Per node, bitsets of the slots it holds and of those it leads, so
	// that finding a slot for a move is a few word operations rather than
	// a scan of every slot's replicas.
	words := (len(p.reps) + 63) / 64
	holds := make([][]uint64, n)
	leads := make([][]uint64, n)
	for x := range n {
		holds[x] = make([]uint64, words)
		leads[x] = make([]uint64, words)
	}
	for s, r := range p.reps {
		for i, x := range r {
			holds[x][s/64] |= 1 << (s % 64)
			if i == 0 {
				leads[x][s/64] |= 1 << (s % 64)
			}
		}
	}
	for {
		u, v := 0, 0
		for i := 1; i < n; i++ {
			if p.count[i] > p.count[u] || (p.count[i] == p.count[u] && p.leads[i] > p.leads[u]) {
				u = i
			}
			if p.lighter(i, v) {
				v = i
			}
		}
		if p.count[u]-p.count[v] < 2 {
			return
		}
		// The lowest slot holding u and not v that u does not lead, or
		// failing that the lowest one it does lead. One exists: u holds
		// more replicas than v.
		s := firstSet(holds[u], holds[v], leads[u])
		if s < 0 {
			s = firstSet(holds[u], holds[v], nil)
		}
		bit := uint64(1) << (s % 64)
		pos := slices.Index(p.reps[s], u)
		p.reps[s][pos] = v
		holds[u][s/64] &^= bit
		holds[v][s/64] |= bit
		p.count[u]--
		p.count[v]++
		if pos == 0 {
			leads[u][s/64] &^= bit
			leads[v][s/64] |= bit
			p.leads[u]--
			p.leads[v]++
		}
	}
}

// firstSet is the lowest bit set in a and in neither b nor c (nil: no c),
// or -1.
func firstSet(a, b, c []uint64) int {
	for w := range a {
		x := a[w] &^ b[w]
		if c != nil {
			x &^= c[w]
		}
		if x != 0 {
			return w*64 + bits.TrailingZeros64(x)
		}
	}
	return -1
}

func (p *planner) result() []Assignment {
	out := make([]Assignment, len(p.reps))
	for s, r := range p.reps {
		ids := make([]string, len(r))
		for i, n := range r {
			ids[i] = p.ids[n]
		}
		out[s] = Assignment{Slot: s, Replicas: ids}
	}
	return out
}

// SpreadLeaders is Repair followed by reordering replicas within slots so
// that preferred leaders per node differ by at most one where possible. It
// never moves a replica (reordering is not a move), so it is what the
// controller runs continuously: a node that comes back after its replicas
// were re-created elsewhere is re-added as the last replica of the slots it
// gets, and without this it would never lead anything again.
func SpreadLeaders(current []Assignment, slots int, eligible []string, rf int) []Assignment {
	p := newPlanner(current, slots, eligible, rf).repair()
	p.balanceLeaders(func(s int) []int { return p.reps[s] })
	return p.result()
}
