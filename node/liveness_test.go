package node

import (
	"context"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/internal/testutil"
	"github.com/timemachine-db/timemachine/liveness"
	"github.com/timemachine-db/timemachine/meta"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftgroup"
	"github.com/timemachine-db/timemachine/rpc/peer"
	"github.com/timemachine-db/timemachine/slot"
)

// hurryOrder places the followers of a group so that the one with the
// longest log goes last (it wins: the others refuse a shorter log), ties
// and unknown indexes by id, and no two followers take the same place.
func TestHurryOrder(t *testing.T) {
	type f struct {
		id   string
		last uint64
		ok   bool   // its index is known to the others
		term uint64 // its last entry's term (0: unknown, an older node)
	}
	cases := []struct {
		name string
		fs   []f
		want map[string]int
	}{
		{"equal logs: by id", []f{{"n2", 10, true, 0}, {"n3", 10, true, 0}}, map[string]int{"n2": 0, "n3": 1}},
		{"the longer log last, whatever its id", []f{{"n2", 11, true, 0}, {"n3", 10, true, 0}}, map[string]int{"n3": 0, "n2": 1}},
		{"the longer log last (higher id)", []f{{"n2", 10, true, 0}, {"n3", 12, true, 0}}, map[string]int{"n2": 0, "n3": 1}},
		{"unknown: by id", []f{{"n2", 11, true, 0}, {"n3", 10, false, 0}}, map[string]int{"n2": 0, "n3": 1}},
		{"four followers", []f{{"a", 7, true, 0}, {"b", 9, true, 0}, {"c", 7, true, 0}, {"d", 8, true, 0}}, map[string]int{"a": 0, "c": 1, "d": 2, "b": 3}},
		// A restarted node still holding its deposed term's entries: the
		// longer log, but the older last term; raft's vote prefers the
		// later term, so that one goes last.
		{"the later last term last, though shorter", []f{{"n2", 12, true, 4}, {"n3", 10, true, 5}}, map[string]int{"n2": 0, "n3": 1}},
		{"equal terms: the longer log last", []f{{"n2", 12, true, 5}, {"n3", 10, true, 5}}, map[string]int{"n3": 0, "n2": 1}},
		{"a term unknown (older node): by index", []f{{"n2", 12, true, 4}, {"n3", 10, true, 0}}, map[string]int{"n3": 0, "n2": 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			seen := map[int]string{}
			for _, me := range c.fs {
				var others []string
				idx := map[string]f{}
				for _, o := range c.fs {
					if o.id != me.id {
						others = append(others, o.id)
						idx[o.id] = o
					}
				}
				pos := hurryOrder(me.id, logPos{index: me.last, term: me.term}, others, func(p string) (logPos, bool) {
					o := idx[p]
					if !o.ok || !me.ok {
						return logPos{}, false // the exchange failed one way or the other
					}
					return logPos{index: o.last, term: o.term}, true
				})
				if pos != c.want[me.id] {
					t.Errorf("%s (last %d) at %d, want %d", me.id, me.last, pos, c.want[me.id])
				}
				if prev, dup := seen[pos]; dup {
					t.Errorf("%s and %s both at %d: they would split the vote", prev, me.id, pos)
				}
				seen[pos] = me.id
			}
		})
	}
}

// The follower with the longest log (ties: the highest id) is the one to
// campaign, and it may only once every other live follower answered that
// it finds the leader dead too: one that still hears the leader, or that
// did not answer, keeps the leader in place.
func TestCampaignDecision(t *testing.T) {
	yes := func(string) bool { return true }
	view := func(last uint64, dead bool) peerView {
		return peerView{last: logPos{index: last}, dead: dead, follows: true}
	}
	cases := []struct {
		name         string
		self         string
		last         uint64
		campaign     func(string) bool
		others       map[string]peerView // nil entry: no answer
		pick, agreed bool
	}{
		{"longest log, all agree", "n2", 11, yes, map[string]peerView{"n3": view(10, true)}, true, true},
		{"longest log, the other still hears the leader", "n2", 11, yes, map[string]peerView{"n3": view(10, false)}, true, false},
		{"shorter log", "n2", 9, yes, map[string]peerView{"n3": view(10, true)}, false, true},
		{"equal logs, higher id", "n3", 10, yes, map[string]peerView{"n2": view(10, true)}, true, true},
		{"equal logs, lower id", "n2", 10, yes, map[string]peerView{"n3": view(10, true)}, false, true},
		{"no answer", "n2", 11, yes, map[string]peerView{"n3": {}}, false, false},
		{"equal logs, lower id, the other names no leader (restarted)", "n2", 10, yes, map[string]peerView{"n3": {last: logPos{index: 10}, dead: true}}, true, true},
		{"shorter log, the other names no leader", "n2", 9, yes, map[string]peerView{"n3": {last: logPos{index: 10}, dead: true}}, false, true},
		{"five voters, one still hears it", "n5", 12, yes, map[string]peerView{"n2": view(10, true), "n3": view(12, false), "n4": view(11, true)}, true, false},
		{"cannot campaign (meta)", "n2", 11, nil, map[string]peerView{"n3": view(10, true)}, false, false},
		{"no other follower", "n2", 11, yes, map[string]peerView{}, false, false},
		// Five voters, the leader and two others cut off: this side is no
		// majority, and a TimeoutNow campaign would only raise the term.
		{"five voters, two of them live", "n5", 12, yes, map[string]peerView{"n4": view(10, true)}, false, false},
		{"five voters, three of them live", "n5", 12, yes, map[string]peerView{"n3": view(10, true), "n4": view(11, true)}, true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := hurryPlan{group: "7", leader: "n1", last: logPos{index: c.last}, campaign: c.campaign}
			if strings.HasPrefix(c.name, "five voters") {
				p.voters = 5
			}
			known := map[string]map[string]peerView{}
			for o, v := range c.others {
				p.others = append(p.others, o)
				if v != (peerView{}) {
					known[o] = map[string]peerView{"7": v}
				}
			}
			pick, agreed := campaignDecision(c.self, p, known)
			if pick != c.pick || (pick && agreed != c.agreed) {
				t.Fatalf("pick %t agreed %t, want %t %t", pick, agreed, c.pick, c.agreed)
			}
		})
	}
}

// Raft's vote prefers the later last term to the longer log, and so does
// the pick: a follower that restarted a moment before may still hold its
// deposed term's entries past the others' logs.
func TestCampaignDecisionByTerm(t *testing.T) {
	yes := func(string) bool { return true }
	cases := []struct {
		name       string
		self       string
		mine, peer logPos
		pick       bool
	}{
		{"longer log of an older term", "n2", logPos{12, 5}, logPos{10, 6}, false},
		{"shorter log of the later term", "n3", logPos{10, 6}, logPos{12, 5}, true},
		{"same term: the longer log", "n2", logPos{12, 6}, logPos{10, 6}, true},
		{"the peer's term unknown (an older node): by index", "n2", logPos{12, 5}, logPos{10, 0}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			other := "n3"
			if c.self == "n3" {
				other = "n2"
			}
			p := hurryPlan{group: "7", leader: "n1", last: c.mine, campaign: yes, others: []string{other}}
			known := map[string]map[string]peerView{other: {"7": {last: c.peer, dead: true, follows: true}}}
			if pick, agreed := campaignDecision(c.self, p, known); pick != c.pick || !agreed {
				t.Fatalf("pick %t agreed %t, want %t true", pick, agreed, c.pick)
			}
		})
	}
}

// The coalesced heartbeats wait a tenth of the slots' raft lease for
// company: well inside the lease, however the timing is set.
func TestBeatFlush(t *testing.T) {
	for _, c := range []struct {
		timing raftgroup.Timing
		want   time.Duration
	}{
		{raftgroup.Timing{}, 500 * time.Millisecond}, // production: slot.SlotLeaderLease
		{raftgroup.Timing{HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond, LeaderLeaseTimeout: 150 * time.Millisecond}, 15 * time.Millisecond},
	} {
		if got := beatFlush(c.timing); got != c.want {
			t.Errorf("beatFlush(%+v) = %v, want %v", c.timing, got, c.want)
		}
	}
}

// The node's coalescer parks and holds the heartbeats of every group it
// carries, the meta group's too, for times derived from the slots' raft
// timeouts (beatPark, beatHold, beatFlush). A meta group with a shorter
// lease would see its heartbeat rounds (up to 3.5 s with the slots' 10 s)
// come too late for its check-quorum and its leader step down while
// nothing is wrong; a longer one would keep a cut-off meta leader longer
// than a slot's. So the two sets of timeouts are one.
func TestMetaTimingIsTheSlots(t *testing.T) {
	if meta.MetaHeartbeatTimeout != slot.SlotHeartbeatTimeout || meta.MetaLeaderLease != slot.SlotLeaderLease {
		t.Fatalf("meta timeouts %v / %v, slot timeouts %v / %v: the coalescer's park and hold fit only one",
			meta.MetaHeartbeatTimeout, meta.MetaLeaderLease, slot.SlotHeartbeatTimeout, slot.SlotLeaderLease)
	}
	park, flush := beatPark(raftgroup.Timing{}), beatFlush(raftgroup.Timing{})
	// The longest round: raft's own wait (up to a fifth of the heartbeat
	// timeout), then the park until the first shared tick past it.
	if round := slot.SlotHeartbeatTimeout/5 + park + flush; round >= slot.SlotLeaderLease {
		t.Fatalf("a heartbeat round may take %v, not inside the %v lease", round, slot.SlotLeaderLease)
	}
	if hold := beatHold(raftgroup.Timing{}); hold > slot.SlotLeaderLease {
		t.Fatalf("held answers up to %v old, more than the %v lease", hold, slot.SlotLeaderLease)
	}
}

// flakyPinger answers every ping, except those to the addresses in down,
// which fail at once as a dropped connection does.
type flakyPinger struct {
	mu   sync.Mutex
	down map[string]bool
}

func (p *flakyPinger) PingAsync(addr string, wall int64, done func(int64, error)) func() {
	p.mu.Lock()
	down := p.down[addr]
	p.mu.Unlock()
	go func() {
		if down {
			done(0, fmt.Errorf("%w: %w", peer.ErrUnreachable, peer.ErrDropped))
			return
		}
		done(time.Now().UnixNano(), nil)
	}()
	return func() {}
}

func (p *flakyPinger) set(addr string, down bool) {
	p.mu.Lock()
	p.down[addr] = down
	p.mu.Unlock()
}

// waitReachable (what the slots' transports hold a failed append with,
// rpc/beat holdFailed): a peer the liveness check has not found dead is
// reachable at once; a dead one holds the caller until it answers again
// and peerBack wakes it, or until the context ends.
func TestWaitReachable(t *testing.T) {
	pinger := &flakyPinger{down: map[string]bool{"b:2": true}}
	n := &Node{}
	n.live = liveness.New(liveness.Config{
		Self: "n1", Peers: func() map[string]string { return map[string]string{"n1": "b:1", "n2": "b:2", "n3": "b:3"} },
		Pinger: pinger, Interval: 10 * time.Millisecond, Lease: 400 * time.Millisecond, DeadAfter: 600 * time.Millisecond,
		MaxOffset: 250 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.live.Run(ctx) }()
	defer func() { cancel(); <-done }()
	testutil.Eventually(t, 5*time.Second, "n2 found dead", testutil.True(func() bool { return slices.Contains(n.live.DeadPeers(), "n2") }))

	if !n.waitReachable(context.Background(), "b:3") {
		t.Fatal("a live peer is not reachable")
	}
	short, cancelShort := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancelShort()
	if n.waitReachable(short, "b:2") {
		t.Fatal("a dead peer was reachable")
	}
	got := make(chan bool, 1)
	go func() { got <- n.waitReachable(context.Background(), "b:2") }()
	pinger.set("b:2", false)
	testutil.Eventually(t, 5*time.Second, "n2 answers again", testutil.True(func() bool { return !slices.Contains(n.live.DeadPeers(), "n2") }))
	n.peerBack() // as the liveness reactor does when a dead peer is back
	select {
	case ok := <-got:
		if !ok {
			t.Fatal("waitReachable gave up on a peer that came back")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waitReachable was not woken")
	}
}

// The liveness check pings every node of the table that has not left, and
// a node the table says left while it still votes in a slot this node
// holds (the table can call a live voter "left" for a while; unpinged, it
// counted for no slot's lease). A left node that votes nowhere here, and a
// node with no internal address, are not pinged.
func TestPingable(t *testing.T) {
	nodes := map[string]*model.Node{
		"a":  {BindAddr: "127.0.0.1:1", Status: model.NodeAlive},
		"b":  {BindAddr: "127.0.0.1:2", Status: model.NodeLeft},
		"c":  {BindAddr: "127.0.0.1:3", Status: model.NodeLeft},
		"d":  {BindAddr: "127.0.0.1:4", Status: model.NodeFailed},
		"e":  {Status: model.NodeAlive},
		"dr": {BindAddr: "127.0.0.1:6", Status: model.NodeDraining},
	}
	read := 0
	voters := func(vs ...string) iter.Seq[string] {
		return func(yield func(string) bool) {
			read++
			for _, v := range vs {
				if !yield(v) {
					return
				}
			}
		}
	}
	got := pingable(nodes, voters("a", "b", "x"))
	want := map[string]string{"a": "127.0.0.1:1", "b": "127.0.0.1:2", "d": "127.0.0.1:4", "dr": "127.0.0.1:6"}
	if !maps.Equal(got, want) {
		t.Fatalf("pingable = %v, want %v", got, want)
	}
	delete(nodes, "b")
	delete(nodes, "c")
	read = 0
	pingable(nodes, voters("a"))
	if read != 0 {
		t.Fatal("the slots' voters were read with no node that left in the table")
	}
}
