package node

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/raftgroup"
	"github.com/timemachine-db/timemachine/slot"
)

// reconcileLoop makes this node's slot replicas match the slot table
// (level-triggered: every pass derives what to do from the current state,
// so a crash midway needs no recovery): open the replicas this node should
// hold, retire those it should not once their group let them go, and, for
// the slots it leads, take the next membership step.
func (n *Node) reconcileLoop() {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-n.kick:
		case <-t.C:
		}
		n.reconcileOnce()
	}
}

func (n *Node) reconcileOnce() {
	st := n.meta.State()
	if !st.Formed() || !n.meta.CaughtUp() {
		return
	}
	if err := n.adoptSlotCount(st.SlotCount); err != nil {
		n.log.Error("slot count mismatch", "error", err)
		return
	}
	self := n.id.NodeID
	for s := 0; s < st.SlotCount; s++ {
		select {
		case <-n.stop:
			return
		default:
		}
		e := st.Slots[s]
		want := e.Has(self)
		r := n.replica(s)
		if r != nil && r.Removed() {
			// Raft shut the replica down: the group removed it.
			n.dropReplica(s, r, !want)
			if !want {
				continue
			}
			r = nil
		}
		switch {
		case r == nil && want:
			n.openReplica(s, e, st)
		case r != nil && r.IsLeader():
			n.stepMembership(s, r, e, st)
		case r != nil && !want:
			n.maybeRetire(s, r)
		}
	}
}

// adoptSlotCount records the cluster's slot count in node.json the first
// time this node sees the meta state (a node that joined an existing
// cluster takes its slot count).
func (n *Node) adoptSlotCount(count int) error {
	if n.id.SlotCount == count {
		return nil
	}
	if len(n.localReplicas()) > 0 {
		return fmt.Errorf("this node holds replicas of %d slots but the cluster has %d", n.id.SlotCount, count)
	}
	n.id.SlotCount = count
	return writeFileAtomic(filepath.Join(n.cfg.DataDir, identityFile), n.id)
}

// openExisting opens the slot replicas whose data is on disk.
func (n *Node) openExisting() {
	for s := 0; s < n.id.SlotCount; s++ {
		dir := filepath.Join(n.cfg.DataDir, "raft", fmt.Sprintf("slot-%04d", s))
		if _, err := os.Stat(dir); err == nil {
			n.openReplica(s, model.SlotEntry{}, nil)
		}
	}
}

func (n *Node) membersOf(ids []string, st *raftfsm.MetaState) ([]raftgroup.Member, bool) {
	out := make([]raftgroup.Member, 0, len(ids))
	for _, id := range ids {
		addr := ""
		if nd, ok := st.Nodes[id]; ok {
			addr = nd.BindAddr
		}
		if id == n.id.NodeID {
			addr = n.mux.Addr().String()
		}
		if addr == "" {
			return nil, false
		}
		out = append(out, raftgroup.Member{ID: id, Addr: addr})
	}
	return out, true
}

func (n *Node) openReplica(s int, e model.SlotEntry, st *raftfsm.MetaState) {
	stream, err := n.mux.StreamLayer(uint16(s), nil)
	if err != nil {
		n.log.Error("slot transport", "slot", s, "error", err)
		return
	}
	stream.Dialer = n.cfg.MuxDialer
	r, err := slot.Open(slot.Config{
		Slot: s, NodeID: n.id.NodeID, Dir: filepath.Join(n.cfg.DataDir, "raft", fmt.Sprintf("slot-%04d", s)),
		LogDB: n.logDB, DB: n.db, Stream: stream, Meta: n.meta.State, Deliverer: n.dlv, Metrics: n.metrics,
		Logger: n.log, RaftLogLevel: n.cfg.RaftLogLevel, Clock: n.cfg.Clock, Timing: n.cfg.Timing,
		FireSlots: n.fireSlots, MaintenanceInterval: n.cfg.MaintenanceInterval, OnFatal: n.onFatal,
		MetaReady: n.meta.WaitCaughtUp,
	})
	if err != nil {
		_ = stream.Close()
		n.log.Error("opening slot replica failed; will retry", "slot", s, "error", err)
		return
	}
	// Only the placement the cluster formed with bootstraps a group; later
	// replicas start empty and are added by the slot's leader.
	if e.Epoch == 1 {
		members, ok := n.membersOf(e.Replicas, st)
		if ok {
			servers := make([]raft.Server, len(members))
			for i, m := range members {
				servers[i] = raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(m.ID), Address: raft.ServerAddress(m.Addr)}
			}
			if err := r.Bootstrap(servers); err != nil {
				n.log.Error("bootstrapping slot failed", "slot", s, "error", err)
			}
		}
	}
	n.mu.Lock()
	n.slots[s] = r
	n.mu.Unlock()
	n.log.Debug("opened slot replica", "slot", s, "epoch", e.Epoch)
}

// dropReplica closes a local replica and, when destroy is set, deletes its
// data (the slot moved away).
func (n *Node) dropReplica(s int, r *slot.Replica, destroy bool) {
	n.mu.Lock()
	if n.slots[s] == r {
		delete(n.slots, s)
	}
	n.mu.Unlock()
	if err := r.Close(); err != nil {
		n.log.Warn("closing slot replica", "slot", s, "error", err)
	}
	if destroy {
		if err := r.Destroy(); err != nil {
			n.log.Error("deleting a moved slot's data failed", "slot", s, "error", err)
			return
		}
		n.log.Info("slot moved away; local replica deleted", "slot", s)
	}
}

// maybeRetire deletes a replica this node should no longer hold once its
// group's leader confirms it is out of the configuration. Until then it
// keeps serving: it may still be needed for a quorum.
func (n *Node) maybeRetire(s int, r *slot.Replica) {
	leader, _ := r.Leader()
	if leader == "" {
		st := r.Status()
		if !st.Member {
			n.dropReplica(s, r, true)
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	body, err := n.rpc.Call(ctx, n.addrOf(leader), mSlotStatus, slotPrefix(s, nil))
	if err != nil {
		return
	}
	var ls raftgroup.Status
	if json.Unmarshal(body, &ls) != nil || ls.State != raft.Leader.String() {
		return
	}
	for _, id := range append(ls.Voters, ls.Nonvoters...) {
		if id == n.id.NodeID {
			return
		}
	}
	n.dropReplica(s, r, true)
}

// stepMembership takes the next membership step of a slot this node leads.
func (n *Node) stepMembership(s int, r *slot.Replica, e model.SlotEntry, st *raftfsm.MetaState) {
	voters, ok := n.membersOf(e.Replicas, st)
	if !ok || len(voters) == 0 {
		return
	}
	leader := r.Status()
	step, err := r.Reconcile(raftgroup.Membership{Voters: voters}, func(id string) bool {
		return n.caughtUp(s, id, leader)
	})
	if err != nil {
		n.log.Warn("slot membership step failed; will retry", "slot", s, "step", step, "error", err)
	}
}

// caughtUp asks a replica how far it is and compares with the leader.
func (n *Node) caughtUp(s int, id string, leader raftgroup.Status) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var body []byte
	var err error
	if s < 0 {
		body, err = n.rpc.Call(ctx, n.addrOf(id), mMetaStatus, nil)
	} else {
		body, err = n.rpc.Call(ctx, n.addrOf(id), mSlotStatus, slotPrefix(s, nil))
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
