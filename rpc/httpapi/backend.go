package httpapi

import (
	"context"
	"time"

	"github.com/timemachine-db/timemachine/raftfsm"
)

// Backend is what the HTTP API needs from the node. The node decides
// everything (routing to slot leaders, existence of collections and routes,
// cluster state); this package only parses, validates shapes and renders.
type Backend interface {
	// CreateJobs creates jobs (POST semantics) in coll. Inputs are already
	// validated and carry their id and spec; the node checks that the
	// collection and routes exist, stamps times and commits. The results
	// are in input order; an input whose Err is set is passed through and
	// not created.
	CreateJobs(ctx context.Context, coll string, in []JobInput) ([]JobResult, error)
	// UpsertJob creates or replaces a job (PUT). ifMatch 0 means no
	// If-Match header. The result code is raftfsm.Created, OK or
	// PreconditionFailed.
	UpsertJob(ctx context.Context, coll, id string, spec raftfsm.JobSpec, ifMatch uint64) (raftfsm.Result, error)
	GetJob(ctx context.Context, coll, id string) (*raftfsm.Job, error)
	DeleteJob(ctx context.Context, coll, id string) error
	// ListJobs returns up to q.Limit jobs in (trigger_time, id) order and
	// the position to continue from (nil at the end).
	ListJobs(ctx context.Context, q raftfsm.ListQuery) ([]*raftfsm.Job, *raftfsm.ListPos, error)

	// PutCollection creates (created=true) or replaces a collection.
	PutCollection(ctx context.Context, c raftfsm.Collection) (created bool, err error)
	GetCollection(ctx context.Context, name string) (*raftfsm.Collection, error)
	ListCollections(ctx context.Context) ([]*raftfsm.Collection, error)
	DeleteCollection(ctx context.Context, name string) error

	PutRoute(ctx context.Context, r raftfsm.Route) (created bool, err error)
	GetRoute(ctx context.Context, name string) (*raftfsm.Route, error)
	ListRoutes(ctx context.Context) ([]*raftfsm.Route, error)
	DeleteRoute(ctx context.Context, name string) error

	// Cluster describes the cluster from this node's view.
	Cluster(ctx context.Context) (*ClusterInfo, error)
	// Ready returns nil when this node is in the cluster and every slot has
	// a leader, else an error saying why not.
	Ready() error
	Rebalance(ctx context.Context, dryRun bool) ([]Move, error)
	Compact(ctx context.Context) ([]CompactResult, error)
	TransferSlot(ctx context.Context, slot int, to string) error
	DrainNode(ctx context.Context, id string) error
	RemoveNode(ctx context.Context, id string) error
}

// JobInput is one validated job of a create request.
type JobInput struct {
	ID   string
	Spec raftfsm.JobSpec
	// Err, when set, is the validation error of this batch item.
	Err *Error
}

// JobResult is the outcome of one create. Code is raftfsm.Created (201),
// Exists (200) or Conflict (409); Err is set instead for any other failure.
type JobResult struct {
	ID   string
	Code raftfsm.Code
	Job  *raftfsm.Job
	Err  *Error
}

// ClusterInfo is GET /v1/cluster (API.md §5).
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
