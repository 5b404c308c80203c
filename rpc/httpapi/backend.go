package httpapi

import (
	"context"

	"github.com/timemachine-db/timemachine/model"
)

// Backend is what the HTTP API needs from the rest of the server (the
// service package implements it). The backend decides everything (routing
// to slot leaders, existence of collections and routes, cluster state);
// this package only parses, validates shapes and renders. Backend errors
// are *model.Error values (anything else is answered 500 internal); this
// package alone chooses their HTTP status.
type Backend interface {
	// CreateJobs creates jobs (POST semantics) in coll. Inputs are already
	// validated and carry their id and spec; the backend checks that the
	// collection and routes exist, stamps times and commits. The results
	// are in input order; an input whose Err is set is passed through and
	// not created.
	CreateJobs(ctx context.Context, coll string, in []model.JobInput) ([]model.JobResult, error)
	// UpsertJob creates or replaces a job (PUT). ifMatch 0 means no
	// If-Match header. The result code is model.CodeCreated, CodeOK or
	// CodePreconditionFailed.
	UpsertJob(ctx context.Context, coll, id string, spec model.JobSpec, ifMatch uint64) (model.Result, error)
	GetJob(ctx context.Context, coll, id string) (*model.Job, error)
	DeleteJob(ctx context.Context, coll, id string) error
	// ListJobs returns up to q.Limit jobs in (trigger_time, id) order and
	// the position to continue from (nil at the end).
	ListJobs(ctx context.Context, q model.ListQuery) ([]*model.Job, *model.ListPos, error)

	// PutCollection creates (created=true) or replaces a collection.
	PutCollection(ctx context.Context, c model.Collection) (created bool, err error)
	GetCollection(ctx context.Context, name string) (*model.Collection, error)
	ListCollections(ctx context.Context) ([]*model.Collection, error)
	DeleteCollection(ctx context.Context, name string) error

	// PutSchedule creates (created=true) or replaces a schedule; the spec
	// is validated. GetSchedule answers a *model.Error not_found for a
	// schedule that does not exist.
	PutSchedule(ctx context.Context, coll, id string, spec model.ScheduleSpec, ifMatch uint64) (model.ScheduleView, bool, error)
	GetSchedule(ctx context.Context, coll, id string) (model.ScheduleView, error)
	DeleteSchedule(ctx context.Context, coll, id string) error
	// ListSchedules lists up to limit schedules in id order after the id
	// after; more says whether a next page exists.
	ListSchedules(ctx context.Context, coll, after string, limit int) ([]model.ScheduleView, bool, error)
	// Redrive sends dead letters again now (attempts reset): ids, or with
	// none, those whose trigger time is in [from, to) (to 0: no bound).
	Redrive(ctx context.Context, coll string, ids []string, from, to int64) (int64, error)

	PutRoute(ctx context.Context, r model.Route) (created bool, err error)
	GetRoute(ctx context.Context, name string) (*model.Route, error)
	ListRoutes(ctx context.Context) ([]*model.Route, error)
	DeleteRoute(ctx context.Context, name string) error

	// Cluster describes the cluster from this node's view.
	Cluster(ctx context.Context) (*model.ClusterInfo, error)
	// Ready returns nil when this node is in the cluster and every slot has
	// a leader, else an error saying why not.
	Ready() error
	Rebalance(ctx context.Context, dryRun bool) ([]model.Move, error)
	Compact(ctx context.Context) ([]model.CompactResult, error)
	TransferSlot(ctx context.Context, slot int, to string) (*model.TransferResult, error)
	DrainNode(ctx context.Context, id string) (*model.DrainResult, error)
	RemoveNode(ctx context.Context, id string, force bool) (*model.RemoveResult, error)
	// GossipKeys lists (model.GossipKeyList) or changes (install, use,
	// remove) the gossip encryption keys of every member.
	GossipKeys(ctx context.Context, op, key string) (*model.GossipKeyring, error)
}
