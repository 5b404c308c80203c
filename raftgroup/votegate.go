package raftgroup

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/timemachine-db/timemachine/storage"
)

// voteGate is the transport of a replica that must not vote as raft
// would, because an earlier replica under the same server id may have
// acknowledged entries this one no longer has (storage.VoteFloor says why
// that is dangerous). Two cases:
//   - re-created: an earlier replica of the group on this node was deleted
//     (its slot moved away) and left a floor: its term and last entry;
//   - started empty (Config.Floors): the replica opened with nothing
//     stored, so it may be one whose node lost its data directory and
//     rejoined under its old --node-id. Its floor is unknown (Learn): it
//     is learnt from what the group's leaders send — the leader's term and
//     commit index from each append and heartbeat, a snapshot's last entry
//     — until the log covers it; from then on it is a floor as above.
//
// The gate stands between the transport and raft and answers votes and
// pre-votes itself, refused, while
//   - the floor is still being learnt and nothing has been heard from a
//     leader, unless the candidate's log holds no more than a bootstrap
//     configuration (the group is being formed: there is nothing to
//     forget, and formation needs the votes of replicas that never
//     bootstrapped), or
//   - it is still being learnt and the candidate's log does not cover
//     what has been learnt (a candidate whose log does holds every entry
//     a lost replica could have helped commit), or
//   - the request's term is not past the floor's term (the old replica may
//     have voted in it: two votes in one term could elect two leaders), or
//   - this replica's log is not yet at least as up-to-date as the floor's
//     last entry (a candidate it voted for might lack entries the old
//     replica helped commit).
//
// The last condition ends for good once the log has caught up (raft's
// log only grows in up-to-dateness: a conflicting suffix is replaced by a
// newer leader's entries in the same step that removes it). Everything else
// passes through unchanged. A learning floor is kept (save) when the gate
// starts, when the first leader is heard and when it is learnt, so a
// restart in between learns again instead of voting with a partial log.
// A replica raft elects ends its learning (elected): a majority found its
// log up-to-date. That is how the first leader of a new group, which
// hears no other leader, stops learning.
//
// Why a leader's (term, commit index) is a sound floor: every entry the
// old replica helped commit is at or below the commit index of any later
// leader, and an entry of the leader's term in our log comes after that
// leader's no-op, which follows everything committed before its term; so a
// log whose last entry is of a later term, or of that term at the commit
// index or past it, holds every such entry. The floor rises with each
// leader heard while learning, so a deposed leader heard first (it still
// believes it leads for up to its lease) is overtaken by the real one's
// next heartbeat — unless a vote request comes in between: that window,
// a wipe, a deposed leader and a stale candidate at once, is left open.
//
// A refusal answers with the request's term, or the floor's when that is
// higher (as the old replica would have: the candidate then moves past
// it). A refused candidate simply does not get this vote; the group elects
// with the others, as when a voter is down.
type voteGate struct {
	raft.Transport
	stores *storage.RaftStores
	save   func(storage.VoteFloor) error // nil: the floor is not kept
	log    *slog.Logger

	out  chan raft.RPC
	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once

	// mu guards floor and caught: votes and appends come through run,
	// heartbeats through raft's heartbeat handler on transport goroutines.
	mu     sync.Mutex
	floor  storage.VoteFloor
	caught bool

	logMu  sync.Mutex
	logged time.Time
}

func newVoteGate(inner raft.Transport, floor storage.VoteFloor, stores *storage.RaftStores, save func(storage.VoteFloor) error, log *slog.Logger) *voteGate {
	g := &voteGate{Transport: inner, floor: floor, stores: stores, save: save, log: log, out: make(chan raft.RPC), stop: make(chan struct{})}
	if !floor.Learn {
		g.caught = g.caughtUp(floor)
	}
	g.wg.Add(1)
	go g.run(inner.Consumer())
	return g
}

// Consumer implements raft.Transport.
func (g *voteGate) Consumer() <-chan raft.RPC { return g.out }

// SetHeartbeatHandler implements raft.Transport: heartbeats go to raft
// without the consumer channel, and a learning gate hears the leader in
// them too.
func (g *voteGate) SetHeartbeatHandler(cb func(raft.RPC)) {
	if cb == nil {
		g.Transport.SetHeartbeatHandler(nil)
		return
	}
	g.Transport.SetHeartbeatHandler(func(rpc raft.RPC) {
		g.heardFrom(rpc)
		cb(rpc)
	})
}

func (g *voteGate) run(in <-chan raft.RPC) {
	defer g.wg.Done()
	for {
		select {
		case <-g.stop:
			return
		case rpc := <-in:
			if g.refused(rpc) {
				continue
			}
			select {
			case g.out <- rpc:
			case <-g.stop:
				return
			}
		}
	}
}

// refused answers rpc itself when it is a vote or pre-vote this replica
// may not grant yet, and reports whether it did.
func (g *voteGate) refused(rpc raft.RPC) bool {
	var term, lastTerm, lastIndex uint64
	var who []byte
	switch req := rpc.Command.(type) {
	case *raft.RequestVoteRequest:
		term, lastTerm, lastIndex, who = req.Term, req.LastLogTerm, req.LastLogIndex, req.ID
	case *raft.RequestPreVoteRequest:
		if req.Term == 0 {
			// No candidate's: a campaign's term is at least 1. It is
			// Campaign's wake-up of its own raft (wakeMainLoop), which
			// raft answers without any effect; refused here, it would
			// not reach raft's main loop and not wake it.
			return false
		}
		term, lastTerm, lastIndex, who = req.Term, req.LastLogTerm, req.LastLogIndex, req.ID
	default:
		g.heardFrom(rpc)
		return false
	}
	why, floorTerm := g.verdict(term, lastTerm, lastIndex)
	if why == "" {
		return false
	}
	answer := max(term, floorTerm)
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax}
	switch rpc.Command.(type) {
	case *raft.RequestVoteRequest:
		rpc.Respond(&raft.RequestVoteResponse{RPCHeader: hdr, Term: answer, Granted: false}, nil)
	default:
		rpc.Respond(&raft.RequestPreVoteResponse{RPCHeader: hdr, Term: answer, Granted: false}, nil)
	}
	g.note(string(who), why)
	return true
}

// verdict says why a vote in term, for a candidate whose last entry is
// (lastTerm, lastIndex), must be refused ("" to pass it to raft), and the
// floor's term.
func (g *voteGate) verdict(term, lastTerm, lastIndex uint64) (why string, floorTerm uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if f := g.floor; f.Learn && !g.learntLocked() {
		heard := f.Term != 0 || f.LastIndex != 0
		switch {
		case !heard && lastTerm <= 1:
			return "", 0 // the group is being formed
		case !heard:
			return "this replica started with nothing stored and has heard from no leader of its group yet: it may be a node whose data was lost", 0
		case term <= f.Term:
			return fmt.Sprintf("term %d is not past term %d, the latest this replica, started with nothing stored, heard a leader in", term, f.Term), f.Term
		case !f.Covers(lastTerm, lastIndex):
			// Every entry a lost replica under this id helped commit
			// is in a log that covers the learnt floor: a candidate
			// with such a log may have the vote, though this replica
			// has not caught up (without that, a group whose leader
			// died while this one was catching up could not elect).
			return fmt.Sprintf("the candidate's log is behind what its group's leader had committed (term %d, index %d) and this replica, started with nothing stored, has not caught up yet", f.LastTerm, f.LastIndex), f.Term
		default:
			return "", f.Term
		}
	}
	f := g.floor
	switch {
	case term <= f.Term:
		return fmt.Sprintf("term %d is not past term %d of the replica this one replaced", term, f.Term), f.Term
	case !g.caught && !g.caughtUp(f):
		return fmt.Sprintf("this replica has not caught up past what the replica it replaced acknowledged (term %d, index %d)", f.LastTerm, f.LastIndex), f.Term
	}
	g.caught = true
	return "", f.Term
}

// gated reports whether the gate still refuses votes for want of catching
// up (a learning floor, or a log short of a recorded one); the term rule
// alone does not count.
func (g *voteGate) gated() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.learntLocked() {
		return true
	}
	if !g.caught && g.caughtUp(g.floor) {
		g.caught = true
	}
	return !g.caught
}

// elected ends a learning floor when raft made this replica leader: a
// majority found its log at least as up-to-date as theirs, so it holds
// every committed entry (the first leader of a new group learns nothing
// otherwise: it hears no other leader).
func (g *voteGate) elected() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.floor.Learn {
		return
	}
	g.floor, g.caught = storage.VoteFloor{}, true
	g.keepLocked()
}

// heardFrom raises a learning floor to what a leader's append, heartbeat
// or snapshot says, and ends the learning once the log covers it.
func (g *voteGate) heardFrom(rpc raft.RPC) {
	var f storage.VoteFloor
	switch req := rpc.Command.(type) {
	case *raft.AppendEntriesRequest:
		f = storage.VoteFloor{Term: req.Term, LastTerm: req.Term, LastIndex: req.LeaderCommitIndex}
	case *raft.InstallSnapshotRequest:
		f = storage.VoteFloor{Term: req.Term, LastTerm: req.LastLogTerm, LastIndex: req.LastLogIndex}
	default:
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.floor.Learn {
		return
	}
	first := g.floor.Term == 0 && g.floor.LastIndex == 0
	g.floor = g.floor.Max(f)
	if first {
		g.keepLocked()
		g.log.Info("replica started with nothing stored: it votes once it has caught up with its group's leader", "term", g.floor.Term, "commit_index", g.floor.LastIndex)
	}
	g.learntLocked()
}

// learntLocked ends a learning floor once the log covers it (kept, and
// logged), and reports whether the floor is learnt.
func (g *voteGate) learntLocked() bool {
	if !g.floor.Learn {
		return true
	}
	if g.floor.Term == 0 && g.floor.LastIndex == 0 {
		return false
	}
	learnt := g.floor
	learnt.Learn = false
	if !g.caughtUp(learnt) {
		return false
	}
	g.floor, g.caught = learnt, true
	g.keepLocked()
	g.log.Info("replica caught up with its group's leader: it votes again", "term", learnt.Term, "index", learnt.LastIndex)
	return true
}

// keepLocked records the floor, if the gate keeps it. A failure is logged:
// the gate still holds the floor in memory; only a restart before the
// next successful write would forget it.
func (g *voteGate) keepLocked() {
	if g.save == nil {
		return
	}
	if err := g.save(g.floor); err != nil {
		g.log.Error("cannot record the replica's vote floor", "error", err)
	}
}

// note logs a refusal, at most once a second.
func (g *voteGate) note(candidate, why string) {
	g.logMu.Lock()
	defer g.logMu.Unlock()
	if time.Since(g.logged) < time.Second {
		return
	}
	g.logged = time.Now()
	g.log.Info("refusing a vote", "candidate", candidate, "reason", why)
}

// caughtUp reports whether the replica's log (or, past its end, its latest
// snapshot) is at least as up-to-date as f's last entry.
func (g *voteGate) caughtUp(f storage.VoteFloor) bool { return logCovers(g.stores, f) }

// logCovers reports whether the log in stores (or, past its end, its
// latest snapshot) is at least as up-to-date as f's last entry.
func logCovers(stores *storage.RaftStores, f storage.VoteFloor) bool {
	var have storage.VoteFloor
	if last, err := stores.Log.LastIndex(); err == nil && last > 0 {
		var l raft.Log
		if stores.Log.GetLog(last, &l) == nil {
			have = storage.VoteFloor{LastTerm: l.Term, LastIndex: last}
		}
	}
	if snaps, err := stores.Snapshots.List(); err == nil && len(snaps) > 0 {
		have = have.Max(storage.VoteFloor{LastTerm: snaps[0].Term, LastIndex: snaps[0].Index})
	}
	return f.Covers(have.LastTerm, have.LastIndex)
}

// spent reports whether a learnt floor asks nothing raft's own state does
// not: the log covers it and raft's current term is past the floor's
// (raft refuses votes in earlier terms itself). Such a replica needs no
// gate when it opens.
func spent(stores *storage.RaftStores, f storage.VoteFloor) bool {
	if f.Learn {
		return false
	}
	term, err := stores.Stable.GetUint64(keyCurrentTerm)
	return err == nil && term > f.Term && logCovers(stores, f)
}

// keyCurrentTerm is hashicorp/raft's stable-store key for its current term.
var keyCurrentTerm = []byte("CurrentTerm")

// Close implements raft.WithClose: it stops the gate, then the transport.
func (g *voteGate) Close() error {
	var err error
	g.once.Do(func() {
		close(g.stop)
		g.wg.Wait()
		if c, ok := g.Transport.(raft.WithClose); ok {
			err = c.Close()
		}
	})
	return err
}

// RequestPreVote implements raft.WithPreVote when the transport does.
func (g *voteGate) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	pv, ok := g.Transport.(raft.WithPreVote)
	if !ok {
		return fmt.Errorf("raftgroup: transport %T has no pre-vote", g.Transport)
	}
	return pv.RequestPreVote(id, target, args, resp)
}

// Inject, Urgent: the optional abilities group.go looks for pass through.
func (g *voteGate) Inject(rpc raft.RPC) error {
	inj, ok := g.Transport.(injector)
	if !ok {
		return fmt.Errorf("raftgroup: transport %T cannot inject", g.Transport)
	}
	return inj.Inject(rpc)
}

// Confirm passes through to a transport that can confirm (confirm.go).
// Without one, VerifyLeader cannot tell this gate from such a transport,
// so a gate over a plain transport sends an ordinary heartbeat.
func (g *voteGate) Confirm(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if c, ok := g.Transport.(confirmer); ok {
		return c.Confirm(id, target, args, resp)
	}
	return g.Transport.AppendEntries(id, target, args, resp)
}

// OnResume passes through to a transport that reports followers to catch
// up (group.go registers the leader's catch-up there). Without it a gated
// replica, leading, caught a follower up only on raft's CommitTimeout
// tick.
func (g *voteGate) OnResume(fn func()) {
	if rn, ok := g.Transport.(resumeNotifier); ok {
		rn.OnResume(fn)
	}
}

// Urgent passes through to a coalescing transport.
func (g *voteGate) Urgent(d time.Duration) {
	if u, ok := g.Transport.(urgentTransport); ok {
		u.Urgent(d)
	}
}
