package node

import "testing"

// hurryOrder places the followers of a group so that the one with the
// longest log goes last (it wins: the others refuse a shorter log), ties
// and unknown indexes by id, and no two followers take the same place.
func TestHurryOrder(t *testing.T) {
	type f struct {
		id   string
		last uint64
		ok   bool // its index is known to the others
	}
	cases := []struct {
		name string
		fs   []f
		want map[string]int
	}{
		{"equal logs: by id", []f{{"n2", 10, true}, {"n3", 10, true}}, map[string]int{"n2": 0, "n3": 1}},
		{"the longer log last, whatever its id", []f{{"n2", 11, true}, {"n3", 10, true}}, map[string]int{"n3": 0, "n2": 1}},
		{"the longer log last (higher id)", []f{{"n2", 10, true}, {"n3", 12, true}}, map[string]int{"n2": 0, "n3": 1}},
		{"unknown: by id", []f{{"n2", 11, true}, {"n3", 10, false}}, map[string]int{"n2": 0, "n3": 1}},
		{"four followers", []f{{"a", 7, true}, {"b", 9, true}, {"c", 7, true}, {"d", 8, true}}, map[string]int{"a": 0, "c": 1, "d": 2, "b": 3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			seen := map[int]string{}
			for _, me := range c.fs {
				var others []string
				idx := map[string]f{}
				for _, o := range c.fs {
					if o.id != me.id {
						others = append(others, o.id)
						idx[o.id] = o
					}
				}
				pos := hurryOrder(me.id, me.last, others, func(p string) (uint64, bool) {
					o := idx[p]
					if !o.ok || !me.ok {
						return 0, false // the exchange failed one way or the other
					}
					return o.last, true
				})
				if pos != c.want[me.id] {
					t.Errorf("%s (last %d) at %d, want %d", me.id, me.last, pos, c.want[me.id])
				}
				if prev, dup := seen[pos]; dup {
					t.Errorf("%s and %s both at %d: they would split the vote", prev, me.id, pos)
				}
				seen[pos] = me.id
			}
		})
	}
}
