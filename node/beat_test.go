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
		c.Timing = raftgroup.Timing{} // production timing: slot heartbeats every 0.5-1 s
	})
	testutil.Eventually(t, 30*time.Second, "heartbeats coalesced on every node", func() error {
		for _, n := range tc.live() {
			st := n.beats.Stats()
			// Production timing: each group heartbeats every 0.5-1 s, so
			// a 20 ms flush gathers fewer of them than it did at 100-200 ms.
			if st.Answered < 300 || st.Answered*2 < st.Batches*3 {
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
	cut := time.Now()
	// raft's lease on the slots is 5 s, but the cut-off leader stops
	// serving reads (and firing: the same liveness lease) well before.
	vn := tc.nodes[tc.index(victim)]
	testutil.Eventually(t, 1500*time.Millisecond, "the cut-off node serves no reads", func() error {
		for s := 0; s < vn.cluster.SlotCount(); s++ {
			if r := vn.slots.Get(s); r != nil && (r.Readable() || r.VerifyRead() == nil) {
				return fmt.Errorf("slot %d readable on the cut-off %s (raft leader: %t)", s, victim, r.IsLeader())
			}
		}
		return nil
	})
	t.Logf("the cut-off %s serves no reads %v after the cut", victim, time.Since(cut).Round(time.Millisecond))
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
	// The liveness check finds the victim dead after 700 ms of silence,
	// then the picked followers campaign (raft on its own: 10-20 s).
	took := time.Since(cut)
	t.Logf("%d slots of the isolated %s led by the others after %v", most, victim, took.Round(time.Millisecond))
	if took > 4*time.Second {
		t.Fatalf("new leaders only after %v", took)
	}
	tc.net.Heal()
}
