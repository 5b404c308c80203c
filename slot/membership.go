package slot

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/raft"
)

// Member is a replica a group should have: a node id and the node's bind
// address (where its raft transport listens).
type Member struct {
	ID   string
	Addr string
}

// Membership is the desired shape of a raft group.
type Membership struct {
	Voters    []Member
	Nonvoters []Member // the meta group keeps every node beyond its voters as a nonvoter
}

// Step names what one reconcile pass did ("" when nothing).
type Step string

const membershipTimeout = 10 * time.Second

// reconcile takes at most one membership step toward want, on the leader
// only (DESIGN.md decision 8): add a missing replica as a nonvoter, promote
// a caught-up one, and only once every wanted voter votes, hand leadership
// away if this leader is leaving and remove replicas no longer wanted. Each
// pass re-derives the next step from the current configuration, so a crash
// midway needs no recovery: the next leader simply continues.
func (g *group) reconcile(want Membership, caughtUp func(id string) bool) (Step, error) {
	if !g.isLeader() || len(want.Voters) == 0 {
		return "", nil
	}
	f := g.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return "", err
	}
	cur := map[raft.ServerID]raft.Server{}
	for _, s := range f.Configuration().Servers {
		cur[s.ID] = s
	}
	wantVoter := map[raft.ServerID]Member{}
	for _, m := range want.Voters {
		wantVoter[raft.ServerID(m.ID)] = m
	}
	wantNon := map[raft.ServerID]Member{}
	for _, m := range want.Nonvoters {
		if _, v := wantVoter[raft.ServerID(m.ID)]; !v {
			wantNon[raft.ServerID(m.ID)] = m
		}
	}
	idx := f.Index()
	// 1. Add missing replicas as nonvoters; fix changed addresses.
	for _, m := range append(append([]Member(nil), want.Voters...), want.Nonvoters...) {
		id := raft.ServerID(m.ID)
		s, ok := cur[id]
		if !ok {
			return g.step(fmt.Sprintf("add %s as nonvoter", m.ID), g.raft.AddNonvoter(id, raft.ServerAddress(m.Addr), idx, membershipTimeout))
		}
		if string(s.Address) != m.Addr && m.Addr != "" {
			if s.Suffrage == raft.Voter {
				return g.step(fmt.Sprintf("update address of %s", m.ID), g.raft.AddVoter(id, raft.ServerAddress(m.Addr), idx, membershipTimeout))
			}
			return g.step(fmt.Sprintf("update address of %s", m.ID), g.raft.AddNonvoter(id, raft.ServerAddress(m.Addr), idx, membershipTimeout))
		}
	}
	// 2. Promote caught-up replicas that should vote.
	allVote := true
	for _, m := range want.Voters {
		s := cur[raft.ServerID(m.ID)]
		if s.Suffrage == raft.Voter {
			continue
		}
		allVote = false
		if caughtUp(m.ID) {
			return g.step(fmt.Sprintf("promote %s to voter", m.ID), g.raft.AddVoter(s.ID, s.Address, idx, membershipTimeout))
		}
	}
	if !allVote {
		return "", nil // wait for the new replicas to catch up before removing anyone
	}
	// 3. Remove (or demote) what is no longer wanted; the leader leaves last,
	// by handing leadership to a wanted voter first.
	self := raft.ServerID(g.cfg.nodeID)
	for id, s := range cur {
		if _, ok := wantVoter[id]; ok {
			continue
		}
		if id == self {
			continue
		}
		if _, non := wantNon[id]; non {
			if s.Suffrage == raft.Voter {
				return g.step(fmt.Sprintf("demote %s to nonvoter", id), g.raft.DemoteVoter(id, idx, membershipTimeout))
			}
			continue
		}
		return g.step(fmt.Sprintf("remove %s", id), g.raft.RemoveServer(id, idx, membershipTimeout))
	}
	if _, ok := wantVoter[self]; !ok {
		for _, m := range want.Voters {
			if caughtUp(m.ID) {
				after := g.pauseForTransfer()
				step, err := g.step(fmt.Sprintf("hand leadership to %s before leaving", m.ID),
					g.raft.LeadershipTransferToServer(raft.ServerID(m.ID), raft.ServerAddress(m.Addr)))
				after(g.isLeader())
				return step, err
			}
		}
	}
	return "", nil
}

func (g *group) step(what string, f raft.Future) (Step, error) {
	if err := f.Error(); err != nil {
		return Step(what), fmt.Errorf("%s: %s: %w", g.cfg.name, what, err)
	}
	g.cfg.log.Info("membership step", "group", g.cfg.name, "step", what)
	return Step(what), nil
}

// transferTo hands leadership to a given voter.
func (g *group) transferTo(id, addr string) error {
	if !g.isLeader() {
		return ErrNotLeader
	}
	after := g.pauseForTransfer()
	err := g.raft.LeadershipTransferToServer(raft.ServerID(id), raft.ServerAddress(addr)).Error()
	after(g.isLeader())
	if err != nil {
		return fmt.Errorf("%s: transfer leadership to %s: %w", g.cfg.name, id, err)
	}
	return nil
}

// GroupStatus is what a replica reports about itself (for catch-up checks
// and the cluster view).
type GroupStatus struct {
	State       string   `json:"state"`
	Leader      string   `json:"leader"`
	Term        uint64   `json:"term"`
	LastIndex   uint64   `json:"last_index"`
	CommitIndex uint64   `json:"commit_index"`
	Applied     uint64   `json:"applied"`
	Voters      []string `json:"voters"`
	Nonvoters   []string `json:"nonvoters"`
	Member      bool     `json:"member"` // this node is in the group's configuration
	Shutdown    bool     `json:"shutdown"`
}

func (g *group) status() GroupStatus {
	st := GroupStatus{
		State:       g.raft.State().String(),
		LastIndex:   g.raft.LastIndex(),
		CommitIndex: g.raft.CommitIndex(),
		Applied:     g.raft.AppliedIndex(),
		Shutdown:    g.raft.State() == raft.Shutdown,
	}
	_, id := g.raft.LeaderWithID()
	st.Leader = string(id)
	if cf := g.raft.GetConfiguration(); cf.Error() == nil {
		for _, s := range cf.Configuration().Servers {
			if string(s.ID) == g.cfg.nodeID {
				st.Member = true
			}
			if s.Suffrage == raft.Voter {
				st.Voters = append(st.Voters, string(s.ID))
			} else {
				st.Nonvoters = append(st.Nonvoters, string(s.ID))
			}
		}
	}
	return st
}

// CaughtUp judges a follower's reported status against this leader's.
func CaughtUp(leader, follower GroupStatus) bool {
	const slack = 64
	return follower.Applied+slack >= leader.CommitIndex && follower.LastIndex+slack >= leader.LastIndex
}

// ReconcileMembership takes at most one step toward the desired members
// (leader only). caughtUp reports whether a new replica has the log.
func (r *Replica) ReconcileMembership(want Membership, caughtUp func(id string) bool) (Step, error) {
	return r.g.reconcile(want, caughtUp)
}

// TransferTo hands the slot's leadership to a given voter.
func (r *Replica) TransferTo(id, addr string) error { return r.g.transferTo(id, addr) }

// Status reports the replica's raft state.
func (r *Replica) Status() GroupStatus {
	st := r.g.status()
	st.Applied = r.fsm.Applied()
	return st
}

// Removed reports whether raft shut this replica down after the group
// removed it (ShutdownOnRemove).
func (r *Replica) Removed() bool { return r.g.raft.State() == raft.Shutdown }

// Destroy deletes the replica's data after Close: its key span in Pebble,
// its raft log bucket and its snapshots. Used when the slot moved away.
func (r *Replica) Destroy() error {
	var errs []error
	if err := r.db.DeleteSlot(r.slot); err != nil {
		errs = append(errs, err)
	}
	if r.cfg.LogDB != nil {
		if err := r.cfg.LogDB.DropGroup(r.g.cfg.name); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(r.cfg.Dir); err != nil {
		errs = append(errs, fmt.Errorf("remove %s: %w", r.cfg.Dir, err))
	}
	return errors.Join(errs...)
}

// ReconcileMembership takes at most one step toward the desired members of
// the meta group (leader only).
func (m *MetaReplica) ReconcileMembership(want Membership, caughtUp func(id string) bool) (Step, error) {
	return m.g.reconcile(want, caughtUp)
}

// Status reports the meta replica's raft state.
func (m *MetaReplica) Status() GroupStatus { return m.g.status() }

// TransferTo hands the meta group's leadership to a given voter.
func (m *MetaReplica) TransferTo(id, addr string) error { return m.g.transferTo(id, addr) }

// TransferLeadership hands the meta group's leadership to any other voter.
func (m *MetaReplica) TransferLeadership(timeout time.Duration) { m.g.leaveLeadership(timeout) }
