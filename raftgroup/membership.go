package raftgroup

import (
	"errors"
	"fmt"
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

// StepKind is what one membership step does.
type StepKind uint8

// The steps, in the order a pass considers them.
const (
	StepNone           StepKind = iota
	StepAddNonvoter             // a wanted replica is missing: add it without a vote
	StepUpdateAddress           // a replica's address changed (Voter says which suffrage it keeps)
	StepPromote                 // a caught-up nonvoter that should vote
	StepDemote                  // a voter that should only hold a copy
	StepRemove                  // a replica no longer wanted
	StepTransferLeader          // this leader is leaving: hand leadership to ID first
)

// Step is one membership change, derived from the group's current
// configuration by NextStep.
type Step struct {
	Kind  StepKind
	ID    string
	Addr  string
	Voter bool // StepUpdateAddress: the replica votes
}

// String says what the step does, for logs ("" for StepNone).
func (s Step) String() string {
	switch s.Kind {
	case StepAddNonvoter:
		return fmt.Sprintf("add %s as nonvoter", s.ID)
	case StepUpdateAddress:
		return fmt.Sprintf("update address of %s", s.ID)
	case StepPromote:
		return fmt.Sprintf("promote %s to voter", s.ID)
	case StepDemote:
		return fmt.Sprintf("demote %s to nonvoter", s.ID)
	case StepRemove:
		return fmt.Sprintf("remove %s", s.ID)
	case StepTransferLeader:
		return fmt.Sprintf("hand leadership to %s before leaving", s.ID)
	}
	return ""
}

const membershipTimeout = 10 * time.Second

// NextStep is the next membership step from the configuration cur toward
// want, for the leader self (docs/architecture.md#slot-membership): add a
// missing replica as a nonvoter; promote a caught-up one; and only once
// every wanted voter votes, remove (or demote) replicas no longer wanted,
// handing leadership to a caught-up wanted voter first if self is leaving.
// caughtUp reports whether a replica has the log (it may ask the network;
// it is only called for a replica about to get a vote or the leadership).
//
// It is a pure function of its inputs: each pass re-derives the next step
// from the current configuration, so a crash midway needs no recovery —
// the next pass, or the next leader, simply continues.
func NextStep(cur []raft.Server, want Membership, self string, caughtUp func(id string) bool) Step {
	if len(want.Voters) == 0 {
		return Step{}
	}
	have := make(map[string]raft.Server, len(cur))
	for _, s := range cur {
		have[string(s.ID)] = s
	}
	wantVoter := make(map[string]bool, len(want.Voters))
	for _, m := range want.Voters {
		wantVoter[m.ID] = true
	}
	wantNon := map[string]bool{}
	for _, m := range want.Nonvoters {
		if !wantVoter[m.ID] {
			wantNon[m.ID] = true
		}
	}
	// 1. Add missing replicas as nonvoters; fix changed addresses.
	for _, group := range [][]Member{want.Voters, want.Nonvoters} {
		for _, m := range group {
			s, ok := have[m.ID]
			if !ok {
				return Step{Kind: StepAddNonvoter, ID: m.ID, Addr: m.Addr}
			}
			if string(s.Address) != m.Addr && m.Addr != "" {
				return Step{Kind: StepUpdateAddress, ID: m.ID, Addr: m.Addr, Voter: s.Suffrage == raft.Voter}
			}
		}
	}
	// 2. Promote caught-up replicas that should vote.
	allVote := true
	for _, m := range want.Voters {
		s := have[m.ID]
		if s.Suffrage == raft.Voter {
			continue
		}
		allVote = false
		if caughtUp(m.ID) {
			return Step{Kind: StepPromote, ID: m.ID, Addr: string(s.Address)}
		}
	}
	if !allVote {
		return Step{} // wait for the new replicas to catch up before removing anyone
	}
	// 3. Remove (or demote) what is no longer wanted; the leader leaves
	// last, by handing leadership to a wanted voter first.
	for _, s := range cur {
		id := string(s.ID)
		if wantVoter[id] || id == self {
			continue
		}
		if wantNon[id] {
			if s.Suffrage == raft.Voter {
				return Step{Kind: StepDemote, ID: id}
			}
			continue
		}
		return Step{Kind: StepRemove, ID: id}
	}
	if !wantVoter[self] {
		for _, m := range want.Voters {
			if caughtUp(m.ID) {
				return Step{Kind: StepTransferLeader, ID: m.ID, Addr: m.Addr}
			}
		}
	}
	return Step{}
}

// Reconcile takes at most one membership step toward want (leader only)
// and returns it. caughtUp reports whether a replica has the log.
func (g *Group) Reconcile(want Membership, caughtUp func(id string) bool) (Step, error) {
	if !g.IsLeader() {
		return Step{}, nil
	}
	f := g.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return Step{}, mapRaftErr(err)
	}
	step := NextStep(f.Configuration().Servers, want, g.cfg.NodeID, caughtUp)
	if step.Kind == StepNone {
		return step, nil
	}
	return step, g.execute(step, f.Index())
}

// ErrConfigChanged: a step was asked for against a configuration that is
// no longer the group's (someone took another step meanwhile).
var ErrConfigChanged = errors.New("the group's configuration changed since the step was planned")

// TakeStep executes one membership step that someone else derived (the
// cluster controller, from this group's configuration at configIndex),
// leader only. It is refused when the configuration changed since: raft
// itself checks configIndex for the membership changes, and a leadership
// hand-off is checked here.
func (g *Group) TakeStep(step Step, configIndex uint64) error {
	if !g.IsLeader() {
		return ErrNotLeader
	}
	f := g.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return mapRaftErr(err)
	}
	if f.Index() != configIndex {
		return fmt.Errorf("%s: %s: %w (planned at index %d, now %d)", g.cfg.Name, step, ErrConfigChanged, configIndex, f.Index())
	}
	if step.Kind == StepNone {
		return nil
	}
	return g.execute(step, configIndex)
}

// execute carries out one step against the configuration at index idx (a
// change made concurrently makes raft refuse it; the next pass re-derives).
func (g *Group) execute(s Step, idx uint64) error {
	id, addr := raft.ServerID(s.ID), raft.ServerAddress(s.Addr)
	var err error
	switch s.Kind {
	case StepAddNonvoter:
		err = g.raft.AddNonvoter(id, addr, idx, membershipTimeout).Error()
	case StepUpdateAddress:
		if s.Voter {
			err = g.raft.AddVoter(id, addr, idx, membershipTimeout).Error()
		} else {
			err = g.raft.AddNonvoter(id, addr, idx, membershipTimeout).Error()
		}
	case StepPromote:
		err = g.raft.AddVoter(id, addr, idx, membershipTimeout).Error()
	case StepDemote:
		err = g.raft.DemoteVoter(id, idx, membershipTimeout).Error()
	case StepRemove:
		err = g.raft.RemoveServer(id, idx, membershipTimeout).Error()
	case StepTransferLeader:
		if err := g.handOff(s.String(), func() raft.Future { return g.raft.LeadershipTransferToServer(id, addr) }, transferWait); err != nil {
			return err
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %s: %w", g.cfg.Name, s, err)
	}
	g.cfg.Logger.Info("membership step", "group", g.cfg.Name, "step", s.String())
	return nil
}
