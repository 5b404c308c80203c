package raftgroup

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/timemachine-db/timemachine/internal/testutil"
)

// A caller only ever shares a round that starts after it arrived: one
// arriving while a round runs gets the next round's answer, not the
// running one's.
func TestConfirmRoundsShareOnlyALaterRound(t *testing.T) {
	var c confirmRounds
	var runs atomic.Int32
	release := make(chan struct{})
	run := func() error {
		n := runs.Add(1)
		<-release
		return fmt.Errorf("round %d", n)
	}
	first := make(chan error, 1)
	go func() { first <- c.do(run) }()
	testutil.Eventually(t, 5*time.Second, "the first round under way", testutil.True(func() bool { return runs.Load() == 1 }))
	later := make(chan error, 2)
	for range 2 {
		go func() { later <- c.do(run) }()
	}
	testutil.Eventually(t, 5*time.Second, "the later callers waiting", testutil.True(func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.next != nil
	}))
	// Both may not have joined yet; either way neither gets round 1.
	close(release)
	if err := <-first; err == nil || err.Error() != "round 1" {
		t.Fatalf("first caller: %v, want round 1", err)
	}
	for range 2 {
		if err := <-later; err == nil || err.Error() == "round 1" {
			t.Fatalf("a later caller got %v: the round that was under way when it arrived", err)
		}
	}
	if n := runs.Load(); n < 2 || n > 3 {
		t.Fatalf("%d rounds for three callers, two of them arriving during the first", n)
	}
	// Once the last round has wound down (it clears running after its
	// callers return), the next caller starts a round of its own, with its
	// own function.
	testutil.Eventually(t, 5*time.Second, "the rounds wound down", testutil.True(func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return !c.running
	}))
	if err := c.do(func() error { return nil }); err != nil {
		t.Fatal(err)
	}
}

// deafTransport is an injectTransport that can stop hearing anything (its
// replica answers no RPC, heartbeats included: each fails), and that
// confirms leaderships (raftgroup's VerifyLeader then runs its own rounds)
// counting them.
type deafTransport struct {
	*injectTransport
	confirms atomic.Int32
	// hearBeats: heartbeats still arrive while deaf (only they do).
	hearBeats atomic.Bool
	// fakeBeats: while deaf, heartbeats are answered with success without
	// reaching raft (the leader sees no failure, the replica hears
	// nothing).
	fakeBeats atomic.Bool
}

func newDeafTransport(nt *raft.NetworkTransport) *deafTransport {
	return &deafTransport{injectTransport: newInjectTransport(nt)}
}

func (t *deafTransport) SetHeartbeatHandler(cb func(raft.RPC)) {
	t.injectTransport.SetHeartbeatHandler(func(rpc raft.RPC) {
		if t.deaf.Load() && !t.hearBeats.Load() {
			if req, ok := rpc.Command.(*raft.AppendEntriesRequest); ok && t.fakeBeats.Load() {
				rpc.Respond(&raft.AppendEntriesResponse{Term: req.Term, Success: true}, nil)
				return
			}
			rpc.Respond(nil, errors.New("deaf"))
			return
		}
		cb(rpc)
	})
}

func (t *deafTransport) Confirm(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	t.confirms.Add(1)
	return t.AppendEntries(id, target, args, resp)
}

// openDeafTrio starts a bootstrapped three-voter group whose transports
// can be made deaf, by node id, and waits for a leader all three follow.
func openDeafTrio(t *testing.T, timing Timing, opts ...func(*Config)) ([]*Group, map[string]*deafTransport) {
	t.Helper()
	dirs, addrs := replicaPlaces(t, 3)
	trans := map[string]*deafTransport{}
	base := Config{Name: "slot-0", Timing: timing}
	for _, o := range opts {
		o(&base)
	}
	var next atomic.Int32
	base.WrapTransport = func(nt *raft.NetworkTransport) raft.Transport {
		tr := newDeafTransport(nt)
		trans["n"+string(rune('1'+next.Add(1)-1))] = tr
		return tr
	}
	gs, servers := openReplicas(t, base, dirs, addrs)
	for _, g := range gs {
		if err := g.Bootstrap(servers); err != nil {
			t.Fatal(err)
		}
	}
	awaitOneLeader(t, gs, 3*time.Second)
	return gs, trans
}

// VerifyLeader's own round (over a transport that confirms): the leader
// is confirmed; a leader deposed by an election it did not hear of fails
// it and steps down; a leader whose followers are gone fails it at once.
func TestVerifyLeaderByConfirmation(t *testing.T) {
	gs, trans := openDeafTrio(t, slowTiming)
	leader, followers := splitLeader(gs)
	lt := trans[leader.cfg.NodeID]
	if err := leader.VerifyLeader(); err != nil {
		t.Fatalf("the leader's VerifyLeader: %v", err)
	}
	if n := lt.confirms.Load(); n < 1 {
		t.Fatal("VerifyLeader sent no confirmation: raft's own round ran")
	}
	if followers[0].VerifyLeader() == nil {
		t.Fatal("a follower's VerifyLeader succeeded")
	}
	awaitFollowersHoldLeadersLog(t, leader, followers)

	// The leader hears nothing more; a follower campaigns past it and wins
	// with the other's vote. The old leader does not know: raft's own
	// heartbeats ignore the newer term in their answers.
	lt.deaf.Store(true)
	if !followers[0].Campaign(leader.cfg.NodeID) {
		t.Fatal("Campaign did not start an election")
	}
	testutil.Eventually(t, 3*time.Second, "the campaigning follower leads", testutil.True(followers[0].IsLeader))
	if err := leader.VerifyLeader(); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("the deposed leader's VerifyLeader: %v, want ErrNotLeader", err)
	}
	testutil.Eventually(t, 3*time.Second, "the deposed leader steps down", testutil.True(func() bool { return !leader.IsLeader() }))
	if err := followers[0].VerifyLeader(); err != nil {
		t.Fatalf("the new leader's VerifyLeader: %v", err)
	}

	// The new leader's followers go away: it cannot confirm, and says so
	// without waiting for raft's check-quorum.
	followers[1].Close()
	leader.Close()
	start := time.Now()
	if err := followers[0].VerifyLeader(); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("VerifyLeader with no follower left: %v, want ErrNotLeader", err)
	}
	t.Logf("failed after %v", time.Since(start).Round(time.Millisecond))
}

// A leader that steps down on its own (check-quorum: its followers went
// deaf for longer than the lease) knows no leader afterwards, while its
// followers still name it and their heartbeat timeouts are far off: the
// group would wait for those (10–20 s here) with every replica alive.
// watchLeaderless makes the replica that stopped leading campaign once
// leaderlessAfter has passed; its followers grant it, since they still
// name it.
func TestLeaderThatSteppedDownIsElectedAgainSoon(t *testing.T) {
	gs, trans := openDeafTrio(t, Timing{HeartbeatTimeout: 10 * time.Second, ElectionTimeout: 10 * time.Second, LeaderLeaseTimeout: time.Second})
	leader, followers := splitLeader(gs)
	for _, f := range followers {
		trans[f.cfg.NodeID].deaf.Store(true)
	}
	testutil.Eventually(t, 5*time.Second, "the leader steps down", testutil.True(func() bool { return !leader.IsLeader() }))
	for _, f := range followers {
		if id, _ := f.Leader(); id != leader.cfg.NodeID {
			t.Fatalf("follower %s names %q, not the leader that stepped down", f.cfg.NodeID, id)
		}
		trans[f.cfg.NodeID].deaf.Store(false)
	}
	awaitOneLeader(t, gs, leaderlessAfter+3*time.Second)
}

// With the node's consent (a majority of the voters answers and names the
// replica that stepped down, or no one) that replica campaigns as soon
// as leaderlessAfter has passed, rather than a lease after its step-down:
// with the slots' 5 s lease, a leader that stepped down under a fault that
// healed a moment later otherwise left its group leaderless for 5 s. A
// consent refused at first (the fault not healed yet) is asked for again
// until the lease is out.
func TestSteppedDownLeaderWithConsentCampaignsAtOnce(t *testing.T) {
	for _, later := range []bool{false, true} {
		t.Run(fmt.Sprintf("later=%t", later), func(t *testing.T) {
			var asked atomic.Int32
			var given atomic.Bool
			given.Store(!later)
			consent := func(c *Config) {
				c.LeaderlessConsent = func(voters []string) bool {
					asked.Add(1)
					return given.Load() && len(voters) == 3
				}
			}
			gs, trans := openDeafTrio(t, Timing{HeartbeatTimeout: 10 * time.Second, ElectionTimeout: 10 * time.Second, LeaderLeaseTimeout: 5 * time.Second}, consent)
			leader, followers := splitLeader(gs)
			for _, f := range followers {
				trans[f.cfg.NodeID].deaf.Store(true)
			}
			testutil.Eventually(t, 10*time.Second, "the leader steps down", testutil.True(func() bool { return !leader.IsLeader() }))
			for _, f := range followers {
				trans[f.cfg.NodeID].deaf.Store(false)
			}
			if later {
				testutil.Eventually(t, 3*time.Second, "the consent asked for", testutil.True(func() bool { return asked.Load() > 0 }))
				given.Store(true)
			}
			// Without the consent the first election comes a lease (5 s)
			// after the step-down, and the followers' own timeouts are
			// 10-20 s away.
			awaitOneLeader(t, gs, leaderlessAfter+2*time.Second)
			if later && asked.Load() < 2 {
				t.Fatalf("the consent was asked for %d times", asked.Load())
			}
		})
	}
}

// After a planned transfer the replica that stopped leading hears of the
// new leader well within leaderlessAfter: watchLeaderless starts no
// hurried election, and the new leader stays.
func TestTransferStartsNoLeaderlessElection(t *testing.T) {
	gs, _ := openDeafTrio(t, slowTiming)
	leader, _ := splitLeader(gs)
	leader.LeaveLeadership(5 * time.Second)
	testutil.Eventually(t, 5*time.Second, "the leadership moved", testutil.True(func() bool {
		id, _ := leader.Leader()
		return !leader.IsLeader() && id != "" && id != leader.cfg.NodeID
	}))
	moved, _ := leader.Leader()
	time.Sleep(leaderlessAfter + 500*time.Millisecond) // the watch's whole window: nothing may happen in it
	leader.hurryMu.Lock()
	hurried := leader.hurried
	leader.hurryMu.Unlock()
	if hurried != "" {
		t.Fatalf("the replica that handed its leadership over hurried an election (%q)", hurried)
	}
	for _, g := range gs {
		if id, _ := g.Leader(); id != moved {
			t.Fatalf("%s follows %q, want %q", g.cfg.NodeID, id, moved)
		}
	}
}
