package beat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/timemachine-db/timemachine/internal/testutil"
	"github.com/timemachine-db/timemachine/rpc/peer"
)

// raftStub answers, in place of a group's raft, every RPC its transport
// consumes: votes granted, appends successful with LastLog = the last
// entry's index; it counts the appends it saw.
func raftStub(t *testing.T, tr raft.Transport, appends *atomic.Int64) {
	t.Helper()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case rpc := <-tr.Consumer():
				switch req := rpc.Command.(type) {
				case *raft.RequestVoteRequest:
					rpc.Respond(&raft.RequestVoteResponse{Term: req.Term, Granted: true}, nil)
				case *raft.RequestPreVoteRequest:
					rpc.Respond(&raft.RequestPreVoteResponse{Term: req.Term, Granted: true}, nil)
				case *raft.TimeoutNowRequest:
					rpc.Respond(&raft.TimeoutNowResponse{RPCHeader: raft.RPCHeader{ID: []byte("nine")}}, nil)
				case *raft.AppendEntriesRequest:
					appends.Add(1)
					var last uint64
					if n := len(req.Entries); n > 0 {
						last = req.Entries[n-1].Index
					}
					rpc.Respond(&raft.AppendEntriesResponse{Term: req.Term, LastLog: last, Success: true}, nil)
				default:
					rpc.Respond(nil, io.ErrUnexpectedEOF)
				}
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
}

func newNT(t *testing.T) *raft.NetworkTransport {
	t.Helper()
	nt, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 5*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return nt
}

func appendReq(term, index uint64) *raft.AppendEntriesRequest {
	return &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("a"), Addr: []byte("a:1")},
		Term: term, PrevLogEntry: index - 1, PrevLogTerm: term, LeaderCommitIndex: index - 1,
		Entries: []*raft.Log{{Index: index, Term: term, Type: raft.LogCommand, Data: []byte("job"), AppendedAt: time.Now()}}}
}

// carried is group 3 of node a, carried on the node connection to the
// same group on node b, whose raft is raftStub.
type carried struct {
	l       *loop
	a       *Coalescer
	ta      *Transport
	tb      *Transport         // b's group's transport
	target  raft.ServerAddress // b's group
	appends *atomic.Int64      // the appends b's group took
}

// newCarried wires a (with opts) and b on a loop, b's group 3 answered
// by raftStub; everything closes when the test ends.
func newCarried(t *testing.T, opts Options) carried {
	t.Helper()
	c := newCarriedPair(t, opts)
	raftStub(t, c.tb, c.appends)
	return c
}

// newCarriedPair is newCarried without the stub: the test reads b's
// group's consumer itself.
func newCarriedPair(t *testing.T, opts Options) carried {
	t.Helper()
	l := newLoop()
	a, b := New(l, opts), New(l, Options{})
	t.Cleanup(func() { a.Close() })
	t.Cleanup(func() { b.Close() })
	ntA, ntB := newNT(t), newNT(t)
	target := ntB.LocalAddr()
	l.add(string(target), b)
	ta, tb := a.Wrap(3, ntA), b.Wrap(3, ntB)
	t.Cleanup(func() { ta.Close() })
	t.Cleanup(func() { tb.Close() })
	return carried{l: l, a: a, ta: ta, tb: tb, target: target, appends: new(atomic.Int64)}
}

// Votes, pre-votes, timeout-now and appends reach the peer's group through
// the node connection (MethodRaft), answered by that group's raft.
func TestRaftRPCsCarriedOnTheNodeConnection(t *testing.T) {
	c := newCarried(t, Options{})
	a, ta, target := c.a, c.ta, c.target

	var vr raft.RequestVoteResponse
	if err := ta.RequestVote("b", target, &raft.RequestVoteRequest{Term: 4}, &vr); err != nil || !vr.Granted || vr.Term != 4 {
		t.Fatalf("vote: %+v, %v", vr, err)
	}
	var pr raft.RequestPreVoteResponse
	if err := ta.RequestPreVote("b", target, &raft.RequestPreVoteRequest{Term: 5}, &pr); err != nil || !pr.Granted || pr.Term != 5 {
		t.Fatalf("pre-vote: %+v, %v", pr, err)
	}
	var tr raft.TimeoutNowResponse
	if err := ta.TimeoutNow("b", target, &raft.TimeoutNowRequest{}, &tr); err != nil || string(tr.ID) != "nine" {
		t.Fatalf("timeout-now: %+v, %v", tr, err)
	}
	var ar raft.AppendEntriesResponse
	if err := ta.AppendEntries("b", target, appendReq(4, 7), &ar); err != nil || !ar.Success || ar.LastLog != 7 {
		t.Fatalf("append: %+v, %v", ar, err)
	}
	if st := a.Stats(); st.Carried != 4 {
		t.Fatalf("stats: %+v, want 4 carried", st)
	}
	// A group that is not open on the peer fails the RPC; it is not
	// retried the stock way (that path would be refused too).
	other := a.Wrap(4, newNT(t))
	defer other.Close()
	if err := other.RequestVote("b", target, &raft.RequestVoteRequest{Term: 4}, &vr); err == nil {
		t.Fatal("vote to a group not open on the peer succeeded")
	}
}

// A carried TimeoutNow (a leadership transfer to this replica) reaches raft
// after a pre-vote request in term 0, which wakes raft's main loop first
// (wakeRaft): a replica whose refused campaign left raft in its candidate
// loop would otherwise ignore the TimeoutNow.
func TestTimeoutNowWakesRaftFirst(t *testing.T) {
	c := newCarriedPair(t, Options{})
	ta, tb, target := c.ta, c.tb, c.target
	var got []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for len(got) < 2 {
			rpc := <-tb.Consumer()
			switch req := rpc.Command.(type) {
			case *raft.RequestPreVoteRequest:
				got = append(got, fmt.Sprintf("pre-vote term %d", req.Term))
				rpc.Respond(&raft.RequestPreVoteResponse{Term: 7}, nil)
			case *raft.TimeoutNowRequest:
				got = append(got, "timeout-now")
				rpc.Respond(&raft.TimeoutNowResponse{}, nil)
			default:
				got = append(got, fmt.Sprintf("%T", req))
				rpc.Respond(nil, errors.New("unexpected"))
			}
		}
	}()
	var tr raft.TimeoutNowResponse
	if err := ta.TimeoutNow("b", target, &raft.TimeoutNowRequest{}, &tr); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("raft got the TimeoutNow alone: no wake-up before it")
	}
	if want := []string{"pre-vote term 0", "timeout-now"}; !slices.Equal(got, want) {
		t.Fatalf("raft got %q, want %q", got, want)
	}
}

// A peer that does not serve MethodRaft (an older binary) gets the RPCs
// the stock way, and is remembered as such.
func TestRaftRPCsFallBackForAnOldPeer(t *testing.T) {
	l := newLoop()
	a := New(l, Options{})
	defer a.Close()
	ntA, ntB := newNT(t), newNT(t)
	target := ntB.LocalAddr()
	// No handler for target at all: the loop answers CodeUnknownMethod.
	ta := a.Wrap(3, ntA)
	defer ta.Close()
	old := New(l, Options{}) // only to wrap b's transport (merged consumer)
	defer old.Close()
	tb := old.Wrap(3, ntB)
	defer tb.Close()
	var appends atomic.Int64
	raftStub(t, tb, &appends)
	var vr raft.RequestVoteResponse
	if err := ta.RequestVote("b", target, &raft.RequestVoteRequest{Term: 4}, &vr); err != nil || !vr.Granted {
		t.Fatalf("vote: %+v, %v", vr, err)
	}
	if !a.isOld(string(target)) {
		t.Fatal("the peer is not remembered as old")
	}
	calls := l.count(string(target))
	var ar raft.AppendEntriesResponse
	if err := ta.AppendEntries("b", target, appendReq(4, 7), &ar); err != nil || !ar.Success {
		t.Fatalf("append: %+v, %v", ar, err)
	}
	if l.count(string(target)) != calls {
		t.Fatal("an old peer was asked again")
	}
	if st := a.Stats(); st.Carried != 0 {
		t.Fatalf("stats: %+v, want nothing carried", st)
	}
}

// The pipeline sends on the node connection while appends are rare, and
// dials the stock pipeline once they come often; futures come out in
// order either way.
func TestLazyPipelineDialsUnderLoad(t *testing.T) {
	c := newCarried(t, Options{})
	a, ta, target, appends := c.a, c.ta, c.target, c.appends

	p, err := ta.AppendEntriesPipeline("b", target)
	if err != nil {
		t.Fatal(err)
	}
	lp := p.(*lazyPipeline)
	const n = 12
	for i := uint64(1); i <= n; i++ {
		if _, err := p.AppendEntries(appendReq(2, i), &raft.AppendEntriesResponse{}); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		lp.mu.Lock()
		dialed := lp.real != nil
		lp.mu.Unlock()
		if want := i >= pipelineAfter+1; dialed != want {
			t.Fatalf("after %d appends dialed=%v, want %v", i, dialed, want)
		}
	}
	for i := uint64(1); i <= n; i++ {
		select {
		case f := <-p.Consumer():
			if err := f.Error(); err != nil {
				t.Fatalf("future %d: %v", i, err)
			}
			if got := f.Response().LastLog; got != i {
				t.Fatalf("future %d answered LastLog %d: out of order", i, got)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("future %d never came", i)
		}
	}
	if st := a.Stats(); st.Carried != pipelineAfter {
		t.Fatalf("stats: %+v, want %d carried before the dial", st, pipelineAfter)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if appends.Load() != n {
		t.Fatalf("the follower saw %d appends, want %d", appends.Load(), n)
	}
}

// A vote for a group the peer has not opened yet waits for it to open
// (voteOpenWait) instead of failing at once: a new group's first
// candidate would otherwise sit out its whole election timeout.
func TestVoteWaitsForTheGroupToOpen(t *testing.T) {
	l := newLoop()
	a, b := New(l, Options{}), New(l, Options{})
	defer a.Close()
	defer b.Close()
	ntA, ntB := newNT(t), newNT(t)
	target := ntB.LocalAddr()
	l.add(string(target), b)
	ta := a.Wrap(6, ntA)
	defer ta.Close()
	type result struct {
		resp raft.RequestVoteResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.err = ta.RequestVote("b", target, &raft.RequestVoteRequest{Term: 2}, &r.resp)
		done <- r
	}()
	// The vote is in flight (or about to be) when the group opens on b.
	testutil.Eventually(t, 5*time.Second, "the vote sent", testutil.True(func() bool { return l.count(string(target)) > 0 }))
	tb := b.Wrap(6, ntB)
	defer tb.Close()
	var appends atomic.Int64
	raftStub(t, tb, &appends)
	select {
	case r := <-done:
		if r.err != nil || !r.resp.Granted {
			t.Fatalf("vote: %+v, %v", r.resp, r.err)
		}
	case <-time.After(voteOpenWait + time.Second):
		t.Fatal("the vote was not answered once the group opened")
	}
}

// Inject hands an RPC to the group's own raft (its consumer), as one
// carried from a peer would be.
func TestInjectReachesTheConsumer(t *testing.T) {
	c := New(newLoop(), Options{})
	defer c.Close()
	tr := c.Wrap(2, newNT(t))
	defer tr.Close()
	got := make(chan raft.RPC, 1)
	go func() { got <- <-tr.Consumer() }()
	if err := tr.Inject(raft.RPC{Command: &raft.TimeoutNowRequest{}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := (<-got).Command.(*raft.TimeoutNowRequest); !ok {
		t.Fatal("the consumer got something else")
	}
	tr.Close()
	if err := tr.Inject(raft.RPC{Command: &raft.TimeoutNowRequest{}}); err == nil {
		t.Fatal("inject after close succeeded")
	}
}

// catchUpPair is a leader's coalescer a and a peer's b on one loop, the
// leader's transport of group 8 (ta) counting its catch-ups in resumed,
// and the peer's stock transport for the test to wrap when the group
// opens there. All are closed when the test ends.
func catchUpPair(t *testing.T) (a, b *Coalescer, ta *Transport, ntB *raft.NetworkTransport, resumed *atomic.Int64) {
	t.Helper()
	l := newLoop()
	a, b = New(l, Options{Flush: time.Millisecond}), New(l, Options{Flush: time.Millisecond})
	ntA := newNT(t)
	ntB = newNT(t)
	l.add(string(ntB.LocalAddr()), b)
	ta = a.Wrap(8, ntA)
	resumed = new(atomic.Int64)
	ta.OnResume(func() { resumed.Add(1) })
	t.Cleanup(func() {
		ta.Close()
		b.Close()
		a.Close()
	})
	return a, b, ta, ntB, resumed
}

// An append that failed in transport (the group not open on the peer yet)
// marks the follower behind; the next heartbeat it answers runs OnResume
// (the group's catch-up) once. A follower whose later append went through
// is not behind any more.
func TestHeartbeatAfterAFailedAppendResumes(t *testing.T) {
	a, b, ta, ntB, resumed := catchUpPair(t)
	target := ntB.LocalAddr()
	hb := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("a"), Addr: []byte("a:1")}, Term: 4}
	var ar raft.AppendEntriesResponse
	if err := ta.AppendEntries("b", target, appendReq(4, 2), &ar); err == nil {
		t.Fatal("an append to a group not open on the peer succeeded")
	}
	tb := b.Wrap(8, ntB)
	defer tb.Close()
	var appends atomic.Int64
	raftStub(t, tb, &appends)
	tb.SetHeartbeatHandler(func(rpc raft.RPC) {
		rpc.Respond(&raft.AppendEntriesResponse{Term: 4, Success: true}, nil)
	})
	for i := 0; i < 3; i++ {
		if err := ta.AppendEntries("b", target, hb, &ar); err != nil {
			t.Fatalf("heartbeat %d: %v", i, err)
		}
	}
	testutil.Eventually(t, 5*time.Second, "the catch-up called", testutil.True(func() bool { return resumed.Load() == 1 }))
	// Behind, then an append that goes through: no catch-up is owed.
	other := a.Wrap(9, newNT(t))
	defer other.Close()
	other.OnResume(func() { resumed.Add(100) })
	if err := other.AppendEntries("b", target, appendReq(4, 2), &ar); err == nil {
		t.Fatal("an append to group 9, not open on the peer, succeeded")
	}
	tb9 := b.Wrap(9, newNT(t))
	defer tb9.Close()
	raftStub(t, tb9, &appends)
	// It answers heartbeats with the entry the append gave it: it holds
	// everything committed (a follower short of that gets a catch-up:
	// TestHeartbeatFromAFollowerShortOfCommittedEntriesCatchesItUp).
	tb9.SetHeartbeatHandler(func(rpc raft.RPC) {
		rpc.Respond(&raft.AppendEntriesResponse{Term: 4, LastLog: 2, Success: true}, nil)
	})
	if err := other.AppendEntries("b", target, appendReq(4, 2), &ar); err != nil {
		t.Fatalf("append once group 9 is open: %v", err)
	}
	if err := other.AppendEntries("b", target, hb, &ar); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	if n := resumed.Load(); n != 1 {
		t.Fatalf("a catch-up ran for a follower no longer behind (resumed %d)", n)
	}
}

// A follower whose heartbeat answers stay short of entries the leader has
// committed (its LastLog below the commit index the group's appends
// carried, unchanged for lagStuckAfter: a node that lost its data came
// back under the same id, and no append to it failed) gets a catch-up
// (OnResume), at most one per lagKickEvery; one that holds the committed
// entries, or whose LastLog moves, gets none.
func TestHeartbeatFromAFollowerShortOfCommittedEntriesCatchesItUp(t *testing.T) {
	a, b, ta, ntB, resumed := catchUpPair(t)
	target := ntB.LocalAddr()
	tb := b.Wrap(8, ntB)
	defer tb.Close()
	var appends atomic.Int64
	raftStub(t, tb, &appends)
	var followerLast atomic.Uint64
	tb.SetHeartbeatHandler(func(rpc raft.RPC) {
		rpc.Respond(&raft.AppendEntriesResponse{Term: 4, LastLog: followerLast.Load(), Success: true}, nil)
	})
	hb := func() {
		t.Helper()
		req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("a"), Addr: []byte("a:1")}, Term: 4}
		var resp raft.AppendEntriesResponse
		if err := ta.AppendEntries("b", target, req, &resp); err != nil {
			t.Fatal(err)
		}
	}
	// An append tells the transport the group's commit index (41: the
	// stub answers LastLog 42); heartbeats carry none.
	var ar raft.AppendEntriesResponse
	if err := ta.AppendEntries("b", target, appendReq(4, 42), &ar); err != nil {
		t.Fatal(err)
	}
	followerLast.Store(42)
	hb()
	hb()
	if n := resumed.Load(); n != 0 {
		t.Fatalf("a catch-up for a follower holding every committed entry (%d)", n)
	}
	followerLast.Store(1) // the follower lost its log
	start := time.Now()
	testutil.Eventually(t, 5*time.Second, "the catch-up called", testutil.True(func() bool {
		hb()
		return resumed.Load() >= 1
	}))
	if d := time.Since(start); d < lagStuckAfter {
		t.Fatalf("a catch-up after %v, before the follower had been stuck for %v", d, lagStuckAfter)
	}
	if n := resumed.Load(); n != 1 {
		t.Fatalf("%d catch-ups for one stuck follower, want 1", n)
	}
	for range 3 {
		hb()
	}
	if n := resumed.Load(); n != 1 {
		t.Fatalf("%d catch-ups for one stuck follower within %v, want 1", n, lagKickEvery)
	}
	// A follower short of committed entries whose last index moves is
	// being caught up already: no catch-up, however long it lags.
	other := a.Wrap(9, newNT(t))
	defer other.Close()
	var moved atomic.Int64
	other.OnResume(func() { moved.Add(1) })
	tb9 := b.Wrap(9, newNT(t))
	defer tb9.Close()
	raftStub(t, tb9, &appends)
	var last9 atomic.Uint64
	tb9.SetHeartbeatHandler(func(rpc raft.RPC) {
		rpc.Respond(&raft.AppendEntriesResponse{Term: 4, LastLog: last9.Add(1), Success: true}, nil)
	})
	if err := other.AppendEntries("b", target, appendReq(4, 1000), &ar); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(lagStuckAfter + 200*time.Millisecond)
	for time.Now().Before(deadline) {
		req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("a"), Addr: []byte("a:1")}, Term: 4}
		var resp raft.AppendEntriesResponse
		if err := other.AppendEntries("b", target, req, &resp); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // heartbeats over time: the rule is about time
	}
	if n := moved.Load(); n != 0 {
		t.Fatalf("%d catch-ups for a follower whose last index moves", n)
	}
}

// A group every node has open (the meta group: WrapAlwaysOpen) that a
// peer refuses as not open there is an older binary's: its RPCs and
// heartbeats go the stock way, and the peer is not asked again for a
// while. Refused the way this binary says it (CodeNotOpen) or the way
// older ones did (the message alone).
func TestAlwaysOpenGroupFallsBackWhereRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		refuse error // nil: the peer's coalescer answers (the group is not registered there)
	}{
		{"heartbeat first, refused by the coalescer", nil},
		{"vote first, refused in an older binary's words", &peer.RemoteError{Message: "group 65535 is not open here"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLoop()
			a, b := New(l, Options{}), New(l, Options{})
			defer a.Close()
			defer b.Close()
			ntA, ntB := newNT(t), newNT(t)
			defer ntB.Close()
			target := ntB.LocalAddr()
			l.add(string(target), b) // b carries no group 0xFFFF
			if tc.refuse != nil {
				l.mu.Lock()
				l.fail[string(target)] = tc.refuse
				l.mu.Unlock()
			}
			ta := a.WrapAlwaysOpen(0xFFFF, ntA)
			defer ta.Close()
			var appends atomic.Int64
			raftStub(t, ntB, &appends) // the peer's group, on its stock transport

			if tc.refuse == nil {
				var hr raft.AppendEntriesResponse
				if err := ta.AppendEntries("b", target, heartbeat(3), &hr); err != nil || !hr.Success {
					t.Fatalf("heartbeat: %+v, %v", hr, err)
				}
				if appends.Load() != 1 {
					t.Fatalf("the peer's stock transport saw %d appends, want the heartbeat", appends.Load())
				}
			} else {
				var vr raft.RequestVoteResponse
				if err := ta.RequestVote("b", target, &raft.RequestVoteRequest{Term: 4}, &vr); err != nil || !vr.Granted {
					t.Fatalf("vote: %+v, %v", vr, err)
				}
			}
			if !ta.stockOnly(target) {
				t.Fatal("the refusing peer is not remembered")
			}
			if a.isOld(string(target)) {
				t.Fatal("the whole peer was marked old: its slot groups would leave the node connection too")
			}
			calls := l.count(string(target))
			var ar raft.AppendEntriesResponse
			if err := ta.AppendEntries("b", target, appendReq(4, 7), &ar); err != nil || !ar.Success {
				t.Fatalf("append: %+v, %v", ar, err)
			}
			var hr raft.AppendEntriesResponse
			if err := ta.AppendEntries("b", target, heartbeat(4), &hr); err != nil || !hr.Success {
				t.Fatalf("heartbeat: %+v, %v", hr, err)
			}
			if l.count(string(target)) != calls {
				t.Fatal("the refusing peer was asked again on the node connection")
			}
		})
	}
}

// peerGate is a WaitReachable for the tests of held RPCs: it blocks until
// open (the peer answers again) or its context ends, and answers at once
// while always is set (a peer the liveness check has not found dead).
type peerGate struct {
	mu     sync.Mutex
	back   chan struct{}
	always bool
	waits  atomic.Int64
}

func newPeerGate() *peerGate { return &peerGate{back: make(chan struct{})} }

func (g *peerGate) wait(ctx context.Context, _ string) bool {
	g.waits.Add(1)
	g.mu.Lock()
	ch, always := g.back, g.always
	g.mu.Unlock()
	if always {
		return true
	}
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// open lets the held RPCs go; the next ones wait again.
func (g *peerGate) open() {
	g.mu.Lock()
	close(g.back)
	g.back = make(chan struct{})
	g.mu.Unlock()
}

func (g *peerGate) setAlways(v bool) {
	g.mu.Lock()
	g.always = v
	g.mu.Unlock()
}

// setFail makes every call to the peer fail with err (nil: succeed).
func (c carried) setFail(err error) {
	c.l.mu.Lock()
	c.l.fail[string(c.target)] = err
	c.l.mu.Unlock()
}

// A vote or pre-vote request lost because its peer was unreachable (its
// connection dropped when the liveness check found the peer dead) is sent
// again once the peer answers again: raft would ask that voter only after
// its election timeout, seconds later. Other errors are not resent, a
// peer that stays away fails the vote after FailHold, and a peer the
// liveness check does not find dead is asked at most every voteResendGap
// for voteResendFor.
func TestVoteLostToAnUnreachablePeerIsSentAgain(t *testing.T) {
	gate := newPeerGate()
	c := newCarried(t, Options{FailHold: 300 * time.Millisecond, WaitReachable: gate.wait})
	l, a, ta, target, setFail := c.l, c.a, c.ta, c.target, c.setFail
	dropped := fmt.Errorf("%w: %w", peer.ErrUnreachable, peer.ErrDropped)

	// The peer comes back: the vote and the pre-vote go through.
	for _, pre := range []bool{false, true} {
		setFail(dropped)
		w := gate.waits.Load()
		done := make(chan bool, 1)
		go func() {
			if pre {
				var r raft.RequestPreVoteResponse
				err := ta.RequestPreVote("b", target, &raft.RequestPreVoteRequest{Term: 5}, &r)
				done <- err == nil && r.Granted && r.Term == 5
				return
			}
			var r raft.RequestVoteResponse
			err := ta.RequestVote("b", target, &raft.RequestVoteRequest{Term: 4}, &r)
			done <- err == nil && r.Granted && r.Term == 4
		}()
		testutil.Eventually(t, 5*time.Second, "the vote held", testutil.True(func() bool { return gate.waits.Load() > w }))
		setFail(nil)
		gate.open()
		if !<-done {
			t.Fatalf("pre-vote %t: not granted once the peer was back", pre)
		}
	}
	if st := a.Stats(); st.VotesResent != 2 {
		t.Fatalf("stats: %+v, want 2 votes resent", st)
	}

	// The peer stays away: the failure comes back after FailHold.
	setFail(dropped)
	var vr raft.RequestVoteResponse
	start := time.Now()
	if err := ta.RequestVote("b", target, &raft.RequestVoteRequest{Term: 6}, &vr); !errors.Is(err, peer.ErrUnreachable) {
		t.Fatalf("vote to an unreachable peer: %v", err)
	}
	if took := time.Since(start); took < 250*time.Millisecond || took > 2*time.Second {
		t.Fatalf("the failure came back after %v, want it held for FailHold", took)
	}

	// Another error is not resent.
	setFail(errors.New("something else"))
	calls := l.count(string(target))
	if err := ta.RequestVote("b", target, &raft.RequestVoteRequest{Term: 6}, &vr); err == nil || l.count(string(target)) != calls+1 {
		t.Fatalf("another error: %v after %d calls", err, l.count(string(target))-calls)
	}

	// A peer not found dead (a refused dial fails at once): asked again
	// at most every voteResendGap, for voteResendFor.
	gate.setAlways(true)
	setFail(dropped)
	calls = l.count(string(target))
	start = time.Now()
	if err := ta.RequestVote("b", target, &raft.RequestVoteRequest{Term: 6}, &vr); !errors.Is(err, peer.ErrUnreachable) {
		t.Fatalf("vote to a peer that keeps refusing: %v", err)
	}
	took, n := time.Since(start), l.count(string(target))-calls
	if took < voteResendFor || took > voteResendFor+time.Second || n < 2 || n > int(voteResendFor/voteResendGap)+1 {
		t.Fatalf("a peer that keeps refusing: %d calls in %v", n, took)
	}
}

// An append that failed because its peer is unreachable is held: until
// the peer answers again (then it is sent once more, and succeeds), at
// most FailHold, or until Urgent. raft would otherwise count a failure
// per try and back off its replication to that follower for up to 10 s.
func TestFailedAppendHeldUntilThePeerIsBack(t *testing.T) {
	gate := newPeerGate()
	c := newCarried(t, Options{FailHold: 300 * time.Millisecond, WaitReachable: gate.wait})
	a, ta, target, setFail := c.a, c.ta, c.target, c.setFail

	// The peer stays away: the failure comes back after FailHold.
	setFail(fmt.Errorf("%w: %w", peer.ErrUnreachable, peer.ErrDropped))
	var ar raft.AppendEntriesResponse
	start := time.Now()
	if err := ta.AppendEntries("b", target, appendReq(4, 7), &ar); !errors.Is(err, peer.ErrUnreachable) {
		t.Fatalf("append to an unreachable peer: %v", err)
	}
	if took := time.Since(start); took < 250*time.Millisecond {
		t.Fatalf("the failure came back after %v, want it held for FailHold", took)
	}

	// Another error is not held.
	setFail(errors.New("something else"))
	start = time.Now()
	if err := ta.AppendEntries("b", target, appendReq(4, 7), &ar); err == nil || time.Since(start) > 100*time.Millisecond {
		t.Fatalf("another error: %v after %v", err, time.Since(start))
	}

	// The peer comes back while the append is held: it goes through.
	setFail(peer.ErrUnreachable)
	done := make(chan error, 1)
	go func() { done <- ta.AppendEntries("b", target, appendReq(4, 8), &ar) }()
	testutil.Eventually(t, 5*time.Second, "the append held", testutil.True(func() bool { return gate.waits.Load() >= 2 }))
	setFail(nil)
	gate.open()
	if err := <-done; err != nil || !ar.Success || ar.LastLog != 8 {
		t.Fatalf("append once the peer is back: %+v %v", ar, err)
	}

	// Urgent (raftgroup, before raft's Shutdown) ends a hold at once.
	a.opts.FailHold = time.Hour
	setFail(peer.ErrUnreachable)
	go func() { done <- ta.AppendEntries("b", target, appendReq(4, 9), &ar) }()
	testutil.Eventually(t, 5*time.Second, "the append held", testutil.True(func() bool { return gate.waits.Load() >= 3 }))
	ta.Urgent(time.Millisecond)
	select {
	case err := <-done:
		if !errors.Is(err, peer.ErrUnreachable) {
			t.Fatalf("after Urgent: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Urgent did not end the hold")
	}
}
