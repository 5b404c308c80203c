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
	floor, err := n.logDB.VoteFloor("slot-0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", n.addr)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Open(Config{Name: "slot-0", NodeID: n.id, Dir: n.dir, Stream: tcpStream{ln}, FSM: nopFSM{},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Timing: slowTiming, LogDB: n.logDB, VoteFloor: floor,
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

// The nemesis's split brain, in small: n1 misses entries that n2 and n3
// commit; one of those two has its replica deleted and re-created empty
// (the slot moved off the node and back) and the other goes down; n1 comes
// back and campaigns with its old configuration {n1, n2, n3}. An empty raft
// grants any vote, so without the vote floor the re-created replica
// elected n1 — a leader without committed entries. With it, the replica
// refuses until it has caught up past what its deleted one had, and the
// group elects only once a replica with those entries is back.
func TestRecreatedReplicaDoesNotElectAStaleCandidate(t *testing.T) {
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

	// The follower's replica is deleted and re-created empty; the leader
	// goes down.
	follow.destroy(t)
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
	dir := t.TempDir()
	db, err := storage.OpenRaftLogDB(filepath.Join(dir, "slots.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stores, err := storage.OpenGroupStores(db, "slot-0", filepath.Join(dir, "g"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer stores.Close()
	floor := storage.VoteFloor{Term: 7, LastTerm: 6, LastIndex: 40}
	inner := &chanTransport{ch: make(chan raft.RPC)}
	gate := newVoteGate(inner, floor, stores, slog.New(slog.NewTextHandler(io.Discard, nil)))
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

// chanTransport is a raft.Transport whose consumer is a channel the test
// feeds; the rest is never called.
type chanTransport struct {
	raft.Transport
	ch chan raft.RPC
}

func (c *chanTransport) Consumer() <-chan raft.RPC { return c.ch }
