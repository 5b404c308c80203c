package forward

import (
	"slices"
	"testing"
)

// A leader counts itself and every voter the liveness check does not find
// dead; it takes a write only with a strict majority of the voters.
func TestQuorate(t *testing.T) {
	for _, c := range []struct {
		name   string
		voters []string
		dead   []string // nil Dead: no liveness check
		noDead bool
		want   bool
	}{
		{"all alive", []string{"a", "b", "c"}, nil, false, true},
		{"one of three dead", []string{"a", "b", "c"}, []string{"c"}, false, true},
		{"two of three dead", []string{"a", "b", "c"}, []string{"b", "c"}, false, false},
		{"this node is never dead to itself", []string{"a", "b", "c"}, []string{"a", "b"}, false, true},
		{"two of four alive is no majority", []string{"a", "b", "c", "d"}, []string{"c", "d"}, false, false},
		{"three of five alive", []string{"a", "b", "c", "d", "e"}, []string{"d", "e"}, false, true},
		{"alone", []string{"a"}, nil, false, true},
		{"a voter list not read: no refusal", nil, []string{"b"}, false, true},
		{"no liveness check: no refusal", []string{"a", "b", "c"}, nil, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := Config{NodeID: "a"}
			if !c.noDead {
				cfg.Dead = func(id string) bool { return slices.Contains(c.dead, id) }
			}
			if got := New(cfg).quorate(c.voters); got != c.want {
				t.Fatalf("quorate(%v) with %v dead = %v, want %v", c.voters, c.dead, got, c.want)
			}
		})
	}
}
