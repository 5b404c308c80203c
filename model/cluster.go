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
}

// Clone copies the entry.
func (e SlotEntry) Clone() SlotEntry {
	return SlotEntry{Replicas: append([]string(nil), e.Replicas...), Epoch: e.Epoch}
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
	SlotCount         int         `json:"slot_count"`
	ReplicationFactor int         `json:"replication_factor"`
	Nodes             []NodeInfo  `json:"nodes"`
	Slots             []SlotInfo  `json:"slots"`
	Self              string      `json:"self,omitempty"`
	MetaLeader        string      `json:"meta_leader,omitempty"`
	Extra             interface{} `json:"extra,omitempty"`
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
	Slot     int      `json:"slot"`
	Leader   string   `json:"leader"`
	Replicas []string `json:"replicas"`
	State    string   `json:"state"`
	Pending  int64    `json:"pending"`
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
