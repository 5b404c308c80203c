package dht

import (
	"cmp"
	"slices"
)

// LeaderTargets chooses, for each slot, which replica should lead given the
// nodes that are alive: the preferred leader (Replicas[0]) if alive,
// otherwise the alive replica that leads the fewest slots so far (ties:
// order in Replicas). "So far" counts every alive preferred leader first and
// then the stand-ins chosen in slot order, so the slots of a dead node are
// spread over the survivors rather than piled on the first one. Slots with
// no alive replica are omitted. A slot listed twice counts once (the first
// entry).
func LeaderTargets(assign []Assignment, alive []string) map[int]string {
	up := make(map[string]bool, len(alive))
	for _, id := range alive {
		if id != "" {
			up[id] = true
		}
	}
	sorted := make([]Assignment, len(assign))
	copy(sorted, assign)
	slices.SortStableFunc(sorted, func(a, b Assignment) int { return cmp.Compare(a.Slot, b.Slot) })
	sorted = slices.CompactFunc(sorted, func(a, b Assignment) bool { return a.Slot == b.Slot })

	out := make(map[int]string, len(sorted))
	led := make(map[string]int, len(alive))
	for _, a := range sorted {
		if len(a.Replicas) > 0 && up[a.Replicas[0]] {
			out[a.Slot] = a.Replicas[0]
			led[a.Replicas[0]]++
		}
	}
	for _, a := range sorted {
		if len(a.Replicas) == 0 || up[a.Replicas[0]] {
			continue
		}
		best := ""
		for _, id := range a.Replicas[1:] {
			if up[id] && (best == "" || led[id] < led[best]) {
				best = id
			}
		}
		if best != "" {
			out[a.Slot] = best
			led[best]++
		}
	}
	return out
}
