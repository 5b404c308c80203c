package model

import "time"

// NodeStatus is a node's membership state as the meta group records it.
type NodeStatus string

// Node states. A failed node keeps its replicas for the failure grace
// period (it may come back); after that, or when it left or was removed,
// its replicas are re-created elsewhere.
const (
	NodeAlive    NodeStatus = "alive"
	NodeFailed   NodeStatus = "failed"
	NodeLeft     NodeStatus = "left"
	NodeDraining NodeStatus = "draining"
)

// Node is one member of the cluster.
type Node struct {
	ID       string     `json:"id"`
	HTTPAddr string     `json:"http_addr"`
	BindAddr string     `json:"bind_addr"`
	SerfAddr string     `json:"serf_addr"`
	Status   NodeStatus `json:"status"`
	// Since is when Status last changed (leader-stamped, ms).
	Since    int64 `json:"since"`
	JoinedAt int64 `json:"joined_at"`
}

// SlotEntry is the desired replica set of one slot. Replicas[0] is the
// preferred leader. Epoch counts changes; epoch 1 is the placement the
// cluster formed with, and only replicas listed at epoch 1 may bootstrap
// the slot's raft group (later replicas are added by the slot's leader).
type SlotEntry struct {
	Replicas []string `json:"replicas"`
	Epoch    uint64   `json:"epoch"`
	// PreferredLeader, when set, is the node an operator asked to lead the
	// slot (admin transfer): the leader balancer keeps leadership there
	// until the next rebalance or until that node drains, fails, leaves or
	// is removed. It is always one of Replicas.
	PreferredLeader string `json:"preferred_leader,omitempty"`
}

// Clone copies the entry.
func (e SlotEntry) Clone() SlotEntry {
	return SlotEntry{Replicas: append([]string(nil), e.Replicas...), Epoch: e.Epoch, PreferredLeader: e.PreferredLeader}
}

// RemovedNode is the tombstone of a node taken out of the cluster (admin
// remove): gossip members with its id are ignored unless their process
// started after the removal (restarted and re-joined).
type RemovedNode struct {
	ID string `json:"id"`
	// At is when it was removed (leader-stamped, ms).
	At int64 `json:"at"`
	// StartedAt is the start time (ms) its process published in gossip
	// when it was removed, 0 if it was not in gossip then.
	StartedAt int64 `json:"started_at,omitempty"`
}

// Has reports whether node is one of the entry's replicas.
func (e SlotEntry) Has(node string) bool {
	for _, r := range e.Replicas {
		if r == node {
			return true
		}
	}
	return false
}

// ClusterInfo is GET /v1/cluster (docs/api.md#cluster-and-admin).
type ClusterInfo struct {
	SlotCount         int        `json:"slot_count"`
	ReplicationFactor int        `json:"replication_factor"`
	Nodes             []NodeInfo `json:"nodes"`
	Slots             []SlotInfo `json:"slots"`
	Self              string     `json:"self,omitempty"`
	MetaLeader        string     `json:"meta_leader,omitempty"`
	// Moves is the meta leader's record of the slot moves under way (nil
	// when no node reports one).
	Moves *MoveProgress `json:"moves,omitempty"`
	Extra interface{}   `json:"extra,omitempty"`
}

// MoveProgress counts slot moves: a slot is moving while its raft
// configuration differs from its target. A round starts when a slot starts
// moving with none moving before, and its counts stay until the next round.
type MoveProgress struct {
	// Pending slots are moving: Active of them are being worked on now
	// (at most the controller's bound), the rest wait their turn.
	Pending int `json:"pending"`
	Active  int `json:"active"`
	// Done slots reached their target this round; Total = Done + Pending.
	Done      int   `json:"done"`
	Total     int   `json:"total"`
	StartedAt int64 `json:"started_at,omitempty"` // ms
	// FinishedAt is set once nothing is pending (ms).
	FinishedAt int64 `json:"finished_at,omitempty"`
}

// TransferResult answers POST /v1/admin/slots/{n}/transfer.
type TransferResult struct {
	Slot int    `json:"slot"`
	From string `json:"from"`
	To   string `json:"to"`
	// Leader is who leads the slot as the answer is sent: To once the
	// transfer happened ("" while the slot elects).
	Leader string `json:"leader"`
	// PreferredLeader is the slot's preferred leader from now on (To).
	PreferredLeader string `json:"preferred_leader"`
}

// DrainResult answers POST /v1/admin/nodes/{id}/drain.
type DrainResult struct {
	Node   string `json:"node"`
	Status string `json:"status"`
	// Replicas and SlotsLed are what the node holds and leads now; the
	// drain is done when both are 0.
	Replicas int `json:"replicas"`
	SlotsLed int `json:"slots_led"`
}

// RemoveResult answers DELETE /v1/admin/nodes/{id}.
type RemoveResult struct {
	Node    string `json:"node"`
	Removed bool   `json:"removed"`
	Forced  bool   `json:"forced,omitempty"`
	// Slots are the slots whose replicas on a force-removed node are being
	// re-created elsewhere.
	Slots []int `json:"slots,omitempty"`
}

// NodeInfo is one node of the cluster.
type NodeInfo struct {
	ID       string `json:"id"`
	HTTPAddr string `json:"http_addr"`
	BindAddr string `json:"bind_addr,omitempty"`
	Status   string `json:"status"`
	SlotsLed int    `json:"slots_led"`
	Replicas int    `json:"replicas"`
}

// SlotInfo is one slot of the cluster.
type SlotInfo struct {
	Slot   int    `json:"slot"`
	Leader string `json:"leader"`
	// Replicas are the voters of the slot's raft configuration, as its
	// leader (or, without one, a replica) reports it; Nonvoters are
	// replicas still being filled.
	Replicas  []string `json:"replicas"`
	Nonvoters []string `json:"nonvoters,omitempty"`
	State     string   `json:"state"`
	// Target is the replica set a moving slot is heading for.
	Target          []string `json:"target,omitempty"`
	PreferredLeader string   `json:"preferred_leader,omitempty"`
	Pending         int64    `json:"pending"`
}

// Move is one step of a rebalance plan.
type Move struct {
	Slot int    `json:"slot"`
	From string `json:"from"`
	To   string `json:"to"`
	Kind string `json:"kind,omitempty"` // "replica" or "leader"
}

// CompactResult is one node's answer to a compaction.
type CompactResult struct {
	Node     string        `json:"node"`
	OK       bool          `json:"ok"`
	Error    string        `json:"error,omitempty"`
	Took     time.Duration `json:"-"`
	TookMs   int64         `json:"took_ms"`
	Snapshot int           `json:"slots_snapshotted"`
}
