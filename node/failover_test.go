package node

import (
	"context"
	"errors"
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
// follower on its own waits 10–20 s for a heartbeat, then an election):
// the liveness check sees the killed leader at once (connection refused)
// and the followers of its groups elect a new leader right away. Measured
// per cycle: kill → every slot the victim led accepts a write through a
// survivor. The median cycle must be well within 2 s (the path above);
// one cycle may take the fallback election instead, at the slots' 5 s
// lease (6.5 s at most with its stagger and the election), but none longer.
// The picked follower's TimeoutNow used to elect nobody when that
// follower had restarted a moment before (its raft still in the loop of
// its refused first campaign: raftgroup wakeMainLoop, docs/reliability.md
// "A TimeoutNow that elected nobody"), in 18 of 24 runs under the race
// detector and load; the bound stays for a fallback election that other
// causes may still need.
func TestFailoverWithinTwoSeconds(t *testing.T) {
	// The zero Timing is what a server runs with (slots then get
	// slot.SlotCommitTimeout).
	tc := startCluster(t, 3, func(_ int, c *Config) { c.Timing = raftgroup.Timing{} })
	const cycles = 3
	var took []time.Duration
	for cycle := 0; cycle < cycles; cycle++ {
		tc.waitReady(30 * time.Second)
		// A settled cluster: the node restarted in the cycle before
		// follows its leaders again. A kill 0.1-0.4 s after a restart
		// failed over in 1.9-5.3 s now and then, on main as on every
		// branch since (docs/scaling.md, fifth pass; docs/reliability.md):
		// a second fault that soon is not what this test measures.
		testutil.Eventually(t, 30*time.Second, "every replica caught up", func() error {
			for _, n := range tc.live() {
				if err := caughtUp(n)(); err != nil {
					return fmt.Errorf("%s: %w", n.ID(), err)
				}
			}
			return nil
		})
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
		d := time.Since(killed)
		took = append(took, d)
		t.Logf("cycle %d: killed %s (leading %d slots): writable again after %v", cycle, victim, most, d.Round(time.Millisecond))
		tc.restart(vi)
	}
	judgeFailovers(t, "failover", took)
}

// judgeFailovers fails t unless the median of took is under a second (the
// liveness check's path: a TimeoutNow by the picked follower) and none is
// over 6.5 s, the fallback election's bound (the 5 s lease, its stagger
// and an election).
func judgeFailovers(t *testing.T, what string, took []time.Duration) {
	t.Helper()
	slices.Sort(took)
	if median := took[len(took)/2]; median > time.Second {
		t.Fatalf("%s took %v (median %v): the liveness check's path is not working", what, took, median)
	}
	if worst := took[len(took)-1]; worst > 6500*time.Millisecond {
		t.Fatalf("%s took up to %v, over the fallback election's bound", what, worst)
	}
}

// The followers of a group whose leader died learn each other's last log
// index (methodLastIndexes) to order their hurried elections, and each
// other's liveness verdict on the leader; each answer is that node's own
// replica's index and its own verdict (a live leader: not dead).
func TestFollowersTellTheirLastLogIndexes(t *testing.T) {
	tc := startCluster(t, 3, nil)
	tc.waitReady(30 * time.Second)
	asker := tc.live()[0]
	byPeer := map[string]*lastIndexesReq{}
	for _, n := range tc.live()[1:] {
		byPeer[n.ID()] = &lastIndexesReq{Groups: []string{metaGroupKey, groupKey(0), "no-such-group"}, Leaders: []string{asker.ID(), asker.ID(), asker.ID()}}
	}
	got := asker.askViews(byPeer)
	for _, n := range tc.live()[1:] {
		m := got[n.ID()]
		if v := m[metaGroupKey].last; v.index == 0 || v.index > n.meta.LastIndex() || v.term == 0 {
			t.Fatalf("%s: meta last entry %+v, its replica's index is %d", n.ID(), v, n.meta.LastIndex())
		}
		if rep := n.slots.Get(0); rep != nil {
			if v := m[groupKey(0)].last; v.index == 0 || v.index > rep.LastIndex() || v.term == 0 {
				t.Fatalf("%s: slot 0 last entry %+v, its replica's index is %d", n.ID(), v, rep.LastIndex())
			}
		}
		if _, ok := m["no-such-group"]; ok {
			t.Fatalf("%s answered an index for a group it has no replica of", n.ID())
		}
		if m[metaGroupKey].dead {
			t.Fatalf("%s finds %s dead, a live node", n.ID(), asker.ID())
		}
	}
}

// leaderlessConsent (a replica that stepped down asks whether it may
// campaign without pre-vote) consents only where a majority of the voters
// names the asking replica, or no one, as leader: the leader's node
// would be granted, a follower's node, whose peers name another leader,
// is not; nor is a node outside the group.
func TestLeaderlessConsentNeedsAMajorityNamingNoOtherLeader(t *testing.T) {
	tc := startCluster(t, 3, nil)
	tc.waitReady(30 * time.Second)
	for _, group := range []string{groupKey(0), metaGroupKey} {
		var voters []string
		var leader string
		for _, n := range tc.live() {
			if group == metaGroupKey {
				voters, leader = n.meta.Voters(), func() string { id, _ := n.meta.Leader(); return id }()
			} else if rep := n.slots.Get(0); rep != nil {
				voters, leader = rep.Voters(), func() string { id, _ := rep.Leader(); return id }()
			}
		}
		if leader == "" || len(voters) != 3 {
			t.Fatalf("group %s: leader %q, voters %v", group, leader, voters)
		}
		for _, n := range tc.live() {
			want := n.ID() == leader
			if got := n.leaderlessConsent(group, voters); got != want {
				t.Fatalf("group %s: %s (leader %s) got consent %t", group, n.ID(), leader, got)
			}
		}
		if tc.live()[0].leaderlessConsent(group, []string{"x", "y", "z"}) {
			t.Fatalf("group %s: consent for a node that is not a voter", group)
		}
	}
}

// A meta replica that took over from a dead leader, or campaigns past it,
// tells the other follower it "follows" that leader: it is not one that
// will leave the election to others. Answering false made the asker
// campaign too, at the same moment and term, and the split vote left the
// meta group to raft's own election timeout (3.2 s in
// TestMetaFailoverWithinTwoSeconds, under -race on a loaded machine).
func TestMetaSuccessorStillCountsAsFollowingTheDeadLeader(t *testing.T) {
	tc := startCluster(t, 3, func(_ int, c *Config) { c.Timing = raftgroup.Timing{} })
	var dead string
	testutil.Eventually(t, 10*time.Second, "a meta leader", func() error {
		for _, n := range tc.live() {
			if n.meta.IsLeader() {
				dead = n.ID()
				return nil
			}
		}
		return errors.New("no meta leader yet")
	})
	tc.kill(tc.index(dead))
	var successor, other *Node
	testutil.Eventually(t, 20*time.Second, "a new meta leader", func() error {
		successor, other = nil, nil
		for _, n := range tc.live() {
			if n.meta.IsLeader() {
				successor = n
			} else {
				other = n
			}
		}
		if successor == nil || other == nil {
			return errors.New("no new meta leader yet")
		}
		return nil
	})
	got := other.askViews(map[string]*lastIndexesReq{successor.ID(): {Groups: []string{metaGroupKey}, Leaders: []string{dead}}})
	v, ok := got[successor.ID()][metaGroupKey]
	if !ok {
		t.Fatalf("%s did not answer for the meta group", successor.ID())
	}
	if !v.follows {
		t.Fatalf("%s leads the meta group after %s died, yet answers that it does not follow %s: the other follower would campaign against it", successor.ID(), dead, dead)
	}
}

// A follower that alone finds a slot's leader dead (a one-way fault, an
// asymmetric partition) must not depose it: the TimeoutNow that makes the
// picked follower campaign skips raft's leader stickiness, so it is sent
// only when every other follower finds the leader dead too. Here both
// followers are told the leader died while the liveness check (theirs and
// each other's) still hears it: neither campaigns, the leader stays.
func TestLoneFollowerDoesNotDeposeTheLeader(t *testing.T) {
	tc := startCluster(t, 3, func(_ int, c *Config) { c.Timing = raftgroup.Timing{} })
	tc.waitReady(30 * time.Second)
	const s = 0
	var leader string
	var followers []*Node
	testutil.Eventually(t, 10*time.Second, "slot 0 led and followed by all", func() error {
		leader, followers = "", nil
		for _, n := range tc.live() {
			rep := n.slots.Get(s)
			if rep == nil {
				return fmt.Errorf("%s has no replica", n.ID())
			}
			id, _ := rep.Leader()
			if id == "" || (leader != "" && id != leader) {
				return fmt.Errorf("%s: leader %q", n.ID(), id)
			}
			leader = id
			if !rep.IsLeader() {
				followers = append(followers, n)
			}
		}
		if len(followers) != 2 {
			return fmt.Errorf("%d followers", len(followers))
		}
		return nil
	})
	done := make(chan struct{}, len(followers))
	for _, f := range followers {
		rep := f.slots.Get(s)
		var others []string
		for _, v := range rep.Voters() {
			if v != leader && v != f.ID() {
				others = append(others, v)
			}
		}
		plan := hurryPlan{group: groupKey(s), leader: leader, others: others, last: newLogPos(rep.LastLog()), hurry: rep.Expedite,
			campaign: rep.Campaign, leaderNow: func() string { id, _ := rep.Leader(); return id }}
		go func() {
			f.hurryInOrder([]hurryPlan{plan})
			done <- struct{}{}
		}()
	}
	for range followers {
		<-done // the picked follower gave up waiting for agreement (agreeWait)
	}
	for _, n := range tc.live() {
		if id, _ := n.slots.Get(s).Leader(); id != leader {
			t.Fatalf("%s: slot %d led by %q, was %q: a healthy leader deposed", n.ID(), s, id, leader)
		}
	}
}

// The meta group fails over like a slot's (it runs the slots' long raft
// timeouts on the node's coalesced heartbeats, meta.MetaHeartbeatTimeout):
// the liveness check finds its killed leader and the follower with the
// most up-to-date log campaigns at once. Measured: kill → a collection
// can be created through a survivor; judged as TestFailoverWithinTwoSeconds.
func TestMetaFailoverWithinTwoSeconds(t *testing.T) {
	tc := startCluster(t, 3, func(_ int, c *Config) { c.Timing = raftgroup.Timing{} })
	var took []time.Duration
	for cycle := 0; cycle < 3; cycle++ {
		tc.waitReady(30 * time.Second)
		var victim int
		testutil.Eventually(t, 10*time.Second, "a meta leader", func() error {
			for _, n := range tc.live() {
				if n.meta.IsLeader() {
					victim = tc.index(n.ID())
					return nil
				}
			}
			return errors.New("no meta leader yet")
		})
		var survivor *Node
		for _, n := range tc.live() {
			if tc.index(n.ID()) != victim {
				survivor = n
				break
			}
		}
		killed := time.Now()
		tc.kill(victim)
		testutil.Eventually(t, 20*time.Second, "a collection created through a survivor", func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			_, err := survivor.svc.PutCollection(ctx, model.Collection{Name: fmt.Sprintf("after-kill-%d", cycle)})
			return err
		})
		d := time.Since(killed)
		took = append(took, d)
		t.Logf("cycle %d: killed the meta leader: meta writable again after %v", cycle, d.Round(time.Millisecond))
		tc.restart(victim)
	}
	judgeFailovers(t, "meta failover", took)
}
