package node

import "testing"

// The hurried elections go in the order of the followers' log tails, then
// of their ids: whichever pair of followers, the one with more uncommitted
// entries (capped) starts later, at least one stagger apart.
func TestHurryDelayOrdersByLogTailThenID(t *testing.T) {
	for _, followers := range []int{1, 2, 4} {
		for ra := 0; ra < followers; ra++ {
			for rb := 0; rb < followers; rb++ {
				if ra == rb {
					continue
				}
				for ta := uint64(0); ta <= hurryTailMax+2; ta++ {
					for tb := uint64(0); tb <= hurryTailMax+2; tb++ {
						da, db := hurryDelay(ra, followers, ta), hurryDelay(rb, followers, tb)
						ca, cb := min(ta, hurryTailMax), min(tb, hurryTailMax)
						aLater := ca > cb || (ca == cb && ra > rb)
						if aLater && da < db+hurryStagger {
							t.Fatalf("followers %d: rank %d tail %d waits %v, rank %d tail %d %v: want it at least %v later", followers, ra, ta, da, rb, tb, db, hurryStagger)
						}
					}
				}
			}
		}
	}
	if d := hurryDelay(0, 2, 0); d != 0 {
		t.Fatalf("the first follower with a committed log waits %v, want 0", d)
	}
}
