package node

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"

	"github.com/timemachine-db/timemachine/slot"
)

// slotDir is where a slot replica keeps its raft snapshots.
func (n *Node) slotDir(s int) string {
	return filepath.Join(n.cfg.DataDir, "raft", fmt.Sprintf("slot-%04d", s))
}

// hasSlotData reports whether this node holds data of slot s.
func (n *Node) hasSlotData(s int) bool {
	_, err := os.Stat(n.slotDir(s))
	return err == nil
}

// openSlot opens this node's replica of slot s over the node's storage,
// internal port, deliverer and fire pool (the cluster's reconciler decides
// when, and registers it).
func (n *Node) openSlot(s int) (*slot.Replica, error) {
	stream, err := n.mux.StreamLayer(uint16(s), nil)
	if err != nil {
		return nil, fmt.Errorf("slot %d transport: %w", s, err)
	}
	stream.Dialer = n.cfg.MuxDialer
	r, err := slot.Open(slot.Config{
		Slot: s, NodeID: n.id.NodeID, Dir: n.slotDir(s),
		LogDB: n.logDB, DB: n.db, Stream: stream, Meta: n.meta.State, Deliverer: n.dlv, Metrics: n.metrics,
		Logger: n.log, RaftLogLevel: n.cfg.RaftLogLevel, Clock: n.cfg.Clock, Timing: n.cfg.Timing,
		FireSlots: n.fireSlots, Targets: n.targets, Lanes: n.lanes, MaintenanceInterval: n.cfg.MaintenanceInterval, OnFatal: n.onFatal,
		MetaReady: n.meta.WaitReplayed, MetaCurrent: n.meta.CaughtUp, Fence: n.live,
		WrapTransport:     func(nt *raft.NetworkTransport) raft.Transport { return n.beats.Wrap(uint16(s), nt) },
		LeaderlessConsent: func(voters []string) bool { return n.leaderlessConsent(groupKey(s), voters) },
	})
	if err != nil {
		_ = stream.Close()
		return nil, err
	}
	return r, nil
}

// adoptSlotCount records the cluster's slot count in node.json.
func (n *Node) adoptSlotCount(count int) error {
	n.id.SlotCount = count
	return writeFileAtomic(filepath.Join(n.cfg.DataDir, identityFile), n.id)
}

// finishDestroys completes the deletions of slot replicas that a crash cut
// short (slot.Destroy marks a replica before deleting it), so their data
// does not linger until the slot happens to be placed here again.
func (n *Node) finishDestroys() {
	for s := 0; s < n.id.SlotCount; s++ {
		if err := slot.FinishDestroy(n.slotDir(s), s, fmt.Sprintf("slot-%d", s), n.db, n.logDB); err != nil {
			n.log.Warn("finishing an interrupted deletion of a slot replica failed; retried when the slot is opened", "slot", s, "error", err)
		}
	}
}
