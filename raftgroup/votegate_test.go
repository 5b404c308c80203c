package raftgroup

import (
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/timemachine-db/timemachine/internal/testutil"
	"github.com/timemachine-db/timemachine/storage"
)

// gateNode is one node of the vote-floor scenario: its own shared raft log
// file, a data directory and an address, so its replica can be closed,
// deleted and re-created as a node does when a slot moves off and back.
type gateNode struct {
	id    string
	dir   string
	addr  string
	logDB *storage.RaftLogDB
	g     *Group
}

func (n *gateNode) open(t *testing.T) {
	t.Helper()
	ln, err := listenAt(n.addr)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Open(Config{Name: "slot-0", NodeID: n.id, Dir: n.dir, Stream: tcpStream{ln}, FSM: nopFSM{},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Timing: slowTiming, LogDB: n.logDB, Floors: n.logDB,
		WrapTransport: func(nt *raft.NetworkTransport) raft.Transport { return newInjectTransport(nt) }})
	if err != nil {
		t.Fatal(err)
	}
	n.g = g
}

func (n *gateNode) close() {
	if n.g != nil {
		n.g.Close()
		n.g = nil
	}
}

// destroy deletes the node's replica as a node does when the slot moves
// away: the log and stable state (recording the vote floor) and the
// snapshots.
func (n *gateNode) destroy(t *testing.T) {
	t.Helper()
	n.close()
	if err := n.logDB.DropGroup("slot-0", storage.VoteFloor{}); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(n.dir); err != nil {
		t.Fatal(err)
	}
}

// wipe loses the node's whole data: its shared raft log file (floors
// included) and the replica's directory, as when a disk is replaced and
// the node restarts under its old --node-id.
func (n *gateNode) wipe(t *testing.T) {
	t.Helper()
	n.close()
	if err := n.logDB.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(n.dir); err != nil {
		t.Fatal(err)
	}
	db, err := storage.OpenRaftLogDB(filepath.Join(t.TempDir(), "slots.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	n.logDB = db
}

// The nemesis's split brain, in small: n1 misses entries that n2 and n3
// commit; one of those two has its replica deleted and re-created empty
// (the slot moved off the node and back) and the other goes down; n1 comes
// back and campaigns with its old configuration {n1, n2, n3}. An empty raft
// grants any vote, so without the vote floor the re-created replica
// elected n1 — a leader without committed entries. With it, the replica
// refuses until it has caught up past what its deleted one had, and the
// group elects only once a replica with those entries is back.
func TestRecreatedReplicaDoesNotElectAStaleCandidate(t *testing.T) {
	staleCandidateScenario(t, (*gateNode).destroy)
}

// The same with the follower's whole data lost (wipe) rather than its
// replica deleted: nothing on the node remembers the old replica, so the
// new one, opened with nothing stored, learns its floor from the leaders.
// Without that, its empty raft elected n1 here too.
func TestWipedReplicaDoesNotElectAStaleCandidate(t *testing.T) {
	staleCandidateScenario(t, (*gateNode).wipe)
}

// staleCandidateScenario: loseData takes the follower's replica away
// (deleted, or its node's data lost) before it is opened again, empty.
func staleCandidateScenario(t *testing.T, loseData func(*gateNode, *testing.T)) {
	dirs, addrs := replicaPlaces(t, 3)
	nodes := make([]*gateNode, 3)
	for i := range nodes {
		db, err := storage.OpenRaftLogDB(filepath.Join(t.TempDir(), "slots.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		nodes[i] = &gateNode{id: "n" + string(rune('1'+i)), dir: dirs[i], addr: addrs[i], logDB: db}
		nodes[i].open(t)
		t.Cleanup(nodes[i].close)
	}
	servers := make([]raft.Server, 3)
	for i, n := range nodes {
		servers[i] = raft.Server{ID: raft.ServerID(n.id), Address: raft.ServerAddress(n.addr)}
	}
	for _, n := range nodes {
		if err := n.g.Bootstrap(servers); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 5*time.Second, "n1 leads", testutil.True(nodes[0].g.IsLeader))

	// n1 goes down; one of n2 and n3 (the one with the longer log, if
	// n1's last entry reached only one) takes over and commits entries
	// with the other.
	stale := nodes[0].g.LastIndex()
	nodes[0].close()
	var lead, follow *gateNode
	testutil.Eventually(t, 15*time.Second, "n2 or n3 leads", testutil.True(func() bool {
		for i, n := range nodes[1:] {
			if n.g.IsLeader() {
				lead, follow = n, nodes[2-i]
				return true
			}
		}
		nodes[1].g.Campaign("n1")
		nodes[2].g.Campaign("n1")
		return false
	}))
	for range 5 {
		if err := lead.g.raft.Apply([]byte("x"), 5*time.Second).Error(); err != nil {
			t.Fatal(err)
		}
	}
	committed := lead.g.LastIndex()

	// The follower's replica is deleted (or its data lost) and opened
	// again empty; the leader goes down.
	loseData(follow, t)
	follow.open(t)
	lead.close()

	// n1 comes back with its old log and campaigns, again and again.
	nodes[0].open(t)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		nodes[0].g.Campaign("")
		if nodes[0].g.IsLeader() {
			t.Fatalf("n1 was elected with a log ending at %d, without the entries committed up to %d", nodes[0].g.LastIndex(), committed)
		}
		time.Sleep(50 * time.Millisecond) // polling a negative: the campaign must keep failing
	}
	if stale >= committed {
		t.Fatalf("the scenario did not leave n1 behind (%d ≥ %d)", stale, committed)
	}

	// The leader comes back: the group elects a leader with every
	// committed entry, and the re-created replica catches up.
	lead.open(t)
	testutil.Eventually(t, 15*time.Second, "a leader holding every committed entry", testutil.True(func() bool {
		for _, n := range nodes {
			if n.g.IsLeader() && n.g.LastIndex() >= committed {
				return true
			}
		}
		return false
	}))
	testutil.Eventually(t, 10*time.Second, "the re-created replica caught up", testutil.True(func() bool {
		return follow.g.LastIndex() >= committed
	}))
}

// The gate's own decisions, on a replica whose stores hold a known log.
func TestVoteGateRefusesUntilCaughtUp(t *testing.T) {
	stores := gateStores(t)
	floor := storage.VoteFloor{Term: 7, LastTerm: 6, LastIndex: 40}
	inner := &chanTransport{ch: make(chan raft.RPC)}
	gate := newVoteGate(inner, floor, stores, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer gate.Close()

	vote := func(term uint64) (raft.RPCResponse, bool) {
		resp := make(chan raft.RPCResponse, 1)
		inner.ch <- raft.RPC{Command: &raft.RequestVoteRequest{Term: term, LastLogTerm: 9, LastLogIndex: 99}, RespChan: resp}
		select {
		case r := <-resp:
			return r, true // the gate answered
		case rpc := <-gate.Consumer():
			rpc.Respond(&raft.RequestVoteResponse{Term: term, Granted: true}, nil)
			return <-resp, false // raft got it
		}
	}
	// Not past the old replica's term: refused, with that term.
	if r, gated := vote(7); !gated || r.Response.(*raft.RequestVoteResponse).Term != 7 || r.Response.(*raft.RequestVoteResponse).Granted {
		t.Fatalf("vote in term 7 = %+v (gated %v), want refused with term 7", r.Response, gated)
	}
	// A later term, but the log is empty: refused.
	if _, gated := vote(8); !gated {
		t.Fatal("an empty replica passed a vote on")
	}
	// A pre-vote in term 0 (Campaign's wake-up of its own raft,
	// wakeMainLoop) reaches raft: no candidate has that term.
	inner.ch <- raft.RPC{Command: &raft.RequestPreVoteRequest{Term: 0}, RespChan: make(chan raft.RPCResponse, 1)}
	select {
	case rpc := <-gate.Consumer():
		if _, ok := rpc.Command.(*raft.RequestPreVoteRequest); !ok {
			t.Fatalf("raft got %T", rpc.Command)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the wake-up pre-vote did not reach raft")
	}
	// Appends reach raft untouched.
	inner.ch <- raft.RPC{Command: &raft.AppendEntriesRequest{Term: 8}}
	if rpc := <-gate.Consumer(); rpc.Command.(*raft.AppendEntriesRequest).Term != 8 {
		t.Fatal("an append was changed")
	}
	// The log catches up to (6, 40): from then on votes go to raft.
	var logs []*raft.Log
	for i := uint64(1); i <= 40; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 6, Type: raft.LogNoop})
	}
	if err := stores.Log.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if _, gated := vote(8); gated {
		t.Fatal("a caught-up replica still refused a vote in a later term")
	}
	// The term rule holds still.
	if _, gated := vote(6); !gated {
		t.Fatal("a vote in an old term passed")
	}
}

// gateStores opens an empty replica's stores in a shared raft log file of
// its own, closed when the test ends.
func gateStores(t *testing.T) *storage.RaftStores {
	t.Helper()
	db, stores := openSlotStores(t, t.TempDir())
	t.Cleanup(func() {
		stores.Close()
		db.Close()
	})
	return stores
}

// openSlotStores opens a shared raft log file in dir and group slot-0's
// stores in it (group directory dir/g); the caller closes both.
func openSlotStores(t *testing.T, dir string) (*storage.RaftLogDB, *storage.RaftStores) {
	t.Helper()
	db, err := storage.OpenRaftLogDB(filepath.Join(dir, "slots.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	stores, err := storage.OpenGroupStores(db, "slot-0", filepath.Join(dir, "g"), io.Discard)
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	return db, stores
}

// chanTransport is a raft.Transport whose consumer is a channel the test
// feeds; the rest is never called.
type chanTransport struct {
	raft.Transport
	ch chan raft.RPC
	hb func(raft.RPC)
}

func (c *chanTransport) Consumer() <-chan raft.RPC { return c.ch }

func (c *chanTransport) SetHeartbeatHandler(cb func(raft.RPC)) { c.hb = cb }

// A replica opened with nothing stored learns its floor from the leaders
// it hears, in appends and heartbeats, refuses votes until its log covers
// it (except, before any leader was heard, a candidate whose log holds no
// more than a bootstrap configuration: the group is being formed), and
// records each step so a restart goes on learning.
func TestVoteGateLearnsTheFloorFromLeaders(t *testing.T) {
	stores := gateStores(t)
	var saved []storage.VoteFloor
	save := func(f storage.VoteFloor) error { saved = append(saved, f); return nil }
	inner := &chanTransport{ch: make(chan raft.RPC)}
	gate := newVoteGate(inner, storage.VoteFloor{Learn: true}, stores, save, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer gate.Close()
	var heartbeats int
	gate.SetHeartbeatHandler(func(raft.RPC) { heartbeats++ })

	vote := func(term, lastTerm, lastIndex uint64) (raft.RPCResponse, bool) {
		resp := make(chan raft.RPCResponse, 1)
		inner.ch <- raft.RPC{Command: &raft.RequestPreVoteRequest{Term: term, LastLogTerm: lastTerm, LastLogIndex: lastIndex}, RespChan: resp}
		select {
		case r := <-resp:
			return r, true
		case rpc := <-gate.Consumer():
			rpc.Respond(&raft.RequestPreVoteResponse{Term: term, Granted: true}, nil)
			return <-resp, false
		}
	}
	// Nothing heard yet: a forming group's candidate passes, one with a
	// history does not.
	if _, gated := vote(2, 1, 1); gated {
		t.Fatal("the vote of a group being formed was refused")
	}
	if _, gated := vote(9, 8, 99); !gated {
		t.Fatal("an empty replica passed on a vote for a candidate with a history before hearing any leader")
	}
	// A leader of term 5 with commit index 30, in an append.
	inner.ch <- raft.RPC{Command: &raft.AppendEntriesRequest{Term: 5, LeaderCommitIndex: 30}}
	if rpc := <-gate.Consumer(); rpc.Command.(*raft.AppendEntriesRequest).Term != 5 {
		t.Fatal("an append was changed")
	}
	if len(saved) != 1 || saved[0] != (storage.VoteFloor{Term: 5, LastTerm: 5, LastIndex: 30, Learn: true}) {
		t.Fatalf("recorded after the first leader: %+v", saved)
	}
	// The next one, in a heartbeat, raises it.
	inner.hb(raft.RPC{Command: &raft.AppendEntriesRequest{Term: 5, LeaderCommitIndex: 35}})
	if heartbeats != 1 {
		t.Fatalf("raft's heartbeat handler ran %d times, want 1", heartbeats)
	}
	if _, gated := vote(2, 1, 1); !gated {
		t.Fatal("once a leader was heard, a bootstrap-only candidate still passed")
	}
	store := func(from, to, term uint64) {
		var logs []*raft.Log
		for i := from; i <= to; i++ {
			logs = append(logs, &raft.Log{Index: i, Term: term, Type: raft.LogNoop})
		}
		if err := stores.Log.StoreLogs(logs); err != nil {
			t.Fatal(err)
		}
	}
	store(1, 20, 4)
	store(21, 34, 5)
	// Short of the learnt floor (5, 35): a candidate whose log does not
	// cover it is refused, one whose log does may have the vote; a vote
	// in the leader's term is refused either way.
	if r, gated := vote(9, 5, 34); !gated || r.Response.(*raft.RequestPreVoteResponse).Term != 9 {
		t.Fatalf("a candidate behind the learnt floor: %+v (gated %v)", r.Response, gated)
	}
	if _, gated := vote(9, 4, 900); !gated {
		t.Fatal("a candidate of an older last term passed")
	}
	if _, gated := vote(5, 5, 40); !gated {
		t.Fatal("a vote in the learnt leader's term passed")
	}
	if _, gated := vote(9, 5, 35); gated {
		t.Fatal("a candidate covering the learnt floor was refused")
	}
	if len(saved) != 1 {
		t.Fatalf("recorded before the replica caught up: %+v", saved)
	}
	if !gate.gated() {
		t.Fatal("a learning replica short of its floor does not report itself gated")
	}
	store(35, 36, 5)
	if gate.gated() {
		t.Fatal("a replica caught up with its leader still reports itself gated")
	}
	// Caught up: the floor is learnt, and a vote in a later term goes to
	// raft, which compares the candidate's log with its own.
	if _, gated := vote(9, 5, 20); gated {
		t.Fatal("a caught-up replica did not leave the vote to raft")
	}
	want := storage.VoteFloor{Term: 5, LastTerm: 5, LastIndex: 35}
	if len(saved) != 2 || saved[1] != want {
		t.Fatalf("recorded once learnt: %+v, want %+v last", saved, want)
	}
	// The learnt floor's term rule stays; appends no longer change it.
	if _, gated := vote(5, 8, 99); !gated {
		t.Fatal("a vote in the learnt leader's term passed")
	}
	inner.hb(raft.RPC{Command: &raft.AppendEntriesRequest{Term: 7, LeaderCommitIndex: 90}})
	if _, gated := vote(6, 8, 99); gated || len(saved) != 2 {
		t.Fatalf("a learnt floor moved again (gated %v, recorded %+v)", gated, saved)
	}
}

// A snapshot from the leader is a floor too: its last entry.
func TestVoteGateLearnsFromASnapshot(t *testing.T) {
	stores := gateStores(t)
	inner := &chanTransport{ch: make(chan raft.RPC)}
	gate := newVoteGate(inner, storage.VoteFloor{Learn: true}, stores, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer gate.Close()
	inner.ch <- raft.RPC{Command: &raft.InstallSnapshotRequest{Term: 8, LastLogTerm: 7, LastLogIndex: 500}}
	<-gate.Consumer()
	gate.mu.Lock()
	got := gate.floor
	gate.mu.Unlock()
	if want := (storage.VoteFloor{Term: 8, LastTerm: 7, LastIndex: 500, Learn: true}); got != want {
		t.Fatalf("floor after a snapshot: %+v, want %+v", got, want)
	}
}

// A recorded floor that the replica's raft state has left behind — its
// log covers it and its current term is past the floor's, so raft refuses
// what the gate would — is dropped when the replica opens: no gate. One
// whose term is not past it still gets the gate.
func TestSpentFloorIsDropped(t *testing.T) {
	for _, c := range []struct {
		term uint64
		gate bool
	}{{term: 4, gate: false}, {term: 3, gate: true}} {
		dir := t.TempDir()
		db, stores := openSlotStores(t, dir)
		var logs []*raft.Log
		for i := uint64(1); i <= 5; i++ {
			logs = append(logs, &raft.Log{Index: i, Term: 3, Type: raft.LogNoop})
		}
		if err := stores.Log.StoreLogs(logs); err != nil {
			t.Fatal(err)
		}
		if err := stores.Stable.SetUint64(keyCurrentTerm, c.term); err != nil {
			t.Fatal(err)
		}
		stores.Close()
		floor := storage.VoteFloor{Term: 3, LastTerm: 3, LastIndex: 5}
		if err := db.SetVoteFloor("slot-0", floor); err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		g, err := Open(Config{Name: "slot-0", NodeID: "n1", Dir: filepath.Join(dir, "g"), Stream: tcpStream{ln}, FSM: nopFSM{},
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Timing: slowTiming, LogDB: db, Floors: db})
		if err != nil {
			t.Fatal(err)
		}
		kept, _ := db.VoteFloor("slot-0")
		g.Close()
		db.Close()
		if got := g.gate != nil; got != c.gate {
			t.Errorf("current term %d, floor %+v: gate %v, want %v", c.term, floor, got, c.gate)
		}
		if want := map[bool]storage.VoteFloor{true: floor, false: {}}[c.gate]; kept != want {
			t.Errorf("current term %d: recorded floor %+v, want %+v", c.term, kept, want)
		}
	}
}
