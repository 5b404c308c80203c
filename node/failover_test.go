package node

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/dht"
	"github.com/timemachine-db/timemachine/internal/testutil"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftgroup"
)

// Failover within 2 s with raft's conservative production timeouts (a
// follower on its own waits 1–2 s for a heartbeat, then an election):
// the liveness check sees the killed leader at once (connection refused)
// and the followers of its groups elect a new leader right away. Measured
// per cycle: kill → every slot the victim led accepts a write through a
// survivor.
func TestFailoverWithinTwoSeconds(t *testing.T) {
	// The zero Timing is what a server runs with (slots then get
	// slot.SlotCommitTimeout).
	tc := startCluster(t, 3, func(_ int, c *Config) { c.Timing = raftgroup.Timing{} })
	const cycles = 3
	var worst time.Duration
	for cycle := 0; cycle < cycles; cycle++ {
		tc.waitReady(30 * time.Second)
		victim, most := "", -1
		for id, c := range tc.leaderCounts() {
			if c > most {
				victim, most = id, c
			}
		}
		vi := tc.index(victim)
		var survivor *Node
		for _, n := range tc.live() {
			if n.ID() != victim {
				survivor = n
				break
			}
		}
		view := survivor.cluster.RefreshView(context.Background())
		var led []int
		for s := 0; s < survivor.cluster.SlotCount(); s++ {
			if view.LeaderOf(s) == victim {
				led = append(led, s)
			}
		}
		// One job id per slot the victim leads.
		ids := map[int]string{}
		for i := 0; len(ids) < len(led); i++ {
			id := fmt.Sprintf("c%d-%d", cycle, i)
			if s := dht.SlotOf("default", id, survivor.cluster.SlotCount()); slices.Contains(led, s) && ids[s] == "" {
				ids[s] = id
			}
		}
		killed := time.Now()
		tc.kill(vi)
		testutil.Eventually(t, 20*time.Second, "every slot the victim led writable", func() error {
			for s, id := range ids {
				ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
				_, err := survivor.svc.UpsertJob(ctx, "default", id, model.JobSpec{TriggerTime: time.Now().Add(time.Hour).UnixMilli(), CallbackURL: "http://127.0.0.1:9/", Hash: 1}, 0)
				cancel()
				if err != nil {
					return fmt.Errorf("slot %d: %w", s, err)
				}
				delete(ids, s)
			}
			return nil
		})
		took := time.Since(killed)
		worst = max(worst, took)
		t.Logf("cycle %d: killed %s (leading %d slots): writable again after %v", cycle, victim, most, took.Round(time.Millisecond))
		tc.restart(vi)
	}
	if worst > 2*time.Second {
		t.Fatalf("failover took up to %v, over 2 s", worst)
	}
}

// The followers of a group whose leader died learn each other's last log
// index (methodLastIndexes) to order their hurried elections; each answer
// is that node's own replica's index.
func TestFollowersTellTheirLastLogIndexes(t *testing.T) {
	tc := startCluster(t, 3, nil)
	tc.waitReady(30 * time.Second)
	asker := tc.live()[0]
	byPeer := map[string][]string{}
	for _, n := range tc.live()[1:] {
		byPeer[n.ID()] = []string{metaGroupKey, groupKey(0), "no-such-group"}
	}
	got := asker.askLastIndexes(byPeer)
	for _, n := range tc.live()[1:] {
		m := got[n.ID()]
		if m[metaGroupKey] == 0 || m[metaGroupKey] > n.meta.LastIndex() {
			t.Fatalf("%s: meta last index %d, its replica's is %d", n.ID(), m[metaGroupKey], n.meta.LastIndex())
		}
		if rep := n.slots.Get(0); rep != nil && (m[groupKey(0)] == 0 || m[groupKey(0)] > rep.LastIndex()) {
			t.Fatalf("%s: slot 0 last index %d, its replica's is %d", n.ID(), m[groupKey(0)], rep.LastIndex())
		}
		if _, ok := m["no-such-group"]; ok {
			t.Fatalf("%s answered an index for a group it has no replica of", n.ID())
		}
	}
}
