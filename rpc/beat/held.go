package beat

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Held answers and parked heartbeats (Options.HoldAnswers, Options.Park).
//
// hashicorp/raft's leader runs one heartbeat goroutine per follower per
// group. It sleeps a random 1-2 s (a tenth to a fifth of the slots' 10 s
// heartbeat timeout; 0.5-1 s with the 5 s they had before), sends, and waits for the answer. An idle node's CPU
// is mostly the Go runtime's cost of waking up (docs/scaling.md), and those
// random timers were most of the distinct wake-ups of a node leading many
// groups: at 256 slots on three nodes ~215 a second of n1's ~640, with the
// coalesced answers (~190 more, many goroutines woken at once) on top.
//
// With HoldAnswers set, a heartbeat whose follower answered this group's
// previous heartbeat, sent less than HoldAnswers ago at the same term, is
// answered with that answer, and goes out in the next batch in the
// background; its own answer (or failure) becomes the held one. With Park
// set too, the call then stays with the transport until the first tick (a
// multiple of Flush, shared by every group on the node) at least Park
// away: raft's goroutine wakes on a shared tick, and its own random timer
// starts only then, so it fires about half as often. The follower still
// hears a heartbeat per round (every 2-3.5 s plus the flush delay,
// against its 10 s timeout); it is the leader's view of the follower that
// is up to HoldAnswers older.
//
// What that view is used for, and why an older one is safe here:
//   - raft's check-quorum (the leader steps down when a majority has not
//     answered for LeaderLeaseTimeout): a leader cut off from its followers
//     steps down up to HoldAnswers later. Nothing is fenced by it: firing
//     and reads are fenced by the liveness lease and a confirmation round
//     (slot.Replica.fenced, VerifyRead), and failover does not wait for it.
//   - raft's VerifyLeader counts heartbeat answers, and a held answer must
//     never count: raftgroup's VerifyLeader therefore runs its own round
//     with Confirm, which is never answered from a held answer, and uses
//     raft's only to make a leader that learnt of a newer term step down,
//     after Urgent (which stops holding and hands parked calls back).
//   - a failed heartbeat: the background one's failure drops the held
//     answer, so the next heartbeat (or the parked one) waits for its own
//     answer and raft sees the failure one round later than before.
//   - raft's Shutdown waits for its heartbeat goroutines: raftgroup calls
//     Urgent before it.

// held is what a Transport holds for one follower.
type held struct {
	resp    raft.AppendEntriesResponse
	term    uint64    // the term of the heartbeat resp answers
	sent    time.Time // when that heartbeat was queued (older than the answer)
	ok      bool      // resp may answer a heartbeat of term
	sending bool      // a background heartbeat awaits its answer
	// failed is when the newest failed heartbeat was queued: an answer to
	// one queued before it is not held (the follower may be gone since).
	failed time.Time
}

// holdTable is a Transport's held answers, per follower address.
type holdTable struct {
	mu sync.Mutex
	m  map[raft.ServerAddress]*held
}

// take fills resp with the answer held for target if it may answer a
// heartbeat of term now, and reports whether a background heartbeat should
// go out (none is awaiting its answer yet; it is then marked as sending).
func (h *holdTable) take(target raft.ServerAddress, term uint64, maxAge time.Duration, resp *raft.AppendEntriesResponse) (answered, send bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.m[target]
	if e == nil || !e.ok || e.term != term || time.Since(e.sent) >= maxAge {
		return false, false
	}
	*resp = e.resp
	if e.sending {
		return true, false
	}
	e.sending = true
	return true, true
}

// record keeps the outcome of a heartbeat of term queued at sent: an answer
// is held (unless a newer one is, or a heartbeat queued later failed), a
// failure drops what is held.
func (h *holdTable) record(target raft.ServerAddress, term uint64, sent time.Time, resp *raft.AppendEntriesResponse, err error, background bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.m[target]
	if e == nil {
		if err != nil {
			return
		}
		if h.m == nil {
			h.m = map[raft.ServerAddress]*held{}
		}
		e = &held{}
		h.m[target] = e
	}
	if background {
		e.sending = false
	}
	if err != nil {
		e.ok = false
		if sent.After(e.failed) {
			e.failed = sent
		}
		return
	}
	if e.ok && e.term == term && e.sent.After(sent) || e.failed.After(sent) {
		return // a newer answer is held already, or a newer heartbeat failed
	}
	e.resp, e.term, e.sent, e.ok = *resp, term, sent, true
}

// heartbeat sends one heartbeat through the Coalescer, answering it from
// the held answer where HoldAnswers allows (see above); confirm never
// does, and sends at once.
func (t *Transport) heartbeat(target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse, confirm bool) error {
	urgent := confirm || t.urgent()
	hold := t.c.opts.HoldAnswers
	if hold <= 0 {
		err := t.c.heartbeat(target, t.group, args, resp, urgent)
		if err == nil {
			t.heartbeatAnswered(target, resp)
		}
		return err
	}
	if !urgent {
		answered, send := t.held.take(target, args.Term, hold, resp)
		if send {
			sent, term := time.Now(), args.Term
			err := t.c.heartbeatThen(target, t.group, args, func(r raft.AppendEntriesResponse, err error) {
				t.held.record(target, term, sent, &r, err, true)
				if err == nil {
					t.heartbeatAnswered(target, &r)
				}
			})
			if err != nil {
				t.held.record(target, term, sent, nil, err, true)
			}
		}
		if answered {
			if t.c.opts.Park <= 0 || !t.park(target, args.Term, resp) {
				return nil
			}
			// The held answer was dropped while parked (the background
			// heartbeat failed): this one waits for its own answer.
		}
	}
	sent := time.Now()
	err := t.c.heartbeat(target, t.group, args, resp, urgent)
	if err == nil {
		t.heartbeatAnswered(target, resp)
	}
	t.held.record(target, args.Term, sent, resp, err, false)
	return err
}

// park keeps a heartbeat answered from a held answer in the call until
// the first tick (a multiple of Flush, shared by every group of the node)
// at least Park away, or until Urgent or Close; then resp is what is held
// now. It reports whether nothing is held any more.
func (t *Transport) park(target raft.ServerAddress, term uint64, resp *raft.AppendEntriesResponse) (dropped bool) {
	select {
	case <-t.c.parkUntil(time.Now().Add(t.c.opts.Park)):
	case <-t.wake():
	case <-t.h.closed:
		return false
	}
	t.held.mu.Lock()
	defer t.held.mu.Unlock()
	e := t.held.m[target]
	if e == nil || !e.ok || e.term != term {
		return true
	}
	*resp = e.resp
	return false
}

// parkUntil returns a channel closed at the first tick at or after at.
func (c *Coalescer) parkUntil(at time.Time) <-chan struct{} {
	tick := c.opts.Flush
	k := (at.UnixNano() + int64(tick) - 1) / int64(tick)
	c.parkMu.Lock()
	defer c.parkMu.Unlock()
	ch := c.parked[k]
	if ch == nil {
		if c.parked == nil {
			c.parked = map[int64]chan struct{}{}
		}
		ch = make(chan struct{})
		c.parked[k] = ch
		time.AfterFunc(time.Until(time.Unix(0, k*int64(tick))), func() {
			c.parkMu.Lock()
			delete(c.parked, k)
			c.parkMu.Unlock()
			close(ch)
		})
	}
	return ch
}

// Confirm sends target one heartbeat now, past the coalescing delay, and
// fills resp with its own answer, never a held one: raftgroup's
// VerifyLeader counts these answers to confirm a leadership. It falls back
// to the stock transport where a heartbeat would.
func (t *Transport) Confirm(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	return t.sendHeartbeat(id, target, args, resp, true)
}
