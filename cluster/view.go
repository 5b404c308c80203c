package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftgroup"
	"github.com/timemachine-db/timemachine/rpc/peer"
)

// NodeStatus is one node's report of itself and its replicas, as it
// travels between nodes (JSON).
type NodeStatus struct {
	ID       string                   `json:"id"`
	HTTPAddr string                   `json:"http_addr"`
	Meta     raftgroup.Status         `json:"meta"`
	Slots    map[int]SlotReplicaState `json:"slots"`
	// Moves is the controller's record of slot moves, reported by the
	// meta leader only.
	Moves *model.MoveProgress `json:"moves,omitempty"`
}

// SlotReplicaState is what a node reports about one of its slot replicas.
type SlotReplicaState struct {
	raftgroup.Status
	Pending int64 `json:"pending"`
}

// View is what the nodes reported about themselves: the ground truth of
// who leads what, which /v1/cluster, /readyz and the controller's
// leadership balancing read. Any node can build it.
type View struct {
	At    time.Time
	Nodes map[string]NodeStatus
}

// LeaderOf is the node whose replica says it leads slot s (the one with
// the highest term if, in a transition, two say so).
func (v View) LeaderOf(s int) string {
	best, term := "", uint64(0)
	for id, ns := range v.Nodes {
		if r, ok := ns.Slots[s]; ok && r.State == raft.Leader.String() && (best == "" || r.Term >= term) {
			best, term = id, r.Term
		}
	}
	return best
}

// Replica is what node reported about its replica of slot s.
func (v View) Replica(node string, s int) (SlotReplicaState, bool) {
	ns, ok := v.Nodes[node]
	if !ok {
		return SlotReplicaState{}, false
	}
	r, ok := ns.Slots[s]
	return r, ok
}

// Truth is what IS for one slot: its raft configuration and leader as the
// replicas report them. The configuration is the leader's; without a
// leader, that of the replica with the newest configuration.
type Truth struct {
	Slot        int
	Leader      string
	Voters      []string
	Nonvoters   []string
	ConfigIndex uint64
	// Known is false when no replica of the slot reported at all.
	Known bool
}

// Members are the voters and nonvoters.
func (t Truth) Members() []string {
	return append(append([]string(nil), t.Voters...), t.Nonvoters...)
}

// Has reports whether node is in the configuration (voter or nonvoter).
func (t Truth) Has(node string) bool {
	return contains(t.Voters, node) || contains(t.Nonvoters, node)
}

// Truth derives slot s's configuration and leader from the view.
func (v View) Truth(s int) Truth {
	t := Truth{Slot: s, Leader: v.LeaderOf(s)}
	if t.Leader != "" {
		ls, _ := v.Replica(t.Leader, s)
		t.Voters, t.Nonvoters, t.ConfigIndex, t.Known = ls.Voters, ls.Nonvoters, ls.ConfigIndex, true
		return t
	}
	var best *SlotReplicaState
	for _, ns := range v.Nodes {
		r, ok := ns.Slots[s]
		if !ok || !r.Member || r.Shutdown {
			continue
		}
		if best == nil || r.ConfigIndex > best.ConfigIndex || (r.ConfigIndex == best.ConfigIndex && r.Term > best.Term) {
			r := r
			best = &r
		}
	}
	if best != nil {
		t.Voters, t.Nonvoters, t.ConfigIndex, t.Known = best.Voters, best.Nonvoters, best.ConfigIndex, true
	}
	return t
}

// Holdings is what a node holds and leads in truth.
type Holdings struct {
	// Replicas counts the slots whose configuration includes the node.
	Replicas int
	// Led counts the slots it leads.
	Led int
	// Local counts the replicas the node itself reports open (a replica
	// removed from its group stays until the node deletes it); -1 when the
	// node did not answer.
	Local int
}

// Empty reports whether the node holds and leads nothing.
func (h Holdings) Empty() bool { return h.Replicas == 0 && h.Led == 0 && h.Local <= 0 }

// Holdings counts what every node holds and leads in truth (slotCount
// slots), keyed by node id (nodes holding nothing may be missing).
func (v View) Holdings(slotCount int) map[string]Holdings {
	out := map[string]Holdings{}
	for s := 0; s < slotCount; s++ {
		t := v.Truth(s)
		for _, id := range t.Members() {
			h := out[id]
			h.Replicas++
			out[id] = h
		}
		if t.Leader != "" {
			h := out[t.Leader]
			h.Led++
			out[t.Leader] = h
		}
	}
	for id, h := range out {
		h.Local = -1
		out[id] = h
	}
	for id, ns := range v.Nodes {
		h := out[id]
		h.Local = len(ns.Slots)
		out[id] = h
	}
	return out
}

// EmptyProof is what a view proves about whether a node holds and leads
// nothing, which is what removing it without force needs.
type EmptyProof struct {
	Holdings Holdings
	// Holds is true when the view shows the node holding or leading
	// something: in a slot's configuration, leading it, or with a replica
	// still open on the node itself.
	Holds bool
	// Unconfirmed says why the view cannot prove that the node holds
	// nothing ("" when it can): a missing answer is not an empty answer.
	Unconfirmed string
}

// ProveEmpty decides whether the view proves that node id holds and leads
// nothing (slotCount slots). alive says whether gossip sees the node
// alive. The proof needs, for every slot, the configuration of a leader
// that answered (a follower's may be stale; a slot nobody reported is
// unknown, not empty), no replica reporting a newer configuration than
// its leader's (a change in flight), and the node's own answer that it
// has no replica open; a node that does not answer counts as holding
// nothing locally only when gossip does not see it alive either (it is
// dead: the configurations are the whole truth, and force exists for the
// rest).
func (v View) ProveEmpty(id string, slotCount int, alive bool) EmptyProof {
	p := EmptyProof{Holdings: v.Holdings(slotCount)[id]}
	h := p.Holdings
	p.Holds = h.Replicas > 0 || h.Led > 0 || h.Local > 0
	if p.Holds {
		return p
	}
	if _, answered := v.Nodes[id]; !answered && alive {
		p.Unconfirmed = fmt.Sprintf("node %q is alive in gossip but did not answer", id)
		return p
	}
	for s := 0; s < slotCount; s++ {
		t := v.Truth(s)
		switch {
		case !t.Known:
			p.Unconfirmed = fmt.Sprintf("no replica of slot %d answered", s)
			return p
		case t.Leader == "":
			p.Unconfirmed = fmt.Sprintf("no leader of slot %d answered", s)
			return p
		}
		for node, ns := range v.Nodes {
			if r, ok := ns.Slots[s]; ok && r.Member && !r.Shutdown && r.ConfigIndex > t.ConfigIndex {
				p.Unconfirmed = fmt.Sprintf("slot %d's configuration is changing (%s reports index %d, its leader %s index %d)",
					s, node, r.ConfigIndex, t.Leader, t.ConfigIndex)
				return p
			}
		}
	}
	return p
}

// viewCache keeps the last view, refreshed in the background.
type viewCache struct {
	mu    sync.Mutex
	at    time.Time
	nodes map[string]NodeStatus
}

func (c *Cluster) viewLoop() {
	t := time.NewTimer(time.Second)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		// The controller refreshes the view at least every
		// controllerIdle; this loop fills in only when it stopped.
		every := max(viewEvery(c.SlotCount()), controllerIdle+time.Second)
		c.view.mu.Lock()
		fresh := time.Since(c.view.at) < every
		c.view.mu.Unlock()
		// Only the meta leader keeps its view warm (its controller
		// refreshes it every pass anyway). On the other nodes every
		// reader asks for the age it needs (CachedView's maxAge) and
		// refreshes on demand: a refresh asks every node for the status
		// of each of its replicas, and three nodes each refreshing every
		// second was a tenth of the idle CPU at 256 slots
		// (docs/scaling.md).
		if !fresh && c.cfg.Meta.IsLeader() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			c.RefreshView(ctx)
			cancel()
		}
		t.Reset(every)
	}
}

// viewEvery is how often the background loop refreshes the view: every
// second up to 256 slots, then a second more per 256 slots. A refresh asks
// every node for the status of each of its replicas (JSON), so its cost
// grows with the slot count (docs/scaling.md); the loop only keeps the
// cache warm — a caller that needs a fresher view refreshes it
// (CachedView's maxAge).
func viewEvery(slots int) time.Duration {
	return time.Duration(max(1, (slots+255)/256)) * time.Second
}

// CachedView returns the last view if it is fresh enough, else refreshes.
// This node's own part is always read fresh: it costs nothing and keeps a
// single node's /v1/cluster exactly in step with its /readyz.
func (c *Cluster) CachedView(ctx context.Context, maxAge time.Duration) View {
	return c.cachedView(ctx, maxAge, false)
}

// consistentView is CachedView for an answer that says who leads what
// (/v1/cluster, admin status): when this node's fresh part disagrees with
// its cached part on a slot's leadership (sameLeadership), the view is
// refreshed whole instead. The loops that only need a leader's address
// keep the cheaper CachedView.
func (c *Cluster) consistentView(ctx context.Context, maxAge time.Duration) View {
	return c.cachedView(ctx, maxAge, true)
}

func (c *Cluster) cachedView(ctx context.Context, maxAge time.Duration, consistent bool) View {
	c.view.mu.Lock()
	if time.Since(c.view.at) < maxAge {
		nodes := make(map[string]NodeStatus, len(c.view.nodes)+1)
		maps.Copy(nodes, c.view.nodes)
		at := c.view.at
		c.view.mu.Unlock()
		self := c.localStatus()
		if cached, ok := nodes[c.cfg.NodeID]; !consistent || !ok || sameLeadership(cached, self) {
			nodes[c.cfg.NodeID] = self
			return View{At: at, Nodes: nodes}
		}
		return c.RefreshView(ctx)
	}
	c.view.mu.Unlock()
	return c.RefreshView(ctx)
}

// sameLeadership reports whether two reports of this node's replicas agree
// on every slot's raft state and term. A fresh report of this node beside
// other nodes' cached ones is only a consistent picture while they do: a
// slot this node handed to another showed no leader at all — this node
// fresh, a follower now; the new leader cached, still a follower — so
// `admin status` right after a rebalance that moved leaderships off the
// meta leader answered "2 of 12 slots are not healthy" (scripts/scale.sh,
// 2 runs in 3), and /readyz could say 503 for as long.
func sameLeadership(a, b NodeStatus) bool {
	if len(a.Slots) != len(b.Slots) {
		return false
	}
	for s, ra := range a.Slots {
		rb, ok := b.Slots[s]
		if !ok || ra.State != rb.State || ra.Term != rb.Term {
			return false
		}
	}
	return true
}

// viewCallTimeout bounds each node's status call in RefreshView, whatever
// the caller's context: a node that does not answer within it is left out
// of the view (shown as not reporting), rather than holding up a status
// page, a controller pass or an admin call that came without a deadline.
const viewCallTimeout = 3 * time.Second

// RefreshView asks every known node for its status (in parallel, bounded
// by ctx and viewCallTimeout) and keeps the answers.
func (c *Cluster) RefreshView(ctx context.Context) View {
	st := c.cfg.Meta.State()
	addrs := map[string]string{}
	for _, nd := range st.NodeList() {
		if nd.Status != model.NodeLeft {
			addrs[nd.ID] = nd.BindAddr
		}
	}
	for _, m := range c.aliveMembers() {
		if _, ok := addrs[m.ID]; !ok && !c.tombstoned(st, m) {
			addrs[m.ID] = m.BindAddr
		}
	}
	delete(addrs, c.cfg.NodeID)
	out := askStatuses(ctx, c.cfg.Client, addrs, viewCallTimeout)
	out[c.cfg.NodeID] = c.localStatus()
	v := View{At: time.Now(), Nodes: out}
	c.view.mu.Lock()
	c.view.at, c.view.nodes = v.At, v.Nodes
	c.view.mu.Unlock()
	return v
}

// statusCaller is what askStatuses needs of the peer client.
type statusCaller interface {
	Call(ctx context.Context, addr string, m peer.Method, body []byte) ([]byte, error)
}

// askStatuses asks each node in addrs (id → internal address) for its
// status at once, each call bounded by ctx and timeout, and returns the
// answers it got.
func askStatuses(ctx context.Context, cl statusCaller, addrs map[string]string, timeout time.Duration) map[string]NodeStatus {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := map[string]NodeStatus{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for id, addr := range addrs {
		if addr == "" {
			continue
		}
		wg.Add(1)
		go func(id, addr string) {
			defer wg.Done()
			body, err := cl.Call(ctx, addr, MethodNodeStatus, nil)
			if err != nil {
				return
			}
			var ns NodeStatus
			if json.Unmarshal(body, &ns) == nil {
				mu.Lock()
				out[id] = ns
				mu.Unlock()
			}
		}(id, addr)
	}
	wg.Wait()
	return out
}

// localStatus reports this node and its replicas.
func (c *Cluster) localStatus() NodeStatus {
	st := NodeStatus{ID: c.cfg.NodeID, HTTPAddr: c.cfg.HTTPAddr, Meta: c.cfg.Meta.Status(), Slots: map[int]SlotReplicaState{}}
	for _, r := range c.cfg.Slots.All() {
		st.Slots[r.Slot()] = SlotReplicaState{Status: r.Status(), Pending: r.Stats().Pending}
	}
	if c.cfg.Meta.IsLeader() {
		st.Moves = c.moves.snapshot()
	}
	return st
}
