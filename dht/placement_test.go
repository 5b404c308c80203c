package dht

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// nodeIDs is n1..nk.
func nodeIDs(k int) []string {
	ids := make([]string, k)
	for i := range ids {
		ids[i] = fmt.Sprintf("n%d", i+1)
	}
	return ids
}

// without is nodes minus drop.
func without(nodes []string, drop ...string) []string {
	var out []string
	for _, n := range nodes {
		if !slices.Contains(drop, n) {
			out = append(out, n)
		}
	}
	return out
}

// spreads is max-min of replica counts and of preferred leaderships over
// the given nodes (nodes holding nothing count as 0).
func spreads(assign []Assignment, nodes []string) (replicas, leads int) {
	loads := Loads(assign, nodes)
	if len(loads) == 0 {
		return 0, 0
	}
	minR, maxR, minL, maxL := loads[0].Replicas, loads[0].Replicas, loads[0].Leads, loads[0].Leads
	for _, l := range loads[1:] {
		minR, maxR = min(minR, l.Replicas), max(maxR, l.Replicas)
		minL, maxL = min(minL, l.Leads), max(maxL, l.Leads)
	}
	return maxR - minR, maxL - minL
}

// checkPlacement asserts the strict invariants: Validate with the effective
// rf, and every replica on an eligible node.
func checkPlacement(t testing.TB, out []Assignment, slots int, eligible []string, rf int) {
	t.Helper()
	if err := Validate(out, slots, EffectiveRF(rf, len(sortedNodes(eligible)))); err != nil {
		t.Fatalf("invalid placement: %v\n%v", err, out)
	}
	for i, a := range out {
		if a.Slot != i {
			t.Fatalf("result not sorted by slot: entry %d is slot %d", i, a.Slot)
		}
		for _, id := range a.Replicas {
			if !slices.Contains(eligible, id) {
				t.Fatalf("slot %d has a replica on %q, not eligible (%v)", a.Slot, id, eligible)
			}
		}
	}
}

// minBalanceMoves is the fewest single-replica moves that bring counts
// within 1 of each other: the final counts are lo or lo+1 with the +1s on
// the k most loaded nodes, and every replica above its final count moves.
func minBalanceMoves(counts []int) int {
	if len(counts) == 0 {
		return 0
	}
	c := slices.Clone(counts)
	slices.SortFunc(c, func(a, b int) int { return b - a })
	total := 0
	for _, x := range c {
		total += x
	}
	lo, k := total/len(c), total%len(c)
	moves := 0
	for i, x := range c {
		target := lo
		if i < k {
			target++
		}
		moves += max(0, x-target)
	}
	return moves
}

func replicaCounts(assign []Assignment, nodes []string) []int {
	var c []int
	for _, l := range Loads(assign, nodes) {
		c = append(c, l.Replicas)
	}
	return c
}

func shuffled(r *rand.Rand, nodes []string) []string {
	s := slices.Clone(nodes)
	r.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
	return s
}

func TestEffectiveRF(t *testing.T) {
	for _, c := range []struct{ rf, nodes, want int }{
		{0, 1, 1}, {0, 2, 2}, {0, 3, 3}, {0, 9, 3}, {-1, 5, 3},
		{1, 5, 1}, {5, 3, 3}, {3, 0, 0}, {0, 0, 0}, {2, -1, 0},
	} {
		if got := EffectiveRF(c.rf, c.nodes); got != c.want {
			t.Errorf("EffectiveRF(%d, %d) = %d, want %d", c.rf, c.nodes, got, c.want)
		}
	}
}

func TestInitialInvariants(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, slots := range []int{12, 1, 7, 64, 100} {
		for _, k := range []int{1, 2, 3, 4, 5, 6, 12} {
			for _, rf := range []int{0, 1, 2, 3, 5} {
				t.Run(fmt.Sprintf("slots=%d/nodes=%d/rf=%d", slots, k, rf), func(t *testing.T) {
					nodes := nodeIDs(k)
					out := Initial(slots, nodes, rf)
					checkPlacement(t, out, slots, nodes, rf)
					if rs, ls := spreads(out, nodes); rs > 1 || ls > 1 {
						t.Errorf("replica spread %d, leader spread %d; want <= 1: %v", rs, ls, Loads(out, nodes))
					}
					if again := Initial(slots, nodes, rf); !reflect.DeepEqual(again, out) {
						t.Errorf("not deterministic")
					}
					for range 5 {
						in := shuffled(r, nodes)
						if got := Initial(slots, in, rf); !reflect.DeepEqual(got, out) {
							t.Fatalf("node order %v changed the placement", in)
						}
					}
					dup := append(slices.Clone(nodes), nodes[0], "")
					if got := Initial(slots, dup, rf); !reflect.DeepEqual(got, out) {
						t.Errorf("duplicate or empty node ids changed the placement")
					}
				})
			}
		}
	}
}

func TestInitialThreeNodes(t *testing.T) {
	out := Initial(12, []string{"n3", "n1", "n2"}, 3)
	for _, l := range Loads(out, nil) {
		if l.Replicas != 12 || l.Leads != 4 {
			t.Errorf("%s: %d replicas, %d leads; want 12 and 4", l.Node, l.Replicas, l.Leads)
		}
	}
	// The layout is part of the contract between versions: every node must
	// compute the same one, and a change here would move data on upgrade.
	// Leaders rotate; the first follower alternates between the next node
	// and the one after, so a dead leader's slots fail over to both.
	want := [][]string{
		{"n1", "n2", "n3"}, {"n2", "n3", "n1"}, {"n3", "n1", "n2"},
		{"n1", "n3", "n2"}, {"n2", "n1", "n3"}, {"n3", "n2", "n1"},
	}
	for s, a := range out {
		if !slices.Equal(a.Replicas, want[s%6]) {
			t.Errorf("slot %d = %v, want %v", s, a.Replicas, want[s%6])
		}
	}
}

func TestInitialEdgeCases(t *testing.T) {
	if out := Initial(0, nodeIDs(3), 3); len(out) != 0 {
		t.Errorf("0 slots: %v", out)
	}
	if out := Initial(-1, nodeIDs(3), 3); len(out) != 0 {
		t.Errorf("-1 slots: %v", out)
	}
	out := Initial(4, nil, 3)
	if len(out) != 4 {
		t.Fatalf("no nodes: %d entries, want 4", len(out))
	}
	for _, a := range out {
		if len(a.Replicas) != 0 {
			t.Errorf("no nodes: slot %d has replicas %v", a.Slot, a.Replicas)
		}
	}
	if err := Validate(out, 4, 3); err != nil {
		t.Errorf("no nodes: %v", err)
	}
	// rf clamps to the node count; rf <= 0 means min(3, nodes).
	for _, c := range []struct{ nodes, rf, want int }{{2, 3, 2}, {5, 0, 3}, {2, 0, 2}, {4, 9, 4}} {
		out := Initial(12, nodeIDs(c.nodes), c.rf)
		if got := len(out[0].Replicas); got != c.want {
			t.Errorf("nodes=%d rf=%d: %d replicas, want %d", c.nodes, c.rf, got, c.want)
		}
	}
}

func TestRepairNodeRemoved(t *testing.T) {
	for _, slots := range []int{12, 64} {
		for _, k := range []int{2, 3, 4, 5, 6, 12} {
			for _, rf := range []int{1, 2, 3} {
				nodes := nodeIDs(k)
				cur := Initial(slots, nodes, rf)
				for _, gone := range nodes {
					t.Run(fmt.Sprintf("slots=%d/nodes=%d/rf=%d/-%s", slots, k, rf, gone), func(t *testing.T) {
						eligible := without(nodes, gone)
						out := Repair(cur, slots, eligible, rf)
						checkPlacement(t, out, slots, eligible, rf)

						held := 0
						for _, l := range Loads(cur, nil) {
							if l.Node == gone {
								held = l.Replicas
							}
						}
						moves := Diff(cur, out)
						if len(moves) != held {
							t.Errorf("%d moves, want %d (the replicas %s held): %v", len(moves), held, gone, moves)
						}
						for _, m := range moves {
							if m.From != gone {
								t.Errorf("move %+v: only %s's replicas should move", m, gone)
							}
							if m.To != "" && slices.Contains(cur[m.Slot].Replicas, m.To) {
								t.Errorf("move %+v: %s already held slot %d", m, m.To, m.Slot)
							}
							if m.To == "" && EffectiveRF(rf, len(eligible)) == EffectiveRF(rf, k) {
								t.Errorf("move %+v: a replica was dropped, not replaced", m)
							}
						}
						// A failed node's leaderships are spread over the survivors.
						if _, ls := spreads(out, eligible); ls > 1 {
							t.Errorf("leader spread %d after repair: %v", ls, Loads(out, eligible))
						}
						// Preferred leaders move to surviving replicas only
						// (with rf 1 there are none).
						for s, a := range out {
							if len(cur[s].Replicas) > 1 && !slices.Contains(cur[s].Replicas, a.Replicas[0]) {
								t.Errorf("slot %d: new replica %s made preferred leader", s, a.Replicas[0])
							}
						}
					})
				}
			}
		}
	}
}

func TestRepairFailedLeaderKeepsOthers(t *testing.T) {
	// 12 slots on 4 nodes: each leads 3. Losing n2 hands its 3 slots one
	// each to n1, n3, n4, and no other slot changes leader.
	nodes := nodeIDs(4)
	cur := Initial(12, nodes, 3)
	out := Repair(cur, 12, without(nodes, "n2"), 3)
	for _, l := range Loads(out, nil) {
		if l.Leads != 4 || l.Replicas != 12 {
			t.Errorf("%s leads %d, holds %d; want 4 and 12", l.Node, l.Leads, l.Replicas)
		}
	}
	for s := range cur {
		if cur[s].Replicas[0] != "n2" && out[s].Replicas[0] != cur[s].Replicas[0] {
			t.Errorf("slot %d: leader %s changed to %s though it is alive", s, cur[s].Replicas[0], out[s].Replicas[0])
		}
		if cur[s].Replicas[0] == "n2" {
			// The replacement takes the leader position; the others keep
			// their order.
			rest := without(cur[s].Replicas, "n2", out[s].Replicas[0])
			if got := without(out[s].Replicas[1:], out[s].Replicas[len(out[s].Replicas)-1]); !slices.Equal(got, rest) {
				t.Errorf("slot %d: %v -> %v reshuffled the followers", s, cur[s].Replicas, out[s].Replicas)
			}
		}
	}
}

func TestRepairNoChange(t *testing.T) {
	for _, k := range []int{1, 2, 3, 4, 5, 9} {
		for _, rf := range []int{0, 1, 2, 3} {
			nodes := nodeIDs(k)
			cur := Initial(12, nodes, rf)
			if out := Repair(cur, 12, nodes, rf); !reflect.DeepEqual(out, cur) {
				t.Errorf("nodes=%d rf=%d: Repair changed a healthy placement: %v", k, rf, Diff(cur, out))
			}
		}
	}
	// Not even uneven leaders are touched while no slot lost its leader.
	cur := []Assignment{{0, []string{"a", "b"}}, {1, []string{"a", "b"}}, {2, []string{"a", "b"}}}
	if out := Repair(cur, 3, []string{"a", "b"}, 2); !reflect.DeepEqual(out, cur) {
		t.Errorf("Repair reordered leaders of a healthy placement: %v", out)
	}
}

func TestRepairIdempotent(t *testing.T) {
	for _, k := range []int{3, 4, 5, 9} {
		for _, rf := range []int{1, 2, 3} {
			nodes := nodeIDs(k)
			cur := Initial(64, nodes, rf)
			eligible := append(without(nodes, "n1", "n3"), "x1")
			once := Repair(cur, 64, eligible, rf)
			if twice := Repair(once, 64, eligible, rf); !reflect.DeepEqual(once, twice) {
				t.Errorf("nodes=%d rf=%d: second Repair moved %v", k, rf, Diff(once, twice))
			}
		}
	}
}

func TestRepairGrowReplication(t *testing.T) {
	// A single node with rf 1, then nodes join and rf grows with them: the
	// existing replicas (and leaders) stay, new ones are only added.
	cur := Initial(12, []string{"n1"}, 1)
	for k := 2; k <= 3; k++ {
		nodes := nodeIDs(k)
		out := Repair(cur, 12, nodes, k)
		checkPlacement(t, out, 12, nodes, k)
		moves := Diff(cur, out)
		if len(moves) != 12 {
			t.Errorf("rf %d: %d moves, want 12 additions", k, len(moves))
		}
		for _, m := range moves {
			if m.From != "" {
				t.Errorf("rf %d: %+v removes a replica", k, m)
			}
		}
		for s := range out {
			if out[s].Replicas[0] != cur[s].Replicas[0] {
				t.Errorf("rf %d: slot %d leader changed %s -> %s", k, s, cur[s].Replicas[0], out[s].Replicas[0])
			}
		}
		if rs, _ := spreads(out, nodes); rs > 1 {
			t.Errorf("rf %d: replica spread %d: %v", k, rs, Loads(out, nodes))
		}
		cur = out
	}
	// Leaders are all still on n1: Rebalance spreads them without moves.
	rb := Rebalance(cur, 12, nodeIDs(3), 3)
	if m := Diff(cur, rb); len(m) != 0 {
		t.Errorf("rebalance of a full rf-3 placement moved %v", m)
	}
	if _, ls := spreads(rb, nodeIDs(3)); ls != 0 {
		t.Errorf("leaders after rebalance: %v", Loads(rb, nil))
	}
}

func TestRepairTrim(t *testing.T) {
	nodes := nodeIDs(5)
	cur := Initial(12, nodes, 3)
	out := Repair(cur, 12, nodes, 2)
	checkPlacement(t, out, 12, nodes, 2)
	moves := Diff(cur, out)
	if len(moves) != 12 {
		t.Errorf("%d moves, want 12 removals: %v", len(moves), moves)
	}
	for _, m := range moves {
		if m.To != "" {
			t.Errorf("%+v adds a replica", m)
		}
	}
	for s := range out {
		if out[s].Replicas[0] != cur[s].Replicas[0] {
			t.Errorf("slot %d: trimming dropped the preferred leader %s", s, cur[s].Replicas[0])
		}
	}
	if rs, _ := spreads(out, nodes); rs > 1 {
		t.Errorf("trimming the most loaded left spread %d: %v", rs, Loads(out, nodes))
	}

	// Over-replicated and the leader is gone: it may be dropped, the rest
	// are trimmed from the most loaded node.
	odd := []Assignment{
		{0, []string{"gone", "a", "b", "c"}},
		{1, []string{"b", "c"}},
		{2, []string{"c"}},
	}
	got := Repair(odd, 3, []string{"a", "b", "c"}, 2)
	want := []Assignment{{0, []string{"a", "b"}}, {1, []string{"b", "c"}}, {2, []string{"c", "a"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Repair(%v) = %v, want %v", odd, got, want)
	}
}

func TestRepairMessyInput(t *testing.T) {
	cur := []Assignment{
		{3, []string{"a", "b"}},
		{0, []string{"a", "a", "", "b"}}, // duplicate and empty ids
		{3, []string{"c", "d"}},          // listed twice: the first wins
		{7, []string{"a", "b"}},          // out of range
		{-1, []string{"a"}},
		// slots 1, 2, 4, 5 missing
	}
	orig := fmt.Sprint(cur)
	nodes := []string{"a", "b", "c", "d"}
	out := Repair(cur, 6, nodes, 2)
	checkPlacement(t, out, 6, nodes, 2)
	if fmt.Sprint(cur) != orig {
		t.Errorf("Repair modified its input: %v", cur)
	}
	if !slices.Equal(out[0].Replicas, []string{"a", "b"}) || !slices.Equal(out[3].Replicas, []string{"a", "b"}) {
		t.Errorf("existing slots changed: %v", out)
	}
	if rs, _ := spreads(out, nodes); rs > 1 {
		t.Errorf("new slots not spread: %v", Loads(out, nodes))
	}
	// The result shares no memory with the input.
	out[0].Replicas[0] = "zz"
	if cur[1].Replicas[0] != "a" {
		t.Errorf("result aliases the input")
	}
	// nil current is the initial placement.
	if got := Repair(nil, 12, nodes, 3); !reflect.DeepEqual(got, Initial(12, nodes, 3)) {
		t.Errorf("Repair(nil) differs from Initial")
	}
	// No eligible node: every slot is emptied.
	for _, a := range Repair(Initial(4, nodes, 2), 4, nil, 2) {
		if len(a.Replicas) != 0 {
			t.Errorf("no eligible nodes: slot %d keeps %v", a.Slot, a.Replicas)
		}
	}
}

func TestRebalanceJoin(t *testing.T) {
	nodes := nodeIDs(3)
	cur := Initial(12, nodes, 3)
	joined := nodeIDs(4)
	out := Rebalance(cur, 12, joined, 3)
	checkPlacement(t, out, 12, joined, 3)
	for _, l := range Loads(out, joined) {
		if l.Replicas != 9 || l.Leads != 3 {
			t.Errorf("%s: %d replicas, %d leads; want 9 and 3", l.Node, l.Replicas, l.Leads)
		}
	}
	moves := Diff(cur, out)
	if len(moves) != 9 {
		t.Errorf("%d moves, want 9: %v", len(moves), moves)
	}
	for _, m := range moves {
		if m.To != "n4" || m.From == "" {
			t.Errorf("%+v: every move should go to the new node", m)
		}
	}
	if again := Rebalance(out, 12, joined, 3); !reflect.DeepEqual(again, out) {
		t.Errorf("not idempotent: %v", Diff(out, again))
	}
	if rep := Repair(out, 12, joined, 3); !reflect.DeepEqual(rep, out) {
		t.Errorf("Repair changes a rebalanced placement: %v", Diff(out, rep))
	}
}

func TestRebalanceMinimalMoves(t *testing.T) {
	for _, c := range []struct {
		slots, from, to, rf int
	}{
		{12, 3, 4, 3}, {12, 3, 5, 3}, {12, 3, 6, 3}, {12, 4, 12, 3}, {64, 5, 9, 3},
		{64, 8, 9, 2}, {100, 2, 3, 1}, {4096, 8, 9, 3}, {12, 1, 3, 3},
	} {
		t.Run(fmt.Sprintf("%d_slots_%d_to_%d_nodes_rf%d", c.slots, c.from, c.to, c.rf), func(t *testing.T) {
			cur := Initial(c.slots, nodeIDs(c.from), c.rf)
			nodes := nodeIDs(c.to)
			rep := Repair(cur, c.slots, nodes, c.rf)
			out := Rebalance(cur, c.slots, nodes, c.rf)
			checkPlacement(t, out, c.slots, nodes, c.rf)
			rs, ls := spreads(out, nodes)
			if rs > 1 || ls > 1 {
				t.Errorf("spreads %d/%d: %v", rs, ls, Loads(out, nodes))
			}
			want := minBalanceMoves(replicaCounts(rep, nodes))
			if got := len(Diff(rep, out)); got != want {
				t.Errorf("%d balancing moves, want the minimum %d", got, want)
			}
		})
	}
}

func TestLeaderTargets(t *testing.T) {
	assign := Initial(12, nodeIDs(3), 3)

	all := LeaderTargets(assign, nodeIDs(3))
	for _, a := range assign {
		if all[a.Slot] != a.Replicas[0] {
			t.Errorf("all alive: slot %d led by %s, want %s", a.Slot, all[a.Slot], a.Replicas[0])
		}
	}

	got := LeaderTargets(assign, []string{"n2", "n1", "unknown"})
	led := map[string]int{}
	for s, n := range got {
		led[n]++
		if !slices.Contains(assign[s].Replicas, n) {
			t.Errorf("slot %d: %s is not a replica", s, n)
		}
		if assign[s].Replicas[0] != "n3" && n != assign[s].Replicas[0] {
			t.Errorf("slot %d: alive preferred leader %s passed over for %s", s, assign[s].Replicas[0], n)
		}
	}
	if len(got) != 12 || led["n1"] != 6 || led["n2"] != 6 {
		t.Errorf("n3 dead: %d slots, leads %v; want 12 slots, 6 each", len(got), led)
	}

	// 12 slots, 4 nodes, one dead: 12 leaderships over 3 nodes.
	four := Initial(12, nodeIDs(4), 3)
	led = map[string]int{}
	for _, n := range LeaderTargets(four, []string{"n1", "n2", "n4"}) {
		led[n]++
	}
	if led["n1"] != 4 || led["n2"] != 4 || led["n4"] != 4 {
		t.Errorf("n3 dead of 4: leads %v, want 4 each", led)
	}

	// rf 1: a dead node's slots have no alive replica and are omitted.
	one := Initial(6, nodeIDs(3), 1)
	got = LeaderTargets(one, []string{"n1", "n3"})
	if len(got) != 4 {
		t.Errorf("rf 1, n2 dead: %d slots targeted, want 4: %v", len(got), got)
	}
	for s, n := range got {
		if n == "n2" || one[s].Replicas[0] != n {
			t.Errorf("slot %d -> %s", s, n)
		}
	}
	if got := LeaderTargets(assign, nil); len(got) != 0 {
		t.Errorf("nobody alive: %v", got)
	}

	// Ties go to the order in Replicas; input order of slots does not matter.
	tie := []Assignment{{1, []string{"x", "c", "b"}}, {0, []string{"x", "b", "c"}}}
	want := map[int]string{0: "b", 1: "c"}
	if got := LeaderTargets(tie, []string{"b", "c"}); !reflect.DeepEqual(got, want) {
		t.Errorf("ties: %v, want %v", got, want)
	}
}

func TestDiff(t *testing.T) {
	a3 := func(s int, r ...string) Assignment { return Assignment{Slot: s, Replicas: r} }
	for _, c := range []struct {
		name string
		a, b []Assignment
		want []Move
	}{
		{"equal", []Assignment{a3(0, "a", "b")}, []Assignment{a3(0, "a", "b")}, nil},
		{"reorder is not a move", []Assignment{a3(0, "a", "b", "c")}, []Assignment{a3(0, "c", "a", "b")}, nil},
		{"replace", []Assignment{a3(0, "a", "b")}, []Assignment{a3(0, "a", "c")}, []Move{{0, "b", "c"}}},
		{"add", []Assignment{a3(0, "a")}, []Assignment{a3(0, "a", "b")}, []Move{{0, "", "b"}}},
		{"remove", []Assignment{a3(0, "a", "b")}, []Assignment{a3(0, "b")}, []Move{{0, "a", ""}}},
		{"pairs sorted", []Assignment{a3(2, "d", "c", "x")}, []Assignment{a3(2, "x", "f", "e")},
			[]Move{{2, "c", "e"}, {2, "d", "f"}}},
		{"more added than removed", []Assignment{a3(0, "a", "b")}, []Assignment{a3(0, "c", "d", "e")},
			[]Move{{0, "", "e"}, {0, "a", "c"}, {0, "b", "d"}}},
		{"slot only in b", nil, []Assignment{a3(1, "a")}, []Move{{1, "", "a"}}},
		{"slot only in a", []Assignment{a3(1, "a")}, nil, []Move{{1, "a", ""}}},
		{"sorted by slot", []Assignment{a3(5, "a"), a3(1, "a")}, []Assignment{a3(1, "b"), a3(5, "b")},
			[]Move{{1, "a", "b"}, {5, "a", "b"}}},
	} {
		if got := Diff(c.a, c.b); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: Diff = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestValidate(t *testing.T) {
	ok := Initial(4, nodeIDs(3), 3)
	if err := Validate(ok, 4, 3); err != nil {
		t.Errorf("valid placement: %v", err)
	}
	if err := Validate(ok, 4, 0); err != nil {
		t.Errorf("rf 0 means min(3, nodes): %v", err)
	}
	if err := Validate(Initial(4, nodeIDs(2), 3), 4, 3); err != nil {
		t.Errorf("rf clamps to the nodes in use: %v", err)
	}
	a := func(s int, r ...string) Assignment { return Assignment{Slot: s, Replicas: r} }
	for _, c := range []struct {
		name   string
		assign []Assignment
		slots  int
		rf     int
		want   string
	}{
		{"missing slot", []Assignment{a(0, "a"), a(2, "a")}, 3, 1, "slot 1 missing"},
		{"twice", []Assignment{a(0, "a"), a(0, "b")}, 1, 1, "slot 0 listed more than once"},
		{"out of range", []Assignment{a(0, "a"), a(1, "a")}, 1, 1, "slot 1 out of range [0,1)"},
		{"negative", []Assignment{a(-1, "a"), a(0, "a")}, 1, 1, "slot -1 out of range"},
		{"empty id", []Assignment{a(0, "a", "")}, 1, 2, "empty node id"},
		{"duplicate", []Assignment{a(0, "a", "a"), a(1, "a", "b")}, 2, 2, `node "a" holds more than one replica`},
		{"short", []Assignment{a(0, "a", "b"), a(1, "a", "b", "c")}, 2, 3, "slot 0 has 2 replicas"},
		{"long", []Assignment{a(0, "a", "b", "c")}, 1, 2, "slot 0 has 3 replicas"},
	} {
		err := Validate(c.assign, c.slots, c.rf)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate = %v, want an error containing %q", c.name, err, c.want)
		}
	}
	// Every problem is listed.
	err := Validate([]Assignment{a(0, "a", "a"), a(5, "b")}, 3, 2)
	for _, want := range []string{"holds more than one", "slot 5 out of range", "slot 1 missing", "slot 2 missing"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("combined: %v lacks %q", err, want)
		}
	}
}

func TestLoads(t *testing.T) {
	assign := []Assignment{{0, []string{"b", "a"}}, {1, []string{"a", "c"}}, {2, []string{"a", ""}}}
	got := Loads(assign, []string{"z", "a"})
	want := []NodeLoad{{"a", 3, 2}, {"b", 1, 1}, {"c", 1, 0}, {"z", 0, 0}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Loads = %v, want %v", got, want)
	}
}
