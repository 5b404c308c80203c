package liveness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/internal/testutil"
	"github.com/timemachine-db/timemachine/rpc/peer"
)

// fakePeer is how one peer answers pings.
type fakePeer struct {
	offset  time.Duration // its clock minus true time
	paused  bool          // never answers
	gone    bool          // refuses at once
	dropped bool          // fails at once: this node dropped the connection
}

type fakeNet struct {
	mu    sync.Mutex
	peers map[string]*fakePeer // by address
}

func (n *fakeNet) Ping(ctx context.Context, addr string, _ int64) (int64, error) {
	n.mu.Lock()
	p := *n.peers[addr]
	n.mu.Unlock()
	switch {
	case p.gone:
		return 0, errors.New("connection refused")
	case p.dropped:
		return 0, fmt.Errorf("%w: %w", peer.ErrUnreachable, peer.ErrDropped)
	case p.paused:
		<-ctx.Done()
		return 0, ctx.Err()
	}
	return time.Now().Add(p.offset).UnixNano(), nil
}

// PingAsync is Ping on a goroutine of its own, as the tracker's Pinger.
func (n *fakeNet) PingAsync(addr string, wall int64, done func(int64, error)) func() {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		t2, err := n.Ping(ctx, addr, wall)
		if ctx.Err() == nil {
			done(t2, err)
		}
	}()
	return cancel
}

func (n *fakeNet) set(addr string, f func(p *fakePeer)) {
	n.mu.Lock()
	f(n.peers[addr])
	n.mu.Unlock()
}

// skewedClock is this node's clock: true time plus an offset that the
// test moves.
type skewedClock struct{ off atomic.Int64 }

func (c *skewedClock) now() time.Time { return time.Now().Add(time.Duration(c.off.Load())).Round(0) }

func start(t *testing.T, net *fakeNet, clock func() time.Time, changes *atomic.Int32) *Tracker {
	t.Helper()
	tr := New(Config{
		Self:     "n1",
		Peers:    func() map[string]string { return map[string]string{"n1": "a1", "n2": "a2", "n3": "a3"} },
		Pinger:   net,
		Clock:    clock,
		Interval: 10 * time.Millisecond,
		// Wide margins over the 10 ms interval: the race detector and a
		// busy host delay goroutines by tens of milliseconds.
		Lease:     testLease,
		DeadAfter: testDeadAfter,
		MaxOffset: 250 * time.Millisecond,
		OnChange:  func() { changes.Add(1) },
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); tr.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return tr
}

const (
	testLease     = 400 * time.Millisecond
	testDeadAfter = 600 * time.Millisecond
)

func newNet() *fakeNet {
	return &fakeNet{peers: map[string]*fakePeer{"a2": {}, "a3": {}}}
}

// The lease (fencing): held while a majority of the voters answers pings,
// lost once a majority has been silent for the lease, and back with fresh
// answers. A single voter always holds it.
func TestLease(t *testing.T) {
	net := newNet()
	var changes atomic.Int32
	tr := start(t, net, time.Now, &changes)
	voters := []string{"n1", "n2", "n3"}
	testutil.Eventually(t, 5*time.Second, "the lease", testutil.True(func() bool { return tr.LeaseHeld(voters) }))
	net.set("a2", func(p *fakePeer) { p.paused = true })
	testutil.Eventually(t, 5*time.Second, "n2 dead", testutil.True(func() bool { return tr.Dead("n2") }))
	if !tr.LeaseHeld(voters) {
		t.Fatal("one paused voter of three: the lease must hold")
	}
	if !tr.Dead("n2") || tr.Dead("n3") {
		t.Fatalf("dead: n2 %v n3 %v", tr.Dead("n2"), tr.Dead("n3"))
	}
	epoch := tr.LeaseEpoch(voters)
	net.set("a3", func(p *fakePeer) { p.paused = true })
	paused := time.Now()
	testutil.Eventually(t, 5*time.Second, "the lease to lapse", testutil.True(func() bool { return !tr.LeaseHeld(voters) }))
	if d := time.Since(paused); d > testLease+2*10*time.Millisecond+300*time.Millisecond {
		t.Errorf("the lease lapsed %v after the majority went silent (lease %v)", d, testLease)
	}
	if !tr.LeaseHeld([]string{"n1"}) {
		t.Fatal("a lone voter holds its own lease")
	}
	net.set("a2", func(p *fakePeer) { p.paused = false })
	testutil.Eventually(t, 5*time.Second, "the lease back", testutil.True(func() bool { return tr.LeaseHeld(voters) }))
	// Back after a lapse: a new epoch, so a leader confirms its
	// leadership with raft before it fires again (fresh ping answers do
	// not tell whether a successor was elected meanwhile).
	if tr.LeaseEpoch(voters) == epoch {
		t.Fatal("the lease came back after a lapse in the same epoch")
	}
	steady := tr.LeaseEpoch(voters)
	time.Sleep(3 * testLease)
	if tr.LeaseEpoch(voters) != steady {
		t.Fatal("the epoch changed while the answers kept coming")
	}
	// A refused connection is a dead peer at once, without waiting for
	// DeadAfter.
	net.set("a2", func(p *fakePeer) { p.gone = true })
	gone := time.Now()
	testutil.Eventually(t, 5*time.Second, "n2 dead", testutil.True(func() bool { return tr.Dead("n2") }))
	if d := time.Since(gone); d >= testDeadAfter {
		t.Errorf("a refusing peer was declared dead after %v, not at once", d)
	}
	if changes.Load() == 0 {
		t.Error("OnChange never called")
	}
}

// A ping failing because this node dropped the connection itself (on an
// earlier verdict) is no evidence against the peer: only DeadAfter of such
// silence makes it dead, never the failure at once.
func TestOwnDropIsNotAFastFailure(t *testing.T) {
	net := newNet()
	var changes atomic.Int32
	tr := start(t, net, time.Now, &changes)
	testutil.Eventually(t, 5*time.Second, "the lease", testutil.True(func() bool { return tr.LeaseHeld([]string{"n1", "n2", "n3"}) }))
	net.set("a2", func(p *fakePeer) { p.dropped = true })
	dropped := time.Now()
	testutil.Eventually(t, 5*time.Second, "n2 dead after DeadAfter", testutil.True(func() bool { return tr.Dead("n2") }))
	if d := time.Since(dropped); d < testDeadAfter {
		t.Errorf("dropped connections made n2 dead after %v, before DeadAfter (%v)", d, testDeadAfter)
	}
	net.set("a2", func(p *fakePeer) { p.dropped = false })
	testutil.Eventually(t, 5*time.Second, "n2 back", testutil.True(func() bool { return !tr.Dead("n2") }))
}

// Clock offsets: a node whose clock runs 2 s ahead of the two others sees
// it (the majority's median), is out of bounds and waits its offset out
// before firing; the others are within bounds. A step of the clock voids
// the measurement at once, before the next round.
func TestClockOffsets(t *testing.T) {
	net := newNet()
	var clock skewedClock
	clock.off.Store(int64(2 * time.Second))
	var changes atomic.Int32
	tr := start(t, net, clock.now, &changes)
	testutil.Eventually(t, 5*time.Second, "the offset measured", func() error {
		skew, unc, ok := tr.Offset()
		if !ok || skew < 1990*time.Millisecond || skew > 2010*time.Millisecond {
			return fmt.Errorf("offset %v ± %v (known %v)", skew, unc, ok)
		}
		return nil
	})
	testutil.Eventually(t, time.Second, "the offset judged out of bounds", testutil.True(func() bool {
		ex, _ := tr.Exceeded()
		return ex && !tr.ClockOK()
	}))
	local := clock.now()
	if fn := tr.FireNow(local); local.Sub(fn) < 1990*time.Millisecond {
		t.Fatalf("FireNow is only %v behind the local clock", local.Sub(fn))
	}
	// The clock comes back: within bounds again.
	clock.off.Store(0)
	if tr.ClockOK() {
		t.Fatal("right after a step the clock must not count as OK")
	}
	testutil.Eventually(t, 5*time.Second, "the clock OK again", testutil.True(tr.ClockOK))
	// One peer off by 2 s does not move the majority.
	net.set("a3", func(p *fakePeer) { p.offset = 2 * time.Second })
	time.Sleep(100 * time.Millisecond)
	if skew, _, _ := tr.Offset(); abs(skew) > 20*time.Millisecond || !tr.ClockOK() {
		t.Fatalf("one skewed peer moved this node's offset to %v", skew)
	}
}

// A stall of this node's own rounds (it was not scheduled) is no evidence
// against a silent peer: its silence counts from the end of the stall.
func TestOwnStallIsNotThePeersSilence(t *testing.T) {
	net := newNet()
	net.set("a2", func(p *fakePeer) { p.paused = true })
	tr := New(Config{
		Self:     "n1",
		Peers:    func() map[string]string { return map[string]string{"n1": "a1", "n2": "a2", "n3": "a3"} },
		Pinger:   net,
		Interval: 10 * time.Millisecond, DeadAfter: 200 * time.Millisecond,
		OnChange: func() {},
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr.round(ctx)
	time.Sleep(300 * time.Millisecond) // this node stalls: no rounds
	resumed := time.Now()
	tr.round(ctx)
	if tr.Dead("n2") {
		t.Fatal("n2 declared dead right after this node's own stall")
	}
	for !tr.Dead("n2") {
		if time.Since(resumed) > 5*time.Second {
			t.Fatal("n2 never declared dead")
		}
		time.Sleep(10 * time.Millisecond)
		tr.round(ctx)
	}
	if d := time.Since(resumed); d < 200*time.Millisecond {
		t.Fatalf("n2 dead %v after the stall ended, before DeadAfter", d)
	}
}

// A step of the wall clock is reported once (OnStep), so that what sleeps
// on the monotonic clock until a wall-clock time looks again; steady time
// reports nothing.
func TestClockStepReported(t *testing.T) {
	var clock skewedClock
	var steps, rounds atomic.Int32
	tr := New(Config{
		Self: "n1",
		Peers: func() map[string]string {
			rounds.Add(1)
			return map[string]string{"n1": "a1", "n2": "a2", "n3": "a3"}
		},
		Pinger: newNet(), Clock: clock.now, Interval: 10 * time.Millisecond,
		Lease: testLease, DeadAfter: testDeadAfter,
		OnStep: func() { steps.Add(1) },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); tr.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitRounds := func(n int32) {
		t.Helper()
		from := rounds.Load()
		testutil.Eventually(t, 5*time.Second, fmt.Sprintf("%d rounds", n), testutil.True(func() bool { return rounds.Load()-from >= n }))
	}
	waitRounds(5)
	if n := steps.Load(); n != 0 {
		t.Fatalf("%d steps reported with a steady clock", n)
	}
	clock.off.Store(int64(time.Hour))
	testutil.Eventually(t, 5*time.Second, "the step reported", testutil.True(func() bool { return steps.Load() > 0 }))
	waitRounds(5)
	if n := steps.Load(); n != 1 {
		t.Fatalf("one step reported %d times", n)
	}
}

// ConnLost pings the peer at once: one that died (refuses) is found dead
// long before the next round; one that is fine answers and stays alive.
func TestConnLostPingsAtOnce(t *testing.T) {
	net := newNet()
	var changes atomic.Int32
	tr := New(Config{
		Self:     "n1",
		Peers:    func() map[string]string { return map[string]string{"n1": "a1", "n2": "a2", "n3": "a3"} },
		Pinger:   net,
		Interval: time.Hour, // only the first round, at start
		Lease:    testLease, DeadAfter: time.Hour,
		OnChange: func() { changes.Add(1) },
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); tr.Run(ctx) }()
	defer func() { cancel(); <-done }()
	testutil.Eventually(t, 5*time.Second, "the first round answered", testutil.True(func() bool { return tr.LeaseHeld([]string{"n1", "n2", "n3"}) && len(tr.PeerOffsets()) == 2 }))
	net.set("a2", func(p *fakePeer) { p.gone = true })
	tr.ConnLost("a2")
	tr.ConnLost("a3")
	testutil.Eventually(t, 5*time.Second, "n2 found dead", testutil.True(func() bool { return tr.Dead("n2") }))
	if tr.Dead("n3") {
		t.Fatal("n3, whose connection broke but which answers, was found dead")
	}
}

// Silent: how long a peer has not answered, growing while it is silent
// (refused or paused alike) and back near zero once it answers; 0 for a
// peer not watched.
func TestSilent(t *testing.T) {
	net := newNet()
	var changes atomic.Int32
	tr := start(t, net, time.Now, &changes)
	testutil.Eventually(t, 5*time.Second, "n2 answering", testutil.True(func() bool { return tr.Silent("n2") > 0 && tr.Silent("n2") < testLease }))
	if d := tr.Silent("nobody"); d != 0 {
		t.Fatalf("Silent of a peer not watched: %v", d)
	}
	net.set("a2", func(p *fakePeer) { p.gone = true })
	cut := time.Now()
	testutil.Eventually(t, 5*time.Second, "n2 silent past DeadAfter", testutil.True(func() bool { return tr.Silent("n2") > testDeadAfter }))
	if d, since := tr.Silent("n2"), time.Since(cut); d > since+testLease {
		t.Fatalf("Silent %v, but the peer went away %v ago", d, since)
	}
	net.set("a2", func(p *fakePeer) { p.gone = false })
	testutil.Eventually(t, 5*time.Second, "n2 answering again", testutil.True(func() bool { return tr.Silent("n2") < testLease }))
}

// An offset beyond the bound is called unmeasurable when its uncertainty
// reaches back within the bound (late pings), and a clock that is off only
// when it is off even at the uncertainty's best.
func TestUnmeasurable(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		skew, unc time.Duration
		want      bool
	}{
		{837 * ms, 1626 * ms, true}, // the review's starved node, one machine's clock
		{-891 * ms, 916 * ms, true},
		{2 * time.Second, 5 * ms, false}, // a clock 2 s off, measured well
		{-2 * time.Second, 5 * ms, false},
		{300 * ms, 49 * ms, false}, // off by at least 251 ms
		{300 * ms, 50 * ms, true},  // may be exactly at the bound
	} {
		if got := unmeasurable(c.skew, c.unc, 250*ms); got != c.want {
			t.Errorf("unmeasurable(%v ± %v) = %v, want %v", c.skew, c.unc, got, c.want)
		}
	}
}
