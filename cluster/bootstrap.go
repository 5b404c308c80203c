package cluster

import (
	"context"
	"encoding/json"
	"sort"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/serf/serf"
)

// bootstrapLoop forms the meta group when this node is one of the
// --bootstrap-expect nodes of a new cluster (docs/architecture.md#forming).
//
// Every expected node computes the same voter set — the ids of the first N
// members by id — and bootstraps with it; raft accepts identical
// bootstraps. A node never bootstraps when any member already has meta
// state (it joins an existing cluster and waits to be added), nor when it
// was started with --join and --bootstrap-expect 1 (the way to say "join").
func (c *Cluster) bootstrapLoop() {
	has, err := c.cfg.Meta.HasState()
	if err != nil {
		c.log.Error("cannot inspect the meta group's state", "error", err)
		return
	}
	if has {
		return
	}
	if len(c.cfg.Join) > 0 && c.cfg.BootstrapExpect <= 1 {
		c.log.Info("waiting to be added to the cluster by its meta leader")
		return
	}
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	logged := time.Time{}
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		var alive []member
		for _, m := range c.members() {
			if m.Status == serf.StatusAlive && m.ID != "" && m.BindAddr != "" {
				alive = append(alive, m)
			}
		}
		if len(alive) < c.cfg.BootstrapExpect {
			if time.Since(logged) > 10*time.Second {
				c.log.Info("waiting for nodes before forming the cluster", "have", len(alive), "bootstrap_expect", c.cfg.BootstrapExpect)
				logged = time.Now()
			}
			continue
		}
		if c.anyPeerFormed(alive) {
			c.log.Info("found an existing cluster; waiting to be added by its meta leader")
			return
		}
		sort.Slice(alive, func(i, j int) bool { return alive[i].ID < alive[j].ID })
		voters := alive[:c.cfg.BootstrapExpect]
		self := false
		servers := make([]raft.Server, 0, len(voters))
		for _, m := range voters {
			if m.ID == c.cfg.NodeID {
				self = true
			}
			servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(m.ID), Address: raft.ServerAddress(m.BindAddr)})
		}
		if !self {
			c.log.Info("not among the first nodes of the new cluster; waiting to be added")
			return
		}
		if err := c.cfg.Meta.Bootstrap(servers); err != nil {
			c.log.Error("bootstrapping the meta group failed", "error", err)
			continue
		}
		c.log.Info("formed the meta group", "voters", len(servers))
		return
	}
}

// anyPeerFormed asks the other members whether they already hold meta
// state.
func (c *Cluster) anyPeerFormed(ms []member) bool {
	for _, m := range ms {
		if m.ID == c.cfg.NodeID {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		body, err := c.cfg.Client.Call(ctx, m.BindAddr, MethodHasState, nil)
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
