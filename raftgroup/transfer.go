package raftgroup

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// Planned leadership transfers (TransferTo, LeaveLeadership, the leave step
// of Reconcile) go through handOff: the owner's leader-only work is paused
// first (BeforeTransfer: the slot stops firing and lets its callbacks in
// flight finish and commit), then raft is asked to transfer.
//
// What happens after a transfer that raft reports as failed needs care:
// raft's transfer has its own timeout (ElectionTimeout), and the TimeoutNow
// it sent the target cannot be taken back — the target may win an election
// a moment after raft answered "leadership transfer timeout". Resuming the
// paused work at once would start callbacks that the new leader, a moment
// later, fires again. So after a failed transfer the work stays paused for
// transferSettle, and resumes only if this replica still leads and a
// round of heartbeats confirms it (VerifyLeader). A later transfer that
// started meanwhile owns the resume (a generation counter).

// errTransferPending: the caller stopped waiting; the transfer goes on.
var errTransferPending = errors.New("leadership transfer still in progress")

// ErrTransferTooSoon: a planned transfer of this replica failed less than
// failedTransferGap ago; the caller tries again later.
var ErrTransferTooSoon = errors.New("a leadership transfer failed moments ago; try again later")

// failedTransferGap is how long after a failed transfer this replica
// starts no other (LeaveLeadership, for a node stopping, excepted).
//
// Why: hashicorp/raft v1.7.3 asks the target's replication goroutine to
// catch it up through a channel of one, and a transfer that times out
// leaves its request there while that goroutine is blocked in an RPC (up
// to the transport's 10 s). A second transfer in the same term then blocks
// sending its own request; if the leader steps down before the goroutine
// reads again, it blocks forever, and raft's "transfer in progress" flag —
// which a later term does not reset — makes every Apply and Barrier of
// this replica fail from then on. Seen in a 100-cycle nemesis run: a slot
// leader answered "leadership transfer in progress" to its barrier for 10
// minutes and fired nothing (3 acknowledged jobs never delivered). Spacing
// attempts by more than the RPC timeout lets the goroutine read the first
// request before a second is sent.
const failedTransferGap = 12 * time.Second

func (g *Group) handOff(what string, start func() raft.Future, wait time.Duration) error {
	return g.handOffGap(what, start, wait, true)
}

// handOffGap is handOff; gap false skips the failedTransferGap check (a
// node stopping hands its leadership away whatever happened before).
func (g *Group) handOffGap(what string, start func() raft.Future, wait time.Duration, gap bool) error {
	if at := g.transferFailedAt.Load(); gap && at != 0 && time.Since(time.Unix(0, at)) < failedTransferGap {
		return fmt.Errorf("%s: %s: %w", g.cfg.Name, what, ErrTransferTooSoon)
	}
	after := g.pauseForTransfer()
	gen := g.transfers.Add(1)
	// raft gives a transfer one election timeout; the slots' is 5 s, and
	// the work stays paused meanwhile (a transfer to a node that had just
	// restarted kept a slot from firing for 15 s in the short nemesis). So
	// the transfer runs with the timeouts at the lease.
	short := g.timing.ElectionTimeout > g.timing.LeaderLeaseTimeout
	if short {
		if err := g.setTimeouts(g.timing.LeaderLeaseTimeout, g.timing.LeaderLeaseTimeout); err != nil {
			short = false
		}
	}
	f := start()
	if short {
		defer func() {
			if err := g.setTimeouts(g.timing.HeartbeatTimeout, g.timing.ElectionTimeout); err != nil {
				g.cfg.Logger.Warn("could not restore the raft timeouts after a transfer", "group", g.cfg.Name, "error", err)
			}
		}()
	}
	errc := make(chan error, 1)
	go func() { errc <- f.Error() }()
	var err error
	select {
	case err = <-errc:
	case <-time.After(wait):
		err = errTransferPending
	}
	if err == nil {
		after(false) // leadership left: the next term starts fresh
		return nil
	}
	if !errors.Is(err, errTransferPending) {
		g.transferFailedAt.Store(time.Now().UnixNano())
	}
	if !g.background(func() {
		if errors.Is(err, errTransferPending) {
			select {
			case err = <-errc:
			case <-g.closed:
				after(false)
				return
			}
			if err == nil {
				after(false)
				return
			}
		}
		g.transferFailedAt.Store(time.Now().UnixNano())
		g.settleFailedTransfer(gen, after)
	}) {
		after(false)
	}
	if errors.Is(err, errTransferPending) {
		return nil
	}
	return fmt.Errorf("%s: %s: %w", g.cfg.Name, what, err)
}

// transferSettle is how long the work stays paused after a failed
// transfer: two of the meta group's (and formerly the slots') 1 s election
// timeouts — time for a TimeoutNow that arrived late to have started the
// target's election, which the VerifyLeader after it then sees. It is not
// the slots' 5 s election timeout: 10 s without firing after every failed
// transfer.
const transferSettle = 2 * time.Second

// settleFailedTransfer resumes the paused work once it is sure this replica
// still leads (see above).
func (g *Group) settleFailedTransfer(gen uint64, after func(resume bool)) {
	select {
	case <-time.After(transferSettle):
	case <-g.closed:
		after(false)
		return
	}
	resume := g.transfers.Load() == gen && g.IsLeader() && g.VerifyLeader() == nil && g.IsLeader()
	after(resume && g.transfers.Load() == gen)
}

// background runs f on a goroutine Close waits for; false when the group
// is closing (f does not run).
func (g *Group) background(f func()) bool {
	g.bgMu.Lock()
	defer g.bgMu.Unlock()
	if g.bgClosed {
		return false
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		f()
	}()
	return true
}
