package service

import (
	"context"
	"errors"
	"time"

	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/raftgroup"
)

// A write whose outcome is unknown — the slot's leader changed, paused or
// became unreachable after the write may have reached it — must not be
// answered with an error, since every error of the contract means "nothing
// changed" (docs/api.md#errors). The service finds the outcome out
// instead: once a leader answers again, raft has decided the fate of the
// earlier attempt (a new leader commits an entry of its own term first, so
// an entry it did not have can never commit any more), and a read or an
// idempotent re-send of the same command tells which way it went. (That
// holds only if the earlier attempt cannot reach a node later, outside
// raft: a forwarded request still queued on a connection the caller gave
// up on would be run by whichever node leads when it arrives. The peer
// client resets such connections, discarding what was not delivered —
// rpc/peer abandon.)
//
// The search may go on after the client gave up waiting and went on with
// other requests, so it never writes what could take effect a second
// time:
//
//   - a create is re-sent with the same stamp: 201 as before, or "exists"
//     with the job's created_at equal to this request's stamp — the
//     earlier attempt created it, so the answer is 201 too. Made by the
//     earlier attempt and deleted since, the job is not made again: the
//     delete left a tombstone of that stamp for a while, and the state
//     machine answers the re-send as created without writing anything
//     (raftfsm create, storage.TombKey);
//   - a delete reads the job: absent, it was deleted by the earlier
//     attempt or before it, which cannot be told apart (unknown); present,
//     the earlier attempt did not apply, and the delete is re-sent for
//     that incarnation only (DeleteIncarnation: a job its client created
//     anew meanwhile stays) (resolveDelete);
//   - a PUT reads the job: a job carrying this request's spec and stamp
//     (updated_at) is the earlier attempt's work (200, or 201 for version
//     1); a job still at the If-Match version was not touched yet, so
//     the PUT is re-sent (it applies only at that version, so at most one
//     of the two attempts does). The earlier attempt may still commit
//     first (a read shows what was committed, not what a leader's log
//     holds): a re-send refused with a job carrying this request's stamp
//     is answered as that job; refused otherwise, it is unknown.
//     Anything else, absent included, cannot be told apart;
//   - schedule writes are re-sent as they are (proposeResolved).
//
// The search ends after resolveBudget (or the request's own deadline);
// what is still unknown then is answered with model.ErrOutcomeUnknown.
const resolveBudget = 10 * time.Second

// unknown reports whether err leaves a write's outcome unknown.
func unknown(err error) bool {
	return errors.Is(err, raftgroup.ErrUnknownOutcome) || errors.Is(err, raftfsm.ErrStopped) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// inconclusive reports whether an attempt made after an unknown one
// failed before it reached a leader, so the first one is still unknown.
func inconclusive(err error) bool {
	return unknown(err) || errors.Is(err, raftgroup.ErrNotLeader) || errors.Is(err, raftgroup.ErrOverloaded) ||
		errors.Is(err, raftgroup.ErrClosed) || errors.Is(err, raftgroup.ErrStorage)
}

// resolver paces the attempts that find a write's outcome out.
type resolver struct {
	ctx     context.Context
	cancel  context.CancelFunc
	attempt int
}

func newResolver(ctx context.Context) *resolver {
	ctx, cancel := context.WithTimeout(ctx, resolveBudget)
	return &resolver{ctx: ctx, cancel: cancel}
}

// next waits before the next attempt; false when the budget is spent.
func (r *resolver) next() bool {
	r.attempt++
	pause := min(time.Duration(r.attempt)*100*time.Millisecond, time.Second)
	select {
	case <-r.ctx.Done():
		return false
	case <-time.After(pause):
		return r.ctx.Err() == nil
	}
}

// proposeResolved proposes cmds on slot sl; when the outcome is unknown
// it re-sends them — they must be idempotent — until an answer is
// definite. known reports whether an earlier attempt's outcome was unknown
// (the caller then reads "exists"/"not found" answers accordingly).
func (s *Service) proposeResolved(ctx context.Context, sl int, cmds ...raftfsm.Command) (res []model.Result, resent bool, err error) {
	res, err = s.fwd.ProposeSlot(ctx, sl, cmds...)
	if !unknown(err) {
		return res, false, err
	}
	r := newResolver(context.WithoutCancel(ctx))
	defer r.cancel()
	for inconclusive(err) {
		if !r.next() {
			s.log.Warn("a write's outcome stayed unknown", "slot", sl, "error", err)
			return nil, true, model.ErrOutcomeUnknown
		}
		res, err = s.fwd.ProposeSlot(r.ctx, sl, cmds...)
	}
	return res, true, err
}
