package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/serf/serf"

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

// Info describes the cluster as it IS: the node table from the meta
// state, and for every slot its raft configuration and leader as the
// replicas report them (View.Truth), with its target when it is moving.
// Node rows count real replicas and leaderships, so a node that still
// leads or holds a replica never shows as empty.
func (c *Cluster) Info(ctx context.Context) (*model.ClusterInfo, error) {
	st := c.cfg.Meta.State()
	view := c.consistentView(ctx, 500*time.Millisecond)
	count := c.SlotCount()
	info := &model.ClusterInfo{SlotCount: count, Self: c.cfg.NodeID, Nodes: []model.NodeInfo{}, Slots: []model.SlotInfo{}}
	info.MetaLeader, _ = c.cfg.Meta.Leader()
	if ml, ok := view.Nodes[info.MetaLeader]; ok {
		info.Moves = ml.Moves
	}
	elig := c.eligible(st)
	info.ReplicationFactor = dht.EffectiveRF(st.ReplicationFactor, len(elig))
	if !st.Formed() {
		info.ReplicationFactor = dht.EffectiveRF(c.cfg.Replicas, 1)
	}
	for s := 0; s < count; s++ {
		var target []string
		var preferred string
		if s < len(st.Slots) {
			target, preferred = st.Slots[s].Replicas, st.Slots[s].PreferredLeader
		}
		info.Slots = append(info.Slots, slotInfo(view, s, target, preferred))
	}
	// Node rows count what the slot rows show, so the two never disagree
	// (a slot nobody reported shows its target).
	reps, led := map[string]int{}, map[string]int{}
	for _, si := range info.Slots {
		if si.Leader != "" {
			led[si.Leader]++
		}
		for _, id := range si.Replicas {
			reps[id]++
		}
		for _, id := range si.Nonvoters {
			reps[id]++
		}
	}
	nodes := st.NodeList()
	if len(nodes) == 0 {
		nodes = []*model.Node{{ID: c.cfg.NodeID, HTTPAddr: c.cfg.HTTPAddr, BindAddr: c.cfg.BindAddr, Status: model.NodeAlive}}
	}
	for _, nd := range nodes {
		status := string(nd.Status)
		if _, ok := view.Nodes[nd.ID]; !ok && (nd.Status == model.NodeAlive || nd.Status == model.NodeDraining) {
			status = "unreachable"
		}
		info.Nodes = append(info.Nodes, model.NodeInfo{ID: nd.ID, HTTPAddr: nd.HTTPAddr, BindAddr: nd.BindAddr, Status: status,
			SlotsLed: led[nd.ID], Replicas: reps[nd.ID]})
	}
	return info, nil
}

// slotInfo is one slot as it is: healthy (a leader, every voter reachable
// and caught up), degraded (a voter down or behind), moving (the
// configuration is not the target yet; Target says where it goes) or
// no_leader.
func slotInfo(view View, s int, target []string, preferred string) model.SlotInfo {
	t := view.Truth(s)
	si := model.SlotInfo{Slot: s, Leader: t.Leader, Replicas: append([]string{}, t.Voters...), Nonvoters: t.Nonvoters,
		State: "no_leader", PreferredLeader: preferred}
	if !t.Known {
		si.Replicas = append(si.Replicas, target...) // nobody reported: all the cluster knows is the target
	}
	if !t.Known || !settled(t, target) {
		si.Target = append([]string{}, target...)
	}
	if t.Leader == "" {
		return si
	}
	ls, _ := view.Replica(t.Leader, s)
	si.Pending = ls.Pending
	switch {
	case si.Target != nil:
		si.State = "moving"
	default:
		si.State = "healthy"
		for _, id := range t.Voters {
			fs, ok := view.Replica(id, s)
			if !ok || (id != t.Leader && !raftgroup.CaughtUp(ls.Status, fs.Status)) {
				si.State = "degraded" // a replica is down or behind
			}
		}
	}
	return si
}

// Ready returns nil when this node is in the cluster (its meta state is
// current) and every slot has a leader somewhere, else why not. A node
// that is draining, drained or removed says so first: it is not ready for
// traffic, on purpose.
func (c *Cluster) Ready() error {
	if at := c.Removed(); !at.IsZero() {
		return fmt.Errorf("this node was removed from the cluster at %s (admin remove): it serves nothing; stop it, or restart it to join again", at.UTC().Format(time.RFC3339))
	}
	st := c.cfg.Meta.State()
	if nd, ok := st.Nodes[c.cfg.NodeID]; ok && nd.Status == model.NodeDraining {
		replicas, led := 0, 0
		for _, r := range c.cfg.Slots.All() {
			replicas++
			if r.IsLeader() {
				led++
			}
		}
		if replicas == 0 {
			return fmt.Errorf("this node is drained: it holds and leads no slot; take it out with `timemachine admin remove %s`", c.cfg.NodeID)
		}
		return fmt.Errorf("this node is draining: it still holds %d slot replicas and leads %d slots", replicas, led)
	}
	if id, _ := c.cfg.Meta.Leader(); id == "" {
		return errors.New("the meta group has no leader yet (the cluster is forming, or has lost its quorum)")
	}
	if !c.cfg.Meta.CaughtUp() {
		return errors.New("this node's copy of the meta state is still catching up")
	}
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
//
// The placement it commits must not have changed since it was planned
// (each slot's epoch is checked in the meta group); when it has — the
// controller placed a node that had just joined, a move took its next
// step — the plan is made again from the new placement, a few times,
// rather than handing the operator a 409 for a race they cannot see (the
// nemesis, seed 1593762907438405713, cycle 25: a rebalance right after a
// join).
func (c *Cluster) Rebalance(ctx context.Context, dryRun bool) ([]model.Move, error) {
	return retryStale(ctx, rebalanceAttempts, rebalanceRetryWait, func() ([]model.Move, error) {
		return c.rebalanceOnce(ctx, dryRun)
	})
}

// rebalanceAttempts and rebalanceRetryWait bound Rebalance's re-plans: the
// n-th waits n × rebalanceRetryWait first (each attempt catches up with
// the meta leader itself), time for a move under way to take its step.
const (
	rebalanceAttempts  = 5
	rebalanceRetryWait = 100 * time.Millisecond
)

// catchUpForAdmin brings this node's copy of the meta state up to the
// meta leader's commit index before an admin operation reads it (the
// node table, the placement): a lagging copy planned a rebalance without
// a node that had just joined (rebalanceOnce). what names the operation
// in the 503.
func (c *Cluster) catchUpForAdmin(ctx context.Context, what string) error {
	if _, err := c.cfg.Forward.CatchUpMeta(ctx); err != nil {
		return model.Unavailable(retrySoon, "%s needs the cluster's current configuration and could not read it (%v); retry", what, err)
	}
	return nil
}

// errPlanStale: the placement changed between planning and committing.
var errPlanStale = errors.New("the placement changed while the rebalance was planned")

// retryStale runs once until it returns anything but errPlanStale, at most
// attempts times, waiting n × wait before the n-th repeat; a plan still
// stale after the last is a conflict the caller may retry.
func retryStale[T any](ctx context.Context, attempts int, wait time.Duration, once func() (T, error)) (T, error) {
	for n := 1; ; n++ {
		v, err := once()
		if !errors.Is(err, errPlanStale) {
			return v, err
		}
		if n == attempts {
			var zero T
			return zero, model.Conflict("%v, %d times in a row (moves are under way); run it again", errPlanStale, n)
		}
		select {
		case <-ctx.Done():
			var zero T
			return zero, model.Conflict("%v, and the request ended before it could be planned again (%v); run it again", errPlanStale, ctx.Err())
		case <-time.After(time.Duration(n) * wait):
		}
	}
}

// rebalanceOnce is one plan and, unless dryRun, its commit.
//
// It plans from the meta state as the meta leader has it, not from this
// node's copy, which may lag: a rebalance through a node that had not yet
// applied a join planned nothing onto the new node, answered as if all
// was well, and the node stayed empty (the nemesis, seed
// 5945297374101737080, cycle 68: "no replica on n8" 90 s later).
func (c *Cluster) rebalanceOnce(ctx context.Context, dryRun bool) ([]model.Move, error) {
	if err := c.catchUpForAdmin(ctx, "the rebalance"); err != nil {
		return nil, err
	}
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
	// Leadership: the balancer moves each slot's leadership to the target
	// dht.LeaderTargets picks from the new placement among the nodes that
	// are up (balanceLeaders, once the slot's replicas are in place), so
	// the answer says where leaderships go too, and --wait can wait for
	// them. A node inside its failure grace period keeps its replicas but
	// is not up: a slot it would lead goes to a stand-in, never to it.
	// The view is asked now, not taken from the cache: a node that died a
	// moment ago must not be planned as a leader.
	view := c.RefreshView(ctx)
	targets := dht.LeaderTargets(desired, upNodes(st, view))
	leaderMoved := map[int]bool{}
	for _, a := range desired {
		if a.Slot >= st.SlotCount {
			continue
		}
		want, ok := targets[a.Slot]
		if !ok {
			continue
		}
		if cur := view.Truth(a.Slot).Leader; cur != "" && cur != want {
			moves = append(moves, model.Move{Slot: a.Slot, From: cur, To: want, Kind: "leader"})
			leaderMoved[a.Slot] = true
		}
	}
	// An explicit rebalance ends the operator's leadership choices: every
	// slot's leader is the balancer's again. Ending one is a move only
	// when a leadership goes somewhere: the pinned node leading and the
	// balancer choosing another is planned above; with no leader right
	// now, the leadership goes to the balancer's choice once elected.
	// A pin on the node the balancer would choose anyway moves nothing
	// and is not reported (a one-node cluster after a transfer answered
	// a "leader" move to no node, and --wait counted it). A dry run
	// reports the same moves, so the plan it answers is the one a real
	// run starts.
	var clear []raftfsm.PreferredUpdate
	for s, e := range st.Slots {
		if e.PreferredLeader != "" {
			clear = append(clear, raftfsm.PreferredUpdate{Slot: s})
			want := targets[s]
			if !leaderMoved[s] && view.Truth(s).Leader == "" && want != "" && want != e.PreferredLeader {
				moves = append(moves, model.Move{Slot: s, From: e.PreferredLeader, To: want, Kind: "leader"})
			}
		}
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
	var cmds []raftfsm.Command
	if len(ups) > 0 {
		cmds = append(cmds, &raftfsm.SetSlots{Updates: ups})
	}
	if len(clear) > 0 {
		cmds = append(cmds, &raftfsm.SetPreferredLeaders{Updates: clear})
	}
	if len(cmds) > 0 {
		res, err := c.cfg.Forward.ProposeMeta(ctx, cmds...)
		if err != nil {
			return nil, err
		}
		if res[0].Code == model.CodeStale {
			return nil, errPlanStale
		}
	}
	return moves, nil
}

// Compact makes every live node snapshot its replicas (truncating raft
// logs) and compact its storage. A draining node is live too: it still
// holds replicas (and their logs) until it is drained.
func (c *Cluster) Compact(ctx context.Context) ([]model.CompactResult, error) {
	st := c.cfg.Meta.State()
	ids := []string{c.cfg.NodeID}
	for _, nd := range st.NodeList() {
		if nd.ID != c.cfg.NodeID && (nd.Status == model.NodeAlive || nd.Status == model.NodeDraining) {
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

// TransferSlot makes node to the preferred leader of slot s (it stays
// so until the next rebalance or until to drains, fails, leaves or is
// removed) and moves the leadership there with a planned transfer: the
// current leader stops firing, lets its callbacks in flight finish and
// commit, then hands over. It waits (within ctx) for the transfer.
func (c *Cluster) TransferSlot(ctx context.Context, s int, to string) (*model.TransferResult, error) {
	if count := c.SlotCount(); s < 0 || s >= count {
		return nil, model.NotFound("slot %d does not exist (slots are 0..%d)", s, count-1)
	}
	if err := c.catchUpForAdmin(ctx, "a transfer"); err != nil {
		return nil, err
	}
	nd, err := c.knownNode(to)
	if err != nil {
		return nil, err
	}
	if nd.Status != model.NodeAlive {
		return nil, model.Invalid("node %q is %s: only an alive node can lead a slot", to, nd.Status)
	}
	st := c.cfg.Meta.State()
	if s >= len(st.Slots) {
		return nil, model.Unavailable(retrySoon, "the cluster has not formed yet")
	}
	if !st.Slots[s].Has(to) {
		return nil, model.Invalid("node %q holds no replica of slot %d (its replicas: %s); move a replica there first (admin rebalance)", to, s, strings.Join(st.Slots[s].Replicas, ", "))
	}
	view := c.RefreshView(ctx)
	from := view.LeaderOf(s)
	res := &model.TransferResult{Slot: s, From: from, To: to, Leader: from, PreferredLeader: to}
	if st.Slots[s].PreferredLeader != to {
		r, err := c.cfg.Forward.ProposeMeta(ctx, &raftfsm.SetPreferredLeaders{Updates: []raftfsm.PreferredUpdate{{Slot: s, Node: to}}})
		if err != nil {
			return nil, err
		}
		if r[0].Code != model.CodeOK {
			return nil, model.Conflict("slot %d's replicas changed meanwhile; try again", s)
		}
	}
	if from == to {
		return res, nil
	}
	if from == "" {
		return res, nil // the slot is electing; the balancer moves it once it has a leader
	}
	t := view.Truth(s)
	if !contains(t.Voters, to) {
		return res, nil // its replica is still being filled: the balancer moves it once it votes
	}
	body, _ := json.Marshal(transferReq{Slot: s, To: to, Addr: c.AddrOf(to)})
	if _, err := c.cfg.Client.Call(ctx, c.AddrOf(from), MethodTransfer, body); err != nil {
		c.log.Info("planned leadership transfer did not happen yet; the balancer will retry", "slot", s, "from", from, "to", to, "error", forward.FromWire(err))
		return res, nil
	}
	c.log.Info("slot leadership transferred on request", "slot", s, "from", from, "to", to)
	for ctx.Err() == nil {
		if l := c.RefreshView(ctx).LeaderOf(s); l != from {
			res.Leader = l
			if l == to {
				break
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return res, nil
}

// DrainNode marks a node draining: the controller moves its replicas and
// leaderships to other nodes (planned transfers); it stays in the meta
// group until it holds and leads nothing. Draining a draining node changes
// nothing. The answer says what it holds now.
func (c *Cluster) DrainNode(ctx context.Context, id string) (*model.DrainResult, error) {
	// The node's record is written back with its new status: it must be
	// the current one, not a lagging copy's.
	if err := c.catchUpForAdmin(ctx, "a drain"); err != nil {
		return nil, err
	}
	nd, err := c.knownNode(id)
	if err != nil {
		return nil, err
	}
	st := c.cfg.Meta.State()
	if nd.Status != model.NodeDraining {
		others := 0
		for _, n := range c.eligible(st) {
			if n != id {
				others++
			}
		}
		if others == 0 {
			return nil, model.Invalid("node %q is the only node of the cluster that can hold slots: there is nowhere to move its slots", id)
		}
		x := *nd
		x.Status = model.NodeDraining
		if _, err := c.cfg.Forward.ProposeMeta(ctx, &raftfsm.UpsertNode{N: x, Now: c.now()}); err != nil {
			return nil, err
		}
	}
	vctx, cancel := context.WithTimeout(ctx, adminViewTimeout)
	defer cancel()
	h := c.RefreshView(vctx).Holdings(c.SlotCount())[id]
	return &model.DrainResult{Node: id, Status: string(model.NodeDraining), Replicas: h.Replicas, SlotsLed: h.Led}, nil
}

// adminViewTimeout bounds the status calls of drain and remove: the peer
// client has no timeout of its own, and a stalled peer must not hold an
// admin call (and, for remove, the decision, taken on the view of that
// moment) for long. A peer that does not answer in time is left out of
// the view: remove then answers unavailable rather than guess.
const adminViewTimeout = 3 * time.Second

// removeSettle is how long RemoveNode waits for a drained node to close
// the replicas its slots no longer list before it answers conflict.
const removeSettle = 5 * time.Second

// RemoveNode takes a node out of the cluster and leaves its tombstone, so
// gossip does not bring it back (unless it restarts and re-joins). A node
// that holds or leads anything — in truth (the raft configurations) or in
// the target placement — is refused with conflict: drain it first. force
// is for a dead node (not answering): its replicas are dropped from the
// targets and re-created on other nodes.
func (c *Cluster) RemoveNode(ctx context.Context, id string, force bool) (*model.RemoveResult, error) {
	// What the node is targeted for must be read as the meta leader has
	// it (see rebalanceOnce): a copy that lags could miss a move planned
	// onto it a moment ago.
	if err := c.catchUpForAdmin(ctx, "removing a node"); err != nil {
		return nil, err
	}
	st := c.cfg.Meta.State()
	nd, err := c.knownNode(id)
	if err != nil {
		if _, gone := st.Tombstone(id); gone {
			return nil, model.NotFound("node %q was already removed from this cluster", id)
		}
		return nil, err
	}
	if id == c.cfg.NodeID && len(st.Nodes) == 1 {
		return nil, model.Conflict("node %q is the only node of the cluster and holds every replica: it cannot be removed", id)
	}
	var targeted []int
	for s, e := range st.Slots {
		if e.Has(id) {
			targeted = append(targeted, s)
		}
	}
	alive := false
	for _, m := range c.aliveMembers() {
		alive = alive || m.ID == id
	}
	// A node drained a moment ago may still have open a replica that no
	// slot's configuration lists any more: it deletes it on its next
	// reconcile pass (500 ms). `admin drain --wait` ends on the
	// configurations, so a remove right after it answered 409 "still
	// holds 1 replicas" (scripts/scale.sh). Such leftovers are waited out,
	// for removeSettle at most.
	var view View
	var proof EmptyProof
	for deadline := time.Now().Add(removeSettle); ; {
		vctx, cancel := context.WithTimeout(ctx, adminViewTimeout)
		view = c.RefreshView(vctx)
		cancel()
		proof = view.ProveEmpty(id, st.SlotCount, alive)
		h := proof.Holdings
		leftovers := !force && len(targeted) == 0 && h.Replicas == 0 && h.Led == 0 && h.Local > 0
		if !leftovers || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, model.Unavailable(time.Second, "node %q is still closing replicas its slots no longer list; retry", id)
		case <-time.After(250 * time.Millisecond):
		}
	}
	h := proof.Holdings
	_, answering := view.Nodes[id]
	res := &model.RemoveResult{Node: id, Removed: true, Forced: force}
	switch {
	case force && answering:
		return nil, model.Conflict("node %q is running and answering: --force is for a dead node; drain it first (POST /v1/admin/nodes/%s/drain)", id, id)
	case force:
		res.Slots = targeted
	case proof.Holds || len(targeted) > 0:
		return nil, model.Conflict("node %q still holds %d replicas and leads %d slots (target placement: %d slots); drain it first (POST /v1/admin/nodes/%s/drain) and wait until it holds nothing, or use force=true for a dead node",
			id, max(h.Replicas, h.Local), h.Led, len(targeted), id)
	case proof.Unconfirmed != "":
		// Removing a node that still holds a replica would take a copy
		// of data out of the cluster's reach: without proof, refuse.
		return nil, model.Unavailable(time.Second, "could not confirm what node %q holds (%s); retry", id, proof.Unconfirmed)
	}
	var started int64
	for _, m := range c.members() {
		if m.ID == id && m.Started > started {
			started = m.Started
		}
	}
	if _, err := c.cfg.Forward.ProposeMeta(ctx, &raftfsm.ForgetNode{ID: id, At: c.now(), StartedAt: started}); err != nil {
		return nil, err
	}
	c.log.Info("node removed from the cluster", "node", id, "force", force, "replicas", h.Replicas, "led", h.Led, "open_replicas", h.Local,
		"answered", answering, "alive", alive, "view_nodes", len(view.Nodes))
	if c.serf != nil {
		for _, m := range c.members() {
			if m.ID == id && m.Status != serf.StatusAlive {
				_ = c.serf.RemoveFailedNodePrune(id)
			}
		}
	}
	if answering {
		go c.tellRemoved(id, nd.BindAddr, c.now())
	}
	return res, nil
}
