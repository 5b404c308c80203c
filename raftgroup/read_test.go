package raftgroup

import (
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/timemachine-db/timemachine/internal/testutil"
)

// nopFSM applies nothing.
type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) any                 { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, io.EOF }
func (nopFSM) Restore(io.ReadCloser) error         { return nil }

// tcpStream is a plain TCP raft.StreamLayer.
type tcpStream struct{ net.Listener }

func (s tcpStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(addr), timeout)
}

// ReadReady turns true only on the leader, once its barrier of the term
// finished (OnLeader starts after it); a follower is never ready.
func TestReadReadyAfterTheBarrier(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sawReady := make(chan bool, 1)
	var g *Group
	g, err = Open(Config{Name: "slot-0", NodeID: "n1", Dir: filepath.Join(t.TempDir(), "g"), Stream: tcpStream{ln}, FSM: nopFSM{},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Timing: Timing{HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond, LeaderLeaseTimeout: 50 * time.Millisecond},
		OnLeader: func(ctx context.Context) {
			sawReady <- g.ReadReady()
			<-ctx.Done()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.ReadReady() {
		t.Fatal("ready before any leadership")
	}
	if err := g.Bootstrap([]raft.Server{{ID: "n1", Address: raft.ServerAddress(ln.Addr().String())}}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "ready once leading", testutil.True(g.ReadReady))
	if !g.IsLeader() {
		t.Fatal("ready but not leader")
	}
	select {
	case ok := <-sawReady:
		if !ok {
			t.Fatal("OnLeader ran before the replica was ready for reads")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("OnLeader did not run")
	}
}

// openPair starts a two-voter group on loopback and returns it leader
// first.
func openPair(t *testing.T, timing Timing) (leader, follower *Group) {
	t.Helper()
	return openPairLogged(t, timing, io.Discard)
}

// openPairLogged is openPair with both replicas logging to w.
func openPairLogged(t *testing.T, timing Timing, w io.Writer) (leader, follower *Group) {
	t.Helper()
	var gs []*Group
	var servers []raft.Server
	for i := 1; i <= 2; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		id := "n" + string(rune('0'+i))
		g, err := Open(Config{Name: "slot-0", NodeID: id, Dir: filepath.Join(t.TempDir(), id), Stream: tcpStream{ln}, FSM: nopFSM{},
			Logger: slog.New(slog.NewTextHandler(w, nil)), Timing: timing})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		gs = append(gs, g)
		servers = append(servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(ln.Addr().String())})
	}
	for _, g := range gs {
		if err := g.Bootstrap(servers); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 10*time.Second, "a leader followed by the other", testutil.True(func() bool {
		return (gs[0].IsLeader() || gs[1].IsLeader()) && func() bool { id, _ := gs[0].Leader(); id2, _ := gs[1].Leader(); return id != "" && id == id2 }()
	}))
	if gs[0].IsLeader() {
		return gs[0], gs[1]
	}
	return gs[1], gs[0]
}

// A hurried follower whose presumed-dead leader answers again (it was
// paused, and resumed) goes back to the normal timeouts at once, instead
// of keeping half-second timeouts for up to hurryLimit under a leader that
// is back.
func TestHurryEndsWhenTheLeaderIsHeardAgain(t *testing.T) {
	timing := Timing{HeartbeatTimeout: time.Second, ElectionTimeout: time.Second, LeaderLeaseTimeout: 500 * time.Millisecond}
	leader, follower := openPair(t, timing)
	leaderID, _ := leader.Leader()
	var back atomic.Bool
	follower.Expedite(leaderID, 0, back.Load)
	follower.hurryMu.Lock()
	hurried := follower.hurried
	follower.hurryMu.Unlock()
	if hurried != leaderID {
		t.Fatalf("not hurried (%q)", hurried)
	}
	back.Store(true)
	testutil.Eventually(t, time.Second, "the hurry over", testutil.True(func() bool {
		follower.hurryMu.Lock()
		defer follower.hurryMu.Unlock()
		return follower.hurried == "" && follower.raft.ReloadableConfig().HeartbeatTimeout == timing.HeartbeatTimeout
	}))
	if id, _ := follower.Leader(); id != leaderID {
		t.Fatalf("the follower follows %q, not the leader that was back %q", id, leaderID)
	}
}

// countFSM counts the entries it applied.
type countFSM struct{ n atomic.Int64 }

func (f *countFSM) Apply(*raft.Log) any                 { f.n.Add(1); return nil }
func (f *countFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, io.EOF }
func (f *countFSM) Restore(io.ReadCloser) error         { return nil }

// After a restart a replica re-applies its log only once an entry of the
// new term commits: raft says it leads before its state holds the entries
// committed earlier. ReadReady waits for them (the meta group answered
// "collection does not exist" from such a state after every node
// restarted).
func TestReadReadyAfterARestartHoldsEveryCommittedEntry(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "g")
	timing := Timing{HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond, LeaderLeaseTimeout: 50 * time.Millisecond}
	open := func(fsm *countFSM) (*Group, raft.ServerAddress) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		g, err := Open(Config{Name: "meta", NodeID: "n1", Dir: dir, Stream: tcpStream{ln}, FSM: fsm,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Timing: timing})
		if err != nil {
			t.Fatal(err)
		}
		return g, raft.ServerAddress(ln.Addr().String())
	}
	first := &countFSM{}
	g, addr := open(first)
	if err := g.Bootstrap([]raft.Server{{ID: "n1", Address: addr}}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "leader", testutil.True(g.IsLeader))
	const entries = 20
	for i := 0; i < entries; i++ {
		if err := g.raft.Apply([]byte("x"), time.Second).Error(); err != nil {
			t.Fatal(err)
		}
	}
	g.Close()
	// The address changes with the restart: the configuration still
	// names the old one, which is fine for a single voter.
	again := &countFSM{}
	g, _ = open(again)
	defer g.Close()
	testutil.Eventually(t, 5*time.Second, "ready again", testutil.True(g.ReadReady))
	if n := again.n.Load(); n < entries {
		t.Fatalf("ready for reads with %d of the %d committed entries applied", n, entries)
	}
}
