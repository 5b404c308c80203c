package slot

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/internal/testutil"
)

// fakeFence is the node's liveness verdict as a test sets it.
type fakeFence struct {
	lease   atomic.Bool
	clockOK atomic.Bool
	epoch   atomic.Uint64
	hold    time.Duration // FireNow's lag: the measured uncertainty
}

func (f *fakeFence) LeaseHeld([]string) bool           { return f.lease.Load() }
func (f *fakeFence) LeaseEpoch([]string) uint64        { return f.epoch.Load() }
func (f *fakeFence) ClockOK() bool                     { return f.clockOK.Load() }
func (f *fakeFence) FireNow(local time.Time) time.Time { return local.Add(-f.hold) }

// A leader that lost its lease after a callback was dispatched — paused,
// then resumed while a new leader may already have delivered or deleted the
// job — sends nothing: the lease is checked right before the request
// leaves, not once per round. The job is not lost: it goes out once the
// lease is held again. The same holds for a clock out of bounds. The fire
// is held inside its never-early wait by the fence's uncertainty, which is
// when the lease is taken away.
func TestFenceCheckedRightBeforeEachSend(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose func(f *fakeFence, lost bool)
	}{
		{"lease", func(f *fakeFence, lost bool) { f.lease.Store(!lost) }},
		{"clock", func(f *fakeFence, lost bool) { f.clockOK.Store(!lost) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fence := &fakeFence{hold: 400 * time.Millisecond}
			fence.lease.Store(true)
			fence.clockOK.Store(true)
			d := newFakeDeliverer()
			ts := openTestSlot(t, t.TempDir(), d, func(c *Config) { c.Fence = fence })
			defer ts.close(t)
			due := time.Now().Add(200 * time.Millisecond)
			create(t, ts.r, "j", due.UnixMilli())
			// Dispatched at its due time, the fire waits out the fence's
			// 400 ms inside fire; the fence turns against it meanwhile.
			time.Sleep(time.Until(due.Add(100 * time.Millisecond)))
			tc.lose(fence, true)
			time.Sleep(time.Until(due.Add(900 * time.Millisecond)))
			if got := d.times("j"); len(got) != 0 {
				t.Fatalf("sent %d times without the %s", len(got), tc.name)
			}
			tc.lose(fence, false)
			testutil.Eventually(t, 5*time.Second, "delivered once the fence allows", testutil.True(func() bool { return len(d.times("j")) == 1 }))
			if got := d.times("j")[0]; got.Before(due.Add(fence.hold)) {
				t.Fatalf("sent %v before its due time on the fence's clock", due.Add(fence.hold).Sub(got))
			}
		})
	}
}

// A leader serves reads only while it can prove its state is current: its
// barrier of this term finished and it holds the liveness lease. A leader
// that lost the lease (paused or cut off: a successor may already have
// acknowledged writes) is no reader, although raft still says it leads;
// reads then look for the leader elsewhere instead of answering stale state.
func TestReadsNeedTheLease(t *testing.T) {
	fence := &fakeFence{}
	fence.lease.Store(true)
	fence.clockOK.Store(true)
	ts := openTestSlot(t, t.TempDir(), newFakeDeliverer(), func(c *Config) { c.Fence = fence })
	defer ts.close(t)
	reg := NewRegistry()
	reg.Put(0, ts.r)
	testutil.Eventually(t, 5*time.Second, "a reader once the barrier finished", testutil.True(func() bool { return reg.Reader(0) == ts.r }))
	fence.lease.Store(false)
	if !ts.r.IsLeader() {
		t.Fatal("the test needs the replica to stay leader")
	}
	if reg.Reader(0) != nil || ts.r.Readable() || ts.r.VerifyRead() == nil {
		t.Fatal("a leader without the liveness lease serves reads")
	}
	fence.lease.Store(true)
	if reg.Reader(0) != ts.r {
		t.Fatal("the lease is back: the leader serves reads again")
	}
	if err := ts.r.VerifyRead(); err != nil {
		t.Fatalf("a current leader's read: %v", err)
	}
}
