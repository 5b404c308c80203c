package cluster

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"
	"github.com/timemachine-db/timemachine/internal/testutil"
	"github.com/timemachine-db/timemachine/raftfsm"
)

func gossipOnly(t *testing.T, id, addr string, join []string, hears func(string) bool) *Cluster {
	t.Helper()
	c := New(Config{NodeID: id, SerfAddr: addr, SerfDir: t.TempDir(), Join: join, FastGossip: true, Hears: hears,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := c.startSerf(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.LeaveGossip(false) })
	return c
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
	addrA, err := testutil.ClusterAddr()
	if err != nil {
		t.Fatal(err)
	}
	addrB, err := testutil.ClusterAddr()
	if err != nil {
		t.Fatal(err)
	}
	hears := func(string) bool { return true }
	a := gossipOnly(t, "a", addrA, nil, hears)
	b := gossipOnly(t, "b", addrB, []string{addrA}, nil)
	testutil.Eventually(t, 10*time.Second, "a sees b alive", func() error {
		if s := statusOf(a, "b"); s != serf.StatusAlive {
			return errors.New("b is " + s.String())
		}
		return nil
	})
	b.LeaveGossip(false) // no leave message: a finds b failed
	testutil.Eventually(t, 20*time.Second, "a finds b failed", func() error {
		if s := statusOf(a, "b"); s != serf.StatusFailed {
			return errors.New("b is " + s.String())
		}
		return nil
	})
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
	testutil.Eventually(t, 5*time.Second, "a sees b alive again", func() error {
		if s := statusOf(a, "b"); s != serf.StatusAlive {
			return errors.New("b is " + s.String())
		}
		return nil
	})
}
