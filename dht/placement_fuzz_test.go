package dht

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// perturb damages a placement the way history can: replicas lost or added
// (sometimes twice on one node), slots missing, followers reordered. seed 0
// leaves it alone. Slot entries are never duplicated, so their order does
// not matter.
func perturb(assign []Assignment, seed uint64, nodes []string) []Assignment {
	out := make([]Assignment, 0, len(assign))
	r := rand.New(rand.NewPCG(seed, 7))
	for _, a := range assign {
		reps := slices.Clone(a.Replicas)
		if seed != 0 {
			switch r.IntN(12) {
			case 0:
				continue // slot missing
			case 1:
				if len(reps) > 0 {
					i := r.IntN(len(reps))
					reps = slices.Delete(reps, i, i+1)
				}
			case 2, 3:
				reps = append(reps, nodes[r.IntN(len(nodes))])
			case 4:
				r.Shuffle(len(reps), func(i, j int) { reps[i], reps[j] = reps[j], reps[i] })
			}
		}
		out = append(out, Assignment{Slot: a.Slot, Replicas: reps})
	}
	return out
}

// survivorsOf is the distinct replicas of slot s in cur that are eligible,
// in order.
func survivorsOf(cur []Assignment, s int, eligible []string) []string {
	var out []string
	for _, a := range cur {
		if a.Slot != s {
			continue
		}
		for _, id := range a.Replicas {
			if slices.Contains(eligible, id) && !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
	}
	return out
}

func FuzzPlacement(f *testing.F) {
	f.Add(uint8(12), uint8(3), uint8(3), uint16(0), uint8(0), uint8(3), uint64(0))
	f.Add(uint8(12), uint8(3), uint8(3), uint16(0), uint8(1), uint8(3), uint64(0))
	f.Add(uint8(12), uint8(4), uint8(3), uint16(2), uint8(0), uint8(3), uint64(0))
	f.Add(uint8(64), uint8(9), uint8(3), uint16(0x15), uint8(2), uint8(2), uint64(3))
	f.Add(uint8(12), uint8(1), uint8(1), uint16(0), uint8(2), uint8(3), uint64(0))
	f.Add(uint8(7), uint8(5), uint8(5), uint16(0x1f), uint8(1), uint8(0), uint64(9))
	f.Add(uint8(33), uint8(6), uint8(2), uint16(0x8), uint8(0), uint8(4), uint64(42))
	f.Fuzz(func(t *testing.T, slotsB, nodesB, rfB uint8, removed uint16, addedB, rf2B uint8, seed uint64) {
		slots := 1 + int(slotsB)%64
		nodes := nodeIDs(1 + int(nodesB)%9)
		rf, rf2 := int(rfB)%6, int(rf2B)%6

		initial := Initial(slots, nodes, rf)
		checkPlacement(t, initial, slots, nodes, rf)
		if rs, ls := spreads(initial, nodes); rs > 1 || ls > 1 {
			t.Fatalf("Initial spreads %d/%d: %v", rs, ls, Loads(initial, nodes))
		}

		var eligible []string
		for i, n := range nodes {
			if removed&(1<<i) == 0 {
				eligible = append(eligible, n)
			}
		}
		for i := range int(addedB) % 4 {
			eligible = append(eligible, fmt.Sprintf("m%d", i+1))
		}
		cur := perturb(initial, seed, nodes)
		r := rand.New(rand.NewPCG(seed, 11))
		want := EffectiveRF(rf2, len(eligible))

		// Repair: valid, minimal, leaders only to survivors, stable.
		rep := Repair(cur, slots, eligible, rf2)
		checkPlacement(t, rep, slots, eligible, rf2)
		orphans := false
		for s := range slots {
			old := survivorsOf(cur, s, eligible)
			kept := 0
			for _, id := range rep[s].Replicas {
				if slices.Contains(old, id) {
					kept++
				}
			}
			if kept != min(want, len(old)) {
				t.Fatalf("slot %d: kept %d of survivors %v, want %d: %v", s, kept, old, min(want, len(old)), rep[s].Replicas)
			}
			i := slices.IndexFunc(cur, func(a Assignment) bool { return a.Slot == s })
			if i < 0 || len(cur[i].Replicas) == 0 || !slices.Contains(eligible, cur[i].Replicas[0]) {
				orphans = true
			}
			if len(old) > 0 && want > 0 && !slices.Contains(old, rep[s].Replicas[0]) {
				t.Fatalf("slot %d: new replica %s made preferred leader over survivors %v", s, rep[s].Replicas[0], old)
			}
		}
		if !orphans {
			for s := range slots {
				if rep[s].Replicas[0] != cur[s].Replicas[0] {
					t.Fatalf("slot %d: no leader was lost, yet %s -> %s", s, cur[s].Replicas[0], rep[s].Replicas[0])
				}
			}
		}
		if again := Repair(rep, slots, eligible, rf2); !reflect.DeepEqual(again, rep) {
			t.Fatalf("Repair not idempotent: %v", Diff(rep, again))
		}
		if got := Repair(cur, slots, shuffled(r, eligible), rf2); !reflect.DeepEqual(got, rep) {
			t.Fatalf("eligible order changed Repair")
		}
		if got := Repair(shuffledAssign(r, cur), slots, eligible, rf2); !reflect.DeepEqual(got, rep) {
			t.Fatalf("order of current changed Repair")
		}

		// Rebalance: valid, even, fewest moves on top of Repair, stable.
		rb := Rebalance(cur, slots, eligible, rf2)
		checkPlacement(t, rb, slots, eligible, rf2)
		if rs, ls := spreads(rb, eligible); rs > 1 || ls > 1 {
			t.Fatalf("Rebalance spreads %d/%d: %v", rs, ls, Loads(rb, eligible))
		}
		if got, least := len(Diff(rep, rb)), minBalanceMoves(replicaCounts(rep, eligible)); got != least {
			t.Fatalf("Rebalance made %d moves beyond Repair, minimum is %d", got, least)
		}
		if again := Rebalance(rb, slots, eligible, rf2); !reflect.DeepEqual(again, rb) {
			t.Fatalf("Rebalance not idempotent: %v", Diff(rb, again))
		}
		if again := Repair(rb, slots, eligible, rf2); !reflect.DeepEqual(again, rb) {
			t.Fatalf("Repair changes a rebalanced placement: %v", Diff(rb, again))
		}
		if got := Rebalance(shuffledAssign(r, cur), slots, shuffled(r, eligible), rf2); !reflect.DeepEqual(got, rb) {
			t.Fatalf("input order changed Rebalance")
		}

		// LeaderTargets: a replica of each slot with one alive, alive
		// preferred leaders kept.
		alive := shuffled(r, eligible)[:len(eligible)/2]
		targets := LeaderTargets(rb, alive)
		for _, a := range rb {
			got, ok := targets[a.Slot]
			hasAlive := slices.ContainsFunc(a.Replicas, func(id string) bool { return slices.Contains(alive, id) })
			switch {
			case ok != hasAlive:
				t.Fatalf("slot %d %v alive %v: target %q present=%v", a.Slot, a.Replicas, alive, got, ok)
			case ok && (!slices.Contains(a.Replicas, got) || !slices.Contains(alive, got)):
				t.Fatalf("slot %d: target %s is not an alive replica", a.Slot, got)
			case ok && slices.Contains(alive, a.Replicas[0]) && got != a.Replicas[0]:
				t.Fatalf("slot %d: alive preferred leader %s passed over", a.Slot, a.Replicas[0])
			}
		}
	})
}

func shuffledAssign(r *rand.Rand, a []Assignment) []Assignment {
	s := slices.Clone(a)
	r.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
	return s
}

// BenchmarkRebalance plans for 4096 slots on 9 nodes with rf 3: a ninth node
// joining eight (about 1365 moves), a node leaving nine, and a placement that
// is already balanced (the controller's common case).
func BenchmarkRebalance(b *testing.B) {
	const slots = 4096
	nine := nodeIDs(9)
	cases := []struct {
		name     string
		cur      []Assignment
		eligible []string
	}{
		{"join", Initial(slots, nine[:8], 3), nine},
		{"leave", Initial(slots, nine, 3), nine[1:]},
		{"balanced", Initial(slots, nine, 3), nine},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Rebalance(c.cur, slots, c.eligible, 3)
			}
		})
	}
}

func BenchmarkInitial(b *testing.B) {
	nodes := nodeIDs(9)
	b.ReportAllocs()
	for b.Loop() {
		Initial(4096, nodes, 3)
	}
}

func BenchmarkRepairLeave(b *testing.B) {
	nodes := nodeIDs(9)
	cur := Initial(4096, nodes, 3)
	b.ReportAllocs()
	for b.Loop() {
		Repair(cur, 4096, nodes[1:], 3)
	}
}
