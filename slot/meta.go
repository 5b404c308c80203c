package slot

import (
	"context"
	"log/slog"
	"time"

	"github.com/hashicorp/raft"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
)

// MetaConfig configures the node's replica of the meta group.
type MetaConfig struct {
	NodeID       string
	Dir          string
	Stream       raft.StreamLayer
	Logger       *slog.Logger
	RaftLogLevel string
	Timing       Timing
	// OnLeader runs while this replica leads the meta group (the cluster
	// controller); it must return when ctx ends. May be nil.
	OnLeader func(ctx context.Context)
	// OnChange is called after every applied change (from raft's FSM
	// goroutine; it must not block). May be nil.
	OnChange func(*raftfsm.MetaState)
}

// MetaReplica is this node's replica of the meta group: collections,
// routes and, in a cluster, the node and slot tables.
type MetaReplica struct {
	g      *group
	fsm    *raftfsm.MetaFSM
	writes *proposer
}

// OpenMeta opens the meta replica and starts its raft group.
func OpenMeta(cfg MetaConfig) (*MetaReplica, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	fsm := raftfsm.NewMetaFSM()
	fsm.OnChange = cfg.OnChange
	g, err := openGroup(groupConfig{
		name:          "meta",
		nodeID:        cfg.NodeID,
		dir:           cfg.Dir,
		stream:        cfg.Stream,
		fsm:           fsm,
		log:           cfg.Logger,
		raftLogLevel:  cfg.RaftLogLevel,
		timing:        cfg.Timing,
		trailingLogs:  1024,
		snapThreshold: 1024,
		onLeader:      cfg.OnLeader,
	})
	if err != nil {
		return nil, err
	}
	m := &MetaReplica{g: g, fsm: fsm}
	m.writes = newProposer(g.apply, 1, 1<<20, 1024, 0, nil)
	return m, nil
}

// Bootstrap forms a new meta group; a no-op when state exists.
func (m *MetaReplica) Bootstrap(servers []raft.Server) error { return m.g.bootstrap(servers) }

// Propose commits meta commands on the meta leader.
func (m *MetaReplica) Propose(ctx context.Context, cmds ...raftfsm.Command) ([]model.Result, error) {
	enc := make([][]byte, len(cmds))
	for i, c := range cmds {
		enc[i] = raftfsm.EncodeOne(c)
	}
	return m.ProposeEncoded(ctx, enc)
}

// ProposeEncoded is Propose for commands already encoded (forwarded).
func (m *MetaReplica) ProposeEncoded(ctx context.Context, enc [][]byte) ([]model.Result, error) {
	if !m.g.isLeader() {
		return nil, ErrNotLeader
	}
	return m.writes.propose(ctx, enc)
}

// Applied is the meta replica's applied raft index (commands, and also
// the no-op and configuration entries that never reach the state machine,
// so it is comparable with another replica's commit index).
func (m *MetaReplica) Applied() uint64 { return m.g.raft.AppliedIndex() }

// HasState reports whether this replica has any raft state (it was
// bootstrapped or has been added to the group before).
func (m *MetaReplica) HasState() (bool, error) {
	return raft.HasExistingState(m.g.stores.Log, m.g.stores.Stable, m.g.stores.Snapshots)
}

// State is the local copy of the meta state.
func (m *MetaReplica) State() *raftfsm.MetaState { return m.fsm.State() }

// IsLeader reports whether this replica leads the meta group.
func (m *MetaReplica) IsLeader() bool { return m.g.isLeader() }

// Leader returns the meta leader's id and address, if known.
func (m *MetaReplica) Leader() (id, addr string) {
	a, i := m.g.raft.LeaderWithID()
	return string(i), string(a)
}

// WaitCaughtUp blocks until this replica's meta state is current: the
// group has a leader and every entry this replica knows to be committed is
// applied. After a restart the meta state is rebuilt from the log only once
// a leader is elected, so until then collections and routes look missing;
// slot leaders wait for this before firing anything.
func (m *MetaReplica) WaitCaughtUp(ctx context.Context) error {
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
func (m *MetaReplica) CaughtUp() bool {
	r := m.g.raft
	if id, _ := m.Leader(); id == "" {
		return false
	}
	commit := r.CommitIndex()
	return commit > 0 && r.AppliedIndex() >= commit
}

// Barrier waits until every committed entry is applied locally.
func (m *MetaReplica) Barrier() error { return m.g.raft.Barrier(0).Error() }

// Close stops the meta replica.
func (m *MetaReplica) Close() error {
	err := m.g.close()
	m.writes.close()
	return err
}
