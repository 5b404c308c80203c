package raftgroup

import (
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/internal/testutil"
)

// With a long CommitTimeout a follower learns that a write is committed
// only at the next tick; Nudge tells it at once.
func TestNudgeTellsFollowersTheCommit(t *testing.T) {
	leader, follower := openPair(t, Timing{HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond,
		LeaderLeaseTimeout: 100 * time.Millisecond, CommitTimeout: time.Minute})
	f := leader.raft.Apply([]byte("x"), 5*time.Second)
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	idx := f.Index()
	// The entry reached the follower with the commit index before it;
	// nothing tells it more for a minute.
	if c := follower.CommitIndex(); c >= idx {
		t.Skipf("follower already knows commit %d >= %d without a nudge (test proves nothing)", c, idx)
	}
	leader.Nudge()
	leader.Nudge() // folds into the running one or one more
	testutil.Eventually(t, 3*time.Second, "the follower knows the write is committed", testutil.True(func() bool {
		return follower.CommitIndex() >= idx && follower.AppliedIndex() >= idx
	}))
	follower.Nudge() // a no-op on a follower
}
