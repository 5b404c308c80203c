package slot

import (
	"slices"
	"testing"
)

func TestRegistry(t *testing.T) {
	g := NewRegistry()
	a, b, c := &Replica{slot: 3}, &Replica{slot: 1}, &Replica{slot: 3}
	if g.Get(3) != nil || g.Len() != 0 {
		t.Fatal("a new registry is not empty")
	}
	g.Put(3, a)
	g.Put(1, b)
	if g.Get(3) != a || g.Get(1) != b || g.Len() != 2 {
		t.Fatal("Put/Get")
	}
	if got := g.Slots(); !slices.Equal(got, []int{1, 3}) {
		t.Fatalf("Slots = %v", got)
	}
	if got := g.All(); len(got) != 2 || got[0] != b || got[1] != a {
		t.Fatalf("All = %v", got)
	}
	g.Put(3, c) // reopened
	if g.Remove(3, a) || g.Get(3) != c {
		t.Fatal("removing a replaced replica removed its successor")
	}
	if !g.Remove(3, c) || g.Get(3) != nil || g.Len() != 1 {
		t.Fatal("Remove")
	}
}
