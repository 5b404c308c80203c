package raftgroup

import (
	"sync"

	"github.com/hashicorp/raft"
)

// confirmer is a transport that sends a heartbeat answered by the
// follower's group itself, never from an earlier answer (rpc/beat's
// Transport, whose ordinary heartbeats may be answered from a held answer:
// rpc/beat held.go).
type confirmer interface {
	Confirm(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error
}

// confirmRounds shares confirmation rounds between concurrent VerifyLeader
// calls, as raft's own VerifyLeader does, but a caller only ever joins a
// round that starts after it arrived: one already under way may have sent
// its heartbeats before the caller's read came in, and its answers would
// not prove that no newer leader existed then.
type confirmRounds struct {
	mu      sync.Mutex
	running bool
	next    *confirmRound // the round the callers arriving now will share
}

type confirmRound struct {
	done chan struct{}
	err  error
}

// do runs run in a round that starts after this call, shared with the
// calls that arrive while another round runs.
func (c *confirmRounds) do(run func() error) error {
	c.mu.Lock()
	if c.next == nil {
		c.next = &confirmRound{done: make(chan struct{})}
	}
	r := c.next
	if c.running {
		c.mu.Unlock()
		<-r.done
		return r.err
	}
	c.running = true
	c.next = nil
	c.mu.Unlock()
	c.run(r, run)
	return r.err
}

// run runs r, then (on a goroutine of its own, so that r's caller returns)
// the round the callers that arrived meanwhile wait for.
func (c *confirmRounds) run(r *confirmRound, run func() error) {
	r.err = run()
	close(r.done)
	c.mu.Lock()
	next := c.next
	c.next = nil
	if next == nil {
		c.running = false
	}
	c.mu.Unlock()
	if next != nil {
		go c.run(next, run)
	}
}

// confirm is one round: a heartbeat of the current term to every other
// voter at once, sent now and answered by each follower's group itself;
// the leadership is confirmed once a majority of the voters (this replica
// among them, if it is one) answered with success, and this replica still
// leads in the same term. A follower that answers with a newer term means
// a newer leader may exist: ErrNotLeader, and raft is made to see it too.
func (g *Group) confirm(c confirmer) error {
	// The term first, then the state, then the term again: a replica seen
	// leading between two equal readings leads in that term (raft sets the
	// state before it moves to a newer term, and a candidacy starts with
	// a newer term).
	term := g.raft.CurrentTerm()
	if g.raft.State() != raft.Leader || g.raft.CurrentTerm() != term {
		return ErrNotLeader
	}
	servers, err := g.Servers()
	if err != nil {
		return ErrNotLeader
	}
	self := raft.ServerID(g.cfg.NodeID)
	var others []raft.Server
	voters, votes := 0, 0
	for _, s := range servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		voters++
		if s.ID == self {
			votes++
		} else {
			others = append(others, s)
		}
	}
	need := voters/2 + 1
	if votes < need {
		addr := g.trans.EncodePeer(self, g.trans.LocalAddr())
		req := raft.AppendEntriesRequest{
			RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(self), Addr: addr},
			Term:      term,
			Leader:    addr, // raft's own heartbeat fills it too, for older peers
		}
		type vote struct {
			ok    bool
			newer bool
		}
		ch := make(chan vote, len(others)) // never blocks a late answer
		for _, s := range others {
			go func() {
				var resp raft.AppendEntriesResponse
				err := c.Confirm(s.ID, s.Address, &req, &resp)
				ch <- vote{ok: err == nil && resp.Success, newer: err == nil && resp.Term > term}
			}()
		}
		for range others {
			v := <-ch
			if v.newer {
				g.stepDownLate()
				return ErrNotLeader
			}
			if v.ok {
				votes++
				if votes >= need {
					break
				}
			}
		}
		if votes < need {
			return ErrNotLeader
		}
	}
	if g.raft.State() != raft.Leader || g.raft.CurrentTerm() != term {
		return ErrNotLeader
	}
	return nil
}

// stepDownLate makes raft see the newer term a confirmation round met: its
// own heartbeats ignore the term of an answer, and its leader would
// otherwise learn of it only from its next append (up to the CommitTimeout
// tick: 30 s for a slot). raft's VerifyLeader steps down on a vote against,
// and its heartbeats skip the held answers while the transport is urgent.
func (g *Group) stepDownLate() {
	if u, ok := g.trans.(urgentTransport); ok {
		u.Urgent(verifyUrgency)
	}
	g.background(func() { _ = g.raft.VerifyLeader().Error() })
}
