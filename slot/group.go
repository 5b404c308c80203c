package slot

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/storage"
)

// Timing holds the raft timeouts. The defaults suit a LAN or loopback: a
// dead leader is replaced in about two seconds.
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
	LeaderLeaseTimeout: 1000 * time.Millisecond,
	CommitTimeout:      20 * time.Millisecond,
}

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

// groupConfig configures one raft group replica.
type groupConfig struct {
	name             string // for logs: "slot-3", "meta"
	nodeID           string
	dir              string
	stream           raft.StreamLayer
	fsm              raft.FSM
	log              *slog.Logger
	raftLogLevel     string
	timing           Timing
	noRestoreOnStart bool
	trailingLogs     uint64
	snapThreshold    uint64
	snapInterval     time.Duration
	// onLeader runs while this replica leads, after a barrier proved that
	// every earlier entry is applied; it must return when ctx ends.
	onLeader func(ctx context.Context)
	// beforeStart runs after the stores open and before raft starts; the
	// slot uses it to redo an interrupted restore.
	beforeStart func(*storage.RaftStores) error
	// logDB, when set, holds the group's log in the node's shared file
	// (slots); otherwise the group gets its own raft-boltdb file (meta).
	logDB *storage.RaftLogDB
	// beforeTransfer, when set, runs before this replica hands leadership
	// away and returns what to do after (resume=true: leadership stayed).
	// The slot uses it to finish callbacks in flight first, so a planned
	// transfer never makes a receiver see a duplicate.
	beforeTransfer func() (after func(resume bool))
	// wrapSnapshots, when set, wraps the file snapshot store.
	wrapSnapshots func(*raft.FileSnapshotStore) raft.SnapshotStore
}

// group is a running raft group replica and its leadership watch.
type group struct {
	cfg    groupConfig
	raft   *raft.Raft
	stores *storage.RaftStores
	trans  *raft.NetworkTransport
	notify chan bool
	closed chan struct{}
	wg     sync.WaitGroup
	once   sync.Once
}

func openGroup(cfg groupConfig) (*group, error) {
	t := cfg.timing.orDefault()
	hlog := newRaftLogger(cfg.log, cfg.name, cfg.raftLogLevel)
	logOut := hlog.StandardWriter(&hclog.StandardLoggerOptions{InferLevels: true})
	var stores *storage.RaftStores
	var err error
	if cfg.logDB != nil {
		stores, err = storage.OpenGroupStores(cfg.logDB, cfg.name, cfg.dir, logOut)
	} else {
		stores, err = storage.OpenRaftStores(cfg.dir, logOut)
	}
	if err != nil {
		return nil, err
	}
	if cfg.beforeStart != nil {
		if err := cfg.beforeStart(stores); err != nil {
			_ = stores.Close()
			return nil, err
		}
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.nodeID)
	rc.Logger = hlog
	rc.HeartbeatTimeout = t.HeartbeatTimeout
	rc.ElectionTimeout = t.ElectionTimeout
	rc.LeaderLeaseTimeout = t.LeaderLeaseTimeout
	rc.CommitTimeout = t.CommitTimeout
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 256
	rc.NoSnapshotRestoreOnStart = cfg.noRestoreOnStart
	rc.NoLegacyTelemetry = true
	if cfg.trailingLogs > 0 {
		rc.TrailingLogs = cfg.trailingLogs
	}
	if cfg.snapThreshold > 0 {
		rc.SnapshotThreshold = cfg.snapThreshold
	}
	if cfg.snapInterval > 0 {
		rc.SnapshotInterval = cfg.snapInterval
	}
	notify := make(chan bool, 16)
	rc.NotifyCh = notify

	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:                cfg.stream,
		MaxPool:               3,
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
	if cfg.wrapSnapshots != nil {
		snaps = cfg.wrapSnapshots(stores.Snapshots)
	}
	r, err := raft.NewRaft(rc, cfg.fsm, logs, stores.Stable, snaps, trans)
	if err != nil {
		_ = trans.Close()
		_ = stores.Close()
		return nil, fmt.Errorf("%s: start raft: %w", cfg.name, err)
	}
	g := &group{cfg: cfg, raft: r, stores: stores, trans: trans, notify: notify, closed: make(chan struct{})}
	g.wg.Add(1)
	go g.watchLeadership()
	return g, nil
}

// bootstrap makes a brand-new group with the given voters. It is a no-op
// for a group that already has state (a restarted replica).
func (g *group) bootstrap(servers []raft.Server) error {
	has, err := raft.HasExistingState(g.stores.Log, g.stores.Stable, g.stores.Snapshots)
	if err != nil {
		return fmt.Errorf("%s: inspect raft state: %w", g.cfg.name, err)
	}
	if has {
		return nil
	}
	f := g.raft.BootstrapCluster(raft.Configuration{Servers: servers})
	if err := f.Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("%s: bootstrap: %w", g.cfg.name, err)
	}
	return nil
}

// watchLeadership runs onLeader while this replica leads. It listens on
// NotifyCh (not LeaderCh, which drops transitions) and, on gaining
// leadership, issues a barrier first, so the leader-only work starts from a
// state that includes every entry committed by earlier leaders.
func (g *group) watchLeadership() {
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
			if !leader || g.cfg.onLeader == nil {
				continue
			}
			if !g.barrier() {
				continue
			}
			ctx, c := context.WithCancel(context.Background())
			cancel, done = c, make(chan struct{})
			go func() {
				defer close(done)
				g.cfg.onLeader(ctx)
			}()
		}
	}
}

// barrier retries until it succeeds, leadership is lost, or the group
// closes. A newer notification (leadership lost) aborts it too.
func (g *group) barrier() bool {
	for attempt := 0; ; attempt++ {
		if g.raft.State() != raft.Leader {
			return false
		}
		err := g.raft.Barrier(10 * time.Second).Error()
		if err == nil {
			return true
		}
		g.cfg.log.Warn("barrier after gaining leadership failed; retrying", "group", g.cfg.name, "error", err)
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

// apply commits one entry and returns the FSM's per-command results.
func (g *group) apply(data []byte) ([]model.Result, error) {
	f := g.raft.Apply(data, 10*time.Second)
	if err := f.Error(); err != nil {
		return nil, mapRaftErr(err)
	}
	switch v := f.Response().(type) {
	case []model.Result:
		return v, nil
	case error:
		return nil, v
	default:
		return nil, fmt.Errorf("%s: unexpected apply response %T", g.cfg.name, v)
	}
}

// pauseForTransfer runs beforeTransfer, if any.
func (g *group) pauseForTransfer() func(resume bool) {
	if g.cfg.beforeTransfer == nil {
		return func(bool) {}
	}
	return g.cfg.beforeTransfer()
}

func (g *group) isLeader() bool { return g.raft.State() == raft.Leader }

// close stops the leadership work, raft and the transport, then closes the
// stores. Raft's Shutdown waits for the FSM to finish its current batch.
func (g *group) close() error {
	var err error
	g.once.Do(func() {
		close(g.closed)
		g.wg.Wait()
		if e := g.raft.Shutdown().Error(); e != nil {
			err = fmt.Errorf("%s: raft shutdown: %w", g.cfg.name, e)
		}
		_ = g.trans.Close()
		if e := g.stores.Close(); e != nil && err == nil {
			err = e
		}
	})
	return err
}

// leaveLeadership hands leadership to another voter, if there is one.
func (g *group) leaveLeadership(timeout time.Duration) {
	if !g.isLeader() {
		return
	}
	cf := g.raft.GetConfiguration()
	if cf.Error() != nil {
		return
	}
	voters := 0
	for _, s := range cf.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			voters++
		}
	}
	if voters < 2 {
		return
	}
	after := g.pauseForTransfer()
	defer func() { after(g.isLeader()) }()
	f := g.raft.LeadershipTransfer()
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		if err != nil {
			g.cfg.log.Warn("leadership transfer failed", "group", g.cfg.name, "error", err)
		}
	case <-time.After(timeout):
	}
}

// newRaftLogger adapts hashicorp/raft's hclog output to slog.
func newRaftLogger(log *slog.Logger, name, level string) hclog.Logger {
	if level == "" {
		level = "warn"
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:        name,
		Level:       hclog.LevelFromString(level),
		Output:      &slogWriter{log: log.With("component", "raft", "group", name)},
		DisableTime: true,
	})
}

// slogWriter turns hclog's text lines into slog records at the matching
// level.
type slogWriter struct {
	log *slog.Logger
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *slogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	sc := bufio.NewScanner(bytes.NewReader(w.buf.Bytes()))
	consumed := 0
	for sc.Scan() {
		line := sc.Text()
		consumed += len(line) + 1
		w.emit(line)
	}
	if consumed > w.buf.Len() {
		consumed = w.buf.Len()
	}
	w.buf.Next(consumed)
	return len(p), nil
}

func (w *slogWriter) emit(line string) {
	lvl := slog.LevelInfo
	switch {
	case strings.Contains(line, "[ERROR]"):
		lvl = slog.LevelError
	case strings.Contains(line, "[WARN]"):
		lvl = slog.LevelWarn
	case strings.Contains(line, "[DEBUG]"), strings.Contains(line, "[TRACE]"):
		lvl = slog.LevelDebug
	}
	// A lone replica, or a fresh group, always starts with an election:
	// raft reports it as a warning, it is routine.
	if lvl == slog.LevelWarn && strings.Contains(line, "heartbeat timeout reached, starting election") {
		lvl = slog.LevelInfo
	}
	// Drop hclog's level prefix ("[INFO]  name: ").
	if i := strings.Index(line, "]"); i >= 0 && i < 10 {
		line = strings.TrimSpace(line[i+1:])
	}
	w.log.Log(context.Background(), lvl, line)
}

var _ io.Writer = (*slogWriter)(nil)
