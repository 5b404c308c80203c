package node

import (
	"context"
	"encoding/json"
	"sort"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/serf/serf"
)

// bootstrapLoop forms the meta group when this node is one of the
// --bootstrap-expect nodes of a new cluster (DESIGN.md decision 2).
//
// Every expected node computes the same voter set — the ids of the first N
// members by id — and bootstraps with it; raft accepts identical
// bootstraps. A node never bootstraps when any member already has meta
// state (it joins an existing cluster and waits to be added), nor when it
// was started with --join and --bootstrap-expect 1 (the way to say "join").
func (n *Node) bootstrapLoop() {
	has, err := n.meta.HasState()
	if err != nil {
		n.log.Error("cannot inspect the meta group's state", "error", err)
		return
	}
	if has {
		return
	}
	if len(n.cfg.Join) > 0 && n.cfg.BootstrapExpect <= 1 {
		n.log.Info("waiting to be added to the cluster by its meta leader")
		return
	}
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	logged := time.Time{}
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		var alive []member
		for _, m := range n.members() {
			if m.Status == serf.StatusAlive && m.ID != "" && m.BindAddr != "" {
				alive = append(alive, m)
			}
		}
		if len(alive) < n.cfg.BootstrapExpect {
			if time.Since(logged) > 10*time.Second {
				n.log.Info("waiting for nodes before forming the cluster", "have", len(alive), "bootstrap_expect", n.cfg.BootstrapExpect)
				logged = time.Now()
			}
			continue
		}
		if n.anyPeerFormed(alive) {
			n.log.Info("found an existing cluster; waiting to be added by its meta leader")
			return
		}
		sort.Slice(alive, func(i, j int) bool { return alive[i].ID < alive[j].ID })
		voters := alive[:n.cfg.BootstrapExpect]
		self := false
		servers := make([]raft.Server, 0, len(voters))
		for _, m := range voters {
			if m.ID == n.id.NodeID {
				self = true
			}
			servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(m.ID), Address: raft.ServerAddress(m.BindAddr)})
		}
		if !self {
			n.log.Info("not among the first nodes of the new cluster; waiting to be added")
			return
		}
		if err := n.meta.Bootstrap(servers); err != nil {
			n.log.Error("bootstrapping the meta group failed", "error", err)
			continue
		}
		n.log.Info("formed the meta group", "voters", len(servers))
		return
	}
}

// anyPeerFormed asks the other members whether they already hold meta
// state.
func (n *Node) anyPeerFormed(ms []member) bool {
	for _, m := range ms {
		if m.ID == n.id.NodeID {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		body, err := n.rpc.Call(ctx, m.BindAddr, mHasState, nil)
		cancel()
		if err != nil {
			continue // unreachable members cannot vote either way
		}
		var hs hasStateReply
		if json.Unmarshal(body, &hs) == nil && hs.MetaState {
			return true
		}
	}
	return false
}

// serfEventLoop turns gossip events into controller wake-ups.
func (n *Node) serfEventLoop() {
	for {
		select {
		case <-n.stop:
			return
		case e := <-n.serfEvents:
			if _, ok := e.(serf.MemberEvent); ok {
				n.kickController()
				n.kickReconcile()
			}
		}
	}
}
