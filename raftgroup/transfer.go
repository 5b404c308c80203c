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
// two election timeouts, and resumes only if this replica still leads and a
// round of heartbeats confirms it (VerifyLeader). A later transfer that
// started meanwhile owns the resume (a generation counter).

// errTransferPending: the caller stopped waiting; the transfer goes on.
var errTransferPending = errors.New("leadership transfer still in progress")

func (g *Group) handOff(what string, start func() raft.Future, wait time.Duration) error {
	after := g.pauseForTransfer()
	gen := g.transfers.Add(1)
	f := start()
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
		g.settleFailedTransfer(gen, after)
	}) {
		after(false)
	}
	if errors.Is(err, errTransferPending) {
		return nil
	}
	return fmt.Errorf("%s: %s: %w", g.cfg.Name, what, err)
}

// settleFailedTransfer resumes the paused work once it is sure this replica
// still leads (see above).
func (g *Group) settleFailedTransfer(gen uint64, after func(resume bool)) {
	select {
	case <-time.After(2 * g.timing.ElectionTimeout):
	case <-g.closed:
		after(false)
		return
	}
	resume := g.transfers.Load() == gen && g.IsLeader() && g.raft.VerifyLeader().Error() == nil && g.IsLeader()
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
