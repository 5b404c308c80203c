package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/timemachine-db/timemachine/forward"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/raftgroup"
	"github.com/timemachine-db/timemachine/slot"
)

// reconcileLoop makes this node's slot replicas match the slot table
// (level-triggered: every pass derives what to do from the current state,
// so a crash midway needs no recovery): open the replicas this node should
// hold, and retire those it should not once their group let them go. The
// membership steps themselves are the meta leader's (moves.go).
func (c *Cluster) reconcileLoop() {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-c.kick:
		case <-t.C:
		}
		c.reconcileOnce()
	}
}

func (c *Cluster) reconcileOnce() {
	st := c.cfg.Meta.State()
	c.rejoinHeard(st)
	if !st.Formed() || !c.cfg.Meta.CaughtUp() || c.removedAt.Load() > 0 {
		return
	}
	if err := c.adoptSlotCount(st.SlotCount); err != nil {
		c.log.Error("slot count mismatch", "error", err)
		return
	}
	self := c.cfg.NodeID
	var opens []int
	defer func() { c.openReplicas(opens, st) }()
	for s := 0; s < st.SlotCount; s++ {
		select {
		case <-c.stop:
			return
		default:
		}
		e := st.Slots[s]
		want := e.Has(self)
		r := c.cfg.Slots.Get(s)
		if r != nil && r.Removed() {
			// Raft shut the replica down.
			c.dropReplica(s, r, !want)
			if !want {
				continue
			}
			r = nil
		}
		switch {
		case r == nil && want:
			opens = append(opens, s)
		case r != nil && !want && !r.IsLeader():
			c.maybeRetire(s, r)
		}
	}
}

// adoptSlotCount records the cluster's slot count in the data directory
// the first time this node sees the meta state (a node that joined an
// existing cluster takes its slot count).
func (c *Cluster) adoptSlotCount(count int) error {
	if int(c.slotCount.Load()) == count {
		return nil
	}
	if n := c.cfg.Slots.Len(); n > 0 {
		return fmt.Errorf("this node holds replicas of %d slots but the cluster has %d", c.slotCount.Load(), count)
	}
	if err := c.cfg.AdoptSlotCount(count); err != nil {
		return err
	}
	c.slotCount.Store(int64(count))
	return nil
}

// openExisting opens the slot replicas whose data is on disk.
func (c *Cluster) openExisting() {
	var opens []int
	for s := 0; s < int(c.slotCount.Load()); s++ {
		if c.cfg.HasSlotData(s) {
			opens = append(opens, s)
		}
	}
	c.openReplicas(opens, nil)
}

// openParallel is how many replicas openReplicas opens at once. Opening
// one waits for a few writes of the node's raft log file (its bucket, the
// bootstrap configuration and term), each an fsync when alone; opened one
// after another, 256 slots took ~18 s to open on a loaded 2-core machine
// (1,024: over a minute), and the cluster was not ready before the last
// one was (docs/scaling.md). Opened side by side, their writes share the
// log file's commits (storage.RaftLogDB batches whatever is waiting):
// 256 in 2-5 s. Each replica is bootstrapped as soon as it is open, so
// the first elections spread over the opening; opening all before
// bootstrapping any was tried and made every group campaign at once: at
// 256 slots an election storm, not ready in 100 s.
const openParallel = 16

// openReplicas opens the replicas of slots (the slot table's entries in
// st; st nil: replicas already on disk), openParallel at a time, and
// returns when all were tried.
func (c *Cluster) openReplicas(slots []int, st *raftfsm.MetaState) {
	if len(slots) == 0 {
		return
	}
	start := time.Now()
	defer func() {
		c.log.Info("opened slot replicas", "count", len(slots), "took", time.Since(start).Round(time.Millisecond).String())
	}()
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(openParallel, len(slots)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range next {
				var e model.SlotEntry
				if st != nil {
					e = st.Slots[s]
				}
				c.openReplica(s, e, st)
			}
		}()
	}
	defer wg.Wait()
	defer close(next)
	for _, s := range slots {
		select {
		case <-c.stop:
			return
		case next <- s:
		}
	}
}

func (c *Cluster) membersOf(ids []string, st *raftfsm.MetaState) ([]raftgroup.Member, bool) {
	out := make([]raftgroup.Member, 0, len(ids))
	for _, id := range ids {
		addr := ""
		if nd, ok := st.Nodes[id]; ok {
			addr = nd.BindAddr
		}
		if id == c.cfg.NodeID {
			addr = c.cfg.BindAddr
		}
		if addr == "" {
			return nil, false
		}
		out = append(out, raftgroup.Member{ID: id, Addr: addr})
	}
	return out, true
}

func (c *Cluster) openReplica(s int, e model.SlotEntry, st *raftfsm.MetaState) {
	r, err := c.cfg.OpenSlot(s)
	if err != nil {
		c.log.Error("opening slot replica failed; will retry", "slot", s, "error", err)
		return
	}
	// Only the placement the cluster formed with bootstraps a group; later
	// replicas start empty and are added by the slot's leader.
	if e.Epoch == 1 {
		members, ok := c.membersOf(e.Replicas, st)
		if ok {
			servers := make([]raft.Server, len(members))
			for i, m := range members {
				servers[i] = raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(m.ID), Address: raft.ServerAddress(m.Addr)}
			}
			if err := r.Bootstrap(servers); err != nil {
				c.log.Error("bootstrapping slot failed", "slot", s, "error", err)
			}
		}
	}
	c.cfg.Slots.Put(s, r)
	c.log.Debug("opened slot replica", "slot", s, "epoch", e.Epoch)
}

// dropReplica closes a local replica and, when destroy is set, deletes its
// data (the slot moved away).
func (c *Cluster) dropReplica(s int, r *slot.Replica, destroy bool) {
	c.cfg.Slots.Remove(s, r)
	if err := r.Close(); err != nil {
		c.log.Warn("closing slot replica", "slot", s, "error", err)
	}
	if destroy {
		if err := r.Destroy(); err != nil {
			c.log.Error("deleting a moved slot's data failed", "slot", s, "error", err)
			return
		}
		c.log.Info("slot moved away; local replica deleted", "slot", s)
	}
}

// maybeRetire deletes a replica this node should no longer hold once its
// group's leader confirms it is out of the configuration. Until then it
// keeps serving: it may still be needed for a quorum.
func (c *Cluster) maybeRetire(s int, r *slot.Replica) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	leader, _ := r.Leader()
	if leader == "" || leader == c.cfg.NodeID {
		// A replica removed from its group may never hear of it (the
		// leader stops replicating to it) and then knows no leader: ask
		// the others who leads.
		leader = c.CachedView(ctx, 2*time.Second).LeaderOf(s)
	}
	if leader == "" || leader == c.cfg.NodeID {
		if st := r.Status(); !st.Member {
			c.dropReplica(s, r, true)
		}
		return
	}
	body, err := c.cfg.Client.Call(ctx, c.AddrOf(leader), MethodSlotStatus, forward.SlotBody(s, nil))
	if err != nil {
		return
	}
	var ls raftgroup.Status
	if json.Unmarshal(body, &ls) != nil || ls.State != raft.Leader.String() {
		return
	}
	for _, id := range append(ls.Voters, ls.Nonvoters...) {
		if id == c.cfg.NodeID {
			return
		}
	}
	c.dropReplica(s, r, true)
}

// caughtUp asks a replica how far it is and compares with the leader (s is
// -1 for the meta group).
func (c *Cluster) caughtUp(s int, id string, leader raftgroup.Status) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var body []byte
	var err error
	if s < 0 {
		body, err = c.cfg.Client.Call(ctx, c.AddrOf(id), MethodMetaStatus, nil)
	} else {
		body, err = c.cfg.Client.Call(ctx, c.AddrOf(id), MethodSlotStatus, forward.SlotBody(s, nil))
	}
	if err != nil {
		return false
	}
	var fs raftgroup.Status
	if json.Unmarshal(body, &fs) != nil {
		return false
	}
	return raftgroup.CaughtUp(leader, fs)
}
