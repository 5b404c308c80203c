package dht

import (
	"fmt"
	"testing"
	"time"
)

// The largest slot counts the server accepts by default (--slots up to
// 4,096) place, repair and rebalance evenly and fast enough for the meta
// leader's controller loop, from 3 nodes up to 100 (docs/scaling.md).
func TestPlacementAtScale(t *testing.T) {
	for _, c := range []struct{ slots, nodes int }{{1024, 3}, {4096, 3}, {1024, 100}, {4096, 100}} {
		t.Run(fmt.Sprintf("slots=%d/nodes=%d", c.slots, c.nodes), func(t *testing.T) {
			nodes := nodeIDs(c.nodes)
			start := time.Now()
			out := Initial(c.slots, nodes, 3)
			initial := time.Since(start)
			checkPlacement(t, out, c.slots, nodes, 3)
			if rs, ls := spreads(out, nodes); rs > 1 || ls > 1 {
				t.Errorf("replica spread %d, leader spread %d; want <= 1", rs, ls)
			}
			// One node lost, then back: repair and rebalance stay valid.
			start = time.Now()
			repaired := Repair(out, c.slots, nodes[1:], 3)
			repair := time.Since(start)
			if err := Validate(repaired, c.slots, 3); err != nil {
				t.Fatal(err)
			}
			start = time.Now()
			back := Rebalance(repaired, c.slots, nodes, 3)
			rebalance := time.Since(start)
			if err := Validate(back, c.slots, 3); err != nil {
				t.Fatal(err)
			}
			if rs, _ := spreads(back, nodes); rs > 1 {
				t.Errorf("after rebalance: replica spread %d", rs)
			}
			t.Logf("initial %v, repair %v, rebalance %v", initial, repair, rebalance)
			if worst := max(initial, repair, rebalance); worst > 5*time.Second {
				t.Errorf("a placement step took %v", worst)
			}
		})
	}
}
