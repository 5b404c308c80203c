package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/internal/testutil"
	"github.com/timemachine-db/timemachine/raftgroup"
)

// The slots' heartbeats between nodes travel coalesced (rpc/beat): many
// heartbeats per node-to-node call, answered by the groups themselves,
// and a partitioned node still loses its leaderships (the coalesced path
// does not keep a cut-off leader alive).
func TestClusterCoalescesHeartbeats(t *testing.T) {
	tc := startCluster(t, 3, func(_ int, c *Config) {
		c.Slots = 48
		c.Timing = raftgroup.Timing{} // production timing: heartbeats every 100-200 ms
	})
	testutil.Eventually(t, 30*time.Second, "heartbeats coalesced on every node", func() error {
		for _, n := range tc.live() {
			st := n.beats.Stats()
			if st.Answered < 1000 || st.Answered < 2*st.Batches {
				return fmt.Errorf("%s: %+v", n.ID(), st)
			}
		}
		return nil
	})

	// Cut the node leading the most slots off: the others elect new
	// leaders for all of them, as without coalescing.
	victim, most := "", -1
	for id, c := range tc.leaderCounts() {
		if c > most {
			victim, most = id, c
		}
	}
	tc.net.Isolate(victim)
	testutil.Eventually(t, 30*time.Second, "the isolated node's slots led by the others", func() error {
		for _, n := range tc.live() {
			if n.ID() == victim {
				continue
			}
			for s := 0; s < n.cluster.SlotCount(); s++ {
				r := n.slots.Get(s)
				if r == nil {
					continue
				}
				if id, _ := r.Leader(); id == "" || id == victim {
					return fmt.Errorf("%s: slot %d led by %q", n.ID(), s, id)
				}
			}
		}
		return nil
	})
	tc.net.Heal()
}
