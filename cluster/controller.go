package cluster

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"hash/fnv"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/timemachine-db/timemachine/dht"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/raftgroup"
)

// metaVoters is the size of the meta group's voter set; every other node
// is a nonvoter holding a copy.
const metaVoters = 3

// RunController runs while this node leads the meta group
// (docs/architecture.md#the-meta-group): it folds gossip into the node
// table, keeps the meta group's membership, commits the target slot
// placement computed by dht, drives every slot's raft configuration toward
// its target one step at a time (moves.go), watches the replicas and
// spreads slot leadership. Every pass starts from the committed state and
// what the replicas report, so a new meta leader simply carries on.
func (c *Cluster) RunController(ctx context.Context) {
	c.log.Info("leading the meta group: running the cluster controller")
	defer c.moves.reset()
	defer c.watch.reset()
	if err := c.cfg.Meta.WaitCaughtUp(ctx); err != nil {
		return
	}
	var lastBalance time.Time
	var last uint64
	idle := time.Second
	for {
		busy, shape := c.controlOnce(ctx, &lastBalance)
		var next time.Duration
		next, idle = nextPass(busy, shape != last, idle)
		last = shape
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		case <-c.ctrlKick:
		}
	}
}

// controllerIdle is the longest the controller waits between two passes
// while nothing changes. Each pass refreshes the view — every node's
// status of every replica it holds, as JSON — which was ~9 % of an idle
// cluster's CPU at 256 slots, every second (docs/scaling.md, fifth pass).
// Gossip events, meta state changes and membership steps still wake it at
// once (kickController); a leader change that none of those announce
// waits for the next pass, as leader balancing waits its 3 s anyway.
const controllerIdle = 4 * time.Second

// nextPass is how long the controller waits after a pass: 250 ms while
// slots move, a second after a pass that saw the cluster change (or when
// it was busy), and twice the last wait, up to controllerIdle, while
// nothing changes.
func nextPass(busy, changed bool, idle time.Duration) (next, newIdle time.Duration) {
	switch {
	case busy:
		return 250 * time.Millisecond, time.Second // slots are moving: take their next steps soon
	case changed:
		return time.Second, time.Second
	}
	idle = min(2*idle, controllerIdle)
	return idle, idle
}

// shapeOf fingerprints what a pass acts on: the meta state's index, every
// slot's leader and configuration, and the nodes that answered for the
// view.
func shapeOf(st *raftfsm.MetaState, view View) uint64 {
	h := fnv.New64a()
	var b [8]byte
	put := func(v uint64) { binary.LittleEndian.PutUint64(b[:], v); h.Write(b[:]) }
	put(st.Index)
	for s := 0; s < st.SlotCount; s++ {
		t := view.Truth(s)
		put(t.ConfigIndex)
		h.Write([]byte(t.Leader))
		for _, v := range t.Voters {
			h.Write([]byte{0})
			h.Write([]byte(v))
		}
		for _, v := range t.Nonvoters {
			h.Write([]byte{1})
			h.Write([]byte(v))
		}
		h.Write([]byte{2})
	}
	ids := make([]string, 0, len(view.Nodes))
	for id := range view.Nodes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		h.Write([]byte(id))
		h.Write([]byte{3})
	}
	return h.Sum64()
}

// controlOnce is one pass; it reports whether slots are moving, and the
// shape of the cluster it acted on (shapeOf; 0 when it did nothing).
func (c *Cluster) controlOnce(ctx context.Context, lastBalance *time.Time) (bool, uint64) {
	if !c.cfg.Meta.IsLeader() {
		return false, 0
	}
	st := c.cfg.Meta.State()
	if !st.Formed() {
		c.formCluster(ctx)
		return false, 0
	}
	c.syncNodes(ctx, st)
	st = c.cfg.Meta.State()
	vctx, cancel := context.WithTimeout(ctx, time.Second)
	view := c.RefreshView(vctx)
	cancel()
	c.stepMetaMembership(st, view)
	c.placeSlots(ctx, st)
	c.dropPreferred(ctx, st)
	c.forgetRemoved(st)
	st = c.cfg.Meta.State()
	c.driveMoves(ctx, st, view)
	c.watchReplicas(st, view, time.Now())
	if time.Since(*lastBalance) > 3*time.Second {
		*lastBalance = time.Now()
		c.balanceLeaders(ctx, st, view)
	}
	pending, _, _ := c.moves.counts()
	return pending > 0, shapeOf(c.cfg.Meta.State(), view)
}

func nodeOf(m member, status model.NodeStatus) model.Node {
	return model.Node{ID: m.ID, HTTPAddr: m.HTTPAddr, BindAddr: m.BindAddr, SerfAddr: m.SerfAddr, Status: status}
}

// formCluster records the cluster's shape: the nodes alive now, the slot
// count this node was started with and the initial placement.
func (c *Cluster) formCluster(ctx context.Context) {
	ms := c.aliveMembers()
	if len(ms) == 0 {
		return
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].ID < ms[j].ID })
	ids := make([]string, len(ms))
	nodes := make([]model.Node, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
		nodes[i] = nodeOf(m, model.NodeAlive)
	}
	slots := int(c.slotCount.Load())
	assign := dht.Initial(slots, ids, c.cfg.Replicas)
	entries := make([]model.SlotEntry, slots)
	for _, a := range assign {
		entries[a.Slot] = model.SlotEntry{Replicas: a.Replicas, Epoch: 1}
	}
	res, err := c.cfg.Meta.Propose(ctx, &raftfsm.InitCluster{SlotCount: slots, ReplicationFactor: c.cfg.Replicas, Nodes: nodes, Slots: entries, Now: c.now()})
	if err != nil {
		c.log.Warn("forming the cluster failed; will retry", "error", err)
		return
	}
	if res[0].Code == model.CodeOK {
		c.log.Info("cluster formed", "nodes", len(ids), "slots", slots, "replication_factor", dht.EffectiveRF(c.cfg.Replicas, len(ids)))
	}
}

// syncNodes folds serf's view into the node table.
func (c *Cluster) syncNodes(ctx context.Context, st *raftfsm.MetaState) {
	var cmds []raftfsm.Command
	now := c.now()
	seen := map[string]bool{}
	for _, m := range c.members() {
		if m.ID == "" || c.tombstoned(st, m) {
			continue // a removed node's old process: ignored until it restarts
		}
		seen[m.ID] = true
		status := model.NodeAlive
		switch m.Status {
		case serf.StatusFailed:
			status = model.NodeFailed
		case serf.StatusLeft, serf.StatusLeaving:
			status = model.NodeLeft
		}
		cur, ok := st.Nodes[m.ID]
		if ok && cur.Status == model.NodeDraining && status == model.NodeAlive {
			status = model.NodeDraining // draining sticks until the node is removed
		}
		want := nodeOf(m, status)
		if ok && cur.HTTPAddr == want.HTTPAddr && cur.BindAddr == want.BindAddr && cur.SerfAddr == want.SerfAddr && cur.Status == want.Status {
			continue
		}
		if ok && m.Status == serf.StatusLeft && cur.Status == model.NodeLeft {
			continue
		}
		cmds = append(cmds, &raftfsm.UpsertNode{N: want, Now: now})
	}
	for id, nd := range st.Nodes {
		if !seen[id] && nd.Status == model.NodeAlive {
			x := *nd
			x.Status = model.NodeFailed
			cmds = append(cmds, &raftfsm.UpsertNode{N: x, Now: now})
		}
	}
	if len(cmds) == 0 {
		return
	}
	if _, err := c.cfg.Meta.Propose(ctx, cmds...); err != nil {
		c.log.Warn("updating the node table failed; will retry", "error", err)
	}
}

// eligible lists the nodes that may hold replicas: alive ones, and failed
// or departed ones still inside the failure grace period (a node stopped
// with SIGTERM for a restart leaves the gossip, and copying its slots away
// would be wasted work). Draining nodes are not eligible, nor, once there
// are enough other nodes to hold the replication factor, nodes gone for
// longer than the grace period: their replicas are re-created elsewhere.
// Nor is an alive node that no slot counts as a voter and whose internal
// port this node cannot reach (unreachableNewcomer).
//
// keepLapsed: with no spare node to take its place, a node gone past the
// grace stays eligible, and so keeps its replicas. Dropped, it left every
// slot (and the meta group) on two members: no more able to lose one
// than three with one down, but no longer able to take it back — with a
// second node down, the first one returning could not restore a quorum,
// and nothing could be re-added without one — while admin status and
// /readyz turned healthy at replication factor 2 (a black-box review of
// a 3-node cluster: every slot and the meta group leaderless for 80 s,
// though two of the three original members were running).
func (c *Cluster) eligible(st *raftfsm.MetaState) []string {
	now := c.now()
	var out, lapsed []string
	var voting map[string]bool
	for _, nd := range st.NodeList() {
		switch nd.Status {
		case model.NodeAlive:
			if nd.ID != c.cfg.NodeID && c.cfg.Unreachable != nil && c.cfg.Unreachable(nd.ID) {
				if voting == nil {
					voting = c.votingNodes()
				}
				if voting != nil && !voting[nd.ID] {
					continue // unreachableNewcomer
				}
			}
			out = append(out, nd.ID)
		case model.NodeFailed, model.NodeLeft:
			if time.Duration(now-nd.Since)*time.Millisecond < c.cfg.FailureGrace {
				out = append(out, nd.ID)
			} else {
				lapsed = append(lapsed, nd.ID)
			}
		}
	}
	return append(out, keepLapsed(st, len(out), lapsed)...)
}

// keepLapsed picks, from the nodes gone past the grace, the ones that keep
// their replicas because the eligible nodes alone (have of them) cannot
// hold the replication factor: as many as are missing, those holding the
// most replicas first (then by id). A lapsed node holding none is never
// kept: it has nothing to keep, and nothing should be placed on it.
func keepLapsed(st *raftfsm.MetaState, have int, lapsed []string) []string {
	want := st.ReplicationFactor
	if want <= 0 {
		want = dht.EffectiveRF(0, have+len(lapsed))
	}
	if have >= want || len(lapsed) == 0 {
		return nil
	}
	held := map[string]int{}
	for _, e := range st.Slots {
		for _, id := range e.Replicas {
			held[id]++
		}
	}
	slices.SortFunc(lapsed, func(a, b string) int {
		if held[a] != held[b] {
			return held[b] - held[a]
		}
		return strings.Compare(a, b)
	})
	var keep []string
	for _, id := range lapsed {
		if len(keep) == want-have || held[id] == 0 {
			break
		}
		keep = append(keep, id)
	}
	return keep
}

// votingNodes lists the nodes that vote in at least one slot as the last
// view reports the slots' configurations, or nil when this node holds no
// view (only the meta leader keeps one warm).
//
// unreachableNewcomer: gossip may call a node alive whose internal port no
// peer can reach — a node started with a certificate the cluster's CA did
// not sign (--peer-tls-ca refuses it before any byte), or one behind a
// firewall that passes only gossip. Counted eligible, it raised the
// replication factor and every slot was planned onto it; none of those
// moves could finish (its replica never caught up to be promoted), so
// every other move and every --wait waited behind them for as long as it
// stayed. Such a node is left out while this node's liveness check finds
// it unreachable and it votes in no slot; a node that does vote somewhere
// keeps its replicas through an outage as before (the failure grace
// decides once gossip finds it failed).
func (c *Cluster) votingNodes() map[string]bool {
	c.view.mu.Lock()
	nodes := c.view.nodes
	c.view.mu.Unlock()
	if len(nodes) == 0 {
		return nil
	}
	out := map[string]bool{}
	for _, ns := range nodes {
		for _, r := range ns.Slots {
			for _, v := range r.Voters {
				out[v] = true
			}
		}
	}
	return out
}

// upNodes lists the nodes that may lead: alive in the node table and
// answering in view. Rebalance plans leaderships with it, as
// balanceLeaders moves them.
func upNodes(st *raftfsm.MetaState, view View) []string {
	var up []string
	for _, id := range alive(st) {
		if _, ok := view.Nodes[id]; ok {
			up = append(up, id)
		}
	}
	return up
}

func alive(st *raftfsm.MetaState) []string {
	var out []string
	for _, nd := range st.NodeList() {
		if nd.Status == model.NodeAlive {
			out = append(out, nd.ID)
		}
	}
	return out
}

func assignments(st *raftfsm.MetaState) []dht.Assignment {
	out := make([]dht.Assignment, len(st.Slots))
	for i, e := range st.Slots {
		out[i] = dht.Assignment{Slot: i, Replicas: append([]string(nil), e.Replicas...)}
	}
	return out
}

func sameReplicas(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// placeSlots commits the placement dht.SpreadLeaders computes (Repair's
// minimal moves, with preferred leaders spread) where it differs.
func (c *Cluster) placeSlots(ctx context.Context, st *raftfsm.MetaState) {
	elig := c.eligible(st)
	if len(elig) == 0 {
		return
	}
	desired := dht.SpreadLeaders(assignments(st), st.SlotCount, elig, st.ReplicationFactor)
	c.commitPlacement(ctx, st, desired)
}

func (c *Cluster) commitPlacement(ctx context.Context, st *raftfsm.MetaState, desired []dht.Assignment) int {
	var ups []raftfsm.SlotUpdate
	for _, a := range desired {
		cur := st.Slots[a.Slot]
		if !sameReplicas(cur.Replicas, a.Replicas) {
			ups = append(ups, raftfsm.SlotUpdate{Slot: a.Slot, Replicas: a.Replicas, ExpectEpoch: cur.Epoch})
		}
	}
	if len(ups) == 0 {
		return 0
	}
	if _, err := c.cfg.Forward.ProposeMeta(ctx, &raftfsm.SetSlots{Updates: ups}); err != nil {
		c.log.Warn("committing the slot placement failed; will retry", "error", err)
		return 0
	}
	c.log.Info("slot placement changed", "slots", len(ups))
	return len(ups)
}

// stepMetaMembership keeps metaVoters voters in the meta group (those
// already voting stay while eligible) and every other eligible node as a
// nonvoter, one step at a time. A draining node is never a voter (a voter
// being drained hands its vote on first: the replacement is promoted
// before it is demoted) but stays a nonvoter until it holds and leads
// nothing in truth: it keeps receiving the meta state, so its view of the
// cluster stays current while its slots move off.
func (c *Cluster) stepMetaMembership(st *raftfsm.MetaState, view View) {
	elig := c.eligible(st)
	eligSet := map[string]bool{}
	for _, id := range elig {
		eligSet[id] = true
	}
	status := c.cfg.Meta.Status()
	var voters []string
	for _, id := range status.Voters {
		if eligSet[id] && len(voters) < metaVoters {
			voters = append(voters, id)
		}
	}
	aliveSet := map[string]bool{}
	for _, id := range alive(st) {
		aliveSet[id] = true
	}
	for _, id := range elig {
		if len(voters) >= metaVoters {
			break
		}
		if aliveSet[id] && !contains(voters, id) {
			voters = append(voters, id)
		}
	}
	var non []string
	for _, id := range elig {
		if !contains(voters, id) {
			non = append(non, id)
		}
	}
	holdings := view.Holdings(st.SlotCount)
	for _, nd := range st.NodeList() {
		if nd.Status == model.NodeDraining && !contains(voters, nd.ID) && !holdings[nd.ID].Empty() {
			non = append(non, nd.ID)
		}
	}
	vm, ok1 := c.membersOf(voters, st)
	nm, ok2 := c.membersOf(non, st)
	if !ok1 || !ok2 || len(vm) == 0 {
		return
	}
	step, err := c.cfg.Meta.Reconcile(raftgroup.Membership{Voters: vm, Nonvoters: nm}, func(id string) bool {
		return c.caughtUp(-1, id, status)
	})
	if err != nil {
		c.log.Info("meta membership step not taken; will retry", "step", step.String(), "error", err)
	}
}

func contains(ss []string, s string) bool { return slices.Contains(ss, s) }

// leaderAssignments is the slot table for leader balancing: a slot's
// preferred leader (admin transfer) comes first, where dht looks for it.
func leaderAssignments(st *raftfsm.MetaState) []dht.Assignment {
	out := assignments(st)
	for i, e := range st.Slots {
		if p := e.PreferredLeader; p != "" && len(out[i].Replicas) > 0 && out[i].Replicas[0] != p {
			rest := []string{p}
			for _, id := range out[i].Replicas {
				if id != p {
					rest = append(rest, id)
				}
			}
			out[i].Replicas = rest
		}
	}
	return out
}

// balanceLeaders moves slot leadership toward dht.LeaderTargets (a slot's
// preferred leader, when set and alive, is its target): a few planned
// transfers per pass, only for slots whose configuration is their target.
func (c *Cluster) balanceLeaders(ctx context.Context, st *raftfsm.MetaState, view View) {
	targets := dht.LeaderTargets(leaderAssignments(st), upNodes(st, view))
	moved := 0
	for s := 0; s < st.SlotCount && moved < 4; s++ {
		want, ok := targets[s]
		if !ok {
			continue
		}
		t := view.Truth(s)
		cur := t.Leader
		if cur == "" || cur == want || !settled(t, st.Slots[s].Replicas) || !contains(t.Voters, want) {
			continue // no leader, already there, or membership still moving
		}
		ls, _ := view.Replica(cur, s)
		fs, ok := view.Replica(want, s)
		if !ok || !raftgroup.CaughtUp(ls.Status, fs.Status) {
			continue
		}
		body, _ := json.Marshal(transferReq{Slot: s, To: want, Addr: c.AddrOf(want)})
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := c.cfg.Client.Call(cctx, c.AddrOf(cur), MethodTransfer, body)
		cancel()
		if err != nil {
			c.log.Debug("leadership transfer failed", "slot", s, "from", cur, "to", want, "error", err)
			continue
		}
		c.log.Info("moved slot leadership", "slot", s, "from", cur, "to", want)
		moved++
	}
}

// dropPreferred clears preferred leaders on nodes that are no longer alive
// (draining, failed, left): the balancer then spreads those slots again.
func (c *Cluster) dropPreferred(ctx context.Context, st *raftfsm.MetaState) {
	var ups []raftfsm.PreferredUpdate
	for s, e := range st.Slots {
		if e.PreferredLeader == "" {
			continue
		}
		if nd, ok := st.Nodes[e.PreferredLeader]; !ok || nd.Status != model.NodeAlive {
			ups = append(ups, raftfsm.PreferredUpdate{Slot: s})
		}
	}
	if len(ups) == 0 {
		return
	}
	if _, err := c.cfg.Meta.Propose(ctx, &raftfsm.SetPreferredLeaders{Updates: ups}); err != nil {
		c.log.Info("clearing preferred leaders failed; will retry", "error", err)
		return
	}
	c.log.Info("preferred leaders cleared: their node is no longer alive", "slots", len(ups))
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !contains(b, x) {
			return false
		}
	}
	return true
}
