package raftgroup

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/internal/testutil"
)

// Apply returns once the group is closed, whatever it was waiting for.
// hashicorp/raft leaves some futures unanswered when it shuts down (an
// entry in its buffered apply channel, or committed and queued for the
// FSM), and their waiter — a proposer worker — waited forever, and with
// it the replica's Close: the slot tests hung on it
// (TestReplicaDestroyAndRecreate, in make test). Group.await gives up on
// them once raft has shut down.
func TestApplyReturnsWhenTheGroupCloses(t *testing.T) {
	for round := 0; round < 20; round++ {
		dirs, addrs := replicaPlaces(t, 1)
		g := openTrioAt(t, slowTiming, dirs, addrs, true)[0]
		var applied atomic.Int64
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					_, _ = g.Apply([]byte("x"))
					applied.Add(1)
				}
			}()
		}
		testutil.Eventually(t, 5*time.Second, "entries applied", testutil.True(func() bool { return applied.Load() >= 100 }))
		g.Close()
		close(stop)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			buf := make([]byte, 1<<20)
			t.Fatalf("round %d: an Apply was still waiting 10 s after Close:\n%s", round, buf[:runtime.Stack(buf, true)])
		}
	}
}
