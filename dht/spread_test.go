package dht

import "testing"

// A node that returns after its replicas were re-created elsewhere is added
// back as the last replica; SpreadLeaders gives it its share of leaderships
// without moving any replica.
func TestSpreadLeadersAfterReturn(t *testing.T) {
	nodes := []string{"n1", "n2", "n3"}
	// n3 gone: two replicas per slot, leaders on n1 and n2.
	two := Repair(Initial(12, nodes, 3), 12, []string{"n1", "n2"}, 3)
	// n3 back: Repair re-adds it at the end of every slot.
	back := Repair(two, 12, nodes, 3)
	if l := leadsOf(back)["n3"]; l != 0 {
		t.Fatalf("after repair n3 leads %d; the test assumes Repair leaves it at 0", l)
	}
	spread := SpreadLeaders(back, 12, nodes, 3)
	if moves := Diff(back, spread); len(moves) != 0 {
		t.Fatalf("SpreadLeaders moved replicas: %v", moves)
	}
	for _, n := range nodes {
		if l := leadsOf(spread)[n]; l != 4 {
			t.Fatalf("%s leads %d, want 4 (%v)", n, l, leadsOf(spread))
		}
	}
	if err := Validate(spread, 12, 3); err != nil {
		t.Fatal(err)
	}
	again := SpreadLeaders(spread, 12, nodes, 3)
	for i := range again {
		if again[i].Replicas[0] != spread[i].Replicas[0] {
			t.Fatal("SpreadLeaders is not idempotent")
		}
	}
}

func leadsOf(as []Assignment) map[string]int {
	out := map[string]int{}
	for _, a := range as {
		if len(a.Replicas) > 0 {
			out[a.Replicas[0]]++
		}
	}
	return out
}
