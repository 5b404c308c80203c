package dht

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// Move is one change between two placements: a replica of Slot leaves From
// and a new one is built on To. Each move with a To costs a full copy of the
// slot, which is why the planner minimises them and why `admin rebalance
// --dry-run` shows them.
type Move struct {
	Slot int
	From string // "" when a replica is only added
	To   string // "" when a replica is only removed
}

// Diff lists the replica moves from a to b, sorted by slot, then From, then
// To. Within a slot, removed and added replicas are each sorted by id and
// paired in that order; the unpaired rest are pure additions or removals.
// Reordering replicas within a slot (a new preferred leader) is not a move.
// A slot listed twice counts once (the first entry).
func Diff(a, b []Assignment) []Move {
	am, bm := bySlot(a), bySlot(b)
	slots := make([]int, 0, len(am)+len(bm))
	for _, x := range a {
		slots = append(slots, x.Slot)
	}
	for _, x := range b {
		slots = append(slots, x.Slot)
	}
	slices.Sort(slots)
	slots = slices.Compact(slots)

	var moves []Move
	for _, s := range slots {
		from, to := minus(am[s], bm[s]), minus(bm[s], am[s])
		for i := range max(len(from), len(to)) {
			m := Move{Slot: s}
			if i < len(from) {
				m.From = from[i]
			}
			if i < len(to) {
				m.To = to[i]
			}
			moves = append(moves, m)
		}
	}
	slices.SortStableFunc(moves, func(x, y Move) int {
		return cmp.Or(cmp.Compare(x.Slot, y.Slot), cmp.Compare(x.From, y.From), cmp.Compare(x.To, y.To))
	})
	return moves
}

// bySlot indexes replica sets by slot; the first entry for a slot wins.
func bySlot(as []Assignment) map[int][]string {
	m := make(map[int][]string, len(as))
	for _, a := range as {
		if _, ok := m[a.Slot]; !ok {
			m[a.Slot] = a.Replicas
		}
	}
	return m
}

// minus is the sorted, distinct ids in x and not in y.
func minus(x, y []string) []string {
	var out []string
	for _, id := range x {
		if !slices.Contains(y, id) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Validate checks the invariants a placement must hold before the
// controller commits it: every slot 0..slots-1 exactly once, non-empty and
// distinct node ids within a slot, and exactly rf replicas per slot. Since a
// placement does not list the cluster's nodes, rf is clamped like
// EffectiveRF but against the number of distinct nodes the placement uses;
// pass EffectiveRF(rf, len(nodes)) for the strict check. The error lists
// every problem found (up to a limit), so a bad table is diagnosed at once.
func Validate(assign []Assignment, slots, rf int) error {
	var errs []error
	const limit = 10
	report := func(format string, args ...any) {
		if len(errs) <= limit {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}

	nodes := map[string]bool{}
	for _, a := range assign {
		for _, id := range a.Replicas {
			if id != "" {
				nodes[id] = true
			}
		}
	}
	want := EffectiveRF(rf, len(nodes))

	seen := make([]bool, max(slots, 0))
	for _, a := range assign {
		switch {
		case a.Slot < 0 || a.Slot >= slots:
			report("slot %d out of range [0,%d)", a.Slot, slots)
			continue
		case seen[a.Slot]:
			report("slot %d listed more than once", a.Slot)
			continue
		}
		seen[a.Slot] = true
		if len(a.Replicas) != want {
			report("slot %d has %d replicas %q, want %d", a.Slot, len(a.Replicas), a.Replicas, want)
		}
		for i, id := range a.Replicas {
			if id == "" {
				report("slot %d: replica %d has an empty node id", a.Slot, i)
			} else if slices.Index(a.Replicas, id) != i {
				report("slot %d: node %q holds more than one replica", a.Slot, id)
			}
		}
	}
	for s, ok := range seen {
		if !ok {
			report("slot %d missing", s)
		}
	}
	if len(errs) > limit {
		errs = append(errs[:limit], errors.New("more problems not shown"))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("dht: invalid placement: %w", errors.Join(errs...))
}

// NodeLoad is what one node holds in a placement.
type NodeLoad struct {
	Node     string
	Replicas int // slots with a replica on the node
	Leads    int // slots the node is the preferred leader of
}

// Loads counts replicas and preferred leaderships per node, for `admin
// status`, /v1/cluster and the tests. Every id in nodes is listed (with
// zeros if it holds nothing), as is every node the placement uses; the
// result is sorted by node id.
func Loads(assign []Assignment, nodes []string) []NodeLoad {
	ids := slices.Clone(nodes)
	for _, a := range assign {
		ids = append(ids, a.Replicas...)
	}
	ids = sortedNodes(ids)
	out := make([]NodeLoad, len(ids))
	for i, id := range ids {
		out[i].Node = id
	}
	at := func(id string) *NodeLoad {
		i, _ := slices.BinarySearchFunc(out, id, func(l NodeLoad, id string) int { return cmp.Compare(l.Node, id) })
		return &out[i]
	}
	for _, a := range assign {
		for i, id := range a.Replicas {
			if id == "" {
				continue
			}
			l := at(id)
			l.Replicas++
			if i == 0 {
				l.Leads++
			}
		}
	}
	return out
}
