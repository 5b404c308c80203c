package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/timemachine-db/timemachine/dht"
	"github.com/timemachine-db/timemachine/forward"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/raftgroup"
)

// The admin operations. They return *model.Error for what the caller got
// wrong (an unknown node, a slot out of range) and the internal error
// otherwise; the service maps those (docs/api.md#cluster-and-admin).

const retrySoon = time.Second

// Info describes the cluster: the node table and slot table from the meta
// state, and who leads what and which replicas are healthy from what every
// node reports right now.
func (c *Cluster) Info(ctx context.Context) (*model.ClusterInfo, error) {
	st := c.cfg.Meta.State()
	view := c.CachedView(ctx, 500*time.Millisecond)
	count := c.SlotCount()
	info := &model.ClusterInfo{SlotCount: count, Self: c.cfg.NodeID, Nodes: []model.NodeInfo{}, Slots: []model.SlotInfo{}}
	info.MetaLeader, _ = c.cfg.Meta.Leader()
	elig := c.eligible(st)
	info.ReplicationFactor = dht.EffectiveRF(st.ReplicationFactor, len(elig))
	if !st.Formed() {
		info.ReplicationFactor = dht.EffectiveRF(c.cfg.Replicas, 1)
	}
	led, hosted := map[string]int{}, map[string]int{}
	for s := 0; s < count; s++ {
		si := model.SlotInfo{Slot: s, Replicas: []string{}, State: "no_leader"}
		if s < len(st.Slots) {
			si.Replicas = append(si.Replicas, st.Slots[s].Replicas...)
		}
		si.Leader = view.LeaderOf(s)
		if si.Leader != "" {
			led[si.Leader]++
			si.State = "healthy"
			ls, _ := view.Replica(si.Leader, s)
			si.Pending = ls.Pending
			switch {
			case !sameSet(ls.Voters, si.Replicas):
				si.State = "moving" // membership is changing toward the placement
			default:
				for _, id := range si.Replicas {
					fs, ok := view.Replica(id, s)
					if !ok || (id != si.Leader && !raftgroup.CaughtUp(ls.Status, fs.Status)) {
						si.State = "degraded" // a replica is down or behind
					}
				}
			}
		}
		for _, id := range si.Replicas {
			hosted[id]++
		}
		info.Slots = append(info.Slots, si)
	}
	nodes := st.NodeList()
	if len(nodes) == 0 {
		nodes = []*model.Node{{ID: c.cfg.NodeID, HTTPAddr: c.cfg.HTTPAddr, BindAddr: c.cfg.BindAddr, Status: model.NodeAlive}}
	}
	for _, nd := range nodes {
		status := string(nd.Status)
		if _, ok := view.Nodes[nd.ID]; !ok && nd.Status == model.NodeAlive {
			status = "unreachable"
		}
		info.Nodes = append(info.Nodes, model.NodeInfo{ID: nd.ID, HTTPAddr: nd.HTTPAddr, BindAddr: nd.BindAddr, Status: status,
			SlotsLed: led[nd.ID], Replicas: hosted[nd.ID]})
	}
	return info, nil
}

// Ready returns nil when this node is in the cluster (its meta state is
// current) and every slot has a leader somewhere, else why not.
func (c *Cluster) Ready() error {
	if id, _ := c.cfg.Meta.Leader(); id == "" {
		return errors.New("the meta group has no leader yet (the cluster is forming, or has lost its quorum)")
	}
	if !c.cfg.Meta.CaughtUp() {
		return errors.New("this node's copy of the meta state is still catching up")
	}
	st := c.cfg.Meta.State()
	if !st.Formed() {
		return errors.New("the cluster has not formed yet")
	}
	if _, ok := st.Nodes[c.cfg.NodeID]; !ok {
		return errors.New("this node has not been added to the cluster yet")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	view := c.CachedView(ctx, time.Second)
	var missing []string
	for s := 0; s < st.SlotCount; s++ {
		if c.cfg.Slots.Leader(s) != nil {
			continue
		}
		if view.LeaderOf(s) == "" {
			missing = append(missing, fmt.Sprint(s))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("slots without a leader: %s", strings.Join(missing, ","))
	}
	return nil
}

// Rebalance computes the fewest replica moves that make replica and leader
// counts even and, unless dryRun, commits them as the new placement (the
// slot leaders then carry them out one membership step at a time).
func (c *Cluster) Rebalance(ctx context.Context, dryRun bool) ([]model.Move, error) {
	st := c.cfg.Meta.State()
	if !st.Formed() {
		return nil, model.Unavailable(retrySoon, "the cluster has not formed yet")
	}
	elig := c.eligible(st)
	desired := dht.Rebalance(assignments(st), st.SlotCount, elig, st.ReplicationFactor)
	moves := []model.Move{}
	for _, m := range dht.Diff(assignments(st), desired) {
		moves = append(moves, model.Move{Slot: m.Slot, From: m.From, To: m.To, Kind: "replica"})
	}
	if dryRun {
		return moves, nil
	}
	var ups []raftfsm.SlotUpdate
	for _, a := range desired {
		cur := st.Slots[a.Slot]
		if !sameReplicas(cur.Replicas, a.Replicas) {
			ups = append(ups, raftfsm.SlotUpdate{Slot: a.Slot, Replicas: a.Replicas, ExpectEpoch: cur.Epoch})
		}
	}
	if len(ups) > 0 {
		res, err := c.cfg.Forward.ProposeMeta(ctx, &raftfsm.SetSlots{Updates: ups})
		if err != nil {
			return nil, err
		}
		if res[0].Code == model.CodeStale {
			return nil, model.Conflict("the placement changed while the rebalance was planned; run it again")
		}
	}
	return moves, nil
}

// Compact makes every live node snapshot its replicas (truncating raft
// logs) and compact its storage.
func (c *Cluster) Compact(ctx context.Context) ([]model.CompactResult, error) {
	st := c.cfg.Meta.State()
	ids := []string{c.cfg.NodeID}
	for _, nd := range st.NodeList() {
		if nd.ID != c.cfg.NodeID && nd.Status == model.NodeAlive {
			ids = append(ids, nd.ID)
		}
	}
	out := make([]model.CompactResult, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func(i int, id string) {
			defer wg.Done()
			if id == c.cfg.NodeID {
				out[i] = c.compactLocal(ctx)
				return
			}
			cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
			defer cancel()
			body, err := c.cfg.Client.Call(cctx, c.AddrOf(id), MethodCompact, nil)
			if err == nil {
				err = json.Unmarshal(body, &out[i])
			}
			if err != nil {
				out[i] = model.CompactResult{Node: id, Error: err.Error()}
			}
		}(i, id)
	}
	wg.Wait()
	return out, nil
}

// compactLocal snapshots every local replica (which truncates its raft
// log), then compacts the node's storage.
func (c *Cluster) compactLocal(ctx context.Context) model.CompactResult {
	start := time.Now()
	res := model.CompactResult{Node: c.cfg.NodeID, OK: true}
	var errs []error
	for _, r := range c.cfg.Slots.All() {
		if err := r.Snapshot(); err != nil {
			errs = append(errs, err)
			continue
		}
		res.Snapshot++
	}
	if err := c.cfg.CompactStorage(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		res.OK, res.Error = false, err.Error()
	}
	res.Took = time.Since(start)
	res.TookMs = res.Took.Milliseconds()
	return res
}

func (c *Cluster) knownNode(id string) (*model.Node, error) {
	nd, ok := c.cfg.Meta.State().Nodes[id]
	if !ok {
		return nil, model.NotFound("node %q is not a member of this cluster (see GET /v1/cluster)", id)
	}
	return nd, nil
}

// TransferSlot asks slot s's leader to hand leadership to the voter on
// node to.
func (c *Cluster) TransferSlot(ctx context.Context, s int, to string) error {
	if count := c.SlotCount(); s < 0 || s >= count {
		return model.NotFound("slot %d does not exist (slots are 0..%d)", s, count-1)
	}
	if _, err := c.knownNode(to); err != nil {
		return err
	}
	st := c.cfg.Meta.State()
	if s < len(st.Slots) && !st.Slots[s].Has(to) {
		return model.Invalid("node %q holds no replica of slot %d (its replicas: %s)", to, s, strings.Join(st.Slots[s].Replicas, ", "))
	}
	view := c.RefreshView(ctx)
	cur := view.LeaderOf(s)
	if cur == to {
		return nil
	}
	if cur == "" {
		return model.Unavailable(retrySoon, "slot %d has no leader right now", s)
	}
	body, _ := json.Marshal(transferReq{Slot: s, To: to, Addr: c.AddrOf(to)})
	if _, err := c.cfg.Client.Call(ctx, c.AddrOf(cur), MethodTransfer, body); err != nil {
		return fmt.Errorf("transfer slot %d from %s to %s: %w", s, cur, to, forward.FromWire(err))
	}
	return nil
}

// DrainNode marks a node draining; the controller then moves its replicas
// and leaderships to other nodes.
func (c *Cluster) DrainNode(ctx context.Context, id string) error {
	nd, err := c.knownNode(id)
	if err != nil {
		return err
	}
	if len(c.eligible(c.cfg.Meta.State())) <= 1 {
		return model.Invalid("node %q is the only node of the cluster: there is nowhere to move its slots", id)
	}
	x := *nd
	x.Status = model.NodeDraining
	_, err = c.cfg.Forward.ProposeMeta(ctx, &raftfsm.UpsertNode{N: x, Now: c.now()})
	return err
}

// RemoveNode forgets a node that holds no replicas any more (drained, or
// dead and replaced).
func (c *Cluster) RemoveNode(ctx context.Context, id string) error {
	if _, err := c.knownNode(id); err != nil {
		return err
	}
	st := c.cfg.Meta.State()
	var held []string
	for s, e := range st.Slots {
		if e.Has(id) {
			held = append(held, fmt.Sprint(s))
		}
	}
	if len(held) > 0 {
		return model.Conflict("node %q still holds replicas of slots %s; drain it first (POST /v1/admin/nodes/%s/drain) or wait until a dead node's replicas are re-created", id, strings.Join(held, ","), id)
	}
	if id == c.cfg.NodeID && len(st.Nodes) == 1 {
		return model.Invalid("node %q is the only node of the cluster and cannot be removed", id)
	}
	if _, err := c.cfg.Forward.ProposeMeta(ctx, &raftfsm.RemoveNode{ID: id}); err != nil {
		return err
	}
	if c.serf != nil {
		_ = c.serf.RemoveFailedNode(id)
	}
	return nil
}
