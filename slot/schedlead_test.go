package slot

import (
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/recur"
)

// TestLeadFor: the schedule lead follows the advances' commit time
// between its floor and a cap that keeps at most one occurrence of the
// fastest schedule created ahead.
func TestLeadFor(t *testing.T) {
	cases := []struct{ commit, want time.Duration }{
		{0, scheduleLead},
		{5 * time.Millisecond, scheduleLead},
		{125 * time.Millisecond, scheduleLead},
		{200 * time.Millisecond, 400 * time.Millisecond},
		{375 * time.Millisecond, maxScheduleLead},
		{10 * time.Second, maxScheduleLead},
	}
	for _, c := range cases {
		if got := leadFor(c.commit); got != c.want {
			t.Errorf("leadFor(%v) = %v, want %v", c.commit, got, c.want)
		}
	}
	if maxScheduleLead >= recur.MinEvery {
		t.Fatalf("the lead's cap %v must stay below the shortest interval %v", maxScheduleLead, recur.MinEvery)
	}
}
