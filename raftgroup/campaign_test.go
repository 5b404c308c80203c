package raftgroup

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/timemachine-db/timemachine/internal/testutil"
)

// injectTransport is a NetworkTransport whose consumer can be handed RPCs
// locally, as rpc/beat's Transport can (Campaign needs it).
type injectTransport struct {
	*raft.NetworkTransport
	ch   chan raft.RPC
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup
	// deaf: the replica hears nothing more through the consumer (each RPC
	// fails); confirm_test.go's deafTransport stops its heartbeats too.
	deaf atomic.Bool
}

func newInjectTransport(nt *raft.NetworkTransport) *injectTransport {
	t := &injectTransport{NetworkTransport: nt, ch: make(chan raft.RPC), stop: make(chan struct{})}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		for {
			select {
			case rpc := <-nt.Consumer():
				if t.deaf.Load() {
					rpc.Respond(nil, errors.New("deaf"))
					continue
				}
				select {
				case t.ch <- rpc:
				case <-t.stop:
					return
				}
			case <-t.stop:
				return
			}
		}
	}()
	return t
}

func (t *injectTransport) Consumer() <-chan raft.RPC { return t.ch }

func (t *injectTransport) Inject(rpc raft.RPC) error {
	select {
	case t.ch <- rpc:
		return nil
	case <-t.stop:
		return errors.New("closed")
	}
}

func (t *injectTransport) Close() error {
	t.once.Do(func() { close(t.stop) })
	t.wg.Wait()
	return t.NetworkTransport.Close()
}

// replicaPlaces gives n replicas a data directory each and a free
// loopback address each.
func replicaPlaces(t *testing.T, n int) (dirs, addrs []string) {
	t.Helper()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, ln.Addr().String())
		// Held until the replica first listens there (listenAt): closed
		// now, another test's listener could take the port meanwhile (seen
		// in make test: "bind: address already in use").
		heldMu.Lock()
		held[ln.Addr().String()] = ln
		heldMu.Unlock()
		t.Cleanup(func() {
			heldMu.Lock()
			if l, ok := held[ln.Addr().String()]; ok && l == ln {
				delete(held, ln.Addr().String())
				ln.Close()
			}
			heldMu.Unlock()
		})
		dirs = append(dirs, filepath.Join(t.TempDir(), "g"))
	}
	return dirs, addrs
}

var (
	heldMu sync.Mutex
	held   = map[string]net.Listener{} // replicaPlaces' listeners not yet used
)

// listenAt listens on addr: the listener replicaPlaces holds for it the
// first time, a new one when a replica opens there again.
func listenAt(addr string) (net.Listener, error) {
	heldMu.Lock()
	ln, ok := held[addr]
	delete(held, addr)
	heldMu.Unlock()
	if ok {
		return ln, nil
	}
	return net.Listen("tcp", addr)
}

// openTrio starts a three-voter group on loopback with the slots' long
// timeouts and transports that can inject (the first campaign is a
// TimeoutNow too, Bootstrap), and waits for a leader all three follow.
func openTrio(t *testing.T, timing Timing) []*Group {
	t.Helper()
	dirs, addrs := replicaPlaces(t, 3)
	return openTrioAt(t, timing, dirs, addrs, true)
}

// openTrioAt opens the three replicas in dirs on addrs (bootstrapping
// them when bootstrap is set) and waits, well under the 5 s heartbeat
// timeout, for a leader all three follow.
func openTrioAt(t *testing.T, timing Timing, dirs, addrs []string, bootstrap bool) []*Group {
	t.Helper()
	gs, servers := openReplicas(t, Config{Name: "slot-0", Timing: timing}, dirs, addrs)
	if bootstrap {
		for _, g := range gs {
			if err := g.Bootstrap(servers); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The first election: a TimeoutNow after a bootstrap, the hurried
	// one after a restart (raft on its own: 5-10 s).
	awaitOneLeader(t, gs, 3*time.Second)
	return gs
}

// openReplicas opens one replica per dir, n1, n2, … on addrs, configured
// as base (name, timing, options) with transports that can inject (unless
// base names its own WrapTransport), and
// returns them with the configuration that lists them.
func openReplicas(t *testing.T, base Config, dirs, addrs []string) ([]*Group, []raft.Server) {
	t.Helper()
	var gs []*Group
	var servers []raft.Server
	for i := range dirs {
		ln, err := listenAt(addrs[i])
		if err != nil {
			t.Fatal(err)
		}
		id := "n" + string(rune('1'+i))
		cfg := base
		cfg.NodeID, cfg.Dir, cfg.Stream, cfg.FSM = id, dirs[i], tcpStream{ln}, nopFSM{}
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		if cfg.WrapTransport == nil {
			cfg.WrapTransport = func(nt *raft.NetworkTransport) raft.Transport { return newInjectTransport(nt) }
		}
		g, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		if !g.CanCampaign() {
			t.Fatal("a transport that can inject, but CanCampaign is false")
		}
		gs = append(gs, g)
		servers = append(servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(addrs[i])})
	}
	return gs, servers
}

// splitLeader returns the replica of gs that leads and the others.
func splitLeader(gs []*Group) (leader *Group, followers []*Group) {
	for _, g := range gs {
		if g.IsLeader() {
			leader = g
		} else {
			followers = append(followers, g)
		}
	}
	return leader, followers
}

// awaitFollowersHoldLeadersLog waits until both followers' logs end where
// the leader's does, in index and term, after the leader committed an
// entry of its own term (ReadReady: its barrier finished). Comparing
// indexes alone passed at once when the leader had not appended its first
// entry yet: the followers then still ended at the bootstrap entry, one of
// them got the leader's entry a moment later, and it refused a vote to the
// other (raft's up-to-date rule) — a campaign that failed 1 run in 30.
func awaitFollowersHoldLeadersLog(t *testing.T, leader *Group, followers []*Group) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, "both followers hold the leader's log", testutil.True(func() bool {
		if !leader.ReadReady() {
			return false
		}
		idx, term := leader.LastLog()
		for _, f := range followers {
			if i, tm := f.LastLog(); i != idx || tm != term {
				return false
			}
		}
		return term != 0
	}))
}

// awaitOneLeader waits up to timeout for a leader every replica follows.
func awaitOneLeader(t *testing.T, gs []*Group, timeout time.Duration) {
	t.Helper()
	testutil.Eventually(t, timeout, "a leader followed by all", testutil.True(func() bool {
		l, _ := gs[0].Leader()
		for _, g := range gs[1:] {
			if id, _ := g.Leader(); id != l {
				return false
			}
		}
		return l != ""
	}))
}

var slowTiming = Timing{HeartbeatTimeout: 5 * time.Second, ElectionTimeout: 5 * time.Second, LeaderLeaseTimeout: 2500 * time.Millisecond}

// With 5 s heartbeat timeouts a follower on its own would wait 5–10 s
// before an election; Campaign makes a follower of a dead leader lead at
// once, the other follower granting the vote although it still names the
// dead leader (it has not noticed anything: its timeout is far off).
func TestCampaignElectsAtOnce(t *testing.T) {
	gs := openTrio(t, slowTiming)
	leader, followers := splitLeader(gs)
	// The campaigner's log must be as up to date as the other follower's,
	// or that one refuses its vote (raft's rule; the node picks the most
	// up-to-date follower, hurryorder.go): on a loaded machine the
	// leader's first entries could have reached only one of them yet.
	awaitFollowersHoldLeadersLog(t, leader, followers)
	dead := leader.cfg.NodeID
	leader.Close()
	start := time.Now()
	if !followers[0].Campaign(dead) {
		t.Fatal("Campaign did not start an election")
	}
	testutil.Eventually(t, 2*time.Second, "the campaigning follower leads", testutil.True(followers[0].IsLeader))
	if took := time.Since(start); took > time.Second {
		t.Fatalf("elected after %v, want within a second", took)
	}
	testutil.Eventually(t, 2*time.Second, "the other follower follows it", testutil.True(func() bool {
		id, _ := followers[1].Leader()
		return id == followers[0].cfg.NodeID
	}))
}

// Campaign is a no-op unless the replica follows the leader named: a
// follower of another leader, or the leader itself, stays as it is.
func TestCampaignOnlyPastTheNamedLeader(t *testing.T) {
	gs := openTrio(t, slowTiming)
	for _, g := range gs {
		if g.IsLeader() {
			if g.Campaign(g.cfg.NodeID) {
				t.Fatal("the leader campaigned against itself")
			}
			continue
		}
		if g.Campaign("someone-else") {
			t.Fatal("a follower campaigned past a leader it does not follow")
		}
	}
}

// When every replica of a group restarts, none knows a leader; with the
// slots' long timeouts raft on its own would elect only after 5-10 s. The
// reopened replicas hurry their first election (electAfterRestart), and
// the group has a leader within openTrioAt's 3 s.
func TestRestartedGroupElectsSoon(t *testing.T) {
	dirs, addrs := replicaPlaces(t, 3)
	gs := openTrioAt(t, slowTiming, dirs, addrs, true)
	for _, g := range gs {
		g.Close()
	}
	openTrioAt(t, slowTiming, dirs, addrs, false)
}

// A group whose only voter is this replica (a single-node cluster, or
// replication factor 1) has nobody to wait for: with the slots' 5 s
// timeouts raft on its own would make it leader only after 5-10 s, at
// bootstrap and again after every restart, and every job due meanwhile
// would be that late. It campaigns at once both times (within
// openTrioAt's 3 s).
func TestSoleVoterElectsAtOnce(t *testing.T) {
	dirs, addrs := replicaPlaces(t, 1)
	start := time.Now()
	gs := openTrioAt(t, slowTiming, dirs, addrs, true)
	t.Logf("bootstrapped sole voter led after %v", time.Since(start))
	gs[0].Close()
	start = time.Now()
	openTrioAt(t, slowTiming, dirs, addrs, false)
	t.Logf("reopened sole voter led after %v", time.Since(start))
}

// The meta group's first voter may never bootstrap (it found its peers'
// state a moment after they formed the group, and waits to be added):
// nobody then campaigns at once, and raft alone elects after the 5-10 s
// heartbeat timeout. With BootstrapFallback the next voter campaigns once
// that long has passed without a leader.
func TestBootstrapFallbackElectsWithoutTheFirstVoter(t *testing.T) {
	dirs, addrs := replicaPlaces(t, 3)
	gs, servers := openReplicas(t, Config{Name: "meta", Timing: slowTiming, BootstrapFallback: 300 * time.Millisecond}, dirs, addrs)
	start := time.Now()
	for _, g := range gs[1:] { // n1, listed first, does not bootstrap
		if err := g.Bootstrap(servers); err != nil {
			t.Fatal(err)
		}
	}
	// Within 4 s: raft alone would elect after 5-10 s (slowTiming).
	awaitOneLeader(t, gs, 4*time.Second)
	t.Logf("elected after %v", time.Since(start).Round(time.Millisecond))
}

// A nonvoter never campaigns: raft would still make it a candidate on a
// TimeoutNow, and its raised term would depose the leader the next time
// the leader replicates to it (a 5-node nemesis run: the meta group, whose
// leader a node outside its three voters deposed this way, went 9.5 s
// without a leader).
func TestNonvoterDoesNotCampaign(t *testing.T) {
	dirs, addrs := replicaPlaces(t, 4)
	gs, servers := openReplicas(t, Config{Name: "slot-0", Timing: slowTiming}, dirs, addrs)
	servers[3].Suffrage = raft.Nonvoter
	for _, g := range gs[:3] { // a nonvoter may not bootstrap; it hears the leader
		if err := g.Bootstrap(servers); err != nil {
			t.Fatal(err)
		}
	}
	awaitOneLeader(t, gs, 3*time.Second)
	leader, _ := splitLeader(gs)
	nonvoter := gs[3]
	term := leader.raft.CurrentTerm()
	if nonvoter.Campaign(leader.cfg.NodeID) {
		t.Fatal("a nonvoter campaigned")
	}
	// The leader replicates to it once more: a raised term would show in
	// its answer and depose the leader.
	if err := leader.Barrier(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "the nonvoter holds the leader's log", testutil.True(func() bool {
		return nonvoter.LastIndex() == leader.LastIndex()
	}))
	if !leader.IsLeader() || leader.raft.CurrentTerm() != term || nonvoter.raft.CurrentTerm() != term {
		t.Fatalf("leader %t, term %d → %d, the nonvoter's %d", leader.IsLeader(), term, leader.raft.CurrentTerm(), nonvoter.raft.CurrentTerm())
	}
}

// A follower whose own campaign was just refused (a pre-vote: the others
// follow a leader; a replica reopened moments before does this,
// electAfterRestart) is picked to replace the leader, which dies: its
// Campaign elects it at once. Its raft was still in the candidate loop,
// waiting out the refused campaign's election timer, when the leader's
// heartbeats made it a follower again (raft's fast path, which that loop
// does not see); a TimeoutNow alone left it waiting for that timer, and
// the failover took that long (wakeMainLoop; node's
// TestFailoverWithinTwoSeconds took 2-5 s in about one run in two).
func TestCampaignRightAfterARefusedPreVote(t *testing.T) {
	timing := Timing{HeartbeatTimeout: 5 * time.Second, ElectionTimeout: 5 * time.Second, LeaderLeaseTimeout: time.Second}
	gs, trans := openDeafTrio(t, timing)
	leader, followers := splitLeader(gs)
	f, tr := followers[0], trans[followers[0].cfg.NodeID]
	awaitFollowersHoldLeadersLog(t, leader, followers)
	// The follower hears nothing (its leader sees its heartbeats answered,
	// so it appends nothing to catch it up afterwards) and campaigns after
	// 1 s; its refused campaign's election timer runs 4-8 s.
	tr.fakeBeats.Store(true)
	tr.deaf.Store(true)
	if err := f.setTimeouts(time.Second, 4*time.Second); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "the follower campaigns", testutil.True(func() bool {
		return f.raft.State() == raft.Candidate
	}))
	// Then it hears the leader's heartbeats again, and only those: an
	// idle group's leader sends nothing else.
	tr.hearBeats.Store(true)
	testutil.Eventually(t, 5*time.Second, "the follower follows the leader again", testutil.True(func() bool {
		l, _ := f.Leader()
		return l == leader.cfg.NodeID && f.raft.State() == raft.Follower
	}))
	if f.LastIndex() != leader.LastIndex() {
		t.Fatalf("the follower's log ends at %d, the leader's at %d: the other follower would refuse its vote", f.LastIndex(), leader.LastIndex())
	}

	dead := leader.cfg.NodeID
	leader.Close()
	start := time.Now()
	if !f.Campaign(dead) {
		t.Fatal("Campaign did not start an election")
	}
	testutil.Eventually(t, 10*time.Second, "the campaigning replica leads", testutil.True(f.IsLeader))
	if took := time.Since(start); took > time.Second {
		t.Fatalf("elected after %v, want within a second (the refused campaign's timer ran out instead)", took)
	}
}
