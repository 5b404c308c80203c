package raftgroup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/storage"
)

// Timing holds the raft timeouts. The defaults are conservative — a
// follower on its own starts an election only after 1-2 s without a
// heartbeat, so a loaded node at 100% CPU does not make leadership flap —
// and a dead leader is replaced well within a second anyway: the node's
// liveness check sees it first and the followers are told to hurry
// (Expedite). LeaderLeaseTimeout is both the leader's check-quorum (it
// steps down after that long without a majority) and the timeouts of a
// hurried follower (raft requires a heartbeat timeout of at least it).
// The slot groups run much longer ones (slot.SlotHeartbeatTimeout) and
// fail over through Campaign instead (DESIGN.md).
type Timing struct {
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
}

// DefaultTiming is used when a Timing field is zero.
var DefaultTiming = Timing{
	HeartbeatTimeout:   1000 * time.Millisecond,
	ElectionTimeout:    1000 * time.Millisecond,
	LeaderLeaseTimeout: 500 * time.Millisecond,
	CommitTimeout:      20 * time.Millisecond,
}

// WithDefaults fills the zero fields from DefaultTiming.
func (t Timing) WithDefaults() Timing { return t.orDefault() }

func (t Timing) orDefault() Timing {
	if t.HeartbeatTimeout == 0 {
		t.HeartbeatTimeout = DefaultTiming.HeartbeatTimeout
	}
	if t.ElectionTimeout == 0 {
		t.ElectionTimeout = DefaultTiming.ElectionTimeout
	}
	if t.LeaderLeaseTimeout == 0 {
		t.LeaderLeaseTimeout = DefaultTiming.LeaderLeaseTimeout
	}
	if t.CommitTimeout == 0 {
		t.CommitTimeout = DefaultTiming.CommitTimeout
	}
	return t
}

// Config configures one raft group replica.
type Config struct {
	Name         string // for logs, and the key prefix in the shared log file: "slot-3", "meta"
	NodeID       string // raft ServerID of this replica
	Dir          string // snapshots (and, without LogDB, the raft-boltdb file)
	Stream       raft.StreamLayer
	FSM          raft.FSM
	Logger       *slog.Logger
	RaftLogLevel string // hashicorp/raft's log level (default "warn")
	Timing       Timing

	NoRestoreOnStart  bool
	TrailingLogs      uint64
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration

	// OnLeader runs while this replica leads, after a barrier proved that
	// every earlier entry is applied; it must return when ctx ends.
	OnLeader func(ctx context.Context)
	// LeaderlessConsent, when set, is asked by a replica that stopped
	// leading and still knows no leader leaderlessAfter later
	// (watchLeaderless), with the group's voters: true means a majority
	// of them, this replica included, is reachable and names this
	// replica or no one as its leader, so the replica campaigns at once
	// (Campaign) instead of a lease after its step-down. The node answers
	// it by asking the other voters (node/hurryorder.go).
	LeaderlessConsent func(voters []string) bool
	// BeforeStart runs after the stores open and before raft starts; the
	// slot uses it to redo an interrupted restore.
	BeforeStart func(*storage.RaftStores) error
	// LogDB, when set, holds the group's log in the node's shared file
	// (slots); otherwise the group gets its own raft-boltdb file (meta).
	LogDB *storage.RaftLogDB
	// VoteFloor, when not zero, is what an earlier replica of this group
	// on this node had acknowledged before it was deleted: this replica
	// votes only in later terms and once its log has caught up past it
	// (votegate.go).
	VoteFloor storage.VoteFloor
	// Floors, when set, keeps the group's vote floor (the node's shared
	// raft log file): the floor recorded there is added to VoteFloor, and
	// a replica that opens with nothing stored — a new one, or one whose
	// node lost its data and rejoined under its old id — learns its floor
	// from the group's leaders and votes only once it has caught up
	// (votegate.go).
	Floors FloorStore
	// BeforeTransfer, when set, runs before this replica hands leadership
	// away and returns what to do after (resume=true: leadership stayed).
	// The slot uses it to finish callbacks in flight first, so a planned
	// transfer never makes a receiver see a duplicate.
	BeforeTransfer func() (after func(resume bool))
	// OnEvent, when set, hears of elections and leader changes (metrics).
	// It must not block.
	OnEvent func(Event)
	// WrapSnapshots, when set, wraps the file snapshot store.
	WrapSnapshots func(*raft.FileSnapshotStore) raft.SnapshotStore
	// WrapTransport, when set, wraps the group's NetworkTransport (the
	// slots send their heartbeats through the node's coalescer, rpc/beat).
	// The result's Close, if any, is called instead of the inner one's.
	WrapTransport func(*raft.NetworkTransport) raft.Transport
	// BootstrapFallback, when set, makes a voter other than the first of
	// a group it bootstraps campaign (Campaign) if no leader is known
	// that long after, plus restartStagger per place in the voter list:
	// the first voter, which campaigns at once, may never bootstrap (the
	// meta group: a node that found its peers formed a moment before it
	// waits to be added instead), and with long heartbeat timeouts raft
	// alone would elect only after 5-10 s. Not for the slots: at 1,024 of
	// them first elections take seconds, and second candidates would
	// split their votes.
	BootstrapFallback time.Duration
}

// FloorStore keeps vote floors by group name (storage.RaftLogDB).
type FloorStore interface {
	VoteFloor(group string) (storage.VoteFloor, error)
	SetVoteFloor(group string, f storage.VoteFloor) error
}

// Group is a running raft group replica and its leadership watch.
type Group struct {
	cfg    Config
	timing Timing
	raft   *raft.Raft
	stores *storage.RaftStores
	logs   raft.LogStore // raft's view of the log (through its cache)
	trans  raft.Transport
	gate   *voteGate // nil: votes go to raft unchecked
	notify chan bool
	closed chan struct{}
	shut   chan struct{} // closed once raft has shut down (await)
	wg     sync.WaitGroup
	once   sync.Once

	transfers atomic.Uint64 // planned transfers started (transfer.go)
	// transferFailedAt (unix ns) is when a planned transfer last failed
	// (failedTransferGap).
	transferFailedAt atomic.Int64
	bgMu             sync.Mutex
	bgClosed         bool
	obs              *raft.Observer

	hurryMu sync.Mutex
	hurried string // the dead leader this follower is hurrying past; "" when not
	// campaignedPast is the leader the last Campaign went past (Follows).
	campaignedPast atomic.Value

	nudge nudger // Nudge (nudge.go)

	confirms confirmRounds // VerifyLeader's rounds (confirm.go)

	// readTerm is the term in which this replica, leading, last finished
	// its barrier (0: none yet): from then on, in that term, its state
	// includes every entry any leader committed before (ReadReady).
	readTerm atomic.Uint64
}

// Open opens the group's stores and starts raft and the leadership watch.
func Open(cfg Config) (*Group, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	t := cfg.Timing.orDefault()
	hlog := newRaftLogger(cfg.Logger, cfg.Name, cfg.RaftLogLevel)
	logOut := hlog.StandardWriter(&hclog.StandardLoggerOptions{InferLevels: true})
	var stores *storage.RaftStores
	var err error
	if cfg.LogDB != nil {
		stores, err = storage.OpenGroupStores(cfg.LogDB, cfg.Name, cfg.Dir, logOut)
	} else {
		stores, err = storage.OpenRaftStores(cfg.Dir, logOut)
	}
	if err != nil {
		return nil, err
	}
	if cfg.BeforeStart != nil {
		if err := cfg.BeforeStart(stores); err != nil {
			_ = stores.Close()
			return nil, err
		}
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.Logger = hlog
	rc.HeartbeatTimeout = t.HeartbeatTimeout
	rc.ElectionTimeout = t.ElectionTimeout
	rc.LeaderLeaseTimeout = t.LeaderLeaseTimeout
	rc.CommitTimeout = t.CommitTimeout
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 256
	rc.NoSnapshotRestoreOnStart = cfg.NoRestoreOnStart
	rc.NoLegacyTelemetry = true
	// A leader never removes itself (NextStep hands leadership away
	// first). Were it to, raft's own shutdown would leave Close unable to
	// wait for raft's goroutines (a second Shutdown returns at once), and
	// a replica being destroyed could still be written to.
	rc.ShutdownOnRemove = false
	if cfg.TrailingLogs > 0 {
		rc.TrailingLogs = cfg.TrailingLogs
	}
	if cfg.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = cfg.SnapshotThreshold
	}
	if cfg.SnapshotInterval > 0 {
		rc.SnapshotInterval = cfg.SnapshotInterval
	}
	notify := make(chan bool, 16)
	rc.NotifyCh = notify

	// A pooled connection holds two 256 KiB buffers (one per side). With
	// WrapTransport (rpc/beat) heartbeats, votes and non-pipelined appends
	// go on the node's own connection and a leader dials a pipeline only
	// under write load, so the stock transport is left with pipelines,
	// snapshots and older peers; one pooled connection per peer is kept
	// for those. Measured at 256 slots with a pool of 3 and votes on the
	// stock transport: connections left pooled by the first elections were
	// ~90% of the heap (docs/scaling.md).
	pool := 3
	if cfg.WrapTransport != nil {
		pool = 1
	}
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:                cfg.Stream,
		MaxPool:               pool,
		Timeout:               10 * time.Second,
		Logger:                hlog,
		MaxRPCsInFlight:       16,
		ServerAddressProvider: nil,
	})
	// A small cache of recent entries serves replication to followers
	// without a bolt read. It is kept small because a cached entry pins its
	// whole apply future (data and results), and an entry can carry a
	// thousand jobs.
	logs := stores.Log
	if cached, err := raft.NewLogCache(32, stores.Log); err == nil {
		logs = cached
	}
	var snaps raft.SnapshotStore = stores.Snapshots
	if cfg.WrapSnapshots != nil {
		snaps = cfg.WrapSnapshots(stores.Snapshots)
	}
	var rt raft.Transport = trans
	if cfg.WrapTransport != nil {
		rt = cfg.WrapTransport(trans)
	}
	floor, save, err := voteFloor(cfg, stores)
	if err != nil {
		closeTransport(rt, trans)
		_ = stores.Close()
		return nil, err
	}
	var gate *voteGate
	if !floor.IsZero() {
		gate = newVoteGate(rt, floor, stores, save, cfg.Logger.With("group", cfg.Name))
		rt = gate
	}
	r, err := raft.NewRaft(rc, cfg.FSM, logs, stores.Stable, snaps, rt)
	if err != nil {
		closeTransport(rt, trans)
		_ = stores.Close()
		return nil, fmt.Errorf("%s: start raft: %w", cfg.Name, err)
	}
	g := &Group{cfg: cfg, timing: t, raft: r, stores: stores, logs: logs, trans: rt, gate: gate, notify: notify, closed: make(chan struct{}), shut: make(chan struct{})}
	g.wg.Add(1)
	go g.watchLeadership()
	g.observe()
	if rn, ok := rt.(resumeNotifier); ok {
		// A follower an append failed to answers heartbeats again: catch
		// it up now, not on the CommitTimeout tick (rpc/beat Transport).
		rn.OnResume(g.catchUp)
	}
	if existing, _ := g.HasState(); existing && g.CanCampaign() {
		g.wg.Add(1)
		go g.electAfterRestart()
	}
	return g, nil
}

// voteFloor is the floor the replica's vote gate keeps (zero: no gate),
// and how to record it. With Floors, a replica with nothing stored and no
// recorded floor gets a learning one, recorded before raft starts; a
// recorded floor the replica's raft state has left behind (spent) is
// dropped.
func voteFloor(cfg Config, stores *storage.RaftStores) (storage.VoteFloor, func(storage.VoteFloor) error, error) {
	floor := cfg.VoteFloor
	if cfg.Floors == nil {
		return floor, nil, nil
	}
	save := func(f storage.VoteFloor) error { return cfg.Floors.SetVoteFloor(cfg.Name, f) }
	kept, err := cfg.Floors.VoteFloor(cfg.Name)
	if err != nil {
		return floor, nil, fmt.Errorf("%s: %w", cfg.Name, err)
	}
	floor = floor.Max(kept)
	if !floor.IsZero() && spent(stores, floor) {
		// Past it for good: no gate, and the record goes (a replica
		// deleted later records its own state, which covers this).
		if err := save(storage.VoteFloor{}); err != nil {
			return floor, nil, fmt.Errorf("%s: %w", cfg.Name, err)
		}
		return storage.VoteFloor{}, save, nil
	}
	if floor.IsZero() {
		has, err := raft.HasExistingState(stores.Log, stores.Stable, stores.Snapshots)
		if err != nil {
			return floor, nil, fmt.Errorf("%s: inspect raft state: %w", cfg.Name, err)
		}
		if !has {
			floor = storage.VoteFloor{Learn: true}
			if err := save(floor); err != nil {
				return floor, nil, fmt.Errorf("%s: %w", cfg.Name, err)
			}
		}
	}
	return floor, save, nil
}

// electAfterRestart hurries the first election of a replica that was
// reopened (a node restarted) while it knows no leader. With the slots'
// long timeouts a follower on its own waits 10–20 s before it campaigns,
// and when every node restarts (the nemesis's kill-all) nobody knows a
// leader: jobs were late by 5–7 s when it was 5–10 s. So the replica
// lowers its timeouts to the lease, and the reload makes raft's follower
// loop check at once; a reopened raft has heard from nobody (its last
// contact is the zero time), so it campaigns then, however long the lease
// — with a pre-vote, so where the others still follow a leader (only this
// node restarted) they refuse and nothing is disrupted. Only a campaign
// that fails (no peer up yet) waits a lease or two before the next, and
// the next voter's own turn usually comes first. The voters of a group
// take turns by their place in its configuration, restartStagger apart,
// each only if no leader is known by then, so the first one usually wins
// alone.
func (g *Group) electAfterRestart() {
	voters := g.Voters()
	pos := slices.Index(voters, g.cfg.NodeID)
	if pos < 0 {
		g.wg.Done()
		return
	}
	if len(voters) == 1 {
		// The only voter (a single-node cluster, or replication factor
		// 1): nobody to disrupt, so it campaigns at once — raft on its
		// own would wait out the 10-20 s heartbeat timeout, and every job
		// due meanwhile would be late by that much.
		g.Campaign("")
		g.wg.Done()
		return
	}
	select {
	case <-g.closed:
		g.wg.Done()
		return
	case <-time.After(time.Duration(pos) * restartStagger):
	}
	g.hurryMu.Lock()
	id, _ := g.Leader()
	if g.hurried != "" || id != "" || g.raft.State() != raft.Follower {
		g.hurryMu.Unlock()
		g.wg.Done()
		return
	}
	select {
	case <-g.closed:
		g.hurryMu.Unlock()
		g.wg.Done()
		return
	default:
	}
	g.hurried = "(restart)"
	g.hurryMu.Unlock()
	if err := g.setTimeouts(g.timing.LeaderLeaseTimeout, g.timing.LeaderLeaseTimeout); err != nil {
		g.cfg.Logger.Warn("could not hurry the election after a restart", "group", g.cfg.Name, "error", err)
		g.hurryMu.Lock()
		g.hurried = ""
		g.hurryMu.Unlock()
		g.wg.Done()
		return
	}
	g.unhurry("", nil) // ends with g.wg.Done()
}

// restartStagger: see electAfterRestart.
const restartStagger = 300 * time.Millisecond

// closeTransport closes t, or inner when t cannot be closed.
func closeTransport(t raft.Transport, inner *raft.NetworkTransport) {
	if c, ok := t.(raft.WithClose); ok {
		_ = c.Close()
	} else if inner != nil {
		_ = inner.Close()
	}
}

// Expedite makes this replica, a follower of dead (a leader the node's
// liveness check found dead: paused, killed, cut off), elect a new leader
// now rather than after the heartbeat timeout: raft's heartbeat and
// election timeouts drop to LeaderLeaseTimeout, which also wakes the
// follower loop at once (ReloadConfig), until a leader is known again or a
// few seconds passed; then they go back. A no-op unless this replica
// follows dead. Pre-vote stays on, so a voter that still hears from its
// leader refuses: a node that only lost its own link to the leader
// disrupts nothing. The caller staggers the followers of one group (the
// node orders them longest log last, 150 ms apart; stagger is this
// follower's share, counted from the moment its leader has been silent
// long enough, below), so one of them wins the first round.
//
// alive, when set, reports whether dead answers again (a paused leader
// resumed, a partition healed): the hurry then ends at once, so the
// follower does not keep half-second timeouts under a leader that is
// back, where one late heartbeat on a loaded machine would start an
// election and make leadership flap.
func (g *Group) Expedite(dead string, stagger time.Duration, alive func() bool) {
	if g.raft.State() != raft.Follower {
		return
	}
	if _, id := g.raft.LeaderWithID(); string(id) != dead {
		return
	}
	if !g.claimHurry(dead) {
		return
	}
	go g.hurry(dead, stagger, alive)
}

// hurry lowers the timeouts and watches for the end of the hurry. raft's
// follower loop, woken by the lower timeouts, starts an election only if
// its leader has been silent for the new heartbeat timeout already;
// otherwise it waits a random one to two of those timeouts more. After a
// kill (seen at once: the connection is refused) the last heartbeat is
// recent, and the election came up to a second later than needed; so the
// timeouts drop once the silence is long enough for the election to
// start at once. The stagger counts from there: the followers' silences
// end together, and counted from the call it was absorbed by that wait
// (a split vote cost a pause failover a second).
func (g *Group) hurry(dead string, stagger time.Duration, alive func() bool) {
	end := func() {
		g.hurryMu.Lock()
		g.hurried = ""
		g.hurryMu.Unlock()
		g.wg.Done()
	}
	if wait := max(0, g.timing.LeaderLeaseTimeout-time.Since(g.raft.LastContact())) + stagger; wait > 0 {
		select {
		case <-g.closed:
			end()
			return
		case <-time.After(wait + 5*time.Millisecond):
		}
		if (alive != nil && alive()) || g.raft.State() != raft.Follower {
			end()
			return
		}
	}
	// A new group's first campaign (dead == "": campaignFirst) starts as
	// soon, but keeps the normal election timeout: when the whole cluster
	// forms, every group's first election runs at once and votes wait for
	// fsyncs, so at 1,024 slots many took longer than the hurried 0.5-1 s
	// and started over in a higher term, over and over (an election
	// storm). Failover keeps both timeouts short.
	election := g.timing.LeaderLeaseTimeout
	if dead == "" {
		election = g.timing.ElectionTimeout
	}
	if err := g.setTimeouts(g.timing.LeaderLeaseTimeout, election); err != nil {
		g.cfg.Logger.Warn("could not hurry the election", "group", g.cfg.Name, "error", err)
		end()
		return
	}
	if dead != "" {
		g.cfg.Logger.Info("leader unreachable: electing a new one now", "group", g.cfg.Name, "leader", dead)
	}
	g.unhurry(dead, alive)
}

// unhurry restores the normal timeouts once a leader other than dead is
// known (or this replica leads), dead is alive again, or after hurryLimit.
func (g *Group) unhurry(dead string, alive func() bool) {
	defer g.wg.Done()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	limit := time.After(hurryLimit)
	for done := false; !done; {
		select {
		case <-g.closed:
			return
		case <-limit:
			done = true
		case <-tick.C:
			_, id := g.raft.LeaderWithID()
			done = g.raft.State() == raft.Leader || (id != "" && string(id) != dead) || (alive != nil && alive())
		}
	}
	if err := g.setTimeouts(g.timing.HeartbeatTimeout, g.timing.ElectionTimeout); err != nil {
		g.cfg.Logger.Warn("could not restore the raft timeouts", "group", g.cfg.Name, "error", err)
	}
	g.hurryMu.Lock()
	g.hurried = ""
	g.hurryMu.Unlock()
}

// injector is a transport that can hand an RPC to its own group's raft
// through its consumer channel (rpc/beat's Transport).
type injector interface{ Inject(raft.RPC) error }

// CanCampaign reports whether Campaign can work here: the group's
// transport can hand its raft a TimeoutNow (the slots' rpc/beat transport;
// not the meta group's stock one).
func (g *Group) CanCampaign() bool {
	t := g.trans
	if vg, ok := t.(*voteGate); ok {
		t = vg.Transport
	}
	_, ok := t.(injector)
	return ok
}

// Campaign makes this replica, a follower of dead, start an election now:
// it hands its own raft a TimeoutNow through the transport's consumer
// channel, as the target of a leadership transfer receives one. raft then
// campaigns at once, without a pre-vote, and the other voters grant the
// vote even while they still name dead as their leader (the vote carries
// raft's leadership-transfer flag); raft's up-to-date-log rule still
// holds, so safety is unchanged. What it skips is leader stickiness: the
// caller must know that the other voters also find dead dead (node's
// hurry order asks them), or an asymmetric partition would depose a
// healthy leader. dead == "" campaigns a follower that knows no leader (a
// new group's first election). It reports whether the TimeoutNow went in.
//
// Failover thus needs no short raft timeouts: the slot groups run long
// heartbeat timeouts (few heartbeats) and still fail over in about the
// time the liveness check takes to find a leader dead.
func (g *Group) Campaign(dead string) bool {
	inj, ok := g.trans.(injector)
	if !ok || !g.CanCampaign() {
		return false
	}
	if !slices.Contains(g.Voters(), g.cfg.NodeID) {
		// A nonvoter (a replica being added, or a meta copy of a node
		// outside the meta group's three voters) cannot win, and raft
		// still makes it a candidate on a TimeoutNow: its raised term
		// then deposes the leader the next time the leader replicates
		// to it, and the group waits for raft's own timeouts to elect
		// another (docs/reliability.md, "Five nodes").
		return false
	}
	if st, id := g.raft.State(), g.leaderID(); st != raft.Follower || id != dead {
		if dead != "" {
			// The node picked this replica to replace dead; say why it
			// does not, or the slot seems to wait for nothing.
			g.cfg.Logger.Info("not campaigning: the replica no longer follows the dead leader", "group", g.cfg.Name,
				"leader", dead, "state", st.String(), "follows", id)
		}
		return false
	}
	select {
	case <-g.closed:
		return false
	default:
	}
	g.wakeMainLoop(inj)
	respCh := make(chan raft.RPCResponse, 1)
	req := &raft.TimeoutNowRequest{RPCHeader: raft.RPCHeader{
		ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(g.cfg.NodeID),
	}}
	if err := inj.Inject(raft.RPC{Command: req, RespChan: respCh}); err != nil {
		g.cfg.Logger.Warn("could not start an election", "group", g.cfg.Name, "error", err)
		return false
	}
	g.campaignedPast.Store(dead)
	if dead != "" {
		g.cfg.Logger.Info("leader unreachable: campaigning now (timeout-now)", "group", g.cfg.Name, "leader", dead)
	}
	g.campaignRetries(dead)
	return true
}

// wakeMainLoop makes raft's main loop look at the replica's state again
// before Campaign's TimeoutNow, so that the TimeoutNow starts an election.
//
// A replica whose pre-vote was refused (a reopened one's first campaign,
// electAfterRestart: the others still follow a leader) stays in raft's
// candidate loop until that loop's election timer fires, 2.5-5 s later for
// a slot. The leader's heartbeats make it a follower meanwhile, but they
// take raft's fast path (the transport's goroutine sets the state), so the
// loop, blocked on its channels, does not see it. A TimeoutNow arriving
// then only sets the state back to candidate, and the loop goes on waiting
// for its old timer: no election. (hashicorp/raft 1.7.3 runCandidate and
// timeoutNow.) That failed over in 2-5 s instead of ~0.1 s whenever the
// follower picked to campaign had restarted moments before
// (TestCampaignRightAfterARefusedPreVote; node's
// TestFailoverWithinTwoSeconds, 18 of 24 runs under the race
// detector).
//
// Any RPC through the consumer channel wakes the loop, which then finds the
// state is a follower's and moves to raft's follower loop, where the
// TimeoutNow campaigns at once. The RPC is a pre-vote request of this
// replica's own in term 0, which raft answers without changing anything
// (a pre-vote never does; it is refused, as raft knows a leader or a later
// term), and which the vote gate lets through (no candidate has term 0);
// waiting for the answer means the loop has moved on. In the usual case,
// a loop already in its follower loop, it costs one RPC on the channel.
func (g *Group) wakeMainLoop(inj injector) {
	respCh := make(chan raft.RPCResponse, 1)
	req := &raft.RequestPreVoteRequest{RPCHeader: raft.RPCHeader{
		ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(g.cfg.NodeID),
	}}
	if err := inj.Inject(raft.RPC{Command: req, RespChan: respCh}); err != nil {
		return
	}
	t := time.NewTimer(wakeWait)
	defer t.Stop()
	select {
	case <-respCh:
	case <-t.C: // a busy loop: the TimeoutNow queues behind the request anyway
	case <-g.closed:
	}
}

// wakeWait bounds how long Campaign waits for the main loop to answer
// wakeMainLoop's request.
const wakeWait = 100 * time.Millisecond

// Follows reports whether this replica names leader as its leader, or is
// campaigning or leading itself (then it knows no leader because it
// started an election, possibly past leader). The hurry order asks it: a
// replica that knows no leader and is not campaigning (reopened moments
// ago) will not plan an election, so its vote goes to another follower.
func (g *Group) Follows(leader string) bool {
	switch g.raft.State() {
	case raft.Leader:
		return true
	case raft.Candidate:
		// Only a campaign Campaign started past leader: a candidate of
		// its own (a reopened replica's pre-vote) is refused by voters
		// that still follow leader, and would hold up the one to pick.
		if p, _ := g.campaignedPast.Load().(string); p == leader {
			return true
		}
	}
	_, id := g.raft.LeaderWithID()
	return leader != "" && string(id) == leader
}

// claimHurry marks the replica as hurried for reason and counts the
// goroutine the caller starts next (g.wg); false if the group is closing or
// another hurry runs already (one at a time: each restores the timeouts
// when it ends).
func (g *Group) claimHurry(reason string) bool {
	g.hurryMu.Lock()
	defer g.hurryMu.Unlock()
	if g.hurried != "" || !g.trackLocked() {
		return false
	}
	g.hurried = reason
	return true
}

// track counts the goroutine the caller starts next (g.wg, which Close
// waits for); false if the group is closing.
func (g *Group) track() bool {
	g.hurryMu.Lock()
	defer g.hurryMu.Unlock()
	return g.trackLocked()
}

// trackLocked is track for a caller that holds hurryMu.
func (g *Group) trackLocked() bool {
	select {
	case <-g.closed:
		return false
	default:
	}
	g.wg.Add(1)
	return true
}

// campaignRetries keeps a campaigning replica's timeouts at the lease until
// the group has a leader other than dead (or hurryLimit): should its
// election fail — a split vote, a lost vote — the next starts after 5–10 s
// (the slots' lease: raft allows no shorter election timeout) rather than
// after their 10–20 s election timeout.
func (g *Group) campaignRetries(dead string) {
	if !g.claimHurry("(campaign)") {
		return
	}
	go func() {
		if err := g.setTimeouts(g.timing.LeaderLeaseTimeout, g.timing.LeaderLeaseTimeout); err != nil {
			g.hurryMu.Lock()
			g.hurried = ""
			g.hurryMu.Unlock()
			g.wg.Done()
			return
		}
		g.unhurry(dead, nil)
	}()
}

// hurryLimit bounds how long a follower keeps the short timeouts.
const hurryLimit = 5 * time.Second

func (g *Group) setTimeouts(heartbeat, election time.Duration) error {
	rc := g.raft.ReloadableConfig()
	rc.HeartbeatTimeout, rc.ElectionTimeout = heartbeat, election
	return g.raft.ReloadConfig(rc)
}

// Voters lists the voters of the group's latest configuration (cheap: no
// round trip through raft's main loop).
func (g *Group) Voters() []string {
	servers, err := g.Servers()
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(servers))
	for _, s := range servers {
		if s.Suffrage == raft.Voter {
			out = append(out, string(s.ID))
		}
	}
	return out
}

// Name is the group's name ("slot-3", "meta").
func (g *Group) Name() string { return g.cfg.Name }

// HasState reports whether this replica has any raft state (it was
// bootstrapped, or added to the group, before).
func (g *Group) HasState() (bool, error) {
	return raft.HasExistingState(g.stores.Log, g.stores.Stable, g.stores.Snapshots)
}

// Bootstrap makes a brand-new group with the given voters. It is a no-op
// for a group that already has state (a restarted replica).
func (g *Group) Bootstrap(servers []raft.Server) error {
	has, err := g.HasState()
	if err != nil {
		return fmt.Errorf("%s: inspect raft state: %w", g.cfg.Name, err)
	}
	if has {
		return nil
	}
	f := g.raft.BootstrapCluster(raft.Configuration{Servers: servers})
	if err := f.Error(); err != nil {
		if errors.Is(err, raft.ErrCantBootstrap) {
			return nil
		}
		return fmt.Errorf("%s: bootstrap: %w", g.cfg.Name, err)
	}
	if len(servers) > 0 && string(servers[0].ID) == g.cfg.NodeID {
		// With a transport that can inject it, a TimeoutNow starts the
		// first election at once (votes wait for the peers to open the
		// group, rpc/beat voteOpenWait; a sole voter wins at once);
		// otherwise the hurried timeouts — except for a sole voter,
		// which raft elects after its own heartbeat timeout anyway.
		if !g.Campaign("") && len(servers) > 1 {
			g.campaignFirst()
		}
		return nil
	}
	if pos := slices.IndexFunc(servers, func(s raft.Server) bool { return string(s.ID) == g.cfg.NodeID }); pos > 0 &&
		g.cfg.BootstrapFallback > 0 && g.CanCampaign() {
		g.wg.Add(1)
		go g.campaignIfLeaderless(g.cfg.BootstrapFallback + time.Duration(pos-1)*restartStagger)
	}
	return nil
}

// campaignIfLeaderless campaigns (Campaign) after wait if this replica
// still knows no leader and is a follower (Config.BootstrapFallback).
func (g *Group) campaignIfLeaderless(wait time.Duration) {
	defer g.wg.Done()
	select {
	case <-g.closed:
		return
	case <-time.After(wait):
	}
	if id, _ := g.Leader(); id != "" || g.raft.State() != raft.Follower {
		return
	}
	g.cfg.Logger.Info("no leader after bootstrapping the group: campaigning", "group", g.cfg.Name, "waited", wait)
	g.Campaign("")
}

// campaignFirst makes the replica listed first in a new group's
// configuration (the placement's preferred leader) start its first
// election before the others: it takes the hurried timeouts until a
// leader is known. Without it every replica of every new group times out
// at once — at 1,024 slots thousands of split votes and pre-votes while
// the cluster forms, then a leadership transfer for two slots in three to
// reach the preferred leaders.
func (g *Group) campaignFirst() {
	if !g.claimHurry("(none)") {
		return
	}
	go g.hurry("", 0, nil)
}

// watchLeadership runs OnLeader while this replica leads. It listens on
// NotifyCh (not LeaderCh, which drops transitions) and, on gaining
// leadership, issues a barrier first, so the leader-only work starts from a
// state that includes every entry committed by earlier leaders.
func (g *Group) watchLeadership() {
	defer g.wg.Done()
	var cancel context.CancelFunc
	var done chan struct{}
	stop := func() {
		if cancel != nil {
			cancel()
			<-done
			cancel, done = nil, nil
		}
	}
	defer stop()
	for {
		select {
		case <-g.closed:
			return
		case leader := <-g.notify:
			stop()
			g.readTerm.Store(0)
			if !leader {
				g.watchLeaderless()
				continue
			}
			if g.gate != nil {
				// A majority found this log up-to-date: whatever it
				// was learning, there is nothing left to forget.
				g.gate.elected()
			}
			term := g.raft.CurrentTerm()
			if !g.barrier() {
				g.watchLeaderless()
				continue
			}
			g.readTerm.Store(term)
			if g.cfg.OnLeader == nil {
				continue
			}
			ctx, c := context.WithCancel(context.Background())
			cancel, done = c, make(chan struct{})
			go func() {
				defer close(done)
				g.cfg.OnLeader(ctx)
			}()
		}
	}
}

// leaderlessAfter is how long a replica that stopped leading waits to
// hear of another leader before it hurries an election (watchLeaderless).
const leaderlessAfter = time.Second

// watchLeaderless hurries an election when, leaderlessAfter after this
// replica stopped leading, it is a follower that knows no leader.
//
// A leader that steps down on its own (check-quorum: no majority answered
// for the lease, say while a follower was paused and the other slow)
// knows no leader afterwards, and its followers, whose heartbeat
// timeouts are 10–20 s away (slots), still name it: nobody campaigns
// until one of those timers fires, and the node's liveness check, which
// hurries elections after a leader dies, sees every node alive. In the
// nemesis (seed 1593762907438405713, cycle 31) a slot went about 6 s
// without a leader that way, its jobs up to 10.5 s late. The hurry here
// lowers this replica's heartbeat timeout to the lease, so it campaigns
// as soon as it has been silent that long (raft counts from the
// step-down: a lease after it, 5 s for a slot); pre-vote stays on, and
// the followers grant it, since they still name it. After a planned
// transfer this replica knows the new leader by then and does nothing
// (TestTransferStartsNoLeaderlessElection).
//
// The hurry waits for raft's timer, which counts the lease from the
// step-down: with the slots' 5 s lease, a group whose leader stepped down
// under a fault that healed a moment later stood without a leader for 5 s
// (the nemesis' long delays, docs/reliability.md). Where the node
// consents (LeaderlessConsent: a majority of the voters answers and
// names this replica or no one), the replica campaigns at once with a
// TimeoutNow instead. The consent is what pre-vote would have checked:
// a replica cut off from the majority (the usual cause of the step-down)
// gets no answers, and campaigning there would only raise its term and
// depose a leader the majority elects meanwhile.
func (g *Group) watchLeaderless() {
	stepped := time.Now()
	time.AfterFunc(leaderlessAfter, func() {
		if !g.leaderless() || g.campaignWithConsent() {
			return
		}
		if id, _ := g.Leader(); id != "" || !g.claimHurry("(leaderless)") {
			return
		}
		g.cfg.Logger.Info("no leader since this replica stopped leading: electing one now", "group", g.cfg.Name, "after", leaderlessAfter)
		go g.hurry("", 0, nil)
		if g.cfg.LeaderlessConsent == nil {
			return
		}
		// The fault behind the step-down may heal before the lease is
		// out: ask again meanwhile.
		if g.track() {
			go g.askConsentUntil(stepped.Add(g.timing.LeaderLeaseTimeout))
		}
	})
}

// consentPoll is how often a replica that stepped down asks again for
// the consent to campaign at once (askConsentUntil).
const consentPoll = 250 * time.Millisecond

// askConsentUntil asks for LeaderlessConsent every consentPoll until
// until (when raft's own timer elects), the replica campaigns, or it is
// no longer a follower that knows no leader. It ends with g.wg.Done().
func (g *Group) askConsentUntil(until time.Time) {
	defer g.wg.Done()
	t := time.NewTicker(consentPoll)
	defer t.Stop()
	for time.Now().Before(until) {
		select {
		case <-g.closed:
			return
		case <-t.C:
		}
		if !g.leaderless() || g.campaignWithConsent() {
			return
		}
	}
}

// leaderless reports whether this replica is a follower that knows no
// leader.
func (g *Group) leaderless() bool {
	if g.raft.State() != raft.Follower {
		return false
	}
	id, _ := g.Leader()
	return id == ""
}

// campaignWithConsent campaigns at once (Campaign) if the node consents
// (Config.LeaderlessConsent) and the replica still knows no leader; it
// reports whether it did.
func (g *Group) campaignWithConsent() bool {
	c := g.cfg.LeaderlessConsent
	if c == nil || !c(g.Voters()) || !g.leaderless() || !g.Campaign("") {
		return false
	}
	g.cfg.Logger.Info("no leader since this replica stopped leading, and a majority of the voters answers: campaigning now (timeout-now)",
		"group", g.cfg.Name)
	return true
}

// barrier retries until it succeeds, leadership is lost, or the group
// closes. A newer notification (leadership lost) aborts it too.
func (g *Group) barrier() bool {
	for attempt := 0; ; attempt++ {
		if g.raft.State() != raft.Leader {
			return false
		}
		err := g.raft.Barrier(10 * time.Second).Error()
		if err == nil {
			return true
		}
		g.cfg.Logger.Warn("barrier after gaining leadership failed; retrying", "group", g.cfg.Name, "error", err)
		select {
		case <-g.closed:
			return false
		case leader := <-g.notify:
			if !leader {
				return false
			}
		case <-time.After(time.Duration(attempt+1) * 100 * time.Millisecond):
		}
	}
}

// await waits for a future of an Apply or Barrier, or until raft has shut
// down. hashicorp/raft does not answer every such future when it stops —
// an entry still in its buffered apply channel (BatchApplyCh), or
// committed and queued for the FSM goroutine, which stops too — and those
// futures carry no shutdown channel: their waiters, proposer workers, and
// the replica's Close behind them, waited forever
// (TestApplyReturnsWhenTheGroupCloses; make test hung on it in slot's
// TestReplicaDestroyAndRecreate). The outcome of an entry given up on is
// unknown to the caller, as for any failed Apply. The wait costs a
// goroutine per entry; one that raft never answers stays parked.
func (g *Group) await(f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-g.shut:
		select {
		case err := <-done:
			return err
		default:
			return raft.ErrRaftShutdown
		}
	}
}

// Apply commits one entry and returns the FSM's per-command results.
func (g *Group) Apply(data []byte) ([]model.Result, error) {
	f := g.raft.Apply(data, 10*time.Second)
	if err := g.await(f); err != nil {
		return nil, mapRaftErr(err)
	}
	switch v := f.Response().(type) {
	case []model.Result:
		return v, nil
	case error:
		return nil, v
	default:
		return nil, fmt.Errorf("%s: unexpected apply response %T", g.cfg.Name, v)
	}
}

// Barrier waits until every entry committed before it is applied locally
// (leader only).
func (g *Group) Barrier(timeout time.Duration) error {
	if err := g.await(g.raft.Barrier(timeout)); err != nil {
		return mapRaftErr(err)
	}
	return nil
}

// pauseForTransfer runs BeforeTransfer, if any.
func (g *Group) pauseForTransfer() func(resume bool) {
	if g.cfg.BeforeTransfer == nil {
		return func(bool) {}
	}
	return g.cfg.BeforeTransfer()
}

// ReadReady reports whether this replica may answer a read from its own
// state: raft says it leads, and a barrier it issued in the current term
// finished, so every entry committed before (by this or an earlier
// leader) is applied here. A leader that was deposed without knowing it
// yet (paused, cut off) still passes: the caller adds the liveness lease
// (slot.Replica.Readable).
func (g *Group) ReadReady() bool {
	if g.raft.State() != raft.Leader {
		return false
	}
	t := g.readTerm.Load()
	return t != 0 && t == g.raft.CurrentTerm()
}

// VerifyLeader confirms with a majority of the voters, in one heartbeat
// round (concurrent calls share one that starts after they arrive), that
// this replica still leads: a leader deposed by a transfer or an election
// it has not heard of yet learns of the newer term from the answers and
// fails here. It fails with ErrNotLeader, also when too few voters answer.
//
// Over a transport whose heartbeats may be answered from held answers
// (rpc/beat), raft's own VerifyLeader could count one of those, so the
// round is this package's (confirm.go), with heartbeats each follower's
// group answers itself.
func (g *Group) VerifyLeader() error {
	if c, ok := g.trans.(confirmer); ok {
		return g.confirms.do(func() error { return g.confirm(c) })
	}
	// The round's heartbeats go out at once rather than wait for a
	// transport's coalescing (rpc/beat).
	if u, ok := g.trans.(urgentTransport); ok {
		u.Urgent(verifyUrgency)
	}
	if err := g.raft.VerifyLeader().Error(); err != nil {
		return ErrNotLeader
	}
	return nil
}

// urgentTransport is a transport that can send heartbeats at once for a
// while (rpc/beat's coalescing one).
type urgentTransport interface{ Urgent(d time.Duration) }

// resumeNotifier is a transport that reports a follower an append failed
// to answering heartbeats again (rpc/beat's).
type resumeNotifier interface{ OnResume(fn func()) }

// verifyUrgency is how long a VerifyLeader's heartbeats skip coalescing:
// long enough for raft's heartbeat goroutines to be woken and send.
const verifyUrgency = 50 * time.Millisecond

// IsLeader reports whether this replica leads the group.
func (g *Group) IsLeader() bool { return g.raft.State() == raft.Leader }

func (g *Group) leaderID() string {
	_, id := g.raft.LeaderWithID()
	return string(id)
}

// Leader returns the current leader's server id and address, if known.
func (g *Group) Leader() (id, addr string) {
	a, i := g.raft.LeaderWithID()
	return string(i), string(a)
}

// State is the replica's raft state (follower, candidate, leader, shutdown).
func (g *Group) State() raft.RaftState { return g.raft.State() }

// Removed reports whether raft has shut this replica down. With
// ShutdownOnRemove off (Open) raft does not do that when the group removes
// the replica: its node retires it once the leader confirms it is out
// (cluster maybeRetire).
func (g *Group) Removed() bool { return g.raft.State() == raft.Shutdown }

// LastIndex is the last index in the replica's log.
func (g *Group) LastIndex() uint64 { return g.raft.LastIndex() }

// LastLog is the index and term of the last entry in the replica's log,
// the pair raft's vote compares (the later term wins, then the longer
// log). term is 0 when the entry cannot be read (the log ends at a
// snapshot, or was compacted meanwhile): the caller then has the index
// alone.
func (g *Group) LastLog() (index, term uint64) {
	index = g.raft.LastIndex()
	var l raft.Log
	if index > 0 && g.logs.GetLog(index, &l) == nil {
		term = l.Term
	}
	return index, term
}

// CommitIndex is the latest index the replica knows to be committed.
func (g *Group) CommitIndex() uint64 { return g.raft.CommitIndex() }

// AppliedIndex is the last index raft handed to the FSM (including no-op
// and configuration entries, which never reach it).
func (g *Group) AppliedIndex() uint64 { return g.raft.AppliedIndex() }

// LastContact is when a follower last heard from its leader.
func (g *Group) LastContact() time.Time { return g.raft.LastContact() }

// Servers is the group's current configuration.
func (g *Group) Servers() ([]raft.Server, error) {
	f := g.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, mapRaftErr(err)
	}
	return f.Configuration().Servers, nil
}

// Snapshot takes a raft snapshot now and truncates the log behind it.
func (g *Group) Snapshot() error {
	if err := g.raft.Snapshot().Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return fmt.Errorf("%s: snapshot: %w", g.cfg.Name, err)
	}
	return nil
}

// Size is the size of the group's raft log and snapshots on disk.
func (g *Group) Size() int64 { return g.stores.Size() }

// Close stops the leadership work, raft and the transport, then closes the
// stores. Raft's Shutdown waits for the FSM to finish its current batch.
func (g *Group) Close() error {
	var err error
	g.once.Do(func() {
		g.bgMu.Lock()
		g.bgClosed = true
		g.bgMu.Unlock()
		g.hurryMu.Lock()
		close(g.closed)
		g.hurryMu.Unlock()
		g.wg.Wait()
		if g.obs != nil {
			g.raft.DeregisterObserver(g.obs)
		}
		// raft's Shutdown waits for its heartbeat goroutines: hand back
		// those a coalescing transport holds (rpc/beat Options.Park).
		if u, ok := g.trans.(urgentTransport); ok {
			u.Urgent(time.Second)
		}
		if e := g.raft.Shutdown().Error(); e != nil {
			err = fmt.Errorf("%s: raft shutdown: %w", g.cfg.Name, e)
		}
		close(g.shut)
		closeTransport(g.trans, nil)
		if e := g.stores.Close(); e != nil && err == nil {
			err = e
		}
	})
	return err
}

// LeaveLeadership hands leadership to another voter, if there is one, as
// a planned transfer (transfer.go), waiting at most timeout for it.
func (g *Group) LeaveLeadership(timeout time.Duration) {
	if !g.IsLeader() {
		return
	}
	servers, err := g.Servers()
	if err != nil {
		return
	}
	voters := 0
	for _, s := range servers {
		if s.Suffrage == raft.Voter {
			voters++
		}
	}
	if voters < 2 {
		return
	}
	if err := g.handOffGap("hand leadership away", g.raft.LeadershipTransfer, timeout, false); err != nil {
		g.cfg.Logger.Info("leadership transfer did not happen", "group", g.cfg.Name, "error", err)
		return
	}
	// A routine move, said at INFO (API.md §5): the stop's log named no
	// slot it handed away, nor to whom (a black-box review).
	to, _ := g.Leader()
	g.cfg.Logger.Info("handed leadership away", "group", g.cfg.Name, "to", to)
}

// TransferTo hands leadership to a given voter, as a planned transfer.
func (g *Group) TransferTo(id, addr string) error {
	if !g.IsLeader() {
		return ErrNotLeader
	}
	return g.handOff("transfer leadership to "+id, func() raft.Future {
		return g.raft.LeadershipTransferToServer(raft.ServerID(id), raft.ServerAddress(addr))
	}, transferWait)
}

// transferWait bounds how long a caller waits for a planned transfer; raft
// bounds the transfer itself by its election timeout, so this is only a
// safety net.
const transferWait = 30 * time.Second
