package fault

import (
	"reflect"
	"sort"
	"testing"
	"time"
)

func TestScheduleIsReproducible(t *testing.T) {
	opt := Options{Cycles: 40, Kinds: All}
	a, b := Schedule(7, opt), Schedule(7, opt)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave two schedules")
	}
	if reflect.DeepEqual(a, Schedule(8, opt)) {
		t.Fatal("another seed gave the same schedule")
	}
	// The kinds' order given does not matter.
	rev := append([]Kind(nil), All...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	if !reflect.DeepEqual(a, Schedule(7, Options{Cycles: 40, Kinds: rev})) {
		t.Fatal("the order of the kinds changed the schedule")
	}
}

func TestScheduleCoversEveryKindAndBounds(t *testing.T) {
	steps := Schedule(1, Options{Cycles: 3 * len(All), Kinds: All})
	count := map[Kind]int{}
	for i, s := range steps {
		if s.Cycle != i+1 {
			t.Fatalf("step %d has cycle %d", i, s.Cycle)
		}
		count[s.Kind]++
		switch s.Kind {
		case PauseLeader, PauseFollower:
			if s.Hold < time.Second || s.Hold > 20*time.Second {
				t.Errorf("pause hold %v", s.Hold)
			}
		case Loss:
			if s.Loss < 0.05 || s.Loss > 0.30 {
				t.Errorf("loss %v", s.Loss)
			}
		case Delay:
			if s.Delay < 50*time.Millisecond || s.Delay > 400*time.Millisecond {
				t.Errorf("delay %v", s.Delay)
			}
		case Clock:
			if a := s.Offset.Abs(); a < 500*time.Millisecond || a > 3*time.Second {
				t.Errorf("offset %v", s.Offset)
			}
		case Membership:
			if s.Under == nil || s.Under.Kind == Membership {
				t.Errorf("membership without a fault under it: %+v", s)
			}
		}
	}
	for _, k := range All {
		if count[k] != 3 {
			t.Errorf("%s came up %d times in 3 rounds, want 3", k, count[k])
		}
	}
	for _, s := range Schedule(1, Options{Cycles: 30, Kinds: All, MaxHold: 2 * time.Second}) {
		if s.Hold > 2*time.Second {
			t.Fatalf("hold %v over the cap", s.Hold)
		}
	}
}

func TestParse(t *testing.T) {
	ks, err := Parse("loss, kill-one,loss")
	if err != nil || !reflect.DeepEqual(ks, []Kind{Loss, KillOne}) {
		t.Fatalf("%v %v", ks, err)
	}
	if _, err := Parse("kill-one,bogus"); err == nil {
		t.Fatal("an unknown kind must be an error")
	}
	if ks, _ := Parse("all"); len(ks) != len(All) {
		t.Fatal("all")
	}
	if ks, err := Parse("none"); err != nil || len(ks) != 1 || ks[0] != None {
		t.Fatalf("none: %v %v", ks, err)
	}
	for _, s := range Schedule(2, Options{Cycles: 3, Kinds: []Kind{None}}) {
		if s.Kind != None || s.Hold < 3*time.Second {
			t.Fatalf("quiet cycle %+v", s)
		}
	}
}

// sees computes, for each node, the nodes it can reach (itself included).
func sees(nodes []string, cut []Link) map[string][]string {
	c := map[Link]bool{}
	for _, l := range cut {
		c[l], c[Link{l[1], l[0]}] = true, true
	}
	out := map[string][]string{}
	for _, a := range nodes {
		for _, b := range nodes {
			if !c[Link{a, b}] {
				out[a] = append(out[a], b)
			}
		}
		sort.Strings(out[a])
	}
	return out
}

func TestPartitions(t *testing.T) {
	three := []string{"n1", "n2", "n3"}
	five := []string{"n1", "n2", "n3", "n4", "n5"}
	if got := sees(three, Isolate("n2", three)); len(got["n2"]) != 1 || len(got["n1"]) != 2 {
		t.Fatalf("isolate: %v", got)
	}
	for _, nodes := range [][]string{three, five} {
		cut, minority := MajoritySplit(3, nodes)
		s := sees(nodes, cut)
		for _, n := range nodes {
			want := len(nodes) - len(minority)
			for _, m := range minority {
				if m == n {
					want = len(minority)
				}
			}
			if len(s[n]) != want {
				t.Fatalf("split of %v (minority %v): %s sees %v", nodes, minority, n, s[n])
			}
		}
		if len(minority) != (len(nodes)-1)/2 {
			t.Fatalf("minority %v", minority)
		}
	}
	// Ring of 5: each node sees exactly 3 (a majority), and the
	// majorities differ.
	cut, _ := Ring(9, five)
	s := sees(five, cut)
	distinct := map[string]bool{}
	for _, n := range five {
		if len(s[n]) != 3 {
			t.Fatalf("ring: %s sees %v", n, s[n])
		}
		distinct[joined(s[n])] = true
	}
	if len(distinct) != 5 {
		t.Fatalf("ring majorities not distinct: %v", s)
	}
	// Ring of 3: a bridge sees both, the others only the bridge and
	// themselves.
	cut, order := Ring(9, three)
	s = sees(three, cut)
	if len(s[order[1]]) != 3 || len(s[order[0]]) != 2 || len(s[order[2]]) != 2 {
		t.Fatalf("bridge: %v", s)
	}
}

func joined(s []string) string {
	out := ""
	for _, x := range s {
		out += x + ","
	}
	return out
}
