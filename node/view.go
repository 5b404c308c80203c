package node

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/timemachine-db/timemachine/model"
)

// clusterView is what the nodes reported about themselves: the ground
// truth of who leads what, which /v1/cluster, /readyz and the controller's
// leadership balancing read. Any node can build it.
type clusterView struct {
	mu    sync.Mutex
	at    time.Time
	nodes map[string]nodeStatus
}

type viewSnapshot struct {
	at    time.Time
	nodes map[string]nodeStatus
}

// leaderOf is the node whose replica says it leads slot s (the one with
// the highest term if, in a transition, two say so).
func (v viewSnapshot) leaderOf(s int) string {
	best, term := "", uint64(0)
	for id, ns := range v.nodes {
		if r, ok := ns.Slots[s]; ok && r.State == raft.Leader.String() && (best == "" || r.Term >= term) {
			best, term = id, r.Term
		}
	}
	return best
}

func (v viewSnapshot) replica(node string, s int) (slotReplicaState, bool) {
	ns, ok := v.nodes[node]
	if !ok {
		return slotReplicaState{}, false
	}
	r, ok := ns.Slots[s]
	return r, ok
}

func (n *Node) viewLoop() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		n.refreshView(ctx)
		cancel()
	}
}

// cachedView returns the last view if it is fresh enough, else refreshes.
// This node's own part is always read fresh: it costs nothing and keeps a
// single node's /v1/cluster exactly in step with its /readyz.
func (n *Node) cachedView(ctx context.Context, maxAge time.Duration) viewSnapshot {
	n.view.mu.Lock()
	if time.Since(n.view.at) < maxAge {
		nodes := make(map[string]nodeStatus, len(n.view.nodes))
		for k, v := range n.view.nodes {
			nodes[k] = v
		}
		at := n.view.at
		n.view.mu.Unlock()
		nodes[n.id.NodeID] = n.localStatus()
		return viewSnapshot{at: at, nodes: nodes}
	}
	n.view.mu.Unlock()
	return n.refreshView(ctx)
}

// refreshView asks every known node for its status (in parallel, bounded
// by ctx) and keeps the answers.
func (n *Node) refreshView(ctx context.Context) viewSnapshot {
	st := n.meta.State()
	addrs := map[string]string{}
	for _, nd := range st.NodeList() {
		if nd.Status != model.NodeLeft {
			addrs[nd.ID] = nd.BindAddr
		}
	}
	for _, m := range n.aliveMembers() {
		if _, ok := addrs[m.ID]; !ok {
			addrs[m.ID] = m.BindAddr
		}
	}
	out := map[string]nodeStatus{n.id.NodeID: n.localStatus()}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for id, addr := range addrs {
		if id == n.id.NodeID || addr == "" {
			continue
		}
		wg.Add(1)
		go func(id, addr string) {
			defer wg.Done()
			body, err := n.rpc.Call(ctx, addr, mNodeStatus, nil)
			if err != nil {
				return
			}
			var ns nodeStatus
			if json.Unmarshal(body, &ns) == nil {
				mu.Lock()
				out[id] = ns
				mu.Unlock()
			}
		}(id, addr)
	}
	wg.Wait()
	v := viewSnapshot{at: time.Now(), nodes: out}
	n.view.mu.Lock()
	n.view.at, n.view.nodes = v.at, v.nodes
	n.view.mu.Unlock()
	return v
}
