package meta

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/raftgroup"
)

// Config configures the node's replica of the meta group.
type Config struct {
	NodeID       string
	Dir          string
	Stream       raft.StreamLayer
	Logger       *slog.Logger
	RaftLogLevel string
	Timing       raftgroup.Timing
	// OnLeader runs while this replica leads the meta group (the cluster
	// controller); it must return when ctx ends. May be nil.
	OnLeader func(ctx context.Context)
	// OnChange is called after every applied change (from raft's FSM
	// goroutine; it must not block). May be nil.
	OnChange func(*raftfsm.MetaState)
	// OnFatal stops the node (a log entry a newer binary wrote).
	OnFatal func(error)
	// OnEvent hears of elections and leader changes (metrics). May be nil.
	OnEvent func(raftgroup.Event)
	// WrapTransport wraps the group's stock transport (the node's
	// coalesced heartbeats and carried RPCs, rpc/beat WrapAlwaysOpen).
	// May be nil: every RPC then goes the stock way, and failover takes
	// raft's hurried timeouts instead of a TimeoutNow (Campaign).
	WrapTransport func(*raft.NetworkTransport) raft.Transport
	// Floors keeps the meta replica's vote floor (the node's shared raft
	// log file). With it, a replica that starts with nothing stored — a
	// node whose data directory was lost, rejoining under its old id —
	// votes only once it has caught up with the meta leader
	// (raftgroup votegate.go). May be nil.
	Floors raftgroup.FloorStore
	// LeaderlessConsent: raftgroup.Config's. May be nil.
	LeaderlessConsent func(voters []string) bool
}

// Replica is this node's replica of the meta group: collections, routes
// and, in a cluster, the node and slot tables.
type Replica struct {
	g      *raftgroup.Group
	fsm    *raftfsm.MetaFSM
	writes *raftgroup.Proposer
	// replayed: CaughtUp held at least once since the process started
	// (see WaitReplayed).
	replayed atomic.Bool
}

// Open opens the meta replica and starts its raft group.
func Open(cfg Config) (*Replica, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	fsm := raftfsm.NewMetaFSM()
	fsm.OnChange = cfg.OnChange
	fsm.OnFatal = cfg.OnFatal
	g, err := raftgroup.Open(raftgroup.Config{
		Name:              "meta",
		NodeID:            cfg.NodeID,
		Dir:               cfg.Dir,
		Stream:            cfg.Stream,
		FSM:               fsm,
		Logger:            cfg.Logger,
		RaftLogLevel:      cfg.RaftLogLevel,
		Timing:            metaTiming(cfg.Timing, cfg.WrapTransport != nil),
		TrailingLogs:      1024,
		SnapshotThreshold: 1024,
		OnLeader:          cfg.OnLeader,
		OnEvent:           cfg.OnEvent,
		WrapTransport:     cfg.WrapTransport,
		BootstrapFallback: metaBootstrapFallback,
		Floors:            cfg.Floors,
		LeaderlessConsent: cfg.LeaderlessConsent,
	})
	if err != nil {
		return nil, err
	}
	m := &Replica{g: g, fsm: fsm}
	m.writes = raftgroup.NewProposer(g.Apply, raftgroup.ProposerOptions{MaxBytes: 1 << 20, MaxCmds: 1024})
	return m, nil
}

// metaBootstrapFallback: a voter other than the first of a new meta group
// campaigns when no leader is known that long after it bootstrapped
// (raftgroup Config.BootstrapFallback). The first voter campaigns at once
// when it bootstraps, but it may not: it found its peers' meta state a
// moment after they formed the group, and waits to be added (cluster
// bootstrapLoop). With the meta group's 5 s heartbeat timeout the cluster
// then formed 7-9 s after start instead of ~1.5 s.
const metaBootstrapFallback = 500 * time.Millisecond

// Bootstrap forms a new meta group; a no-op when state exists.
func (m *Replica) Bootstrap(servers []raft.Server) error { return m.g.Bootstrap(servers) }

// Propose commits meta commands on the meta leader.
func (m *Replica) Propose(ctx context.Context, cmds ...raftfsm.Command) ([]model.Result, error) {
	enc := make([][]byte, len(cmds))
	for i, c := range cmds {
		enc[i] = raftfsm.EncodeOne(c)
	}
	return m.ProposeEncoded(ctx, enc)
}

// ProposeEncoded is Propose for commands already encoded (forwarded).
func (m *Replica) ProposeEncoded(ctx context.Context, enc [][]byte) ([]model.Result, error) {
	if !m.g.IsLeader() {
		return nil, raftgroup.ErrNotLeader
	}
	res, err := m.writes.Propose(ctx, enc)
	if err == nil {
		// The followers learn of the commit now, not at the next
		// CommitTimeout tick (MetaCommitTimeout): a node that forwarded
		// this write waits until its own copy has applied it.
		m.g.Nudge()
	}
	return res, err
}

// MetaCommitTimeout is the meta group's raft CommitTimeout unless the
// Timing sets one. hashicorp/raft sends every follower an AppendEntries
// every CommitTimeout (randomised up to twice that) even when nothing
// changed, only so an idle follower learns the commit index soon; at the
// library's 20 ms that was the largest idle cost of a node with few slots
// (docs/scaling.md). Followers still learn of every write at once: the
// leader nudges them after each one (ProposeEncoded, raftgroup Nudge).
const MetaCommitTimeout = time.Second

// The meta group's raft timeouts unless the Timing sets them (a zero
// HeartbeatTimeout), when its heartbeats go through the node's coalesced
// batches (WrapTransport): the slot groups' (slot.SlotHeartbeatTimeout,
// slot.SlotLeaderLease), for the same reasons. With the library's 1 s the
// meta leader sent each follower a heartbeat every 100-200 ms as its own
// RPC on the stock transport — the largest single item of an idle 12-slot
// cluster's CPU (docs/scaling.md, sixth pass); coalesced, they wait up to
// a tenth of the slots' lease for the next batch, which a 500 ms lease
// would not tolerate. They must equal the slots' (node's
// TestMetaTimingIsTheSlots'): the node's coalescer parks and holds every
// group's heartbeats for times derived from the slots' timeouts, and a
// shorter meta lease would see its heartbeat rounds come too late for its
// check-quorum. Failover does not wait for these timeouts: the liveness
// check finds a dead meta leader and the follower with the most
// up-to-date log campaigns at once (Campaign, node hurryorder.go), as a
// slot's does.
const (
	MetaHeartbeatTimeout = 10 * time.Second
	MetaLeaderLease      = 5 * time.Second
)

// metaTiming fills in MetaCommitTimeout, and with coalesced heartbeats
// the timeouts above when the heartbeat timeout is not set.
func metaTiming(t raftgroup.Timing, coalesced bool) raftgroup.Timing {
	if t.CommitTimeout == 0 {
		t.CommitTimeout = MetaCommitTimeout
	}
	if coalesced && t.HeartbeatTimeout == 0 {
		t.HeartbeatTimeout = MetaHeartbeatTimeout
		t.ElectionTimeout = max(t.ElectionTimeout, MetaHeartbeatTimeout)
		if t.LeaderLeaseTimeout == 0 {
			t.LeaderLeaseTimeout = MetaLeaderLease
		}
	}
	return t
}

// Applied is the meta replica's applied raft index (commands, and also
// the no-op and configuration entries that never reach the state machine,
// so it is comparable with another replica's commit index).
func (m *Replica) Applied() uint64 { return m.g.AppliedIndex() }

// HasState reports whether this replica has any raft state (it was
// bootstrapped or has been added to the group before).
func (m *Replica) HasState() (bool, error) { return m.g.HasState() }

// State is the local copy of the meta state.
func (m *Replica) State() *raftfsm.MetaState { return m.fsm.State() }

// IsLeader reports whether this replica leads the meta group.
func (m *Replica) IsLeader() bool { return m.g.IsLeader() }

// VerifyCurrent waits (until ctx ends) until this replica, leading,
// finished the barrier of its term (raftgroup.Group.ReadReady), then
// confirms its leadership with a heartbeat round: its state then holds
// every committed change. A leader elected a moment ago (after a restart
// of every node, say) has not applied its predecessors' entries yet; its
// state and index used to answer "collection does not exist" for a
// collection created long before. It fails with raftgroup.ErrNotLeader.
func (m *Replica) VerifyCurrent(ctx context.Context) error {
	for !m.g.ReadReady() {
		if !m.g.IsLeader() {
			return raftgroup.ErrNotLeader
		}
		select {
		case <-ctx.Done():
			return raftgroup.ErrNotLeader
		case <-time.After(10 * time.Millisecond):
		}
	}
	return m.g.VerifyLeader()
}

// Leader returns the meta leader's id and address, if known.
func (m *Replica) Leader() (id, addr string) { return m.g.Leader() }

// WaitCaughtUp blocks until this replica's meta state is current: the
// group has a leader and every entry this replica knows to be committed is
// applied. After a restart the meta state is rebuilt from the log only once
// a leader is elected, so until then collections and routes look missing;
// slot leaders wait for this before firing anything.
func (m *Replica) WaitCaughtUp(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if m.CaughtUp() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// CaughtUp reports whether the meta state is current (see WaitCaughtUp).
func (m *Replica) CaughtUp() bool {
	if id, _ := m.Leader(); id == "" {
		return false
	}
	commit := m.g.CommitIndex()
	ok := commit > 0 && m.g.AppliedIndex() >= commit
	if ok && !m.replayed.Load() {
		m.replayed.Store(true)
	}
	return ok
}

// WaitReplayed blocks until the meta state has been current at least once
// since this process started (WaitCaughtUp), and returns at once after
// that, whether the group has a leader now or not. What it guards against
// is the state of a restarted node, which is its last snapshot until a
// leader tells it what is committed: collections and routes created since
// would look missing. Once replayed, the state is applied in order as the
// group commits, so it lags only by what the group commits without this
// replica (a partition, a meta group without a leader) — as it does for a
// slot leader elected before such an outage, which goes on firing. A slot
// leader elected during one waits for this, not for a meta leader, and
// treats a route it does not know as not known yet rather than deleted
// while the state is not current (slot.Config.MetaCurrent).
func (m *Replica) WaitReplayed(ctx context.Context) error {
	if m.replayed.Load() {
		return nil
	}
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if m.replayed.Load() || m.CaughtUp() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// WaitApplied waits (until ctx ends) until the local meta state has
// applied the command at index. It watches the state machine's own index,
// not raft's applied index: raft advances that when it hands entries to
// the state machine, a moment before they are applied.
func (m *Replica) WaitApplied(ctx context.Context, index uint64) {
	for m.State().Index < index {
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Reconcile takes at most one step toward the desired members of the meta
// group (leader only).
func (m *Replica) Reconcile(want raftgroup.Membership, caughtUp func(id string) bool) (raftgroup.Step, error) {
	return m.g.Reconcile(want, caughtUp)
}

// Status reports the meta replica's raft state.
func (m *Replica) Status() raftgroup.Status { return m.g.Status() }

// TransferTo hands the meta group's leadership to a given voter.
func (m *Replica) TransferTo(id, addr string) error { return m.g.TransferTo(id, addr) }

// TransferLeadership hands the meta group's leadership to any other voter.
func (m *Replica) TransferLeadership(timeout time.Duration) { m.g.LeaveLeadership(timeout) }

// Expedite makes this replica elect a new meta leader now if it follows
// dead (raftgroup.Group.Expedite).
func (m *Replica) Expedite(dead string, stagger time.Duration, alive func() bool) {
	m.g.Expedite(dead, stagger, alive)
}

// Campaign makes this replica, a follower of dead, start an election now
// (raftgroup.Group.Campaign); CanCampaign reports whether it can (the
// group runs on the node's transport: WrapTransport).
func (m *Replica) Campaign(dead string) bool { return m.g.Campaign(dead) }

// CanCampaign reports whether Campaign can work (raftgroup.Group.CanCampaign).
func (m *Replica) CanCampaign() bool { return m.g.CanCampaign() }

// Follows reports whether this replica names leader, or campaigns past it
// or leads itself (raftgroup.Group.Follows).
func (m *Replica) Follows(leader string) bool { return m.g.Follows(leader) }

// Voters lists the meta group's voters.
func (m *Replica) Voters() []string { return m.g.Voters() }

// LastIndex is the last index in the replica's log.
func (m *Replica) LastIndex() uint64 { return m.g.LastIndex() }

// LastLog is the index and term of the replica's last log entry
// (raftgroup.Group.LastLog).
func (m *Replica) LastLog() (index, term uint64) { return m.g.LastLog() }

// Close stops the meta replica.
func (m *Replica) Close() error {
	err := m.g.Close()
	m.writes.Close()
	return err
}
