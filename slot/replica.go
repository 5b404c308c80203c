package slot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/raftgroup"
	"github.com/timemachine-db/timemachine/storage"
)

// Delivery is one callback attempt, fully resolved (route, secret, timeout).
type Delivery struct {
	URL           string
	Headers       map[string]string
	Job           *model.Job
	Attempt       int64
	SigningSecret string // "whsec_…", empty: unsigned
	Timeout       time.Duration
	Now           time.Time
	// Pipeline is the route's pipeline setting: send the request
	// HTTP/1.1-pipelined, on a connection that may already carry
	// requests waiting for their answers (model.Route.Pipeline).
	Pipeline bool
}

// Deliverer sends callbacks. The node wires in the webhook client.
type Deliverer interface {
	Deliver(ctx context.Context, d *Delivery) DeliveryResult
}

// Metrics receives the slot's measurements.
type Metrics interface {
	// Fired is called as a callback attempt starts; lateness is how long
	// after its due time.
	Fired(slot int, lateness time.Duration, attempt int64)
	// Decided is called with each attempt's verdict.
	Decided(slot int, v Verdict)
	// Applied is called with the time a raft entry took to commit and apply.
	Applied(slot int, d time.Duration)
	// RaftEvent is called when this replica starts an election or sees
	// its group's leader change.
	RaftEvent(slot int, e raftgroup.Event)
}

// Fence is what a slot leader asks right before each callback leaves
// (the node's liveness tracker implements it; docs/reliability.md).
type Fence interface {
	// LeaseHeld: a majority of voters answered a liveness ping sent less
	// than the lease ago. A leader that was paused, cut off or deposed
	// has no such answers, whatever raft still believes.
	LeaseHeld(voters []string) bool
	// LeaseEpoch changes when a voter's answers lapsed for the lease and
	// came back: the leader then confirms its leadership with raft once
	// before it sends again.
	LeaseEpoch(voters []string) uint64
	// ClockOK: this node's clock is within --max-clock-offset of the
	// majority's (and has not just stepped).
	ClockOK() bool
	// FireNow is the time due times are compared with: the local clock
	// less how far it may run ahead of the majority's.
	FireNow(local time.Time) time.Time
}

// Config configures one slot replica.
type Config struct {
	Slot   int
	NodeID string
	// Dir holds this replica's raft snapshots.
	Dir string
	// LogDB is the node's shared raft log file; this replica's log lives in
	// it, under keys prefixed by the replica's group name.
	LogDB  *storage.RaftLogDB
	DB     *storage.DB
	Stream raft.StreamLayer
	// WrapTransport, when set, wraps the replica's raft transport (the
	// node's heartbeat coalescer, rpc/beat).
	WrapTransport func(*raft.NetworkTransport) raft.Transport
	// Meta returns the current meta state (collections and routes), read at
	// fire time so a route's URL is the one configured when the job fires.
	Meta      func() *raftfsm.MetaState
	Deliverer Deliverer
	Metrics   Metrics
	Logger    *slog.Logger
	// RaftLogLevel is hashicorp/raft's log level (default "warn").
	RaftLogLevel string
	Clock        func() time.Time
	Timing       raftgroup.Timing
	// Lanes, if set, applies routes' delivery control (rate limits,
	// in-flight caps, batching): share one across the node's replicas.
	Lanes *Lanes
	// Targets, if set, bounds the callbacks in flight to one target
	// (host:port) across the node: share one across the node's replicas.
	Targets *Targets
	// FireSlots bounds concurrent callbacks; share one across the node's
	// slots. Default: a pool of 256 for this replica alone.
	FireSlots chan struct{}
	// Window is how far ahead of now the scheduler keeps the due index in
	// memory (default 2s). MaxLoaded caps the jobs it holds (default 20000).
	Window    time.Duration
	MaxLoaded int
	// SnapshotBytes triggers a raft snapshot once this many command bytes
	// were applied since the last one (default 4 MiB), so the raft log of
	// a slot that takes big batches stays small.
	SnapshotBytes uint64
	// MaintenanceInterval paces retention cleanup and offset upkeep
	// (default 30s).
	MaintenanceInterval time.Duration
	// OnFatal is called once if the replica's storage fails.
	OnFatal func(error)
	// Fence, if set, must allow each callback right before it is sent
	// (fencing and clock bounds); unset, only raft's leadership counts.
	Fence Fence
	// MetaReady, if set, blocks until the meta state has been replayed
	// (meta.Replica.WaitReplayed); a new leader waits for it before firing,
	// so a collection or route that the meta state has not replayed yet is
	// never taken for a deleted one.
	MetaReady func(ctx context.Context) error
	// MetaCurrent, if set, reports whether the meta state is current (the
	// meta group has a leader and this node applied what it committed).
	// While it is not, a job naming a route the meta state does not know is
	// held back instead of failed (the route may be newer than this node's
	// copy), and finished jobs are not expired (a collection's retention
	// may have changed).
	MetaCurrent func() bool
	// LeaderlessConsent, if set, lets a replica that stepped down campaign
	// again at once when a majority of the voters answers
	// (raftgroup.Config's).
	LeaderlessConsent func(voters []string) bool
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.FireSlots == nil {
		c.FireSlots = make(chan struct{}, 256)
	}
	if c.Window <= 0 {
		c.Window = 2 * time.Second
	}
	if c.MaxLoaded <= 0 {
		c.MaxLoaded = 20000
	}
	if c.SnapshotBytes == 0 {
		c.SnapshotBytes = 4 << 20
	}
	if c.MaintenanceInterval <= 0 {
		c.MaintenanceInterval = 30 * time.Second
	}
	if c.Metrics == nil {
		c.Metrics = nopMetrics{}
	}
}

type nopMetrics struct{}

func (nopMetrics) Fired(int, time.Duration, int64) {}
func (nopMetrics) Decided(int, Verdict)            {}
func (nopMetrics) Applied(int, time.Duration)      {}
func (nopMetrics) RaftEvent(int, raftgroup.Event)  {}

// Replica is one replica of one slot: its raft group, state machine,
// leadership watch and, while it leads, the scheduler.
type Replica struct {
	cfg       Config
	slot      int
	log       *slog.Logger
	db        *storage.DB
	fsm       *raftfsm.SlotFSM
	g         *raftgroup.Group
	snaps     *snapshotStore
	fireSlots chan struct{}

	writes   *raftgroup.Proposer // client writes: create, upsert, delete, purge
	outcomes *raftgroup.Proposer // the scheduler's acks, retries and reschedules

	active atomic.Pointer[scheduler]
	// pauseMu orders planned transfers against a term's scheduler coming
	// up: paused counts the transfers in progress (pauseScheduler until
	// its after), and a scheduler installed while one is starts paused.
	pauseMu        sync.Mutex
	paused         int
	guard          *jobGuard // fires vs. DELETE/PUT of the same job (leader only)
	voters         atomic.Pointer[voterCache]
	verifiedEpoch  atomic.Uint64 // Fence.LeaseEpoch+1 last confirmed by a heartbeat round (fenced)
	proposedOffset atomic.Int64
	lastOffset     atomic.Int64
	lastOffsetAt   atomic.Int64
	snapBytes      atomic.Uint64

	schedWake chan struct{} // SchedulesChanged wakes the schedule loop
	// maintPasses counts the upkeep loop's passes (tests wait on it).
	maintPasses atomic.Int64
	// snapIdle: the snapshot loop sleeps until Applied kicks snapKick.
	snapIdle   atomic.Bool
	snapKick   chan struct{}
	schedNoted atomic.Int64 // the earliest schedule due entry written since the loop's last look
	// advanceCommit is the schedule loop's moving average of an advance's
	// commit time (ns), which its lead follows (leadFor).
	advanceCommit atomic.Int64

	stopMaint chan struct{}
	maintWG   sync.WaitGroup
	closeOnce sync.Once
}

// Open opens a slot replica and starts its raft group. A brand-new replica
// waits for Bootstrap (or, in a cluster, to be added by a leader).
func Open(cfg Config) (*Replica, error) {
	cfg.setDefaults()
	r := &Replica{cfg: cfg, slot: cfg.Slot, log: cfg.Logger.With("slot", cfg.Slot), db: cfg.DB, fireSlots: cfg.FireSlots, stopMaint: make(chan struct{}), guard: newJobGuard(), schedWake: make(chan struct{}, 1), snapKick: make(chan struct{}, 1)}
	if err := FinishDestroy(cfg.Dir, cfg.Slot, groupName(cfg.Slot), cfg.DB, cfg.LogDB); err != nil {
		return nil, fmt.Errorf("slot %d: finish deleting an earlier replica: %w", cfg.Slot, err)
	}
	removeStaleStreams(cfg.Dir, r.log)
	var floors raftgroup.FloorStore
	if cfg.LogDB != nil {
		floors = cfg.LogDB // a nil *RaftLogDB must not become a non-nil interface
	}
	fsm, err := raftfsm.OpenSlotFSM(cfg.DB, cfg.Slot, r.log, r.fatal)
	if err != nil {
		return nil, err
	}
	r.fsm = fsm
	r.schedNoted.Store(math.MinInt64) // the first look reads the whole index
	fsm.SetObserver(r)
	g, err := raftgroup.Open(raftgroup.Config{
		Name:              groupName(cfg.Slot),
		NodeID:            cfg.NodeID,
		Dir:               cfg.Dir,
		Stream:            cfg.Stream,
		WrapTransport:     cfg.WrapTransport,
		FSM:               fsm,
		Logger:            r.log,
		RaftLogLevel:      cfg.RaftLogLevel,
		Timing:            slotTiming(cfg.Timing),
		NoRestoreOnStart:  true,
		TrailingLogs:      64,
		SnapshotThreshold: 4096,
		SnapshotInterval:  30 * time.Second,
		OnLeader:          r.lead,
		BeforeStart:       r.recover,
		LogDB:             cfg.LogDB,
		Floors:            floors,
		BeforeTransfer:    r.pauseScheduler,
		LeaderlessConsent: cfg.LeaderlessConsent,
		OnEvent:           func(e raftgroup.Event) { cfg.Metrics.RaftEvent(cfg.Slot, e) },
		WrapSnapshots: func(fs *raft.FileSnapshotStore) raft.SnapshotStore {
			r.snaps = &snapshotStore{FileSnapshotStore: fs, fsm: fsm, dir: cfg.Dir}
			return r.snaps
		},
	})
	if err != nil {
		return nil, err
	}
	r.g = g
	// One worker per slot: writes that arrive while an entry commits form
	// the next entry. More workers only made entries smaller (measured:
	// 12.8k single creates/s with one, 10.0k with four).
	r.writes = raftgroup.NewProposer(r.applyEntry, raftgroup.ProposerOptions{Workers: 1, MaxBytes: 2 << 20, MaxCmds: 4096})
	// Outcomes are not waited on by anyone, so they may linger a little to
	// share entries: at 20k fires/s that is the difference between a
	// commit per fire and a commit per hundred.
	r.outcomes = raftgroup.NewProposer(r.applyEntry, raftgroup.ProposerOptions{Workers: 1, MaxBytes: 2 << 20, MaxCmds: 8192,
		Linger: outcomeLinger, Extra: r.offsetCmd})
	r.maintWG.Add(1)
	go r.snapshotLoop()
	return r, nil
}

// groupName is the slot's raft group name (logs, and its keys in the
// shared raft log file).
func groupName(s int) string { return fmt.Sprintf("slot-%d", s) }

// SlotCommitTimeout is a slot group's raft CommitTimeout unless the
// Timing sets one. hashicorp/raft sends every follower an AppendEntries
// every CommitTimeout (randomised up to twice that) even when nothing
// changed, only so an idle follower learns the commit index soon; at the
// library's 20-50 ms that was five times the heartbeat traffic and the
// largest idle cost of a slot (docs/scaling.md). It delays nothing a
// client waits for: the leader commits and answers without it, writes
// carry the commit index as they flow, and a new leader applies
// everything before it fires (Barrier). An idle follower's FSM simply
// lags by up to twice this, by a few entries at most (catch-up checks
// allow raftgroup.CaughtUpSlack). A follower whose replication failed is
// retried on the next write, or caught up at once when it answers
// heartbeats again (raftgroup catchUp); only an idle group's retry waits
// for this tick. 5 s was still ~20 % of an idle node's wake-ups at 256
// slots (each send wakes the leader's replication and pipeline goroutines,
// the connection's writer and reader on both sides, the follower's raft
// loop: docs/scaling.md, fifth pass); 15 s keeps twice it within the
// 30 s after which the cluster warns of a replica behind
// (cluster.DefaultReplicaWarnAfter).
const SlotCommitTimeout = 15 * time.Second

// Slot groups' raft timeouts unless the Timing sets them (a zero
// HeartbeatTimeout). hashicorp/raft's leader wakes a goroutine per
// follower every HeartbeatTimeout/10 to HeartbeatTimeout/5 to send a
// heartbeat, idle or not: with the library's 1 s that was ~4,600
// heartbeats a second at 1,024 slots and the floor of the idle cost
// (docs/scaling.md). With 10 s they go every 1–2 s, and every 2–3.5 s
// over the node's coalescing transport, which holds raft's call until a
// shared tick (rpc/beat held.go); with 5 s, half as far apart, they were
// half of a 256-slot cluster's idle CPU (docs/scaling.md, eleventh and
// twelfth passes). Failover does not wait for these timeouts: the
// liveness check finds a dead leader within ~0.7 s and the follower with
// the longest log campaigns at once through a TimeoutNow (raftgroup
// Campaign, node hurryorder.go); a replica reopened with no leader known
// campaigns at once too (its raft has heard from nobody, raftgroup
// electAfterRestart). The lease (raft's check-quorum: a leader steps down
// after that long without a majority's answers) is 5 s, 1.5–2.5 rounds,
// so a loaded node does not lose leaderships for one late answer; it
// fences nothing — firing and reads are fenced by the liveness lease
// (500 ms, Fence) and a read's heartbeat round (VerifyLeader). raft
// requires every hurried timeout to be at least the lease, so what still
// leans on raft's timers takes a lease or more: an election retried after
// a failed campaign (5–10 s), the fallback when the other followers do not
// agree the leader is dead, a leader that stepped down on its own while no
// majority of its voters answers it (a lease after the step-down;
// raftgroup LeaderlessConsent), and a follower that loses only raft's connection
// to a leader the liveness check still hears (10–20 s).
const (
	SlotHeartbeatTimeout = 10 * time.Second
	SlotLeaderLease      = 5 * time.Second
)

// slotTiming fills in SlotCommitTimeout, and the slot timeouts above when
// the heartbeat timeout is not set.
func slotTiming(t raftgroup.Timing) raftgroup.Timing {
	if t.CommitTimeout == 0 {
		t.CommitTimeout = SlotCommitTimeout
	}
	if t.HeartbeatTimeout == 0 {
		t.HeartbeatTimeout = SlotHeartbeatTimeout
		t.ElectionTimeout = max(t.ElectionTimeout, SlotHeartbeatTimeout)
		if t.LeaderLeaseTimeout == 0 {
			t.LeaderLeaseTimeout = SlotLeaderLease
		}
	}
	return t
}

// recover runs before raft starts. The FSM state persisted in Pebble is
// normally ahead of the latest snapshot and raft only replays the log tail
// (NoSnapshotRestoreOnStart). Only when the state is behind the snapshot,
// or a restore was interrupted, is the snapshot restored here.
func (r *Replica) recover(stores *storage.RaftStores) error {
	snaps, err := stores.Snapshots.List()
	if err != nil {
		return fmt.Errorf("slot %d: list snapshots: %w", r.slot, err)
	}
	if len(snaps) == 0 {
		if r.fsm.NeedsRestore() {
			return fmt.Errorf("slot %d: a snapshot restore was interrupted and no snapshot is left to redo it; remove %s and this slot's data, then let the replica be re-created from its peers", r.slot, r.cfg.Dir)
		}
		return nil
	}
	latest := snaps[0]
	if !r.fsm.NeedsRestore() && r.fsm.Applied() >= latest.Index {
		return nil
	}
	r.log.Info("restoring slot state from snapshot", "snapshot", latest.ID, "index", latest.Index, "applied", r.fsm.Applied())
	_, rc, err := stores.Snapshots.Open(latest.ID)
	if err != nil {
		return fmt.Errorf("slot %d: open snapshot %s: %w", r.slot, latest.ID, err)
	}
	return r.fsm.Restore(rc)
}

// Bootstrap forms a new group with the given voters; a no-op when the
// replica already has raft state.
func (r *Replica) Bootstrap(servers []raft.Server) error { return r.g.Bootstrap(servers) }

func (r *Replica) fatal(err error) {
	if r.cfg.OnFatal != nil {
		r.cfg.OnFatal(err)
	}
}

// Scheduled implements raftfsm.Observer.
func (r *Replica) Scheduled(due int64, coll, id string) {
	if s := r.active.Load(); s != nil {
		s.scheduled(storage.DueEntry{Due: due, Coll: coll, ID: id})
	}
}

// Applied implements raftfsm.ApplyObserver: it wakes the snapshot loop
// when that sleeps for want of applied entries.
func (r *Replica) Applied() {
	if r.snapIdle.Load() {
		select {
		case r.snapKick <- struct{}{}:
		default:
		}
	}
}

// Reset implements raftfsm.Observer.
func (r *Replica) Reset() {
	if s := r.active.Load(); s != nil {
		s.resetAll()
	}
}

// ClockStepped wakes the leader's loops to look at the clock again: they
// sleep on the monotonic clock until a wall-clock due time (up to
// idleWake), so after the wall clock stepped forward they would sleep past
// due times until their timers ran out. The node calls it when its
// liveness check sees a step.
func (r *Replica) ClockStepped() {
	if s := r.active.Load(); s != nil {
		s.signal()
	}
	select {
	case r.schedWake <- struct{}{}:
	default:
	}
}

// pauseScheduler stops dispatching and waits for the callbacks in flight to
// finish and commit, before a planned leadership transfer: the next leader
// then has nothing to fire twice. after(true) resumes dispatching when
// leadership stayed here.
//
// A term's scheduler starts only after the barrier and the wait for the
// meta state, so a transfer can begin while this replica leads and has no
// scheduler yet: the one installed meanwhile starts paused (see lead), and
// must not fire while leadership is on its way out — its callbacks'
// outcomes might not be committed when the next leader takes over.
func (r *Replica) pauseScheduler() func(resume bool) {
	r.pauseMu.Lock()
	r.paused++
	s := r.active.Load()
	if s != nil {
		s.stopping.Store(true) // drain below waits, ordered by the gate
	}
	r.pauseMu.Unlock()
	if s != nil && !s.drain(drainTimeout) {
		r.log.Warn("callbacks still in flight at a leadership transfer; the next leader may repeat them")
	}
	return func(resume bool) {
		r.pauseMu.Lock()
		defer r.pauseMu.Unlock()
		r.paused--
		if cur := r.active.Load(); resume && r.paused == 0 && cur != nil {
			cur.resume()
		}
	}
}

// lead runs for one leadership term.
func (r *Replica) lead(ctx context.Context) {
	r.log.Debug("slot leadership gained")
	if r.cfg.MetaReady != nil {
		if err := r.cfg.MetaReady(ctx); err != nil {
			return // leadership ended first
		}
	}
	s := newScheduler(r, schedConfig{
		slot: r.slot, log: r.log, clock: r.cfg.Clock, sem: r.fireSlots,
		window: r.cfg.Window, maxLoaded: r.cfg.MaxLoaded, workers: fireWorkers, guard: r.guard, lanes: r.cfg.Lanes,
	})
	r.pauseMu.Lock()
	r.active.Store(s)
	if r.paused > 0 {
		s.stopping.Store(true) // a planned transfer is under way (pauseScheduler)
	}
	r.pauseMu.Unlock()
	defer r.active.Store(nil)
	// The records the scheduler reads to fire are handed to the apply of
	// their outcomes for this term (raftfsm/fired.go).
	r.fsm.CacheFired(true)
	defer r.fsm.CacheFired(false)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		r.maintain(ctx)
	}()
	go func() {
		defer wg.Done()
		r.runSchedules(ctx)
	}()
	s.run(ctx)
	wg.Wait()
	r.log.Debug("slot leadership ended")
}

func (r *Replica) applyEntry(data []byte) ([]model.Result, error) {
	start := time.Now()
	res, err := r.g.Apply(data)
	if err == nil {
		r.cfg.Metrics.Applied(r.slot, time.Since(start))
	}
	return res, err
}

// retryLater is what fire returns for a job it cannot deliver now but must
// not forget: the scheduler puts it back after a pause.
var retryLater = fireResult{again: retryLaterPause}

// notNow is what fire returns when it may not send right now (a DELETE or
// PUT of the job began): the job is looked at again shortly, when the
// record says what is left to do.
var notNow = fireResult{again: notNowPause}

// notNowPause is how soon a fire that was held back is looked at again.
const notNowPause = 20 * time.Millisecond

func outcome(cmd []byte) fireResult { return fireResult{cmd: cmd} }

// abandonedLinger bounds an abandoned attempt whose delivery had no
// timeout of its own (the webhook client's default is 10 s).
const abandonedLinger = 10 * time.Second

// fencedPause is how soon a job held back by the fence is looked at again.
const fencedPause = 100 * time.Millisecond

func (r *Replica) fireNow(local time.Time) time.Time {
	if r.cfg.Fence == nil {
		return local
	}
	return r.cfg.Fence.FireNow(local)
}

// fenced reports whether this replica may start a callback now: raft says
// it leads, it holds the liveness lease over the slot's voters, and its
// clock is within bounds. A few atomics and a map lookup per voter.
func (r *Replica) fenced() bool {
	if !r.g.IsLeader() {
		return false
	}
	f := r.cfg.Fence
	if f == nil {
		return true
	}
	voters := r.currentVoters()
	if !f.ClockOK() || !f.LeaseHeld(voters) {
		return false
	}
	// After a lapse of the lease, a heartbeat round proves that no newer
	// leader exists before anything is sent (LeaseEpoch): a deposed
	// leader learns of the newer term from the answers and fails here.
	e := f.LeaseEpoch(voters) + 1 // 0: never verified
	if r.verifiedEpoch.Load() == e {
		return true
	}
	if r.g.VerifyLeader() != nil {
		return false
	}
	r.verifiedEpoch.Store(e)
	return true
}

// voterCache holds the slot's voters, read from raft at most every
// voterCacheAge.
type voterCache struct {
	voters []string
	at     time.Time
}

const voterCacheAge = 200 * time.Millisecond

func (r *Replica) currentVoters() []string {
	if v := r.voters.Load(); v != nil && time.Since(v.at) < voterCacheAge {
		return v.voters
	}
	v := &voterCache{voters: r.g.Voters(), at: time.Now()}
	r.voters.Store(v)
	return v.voters
}

// Readable reports whether this replica may serve reads (GET, list) from
// its own state: it leads, its barrier of the current term finished
// (raftgroup.Group.ReadReady), and it holds the liveness lease over the
// slot's voters. A leader that was paused or cut off — and may have been
// replaced, with writes acknowledged by its successor — answers nothing
// from its stale state: the caller looks for the leader elsewhere or
// answers 503.
func (r *Replica) Readable() bool {
	if !r.g.ReadReady() {
		return false
	}
	f := r.cfg.Fence
	return f == nil || f.LeaseHeld(r.currentVoters())
}

// VerifyRead is what a read served from this replica's state waits for:
// Readable, then a heartbeat round in which a majority confirms that this
// replica still leads (raftgroup.Group.VerifyLeader). The lease alone does
// not tell a leader deposed a moment ago by a leadership transfer (its
// peers still answer pings) from a current one; a stale read from such a
// leader showed in the nemesis (a job read 404 150 ms after its create's
// 201 through the new leader). It fails with raftgroup.ErrNotLeader.
func (r *Replica) VerifyRead() error {
	if !r.Readable() {
		return raftgroup.ErrNotLeader
	}
	return r.g.VerifyLeader()
}

// Expedite makes this replica elect a new leader now if it follows dead
// (raftgroup.Group.Expedite).
func (r *Replica) Expedite(dead string, stagger time.Duration, alive func() bool) {
	r.g.Expedite(dead, stagger, alive)
}

// Campaign makes this replica, a follower of dead, campaign now
// (raftgroup.Group.Campaign); CanCampaign reports whether it can.
func (r *Replica) Campaign(dead string) bool { return r.g.Campaign(dead) }

// Follows reports whether this replica names leader, or campaigns or
// leads itself (raftgroup.Group.Follows).
func (r *Replica) Follows(leader string) bool { return r.g.Follows(leader) }

// CanCampaign reports whether Campaign can work (raftgroup.Group.CanCampaign).
func (r *Replica) CanCampaign() bool { return r.g.CanCampaign() }

// Voters lists the slot's voters.
func (r *Replica) Voters() []string { return r.g.Voters() }

// RecentVoters is Voters as read at most voterCacheAge ago: cheap enough
// to ask on every write (forward refuses a write on a leader that cannot
// reach a majority of them).
func (r *Replica) RecentVoters() []string { return r.currentVoters() }

// LastIndex is the last index in the replica's log.
func (r *Replica) LastIndex() uint64 { return r.g.LastIndex() }

// LastLog is the index and term of the replica's last log entry
// (raftgroup.Group.LastLog).
func (r *Replica) LastLog() (index, term uint64) { return r.g.LastLog() }

// outcomeLinger is how long the outcome proposer waits for more outcomes
// once it holds one under load.
const outcomeLinger = 5 * time.Millisecond

// drainTimeout bounds how long a graceful stop waits for callbacks in flight.
const drainTimeout = 15 * time.Second

// maxEntryBytes bounds one raft entry; a larger request is split.
const maxEntryBytes = 4 << 20

// Propose commits commands through the slot's raft group, coalesced with
// other concurrent writes, and returns one result per command.
func (r *Replica) Propose(ctx context.Context, cmds ...raftfsm.Command) ([]model.Result, error) {
	enc := make([][]byte, len(cmds))
	for i, c := range cmds {
		enc[i] = raftfsm.EncodeOne(c)
	}
	return r.ProposeEncoded(ctx, enc)
}

// ProposeEncoded is Propose for commands already encoded (a write another
// node forwarded to this leader).
func (r *Replica) ProposeEncoded(ctx context.Context, enc [][]byte) ([]model.Result, error) {
	if !r.g.IsLeader() {
		return nil, raftgroup.ErrNotLeader
	}
	held, refused := r.beginWrites(enc)
	defer func() {
		for _, w := range held {
			r.guard.endWrite(w.coll, w.id)
		}
	}()
	if len(refused) == 0 {
		return r.propose(ctx, enc)
	}
	// Some writes were refused (their job's callback has started): propose
	// the others and put the answers back in input order.
	rest := make([][]byte, 0, len(enc)-len(refused))
	for i, c := range enc {
		if _, ok := refused[i]; !ok {
			rest = append(rest, c)
		}
	}
	var res []model.Result
	if len(rest) > 0 {
		var err error
		if res, err = r.propose(ctx, rest); err != nil {
			return nil, err
		}
	}
	out := make([]model.Result, 0, len(enc))
	for i := range enc {
		if x, ok := refused[i]; ok {
			out = append(out, x)
			continue
		}
		out = append(out, res[0])
		res = res[1:]
	}
	return out, nil
}

type heldWrite struct{ coll, id string }

// beginWrites starts the guard's write for every DELETE and PUT among enc.
// A job whose callback has started refuses it: its result is CodeFiring
// with the job, and it is not proposed.
func (r *Replica) beginWrites(enc [][]byte) (held []heldWrite, refused map[int]model.Result) {
	for i, b := range enc {
		if len(b) == 0 {
			continue
		}
		switch raftfsm.CmdType(b[0]) {
		case raftfsm.CmdDelete, raftfsm.CmdDeleteIncarnation, raftfsm.CmdUpsert:
		default:
			continue
		}
		cmds, err := raftfsm.Decode(b)
		if err != nil || len(cmds) != 1 {
			continue // the state machine answers it
		}
		var coll, id string
		switch c := cmds[0].(type) {
		case *raftfsm.Delete:
			coll, id = c.Coll, c.ID
		case *raftfsm.DeleteIncarnation:
			coll, id = c.Coll, c.ID
		case *raftfsm.Upsert:
			coll, id = c.Coll, c.ID
		default:
			continue
		}
		if r.guard.beginWrite(coll, id) {
			held = append(held, heldWrite{coll, id})
			continue
		}
		if refused == nil {
			refused = map[int]model.Result{}
		}
		j, found, err := r.Get(coll, id)
		if err != nil || !found {
			j = &model.Job{Collection: coll, ID: id}
		}
		j.Status = model.StatusFiring
		refused[i] = model.Result{Code: model.CodeFiring, Job: j}
	}
	return held, refused
}

// propose commits encoded commands, split into entries of at most
// maxEntryBytes.
func (r *Replica) propose(ctx context.Context, enc [][]byte) ([]model.Result, error) {
	total := len(enc)
	out := make([]model.Result, 0, total)
	for len(enc) > 0 {
		n, size := 0, 0
		for n < len(enc) && (n == 0 || size+len(enc[n]) <= maxEntryBytes) {
			size += len(enc[n])
			n++
		}
		res, err := r.writes.Propose(ctx, enc[:n])
		if err != nil {
			if len(out) > 0 && !errors.Is(err, raftgroup.ErrNotLeader) {
				err = fmt.Errorf("%w (after %d of %d commands committed)", err, len(out), total)
			}
			return nil, err
		}
		out = append(out, res...)
		enc = enc[n:]
	}
	return out, nil
}

// resolved is a due job ready to be sent: its delivery (route, secret,
// timeout resolved) and the retry policy its outcome is decided by.
type resolved struct {
	d      *Delivery
	policy model.RetryPolicy
}

// resolve works out where and how a due entry's job is delivered, reading
// the meta state (collections, routes) as it is now. When nothing is to
// be sent it returns false and what to do instead.
func (r *Replica) resolve(e storage.DueEntry, j *model.Job) (resolved, fireResult, bool) {
	if j == nil || j.Status != model.StatusScheduled || j.DueTime != e.Due {
		// Deleted, replaced or moved since it was loaded: make sure no
		// stray due entry is left behind (a no-op when none is).
		return resolved{}, outcome(raftfsm.EncodeOne(&raftfsm.DropDue{Due: e.Due, Coll: e.Coll, ID: e.ID})), false
	}
	meta := r.cfg.Meta()
	coll, ok := meta.Collection(j.Collection)
	if !ok || coll.Deleting {
		// Being deleted (the purge removes the job), or unknown to this
		// node's meta state. Either way nothing is delivered now; the job
		// stays due and is looked at again later rather than forgotten.
		return resolved{}, retryLater, false
	}
	policy := j.Retry.Or(coll.Retry).Or(model.DefaultRetryPolicy)
	attempt := j.Attempts + 1
	d := &Delivery{URL: j.CallbackURL, Job: j, Attempt: attempt, SigningSecret: coll.SigningSecret}
	timeoutMs := coll.EffectiveTimeoutMs()
	if j.Route != "" {
		rt, ok := meta.Route(j.Route)
		if !ok && !r.metaCurrent() {
			// Not known yet, perhaps, rather than deleted: looked at
			// again once the meta state is current.
			return resolved{}, retryLater, false
		}
		if !ok {
			r.cfg.Metrics.Decided(r.slot, VerdictFailed)
			return resolved{}, outcome(raftfsm.EncodeOne(&raftfsm.Ack{Coll: j.Collection, ID: j.ID, Version: j.Version, Attempts: j.Attempts,
				LastError: fmt.Sprintf("route %q does not exist at fire time (it was deleted, possibly moments before this job's create reached a node that had not yet heard of the deletion)", j.Route), Now: r.cfg.Clock().UnixMilli()})), false
		}
		d.URL, d.Headers = rt.WebhookURL, rt.Headers
		d.Pipeline = rt.Pipeline
		if rt.SigningSecret != "" {
			d.SigningSecret = rt.SigningSecret
		}
		if rt.TimeoutMs > 0 {
			timeoutMs = rt.TimeoutMs
		}
	}
	if j.CallbackTimeoutMs > 0 {
		timeoutMs = j.CallbackTimeoutMs
	}
	d.Timeout = model.Duration(timeoutMs)
	return resolved{d: d, policy: policy}, fireResult{}, true
}

// waitDue blocks until due (ms) has passed on the fence's clock: never
// early. False when ctx ended first.
func (r *Replica) waitDue(ctx context.Context, due int64) (time.Time, bool) {
	now := r.cfg.Clock()
	for {
		wait := time.UnixMilli(due).Sub(r.fireNow(now))
		if wait <= 0 {
			return now, true
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return now, false
		}
		now = r.cfg.Clock()
	}
}

// decide turns one attempt's result into the outcome to commit.
func (r *Replica) decide(j *model.Job, rs resolved, res DeliveryResult) fireResult {
	end := r.endMs()
	dec := r.verdict(j, rs, res, end)
	switch dec.Verdict {
	case VerdictSucceeded, VerdictFailed:
		return outcome(raftfsm.EncodeOne(&raftfsm.Ack{Coll: j.Collection, ID: j.ID, Version: j.Version, Success: dec.Verdict == VerdictSucceeded,
			Attempts: rs.d.Attempt, LastError: dec.LastError, Now: end}))
	}
	return r.otherOutcome(j, rs, dec, end)
}

// endMs is the end of an attempt in ms, rounded up, so waits computed
// from it are never short.
func (r *Replica) endMs() int64 {
	return (r.cfg.Clock().UnixNano() + int64(time.Millisecond) - 1) / int64(time.Millisecond)
}

// verdict decides one attempt's result at end (ms).
func (r *Replica) verdict(j *model.Job, rs resolved, res DeliveryResult, end int64) Decision {
	dec := Decide(res, rs.policy, j.TriggerTime, rs.d.Attempt, end, rand.Float64()*2-1)
	r.cfg.Metrics.Decided(r.slot, dec.Verdict)
	return dec
}

// decideBatched is decide for a job of a batched delivery, all of whose
// answers share end: a job the answer finished (succeeded, or failed for
// good) comes back as its AckJob, committed with the batch's others in
// one AckMany; any other verdict as its own encoded command.
func (r *Replica) decideBatched(j *model.Job, rs resolved, res DeliveryResult, end int64) (raftfsm.AckJob, bool, []byte) {
	dec := r.verdict(j, rs, res, end)
	switch dec.Verdict {
	case VerdictSucceeded, VerdictFailed:
		return raftfsm.AckJob{ID: j.ID, Version: j.Version, Success: dec.Verdict == VerdictSucceeded, Attempts: rs.d.Attempt, LastError: dec.LastError}, true, nil
	}
	return raftfsm.AckJob{}, false, r.otherOutcome(j, rs, dec, end).cmd
}

// otherOutcome is the outcome of a verdict that does not finish the job:
// a retry or a reschedule.
func (r *Replica) otherOutcome(j *model.Job, rs resolved, dec Decision, end int64) fireResult {
	attempt := rs.d.Attempt
	switch dec.Verdict {
	case VerdictRetry:
		return outcome(raftfsm.EncodeOne(&raftfsm.Retry{Coll: j.Collection, ID: j.ID, Version: j.Version, NextDue: dec.NextDue,
			Attempts: attempt, LastError: dec.LastError, Now: end}))
	default:
		return outcome(raftfsm.EncodeOne(&raftfsm.Reschedule{Coll: j.Collection, ID: j.ID, Version: j.Version, TriggerTime: dec.Trigger, Now: end}))
	}
}

// fire makes one callback attempt for a due entry, whose record j was read
// just before (nil: it no longer exists), and hands done the encoded
// outcome to commit (nil when there is nothing to commit). done runs on
// the caller's goroutine, or later on a fire worker when the job's target
// was saturated: the fire is then parked in Targets, holding no pool slot
// and no goroutine, until a place for its target frees up.
func (r *Replica) fire(ctx context.Context, e storage.DueEntry, j *model.Job, slot *heldSlot, mayFire func() bool, done func(fireResult)) {
	rs, early, ok := r.resolve(e, j)
	if !ok {
		done(early)
		return
	}

	// This target's fair share of the fire pool: when its callbacks fill
	// it, wait for one to end holding no node-wide slot, so a receiver
	// that never answers delays no other target's jobs.
	lim := r.cfg.Targets
	if lim == nil {
		done(r.send(ctx, j, rs, mayFire))
		return
	}
	key := lim.Key(rs.d.URL)
	if lim.TryAcquire(key) {
		res := r.send(ctx, j, rs, mayFire)
		lim.Release(key)
		done(res)
		return
	}
	// The pool slot goes back before the fire is parked: the parked fire
	// may be handed its place (on another goroutine) at once.
	slot.yield()
	granted := func(ok bool) {
		if !ok {
			done(fireResult{})
			return
		}
		if !slot.reclaim(ctx) {
			lim.Release(key)
			done(fireResult{})
			return
		}
		res := r.send(ctx, j, rs, mayFire)
		lim.Release(key)
		done(res)
	}
	if lim.Acquire(ctx, key, granted) {
		granted(true)
	}
}

// send makes the callback attempt of a resolved job holding its target's
// place and a pool slot, and decides its outcome.
func (r *Replica) send(ctx context.Context, j *model.Job, rs resolved, mayFire func() bool) fireResult {
	// Never early: the heap only hands out due jobs by the local clock;
	// here, right before the request leaves, the time is checked again on
	// the fence's clock (the local one less how far it may run ahead of
	// the majority's, and the measurement's uncertainty).
	now, ok := r.waitDue(ctx, j.DueTime)
	if !ok {
		return fireResult{}
	}
	if !r.fenced() {
		return fireResult{again: fencedPause}
	}
	if !mayFire() {
		return notNow
	}
	d := rs.d
	d.Now = now
	r.cfg.Metrics.Fired(r.slot, now.Sub(time.UnixMilli(j.DueTime)), d.Attempt)
	res := r.cfg.Deliverer.Deliver(ctx, d)
	if ctx.Err() != nil {
		// Leadership lost mid-flight: the next leader fires it. The
		// request goes on without a listener until its deadline.
		timeout := d.Timeout
		if timeout <= 0 {
			timeout = abandonedLinger
		}
		return fireResult{busyUntil: now.Add(timeout)}
	}
	return r.decide(j, rs, res)
}

// The replica's side of schedReplica.

func (r *Replica) offset() int64 { return r.fsm.Offset() }

func (r *Replica) dueIter(lower, upper []byte) (dueIter, error) {
	it, err := r.db.NewIter(lower, upper)
	if err != nil {
		return nil, err
	}
	return it, nil
}

func (r *Replica) readJobs(refs []storage.DueEntry) ([]*model.Job, error) {
	return r.fsm.ReadJobsToFire(refs)
}

func (r *Replica) loadedUpTo(ms int64) { r.proposedOffset.Store(ms) }

func (r *Replica) pacedRoute(j *model.Job) *model.Route {
	if r.cfg.Lanes == nil || j == nil || j.Route == "" || j.Status != model.StatusScheduled {
		return nil
	}
	rt, ok := r.cfg.Meta().Route(j.Route)
	if !ok || !rt.Paced() {
		return nil
	}
	return rt
}

// The replica's side of batchReplica.

func (r *Replica) noteFired(lateness time.Duration, attempt int64) {
	r.cfg.Metrics.Fired(r.slot, lateness, attempt)
}

func (r *Replica) commitOutcomes(ctx context.Context, cmds [][]byte) error {
	_, err := r.outcomes.Propose(ctx, cmds)
	return err
}

var _ batchReplica = (*Replica)(nil)

var _ schedReplica = (*Replica)(nil)

// offsetCmd rides along with every outcome entry: the scheduler's cursor
// as the proposed offset (the FSM clamps it to the first live due entry).
// It is rate-limited: advancing costs the FSM an iterator over the head of
// the due index, and a lagging offset only means a new leader walks a few
// more tombstones.
func (r *Replica) offsetCmd() [][]byte {
	o := r.proposedOffset.Load()
	if o == 0 || o == r.lastOffset.Load() {
		return nil
	}
	now := time.Now().UnixNano()
	if last := r.lastOffsetAt.Load(); now-last < int64(offsetEvery) {
		return nil
	}
	r.lastOffsetAt.Store(now)
	r.lastOffset.Store(o)
	return [][]byte{raftfsm.EncodeOne(&raftfsm.AdvanceOffset{Offset: o})}
}

// offsetEvery is the least time between two offset proposals.
const offsetEvery = 200 * time.Millisecond

// maintain runs leader-only upkeep: retention of finished jobs and offset
// advance when no outcome carried it.
func (r *Replica) maintain(ctx context.Context) {
	t := time.NewTicker(r.cfg.MaintenanceInterval)
	defer t.Stop()
	// The scheduler's cursor moves with the clock, so an idle leader had
	// a new offset to propose on every tick: one raft entry (fsyncs on
	// three nodes) per slot every 30 s for nothing — ~11 a second per node
	// at 1,024 slots (docs/scaling.md). With no command applied since the
	// last advance there is nothing new below the cursor to skip (no
	// outcome, create or delete), so the advance waits for activity. The
	// state machine knows (OffsetCurrent), across terms: a new leader's
	// first tick proposed an advance too, one entry per slot 30 s after
	// every election — in a freshly formed cluster, inside the idle window
	// scripts/density.sh measures (docs/scaling.md, fifth pass).
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.maintPasses.Add(1)
		if err := r.removeExpired(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("retention cleanup failed; will retry", "error", err)
		}
		if err := r.dropTombstones(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("tombstone cleanup failed; will retry", "error", err)
		}
		if r.fsm.OffsetCurrent() {
			continue
		}
		cmd := r.offsetCmd()
		if o := r.proposedOffset.Load(); cmd == nil && o != 0 && r.fsm.Offset() < o {
			// The cursor has not moved since the last advance (the loop
			// of an idle slot sleeps), but what held the offset below it
			// then — jobs in flight — has changed since.
			r.lastOffset.Store(o)
			cmd = [][]byte{raftfsm.EncodeOne(&raftfsm.AdvanceOffset{Offset: o})}
		}
		if cmd != nil {
			if _, err := r.outcomes.Propose(ctx, cmd); err != nil && ctx.Err() == nil {
				r.log.Warn("offset advance failed; will retry", "error", err)
				r.lastOffset.Store(0)
			}
		}
	}
}

// tombstoneKeep is how long a deleted job's tombstone (storage.TombKey)
// is kept, counted from its create's stamp: longer than any re-send of
// that create can come — the service resolves an unknown outcome for at
// most its 10 s budget after the forward's 5 s — with room for clocks
// that disagree. A finished job's record is kept at least as long after
// it finished (removeExpired), for the same re-sends.
const tombstoneKeep = 2 * time.Minute

// dropTombstones removes, in one entry, the tombstones older than
// tombstoneKeep, when there are any.
func (r *Replica) dropTombstones(ctx context.Context) error {
	before := r.cfg.Clock().Add(-tombstoneKeep).UnixMilli()
	lower, upper := storage.TombsBefore(r.slot, before)
	it, err := r.db.NewIter(lower, upper)
	if err != nil {
		return err
	}
	any := it.First()
	if err := it.Close(); err != nil || !any {
		return err
	}
	_, err = r.Propose(ctx, &raftfsm.DropTombstones{Before: before})
	return err
}

// metaCurrent reports whether the meta state is current (Config.MetaCurrent).
func (r *Replica) metaCurrent() bool { return r.cfg.MetaCurrent == nil || r.cfg.MetaCurrent() }

// removeExpired deletes finished jobs past their collection's retention, a
// bounded range per entry; not while the meta state is not current.
//
// A record stays on disk for at least tombstoneKeep after its job
// finished, however short the retention (API.md allows 1 s): reads and
// writes already treat it as gone (model.Collection.Expired), but a
// re-send of the create that made it — the service resolving an unknown
// outcome, up to ~15 s after the first send — must still find it, or it
// makes the job again and the job fires twice. Deletes leave a tombstone
// for those re-sends; this removal does not write one (a key per removed
// job), so the record itself is what a re-send finds. A job finishes
// after it is created, so every record removed here was created more
// than tombstoneKeep ago.
func (r *Replica) removeExpired(ctx context.Context) error {
	if !r.metaCurrent() {
		return nil
	}
	now := r.cfg.Clock().UnixMilli()
	for _, c := range r.cfg.Meta().CollectionList() {
		if c.Deleting {
			continue
		}
		before := min(c.RetainedFrom(now), now-tombstoneKeep.Milliseconds())
		for ctx.Err() == nil {
			lower, upper := storage.FinishedBefore(r.slot, c.Name, before)
			it, err := r.db.NewIter(lower, upper)
			if err != nil {
				return err
			}
			any := it.First()
			if err := it.Close(); err != nil {
				return err
			}
			if !any {
				break
			}
			res, err := r.Propose(ctx, &raftfsm.RemoveFinished{Coll: c.Name, Before: before, Limit: 2000})
			if err != nil {
				return err
			}
			if !res[0].More {
				break
			}
		}
	}
	return nil
}

// Purge removes every job of a collection from this slot, a bounded range
// per entry. The caller marked the collection as deleting first.
func (r *Replica) Purge(ctx context.Context, coll string) error {
	for {
		res, err := r.Propose(ctx, &raftfsm.PurgeCollection{Coll: coll, Limit: 5000})
		if err != nil {
			return err
		}
		if !res[0].More {
			return nil
		}
	}
}

// snapshotLoop snapshots by log volume on every replica, leader or not:
// each replica truncates its own log.
func (r *Replica) snapshotLoop() {
	defer r.maintWG.Done()
	// Every 2 s while entries are applied; an idle replica backs off to
	// snapshotIdleCheck (a 2 s ticker on each of 1,024 replicas was ~500
	// wake-ups a second on an idle node, docs/scaling.md), and once that
	// finds nothing applied either, it sleeps until the state machine
	// applies something (Applied): nothing else makes a snapshot due, and
	// the 8 s checks were still ~130 wake-ups a second at 1,024 slots
	// (docs/scaling.md, fifth pass).
	every := snapshotCheck
	t := time.NewTimer(every)
	defer t.Stop()
	last := r.fsm.AppliedBytes()
	for {
		select {
		case <-r.stopMaint:
			return
		case <-t.C:
		}
		applied := r.fsm.AppliedBytes()
		if applied == last && every == snapshotIdleCheck {
			// Set before the second look: an apply after it kicks.
			r.snapIdle.Store(true)
			if r.fsm.AppliedBytes() == last {
				select {
				case <-r.stopMaint:
					return
				case <-r.snapKick:
				}
			}
			r.snapIdle.Store(false)
			applied = r.fsm.AppliedBytes()
		}
		if applied == last {
			every = min(2*every, snapshotIdleCheck)
		} else {
			every = snapshotCheck
		}
		last = applied
		t.Reset(every)
		if applied-r.snapBytes.Load() < r.cfg.SnapshotBytes {
			continue
		}
		if err := r.Snapshot(); err != nil {
			r.log.Warn("snapshot failed; will retry", "error", err)
			continue
		}
		r.snapBytes.Store(applied)
	}
}

// snapshotCheck and snapshotIdleCheck: see snapshotLoop. (Variables only
// so that tests can shorten them.)
var (
	snapshotCheck     = 2 * time.Second
	snapshotIdleCheck = 8 * time.Second
)

// Snapshot takes a raft snapshot now and truncates the log behind it.
func (r *Replica) Snapshot() error { return r.g.Snapshot() }

// Get reads a job from this replica's state. On the leader that includes
// every acknowledged write, and a job whose callback is in flight reads
// with status firing.
func (r *Replica) Get(coll, id string) (*model.Job, bool, error) {
	j, found, err := raftfsm.GetJob(r.db, r.slot, coll, id)
	if found && j.Status == model.StatusScheduled && r.guard.firing(coll, id) {
		j.Status = model.StatusFiring
	}
	return j, found, err
}

// List lists a collection's jobs in this slot.
func (r *Replica) List(q model.ListQuery) (model.ListPage, error) {
	return raftfsm.ListJobs(r.db, r.slot, q)
}

// Slot is the slot this replica belongs to.
func (r *Replica) Slot() int { return r.slot }

// IsLeader reports whether this replica leads its slot.
func (r *Replica) IsLeader() bool { return r.g.IsLeader() }

// Leader returns the current leader's server id and address, if known.
func (r *Replica) Leader() (id, addr string) { return r.g.Leader() }

// Stats describes the replica.
type Stats struct {
	Slot        int
	State       string
	Leader      string
	Applied     uint64
	LastIndex   uint64
	Pending     int64
	Offset      int64
	RaftBytes   int64
	Voters      []string
	Nonvoters   []string
	LastContact time.Duration
}

// Stats reads the replica's current state.
func (r *Replica) Stats() Stats {
	id, _ := r.Leader()
	st := Stats{
		Slot:      r.slot,
		State:     r.g.State().String(),
		Leader:    id,
		Applied:   r.fsm.Applied(),
		LastIndex: r.g.LastIndex(),
		Pending:   r.fsm.Pending(),
		Offset:    r.fsm.Offset(),
	}
	if !r.g.IsLeader() {
		st.LastContact = time.Since(r.g.LastContact())
	}
	if servers, err := r.g.Servers(); err == nil {
		for _, s := range servers {
			if s.Suffrage == raft.Voter {
				st.Voters = append(st.Voters, string(s.ID))
			} else {
				st.Nonvoters = append(st.Nonvoters, string(s.ID))
			}
		}
	}
	return st
}

// RaftBytes is the size of this replica's raft log and snapshots on disk.
func (r *Replica) RaftBytes() int64 { return r.g.Size() }

// TransferLeadership hands leadership to another voter, if any.
func (r *Replica) TransferLeadership(timeout time.Duration) { r.g.LeaveLeadership(timeout) }

// Close stops the replica: the scheduler first (in-flight callbacks finish
// and their outcomes commit, up to drainTimeout), then proposers, raft and
// stores.
func (r *Replica) Close() error {
	var err error
	r.closeOnce.Do(func() {
		if s := r.active.Load(); s != nil {
			if !s.drain(drainTimeout) {
				r.log.Warn("callbacks still in flight at shutdown; they will be retried by the next leader")
			}
		}
		close(r.stopMaint)
		r.maintWG.Wait()
		err = r.g.Close()
		r.writes.Close()
		r.outcomes.Close()
		r.fsm.Release() // raft's FSM goroutine has stopped
	})
	return err
}

// Reconcile takes at most one membership step toward the desired members
// (leader only). caughtUp reports whether a new replica has the log.
func (r *Replica) Reconcile(want raftgroup.Membership, caughtUp func(id string) bool) (raftgroup.Step, error) {
	return r.g.Reconcile(want, caughtUp)
}

// TakeStep executes one membership step planned by the cluster controller
// against the configuration at configIndex (leader only).
func (r *Replica) TakeStep(step raftgroup.Step, configIndex uint64) error {
	return r.g.TakeStep(step, configIndex)
}

// TransferTo hands the slot's leadership to a given voter.
func (r *Replica) TransferTo(id, addr string) error { return r.g.TransferTo(id, addr) }

// Status reports the replica's raft state, with the state machine's own
// applied index.
func (r *Replica) Status() raftgroup.Status {
	st := r.g.Status()
	st.Applied = r.fsm.Applied()
	return st
}

// Removed reports whether raft has shut this replica down (raftgroup
// Group.Removed).
func (r *Replica) Removed() bool { return r.g.Removed() }

// Destroy deletes the replica's data after Close: its key span in Pebble,
// its raft log and stable state in the shared log file, and its
// snapshots. Used when the slot moved away.
//
// A replica of the same slot may be re-created on this node right after
// (the slot is placed back), or the process may die midway, so the three
// deletions must look like one: a re-open must never see part of the old
// state (a raft log without its snapshot made raft.NewRaft panic with
// "log not found"). The directory is renamed to a "destroying" marker first
// (atomic); from then on the replica does not exist for HasData, and
// whoever opens the slot next finishes the deletions before anything else
// (FinishDestroy). Each deletion is itself atomic (one bolt transaction,
// one Pebble batch) and idempotent.
func (r *Replica) Destroy() error {
	if err := markDestroying(r.cfg.Dir); err != nil {
		return err
	}
	return FinishDestroy(r.cfg.Dir, r.slot, r.g.Name(), r.db, r.cfg.LogDB)
}

// destroyingSuffix marks a replica directory whose deletion has started.
const destroyingSuffix = ".destroying"

func markDestroying(dir string) error {
	marker := dir + destroyingSuffix
	err := os.Rename(dir, marker)
	if errors.Is(err, os.ErrNotExist) {
		err = os.MkdirAll(marker, 0o755) // nothing on disk to rename: still record the intent
	}
	if err != nil {
		return fmt.Errorf("slot replica %s: mark for deletion: %w", dir, err)
	}
	return nil
}

// FinishDestroy completes a deletion that Destroy started (a no-op when
// none did): the group's raft log and stable state, the slot's span in
// Pebble, then the marker directory with the old snapshots. Open calls it
// first, so a crash midway is finished before a replica of the slot runs
// again.
func FinishDestroy(dir string, slot int, group string, db *storage.DB, logDB *storage.RaftLogDB) error {
	marker := dir + destroyingSuffix
	if _, err := os.Stat(marker); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var errs []error
	if logDB != nil {
		if err := logDB.DropGroup(group, snapshotFloor(marker)); err != nil {
			errs = append(errs, err)
		}
	}
	if err := db.DeleteSlot(slot); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		if err := os.RemoveAll(marker); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", marker, err))
		}
	}
	return errors.Join(errs...)
}

// snapshotFloor is the latest entry the replica's snapshots in dir cover
// (storage.VoteFloor): a follower that installed a snapshot may hold no
// log entry after it. Unreadable snapshot metadata counts for nothing; the
// log's own last entry still does.
func snapshotFloor(dir string) storage.VoteFloor {
	var f storage.VoteFloor
	metas, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*", "meta.json"))
	for _, m := range metas {
		b, err := os.ReadFile(m)
		if err != nil {
			continue
		}
		var meta struct{ Index, Term uint64 }
		if json.Unmarshal(b, &meta) != nil {
			continue
		}
		f = f.Max(storage.VoteFloor{LastTerm: meta.Term, LastIndex: meta.Index})
	}
	return f
}

// HasData reports whether a replica directory holds a replica (and not
// one being deleted).
func HasData(dir string) bool {
	_, err := os.Stat(dir)
	return err == nil
}
