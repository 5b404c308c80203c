package cluster

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"
	"github.com/timemachine-db/timemachine/internal/testutil"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
)

func gossipOnly(t *testing.T, id, addr string, join []string, hears func(string) bool) *Cluster {
	t.Helper()
	return gossipIn(t, t.TempDir(), id, addr, join, hears)
}

// gossipIn is gossipOnly with serf's state (its snapshot) in dir.
func gossipIn(t *testing.T, dir, id, addr string, join []string, hears func(string) bool) *Cluster {
	t.Helper()
	c := New(Config{NodeID: id, SerfAddr: addr, SerfDir: dir, Join: join, FastGossip: true, Hears: hears,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := c.startSerf(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.LeaveGossip(false) })
	return c
}

// clusterAddr is a free loopback gossip address.
func clusterAddr(t *testing.T) string {
	t.Helper()
	a, err := testutil.ClusterAddr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// seenAs is a condition for testutil.Eventually: every one of nodes
// lists id with status want.
func seenAs(id string, want serf.MemberStatus, nodes ...*Cluster) func() error {
	return func() error {
		for _, n := range nodes {
			if s := statusOf(n, id); s != want {
				return fmt.Errorf("%s: %s is %s", n.cfg.NodeID, id, s)
			}
		}
		return nil
	}
}

func statusOf(c *Cluster, id string) serf.MemberStatus {
	for _, m := range c.members() {
		if m.ID == id {
			return m.Status
		}
	}
	return serf.StatusNone
}

// A member that gossip calls failed but that the liveness check hears is
// joined again (rejoinHeard): the healed side of a partition. Here b's
// process dies and a new one starts on the same address knowing no one,
// so that a holds b as failed at b's last incarnation and neither side
// gossips to the other — the state both sides of a healed partition are
// in. Without the rejoin, only serf's reconnect (every 30 s) or a push-pull
// would find b again; the nemesis measured the node table saying "failed"
// for 6–32 s after partitions healed.
func TestRejoinHeardFailedMember(t *testing.T) {
	addrA, addrB := clusterAddr(t), clusterAddr(t)
	hears := func(string) bool { return true }
	a := gossipOnly(t, "a", addrA, nil, hears)
	b := gossipOnly(t, "b", addrB, []string{addrA}, nil)
	testutil.Eventually(t, 10*time.Second, "a sees b alive", seenAs("b", serf.StatusAlive, a))
	b.LeaveGossip(false) // no leave message: a finds b failed
	testutil.Eventually(t, 20*time.Second, "a finds b failed", seenAs("b", serf.StatusFailed, a))
	gossipOnly(t, "b", addrB, nil, nil) // alone: no --join, no snapshot

	// No join while the liveness check does not hear b, nor from a node
	// that was removed from the cluster (it stays out of the gossip).
	a.cfg.Hears = func(string) bool { return false }
	a.rejoinHeard(&raftfsm.MetaState{})
	a.cfg.Hears = hears
	a.removedAt.Store(1)
	a.rejoinHeard(&raftfsm.MetaState{})
	a.removedAt.Store(0)
	if len(a.rejoined) != 0 {
		t.Fatalf("joined b again unheard or after removal: %v", a.rejoined)
	}

	a.rejoinHeard(&raftfsm.MetaState{})
	testutil.Eventually(t, 5*time.Second, "a sees b alive again", seenAs("b", serf.StatusAlive, a))
}

// A node of the node table that gossip does not list at all, while the
// liveness check hears it, is joined: after a whole-cluster restart a
// process can miss a node entirely (its joins reached the node before it
// listened, and the node's "alive" broadcasts went out before this
// process was known), and only the next push-pull, 30 s later, told it;
// the meta leader kept the node "failed" meanwhile (45 s in a 5-node
// nemesis run, long enough to move every replica off it). Not for a node
// the liveness check does not hear, nor for a removed one.
func TestRejoinHeardUnknownNode(t *testing.T) {
	addrA, addrB := clusterAddr(t), clusterAddr(t)
	a := gossipOnly(t, "a", addrA, nil, func(string) bool { return false })
	gossipOnly(t, "b", addrB, nil, nil) // alone: a does not know it
	table := func() *raftfsm.MetaState {
		return &raftfsm.MetaState{Nodes: map[string]*model.Node{
			"a": {ID: "a", SerfAddr: addrA, Status: model.NodeAlive},
			"b": {ID: "b", SerfAddr: addrB, Status: model.NodeFailed},
		}}
	}
	st := table()
	a.rejoinHeard(st) // unheard
	removed := table()
	removed.Removed = map[string]*model.RemovedNode{"b": {ID: "b", At: 1}}
	a.cfg.Hears = func(string) bool { return true }
	a.rejoinHeard(removed)
	if len(a.rejoined) != 0 {
		t.Fatalf("joined b unheard or removed: %v", a.rejoined)
	}
	if s := statusOf(a, "b"); s != serf.StatusNone {
		t.Fatalf("a lists b as %s before the join", s)
	}
	a.rejoinHeard(st)
	testutil.Eventually(t, 5*time.Second, "a sees b alive", seenAs("b", serf.StatusAlive, a))
}

// A node started again after its removal is taken back as alive at once,
// even when serf's snapshot re-joins it through one member. Removing a
// node prunes its failed process from serf (forgetRemoved), which sends a
// leave intent; a member that does not list the node (pruned) keeps such
// an intent for five minutes. The snapshot's re-join is a memberlist join
// alone, with no join intent, so that member takes the new process in as
// "leaving" — for the meta leader, a node table that said "left" for 20 s
// to over a minute. A serf Join carries a newer join intent: joinLoop makes
// one at start with the addresses it knows (syncWithAll), and, when it
// knew none — restarted without --join, its meta state empty (a restarted
// node's meta state is its last snapshot until a meta leader tells it
// what is committed: none before the first meta snapshot, and a removed
// node's meta replica is out of the group) — with the members it sees once
// the snapshot re-joined it. Without that second join (a black-box review,
// 2026-11-28) the restarted node stayed "left" for 30–80 s, and a meta
// leader elected later, which had held it as "leaving" all along, put it
// "left" again and dropped its replicas after the failure grace.
func TestRestartedRemovedNodeRejoinsAtOnce(t *testing.T) {
	for _, withJoin := range []bool{true, false} {
		t.Run(fmt.Sprintf("join=%t", withJoin), func(t *testing.T) {
			addr := [3]string{clusterAddr(t), clusterAddr(t), clusterAddr(t)}
			a := gossipOnly(t, "a", addr[0], nil, nil)
			b := gossipOnly(t, "b", addr[1], []string{addr[0]}, nil)
			old := gossipOnly(t, "c", addr[2], []string{addr[0]}, nil)
			testutil.Eventually(t, 10*time.Second, "a and b see c alive", seenAs("c", serf.StatusAlive, a, b))
			old.LeaveGossip(false) // killed: no leave message
			testutil.Eventually(t, 20*time.Second, "a finds c failed", seenAs("c", serf.StatusFailed, a))
			// The removal: the meta leader prunes the failed process, then,
			// every 10 s while any member still lists it, again; a's own
			// second prune leaves the intent with a for a name it no longer
			// lists.
			if err := a.serf.RemoveFailedNodePrune("c"); err != nil {
				t.Fatal(err)
			}
			testutil.Eventually(t, 10*time.Second, "c pruned", seenAs("c", serf.StatusNone, a, b))
			if err := a.serf.RemoveFailedNodePrune("c"); err != nil {
				t.Fatal(err)
			}
			// A process that hears a leave intent about itself refutes it
			// with a join intent: the restart comes after the removal's
			// gossip is over (every member's queue of intents to gossip
			// empty for a second; what one hands memberlist is
			// retransmitted for a few rounds more).
			var quiet time.Time
			testutil.Eventually(t, 20*time.Second, "the prunes' gossip over", func() error {
				for _, n := range []*Cluster{a, b} {
					if q := n.serf.Stats()["intent_queue"]; q != "0" {
						quiet = time.Time{}
						return errors.New(n.cfg.NodeID + ": intent queue " + q)
					}
				}
				if quiet.IsZero() {
					quiet = time.Now()
				}
				if d := time.Since(quiet); d < time.Second {
					return fmt.Errorf("quiet for %v", d)
				}
				return nil
			})

			// The new process: a snapshot that re-joins through b alone,
			// and --join naming both, or nothing.
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "snapshot"), []byte("alive: b "+addr[1]+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			var join []string
			if withJoin {
				join = []string{addr[0], addr[1]}
			}
			gossipIn(t, dir, "c", addr[2], join, nil)
			testutil.Eventually(t, 5*time.Second, "a and b see the new c alive", seenAs("c", serf.StatusAlive, a, b))
		})
	}
}
