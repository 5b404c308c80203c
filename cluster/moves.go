package cluster

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/timemachine-db/timemachine/forward"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/raftgroup"
)

// Slot moves are owned by the meta leader (docs/architecture.md#slot-membership).
// The meta state holds each slot's TARGET replica set; the TRUTH is the
// slot's raft configuration as its leader reports it (the view). Every
// pass of the controller derives, for each slot whose configuration is
// not its target, the next membership step (raftgroup.NextStep: add a
// nonvoter, promote it once caught up, hand leadership away if the leader
// leaves, remove) and asks the slot's leader to take exactly that step
// against the configuration index it was derived from. Nothing about a
// move is persisted: a new meta leader re-derives everything from the
// targets and the configurations, so moves survive a meta-leader change
// midway. At most Config.MaxMoves slots are worked on at once, which
// bounds the snapshot traffic of new replicas catching up.

// DefaultMaxMoves is how many slots move at once unless configured.
const DefaultMaxMoves = 4

// moveTracker is the meta leader's in-memory record of slot moves: which
// slots are moving, which of them are being worked on, and the counts of
// the current round, for /v1/cluster and metrics.
type moveTracker struct {
	mu       sync.Mutex
	pending  map[int]time.Time // slot → when it was first seen moving
	active   map[int]bool
	done     int
	doneAll  uint64 // every slot move finished while this node led, for the counter
	started  time.Time
	finished time.Time
}

func (m *moveTracker) snapshot() *model.MoveProgress {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started.IsZero() {
		return nil
	}
	p := &model.MoveProgress{Pending: len(m.pending), Active: len(m.active), Done: m.done, Total: m.done + len(m.pending),
		StartedAt: m.started.UnixMilli()}
	if !m.finished.IsZero() {
		p.FinishedAt = m.finished.UnixMilli()
	}
	return p
}

// counts reads the gauges and the counter for metrics.
func (m *moveTracker) counts() (pending, active int, done uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.pending), len(m.active), m.doneAll
}

// update records which slots are moving now and which are worked on.
func (m *moveTracker) update(moving map[int]bool, active map[int]bool, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pending == nil {
		m.pending = map[int]time.Time{}
	}
	for s := range m.pending {
		if !moving[s] {
			delete(m.pending, s)
			m.done++
			m.doneAll++
		}
	}
	for s := range moving {
		if _, ok := m.pending[s]; !ok {
			if len(m.pending) == 0 && (m.started.IsZero() || !m.finished.IsZero()) {
				m.started, m.finished, m.done = now, time.Time{}, 0 // a new round
			}
			m.pending[s] = now
		}
	}
	if len(m.pending) == 0 && !m.started.IsZero() && m.finished.IsZero() {
		m.finished = now
	}
	m.active = active
}

// reset forgets everything (this node stopped leading the meta group).
func (m *moveTracker) reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pending, m.active, m.done = nil, nil, 0
	m.started, m.finished = time.Time{}, time.Time{}
}

// settled reports whether a slot's configuration is its target: the same
// voters and no nonvoter.
func settled(t Truth, target []string) bool {
	return len(t.Nonvoters) == 0 && sameSet(t.Voters, target)
}

// started reports whether a move has begun: a replica is being filled,
// or every target replica is in and only removals (or the leader's
// hand-off) remain.
func started(t Truth, target []string) bool {
	if len(t.Nonvoters) > 0 {
		return true
	}
	for _, id := range target {
		if !t.Has(id) {
			return false
		}
	}
	return true
}

// stepReq asks a slot's leader to take one membership step (MethodStep).
type stepReq struct {
	Slot        int                `json:"slot"`
	ConfigIndex uint64             `json:"config_index"`
	Kind        raftgroup.StepKind `json:"kind"`
	ID          string             `json:"id"`
	Addr        string             `json:"addr"`
	Voter       bool               `json:"voter,omitempty"`
	// Target is the slot's target replica set with addresses, so the
	// leader can check the step against it without its own (possibly
	// stale) copy of the meta state.
	Target []raftgroup.Member `json:"target"`
}

// driveMoves takes the next membership step of every slot in motion (at
// most MaxMoves of them) and records the progress.
func (c *Cluster) driveMoves(ctx context.Context, st *raftfsm.MetaState, view View) {
	moving := map[int]bool{}
	var inMotion, waiting []int
	truths := make([]Truth, st.SlotCount)
	for s := 0; s < st.SlotCount && s < len(st.Slots); s++ {
		t := view.Truth(s)
		truths[s] = t
		target := st.Slots[s].Replicas
		if !t.Known || settled(t, target) {
			continue
		}
		moving[s] = true
		if started(t, target) {
			inMotion = append(inMotion, s)
		} else {
			waiting = append(waiting, s)
		}
	}
	limit := c.cfg.MaxMoves
	if limit <= 0 {
		limit = DefaultMaxMoves
	}
	// Slots already in motion go on (a meta-leader change may find more
	// than the bound in motion: none is left half done); new ones start
	// while there is room.
	work := inMotion
	for _, s := range waiting {
		if len(work) >= limit {
			break
		}
		work = append(work, s)
	}
	active := map[int]bool{}
	for _, s := range work {
		active[s] = true
	}
	c.moves.update(moving, active, time.Now())
	sort.Ints(work)
	var wg sync.WaitGroup
	for _, s := range work {
		t := truths[s]
		if t.Leader == "" {
			continue // an election is under way; the next pass goes on
		}
		wg.Add(1)
		go func(s int, t Truth) {
			defer wg.Done()
			c.stepSlot(ctx, st, view, s, t)
		}(s, t)
	}
	wg.Wait()
}

// stepSlot derives slot s's next step and asks its leader to take it.
func (c *Cluster) stepSlot(ctx context.Context, st *raftfsm.MetaState, view View, s int, t Truth) {
	target, ok := c.membersOf(st.Slots[s].Replicas, st)
	if !ok || len(target) == 0 {
		return
	}
	ls, ok := view.Replica(t.Leader, s)
	if !ok {
		return
	}
	cur := make([]raft.Server, 0, len(t.Voters)+len(t.Nonvoters))
	for _, id := range t.Voters {
		cur = append(cur, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(c.AddrOf(id))})
	}
	for _, id := range t.Nonvoters {
		cur = append(cur, raft.Server{Suffrage: raft.Nonvoter, ID: raft.ServerID(id), Address: raft.ServerAddress(c.AddrOf(id))})
	}
	caughtUp := func(id string) bool {
		fs, ok := view.Replica(id, s)
		return ok && raftgroup.CaughtUp(ls.Status, fs.Status)
	}
	step := raftgroup.NextStep(cur, raftgroup.Membership{Voters: target}, t.Leader, caughtUp)
	switch step.Kind {
	case raftgroup.StepNone:
		return
	case raftgroup.StepAddNonvoter:
		// The new replica's node opens an empty replica once its copy of
		// the meta state places the slot there; adding it before that
		// only makes the leader's transport back off.
		if _, open := view.Replica(step.ID, s); !open {
			return
		}
	}
	body, _ := json.Marshal(stepReq{Slot: s, ConfigIndex: t.ConfigIndex, Kind: step.Kind, ID: step.ID, Addr: step.Addr, Voter: step.Voter, Target: target})
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := c.cfg.Client.Call(cctx, c.AddrOf(t.Leader), MethodStep, body); err != nil {
		c.log.Debug("slot membership step not taken; the next pass re-derives it", "slot", s, "leader", t.Leader, "step", step.String(), "error", forward.FromWire(err))
		return
	}
	c.log.Info("slot membership step", "slot", s, "leader", t.Leader, "step", step.String())
	c.kickController()
}

// serveStep takes a membership step the controller asked for, after
// checking it against the target it carries.
func (c *Cluster) serveStep(_ context.Context, body []byte) ([]byte, error) {
	var req stepReq
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	r := c.cfg.Slots.Get(req.Slot)
	if r == nil {
		return nil, c.noReplica(req.Slot)
	}
	inTarget := slices.ContainsFunc(req.Target, func(m raftgroup.Member) bool { return m.ID == req.ID })
	switch req.Kind {
	case raftgroup.StepAddNonvoter, raftgroup.StepPromote, raftgroup.StepUpdateAddress, raftgroup.StepTransferLeader:
		if !inTarget {
			return nil, forward.ToWire(model.Invalid("step %d for %s: not one of the slot's target replicas", req.Kind, req.ID), "")
		}
	case raftgroup.StepRemove, raftgroup.StepDemote:
		if inTarget || req.ID == c.cfg.NodeID {
			return nil, forward.ToWire(model.Invalid("step %d for %s: a target replica, or the leader itself", req.Kind, req.ID), "")
		}
	default:
		return nil, forward.ToWire(model.Invalid("unknown membership step %d", req.Kind), "")
	}
	if req.Kind == raftgroup.StepTransferLeader && slices.ContainsFunc(req.Target, func(m raftgroup.Member) bool { return m.ID == c.cfg.NodeID }) {
		return nil, forward.ToWire(model.Invalid("this node stays a replica of slot %d: no hand-off", req.Slot), "")
	}
	step := raftgroup.Step{Kind: req.Kind, ID: req.ID, Addr: req.Addr, Voter: req.Voter}
	if err := r.TakeStep(step, req.ConfigIndex); err != nil {
		id, _ := r.Leader()
		return nil, forward.ToWire(err, id)
	}
	return []byte("{}"), nil
}
