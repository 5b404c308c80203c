package raftgroup

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/timemachine-db/timemachine/storage"
)

// voteGate is the transport of a replica re-created on a node where an
// earlier replica of the same group was deleted (storage.VoteFloor says
// why that is dangerous). It stands between the transport and raft and
// answers votes and pre-votes itself, refused, while either
//   - the request's term is not past the old replica's term (it may have
//     voted in it: two votes in one term could elect two leaders), or
//   - this replica's log is not yet at least as up-to-date as the old
//     one's last entry (a candidate it voted for might lack entries the
//     old replica helped commit).
//
// The second condition ends for good once the log has caught up (raft's
// log only grows in up-to-dateness: a conflicting suffix is replaced by a
// newer leader's entries in the same step that removes it). Everything else
// passes through unchanged; so does everything once the replica restarts
// with the floor behind it (Open installs the gate only then).
//
// A refusal answers with the request's term, or the old replica's when that
// is higher (as the old replica would have: the candidate then moves past
// it). A refused candidate simply does not get this vote; the group elects
// with the others, as when a voter is down.
type voteGate struct {
	raft.Transport
	floor  storage.VoteFloor
	stores *storage.RaftStores
	log    *slog.Logger

	out    chan raft.RPC
	stop   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once
	caught atomic.Bool

	logMu  sync.Mutex
	logged time.Time
}

func newVoteGate(inner raft.Transport, floor storage.VoteFloor, stores *storage.RaftStores, log *slog.Logger) *voteGate {
	g := &voteGate{Transport: inner, floor: floor, stores: stores, log: log, out: make(chan raft.RPC), stop: make(chan struct{})}
	g.caught.Store(g.caughtUp())
	g.wg.Add(1)
	go g.run(inner.Consumer())
	return g
}

// Consumer implements raft.Transport.
func (g *voteGate) Consumer() <-chan raft.RPC { return g.out }

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
	var term uint64
	var who []byte
	switch req := rpc.Command.(type) {
	case *raft.RequestVoteRequest:
		term, who = req.Term, req.ID
	case *raft.RequestPreVoteRequest:
		term, who = req.Term, req.ID
	default:
		return false
	}
	why := ""
	switch {
	case term <= g.floor.Term:
		why = fmt.Sprintf("term %d is not past term %d of this node's deleted replica", term, g.floor.Term)
	case !g.caught.Load() && !g.caughtUp():
		why = fmt.Sprintf("this replica has not caught up past what this node's deleted replica acknowledged (term %d, index %d)", g.floor.LastTerm, g.floor.LastIndex)
	default:
		g.caught.Store(true)
		return false
	}
	answer := max(term, g.floor.Term)
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

// note logs a refusal, at most once a second.
func (g *voteGate) note(candidate, why string) {
	g.logMu.Lock()
	defer g.logMu.Unlock()
	if time.Since(g.logged) < time.Second {
		return
	}
	g.logged = time.Now()
	g.log.Info("refusing a vote: this replica was re-created after an earlier one on this node was deleted", "candidate", candidate, "reason", why)
}

// caughtUp reports whether the replica's log (or, past its end, its latest
// snapshot) is at least as up-to-date as the floor's last entry.
func (g *voteGate) caughtUp() bool {
	var have storage.VoteFloor
	if last, err := g.stores.Log.LastIndex(); err == nil && last > 0 {
		var l raft.Log
		if g.stores.Log.GetLog(last, &l) == nil {
			have = storage.VoteFloor{LastTerm: l.Term, LastIndex: last}
		}
	}
	if snaps, err := g.stores.Snapshots.List(); err == nil && len(snaps) > 0 {
		have = have.Max(storage.VoteFloor{LastTerm: snaps[0].Term, LastIndex: snaps[0].Index})
	}
	return g.floor.Covers(have.LastTerm, have.LastIndex)
}

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

// Urgent passes through to a coalescing transport.
func (g *voteGate) Urgent(d time.Duration) {
	if u, ok := g.Transport.(urgentTransport); ok {
		u.Urgent(d)
	}
}
