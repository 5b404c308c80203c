package service

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/timemachine-db/timemachine/cluster"
	"github.com/timemachine-db/timemachine/dht"
	"github.com/timemachine-db/timemachine/forward"
	"github.com/timemachine-db/timemachine/meta"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/raftgroup"
	"github.com/timemachine-db/timemachine/storage"
)

// Config wires a Service.
type Config struct {
	Meta    *meta.Replica
	Forward *forward.Forwarder
	Cluster *cluster.Cluster
	// Clock stamps commands with the time (time.Now).
	Clock func() time.Time
	// OnCreated, if set, counts jobs created (metrics).
	OnCreated func(n int)
	Logger    *slog.Logger
	// Secrets, when set, seals signing secrets and sensitive route headers
	// before they are proposed (secrets.go).
	Secrets Sealer
	// MaxCollections and MaxRoutes bound the meta state (limits.go); 0
	// takes the defaults, negative means no limit.
	MaxCollections, MaxRoutes int
	// Ready, if set, is a condition of the node's own for /readyz (its
	// clock is within bounds), checked before the cluster's.
	Ready func() error
}

// forwarder is what the service needs of forward.Forwarder: slot and meta
// traffic to the leaders, wherever they are (tests fake it).
type forwarder interface {
	ProposeSlot(ctx context.Context, s int, cmds ...raftfsm.Command) ([]model.Result, error)
	ProposeMeta(ctx context.Context, cmds ...raftfsm.Command) ([]model.Result, error)
	CatchUpMeta(ctx context.Context) (*raftfsm.MetaState, error)
	GetJob(ctx context.Context, s int, coll, id string) (*model.Job, bool, error)
	ListSlot(ctx context.Context, s int, q model.ListQuery) (model.ListPage, error)
	GetSchedule(ctx context.Context, s int, coll, id string) (*model.Schedule, string, bool, error)
	ListSchedules(ctx context.Context, s int, coll, after string, limit int) (model.ScheduleListPage, []string, error)
}

// Service is the API's backend on a node.
type Service struct {
	meta    *meta.Replica
	fwd     forwarder
	cluster *cluster.Cluster
	clock   func() time.Time
	created func(n int)
	ready   func() error
	log     *slog.Logger

	sealer                    Sealer
	maxCollections, maxRoutes int
}

// New returns a Service.
func New(cfg Config) *Service {
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.OnCreated == nil {
		cfg.OnCreated = func(int) {}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxCollections == 0 {
		cfg.MaxCollections = DefaultMaxCollections
	}
	if cfg.MaxRoutes == 0 {
		cfg.MaxRoutes = DefaultMaxRoutes
	}
	return &Service{meta: cfg.Meta, fwd: cfg.Forward, cluster: cfg.Cluster, clock: cfg.Clock, created: cfg.OnCreated, ready: cfg.Ready, log: cfg.Logger,
		sealer: cfg.Secrets, maxCollections: cfg.MaxCollections, maxRoutes: cfg.MaxRoutes}
}

func (s *Service) now() int64 { return s.clock().UnixMilli() }

func (s *Service) slotCount() int { return s.cluster.SlotCount() }

func (s *Service) slotOf(coll, id string) int { return dht.SlotOf(coll, id, s.slotCount()) }

const retrySoon = time.Second

// toModel turns an internal error into the domain error a client can act
// on; a *model.Error stands for itself.
func toModel(err error) *model.Error {
	if err == nil {
		return nil
	}
	if e, ok := model.AsError(err); ok {
		return e
	}
	switch {
	case errors.Is(err, model.ErrOutcomeUnknown):
		return nil
	case errors.Is(err, forward.ErrMetaUnavailable):
		return model.Unavailable(retrySoon, "%v; retry shortly", err)
	case errors.Is(err, forward.ErrMetaBehind):
		return errMetaBehind()
	case errors.Is(err, raftgroup.ErrNotLeader):
		return model.Unavailable(retrySoon, "the slot has no leader right now (an election is in progress); retry shortly")
	case errors.Is(err, raftgroup.ErrUnknownOutcome):
		// Reads only: writes find their outcome out (resolve.go).
		return model.Unavailable(retrySoon, "the slot's leader changed while the request was in flight; retry shortly")
	case errors.Is(err, raftgroup.ErrClosed):
		return model.Unavailable(retrySoon, "this node is shutting down; send the request to another node")
	case errors.Is(err, raftgroup.ErrOverloaded):
		return model.Overloaded(retrySoon, "the slot's write queue is full; slow down and retry")
	case errors.Is(err, raftfsm.ErrStopped), errors.Is(err, raftgroup.ErrStorage), errors.Is(err, storage.ErrFatal):
		// For a write, only ErrStorage reaches here (nothing was stored):
		// ErrStopped means committed but not applied, an unknown outcome.
		return model.Unavailable(5*time.Second, "a node's storage failed (is its disk full?) and it is stopping; nothing was changed: retry, the cluster moves the slot's leadership to a healthy node")
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return model.Unavailable(retrySoon, "the request timed out inside the cluster; retry shortly")
	}
	// Anything else is a bug. Its text may name files or internals, so it
	// goes to the log, not to the client.
	slog.Default().Error("unexpected internal error", "error", err)
	return model.Internal("an unexpected error occurred on this node (it is in the node's log); please report it")
}

// fail is toModel as an error (a nil *model.Error must not become a
// non-nil error). model.ErrOutcomeUnknown stays itself: it is no contract
// error (the HTTP layer answers it by closing the connection).
func fail(err error) error {
	if errors.Is(err, model.ErrOutcomeUnknown) || errors.Is(err, raftgroup.ErrUnknownOutcome) {
		return model.ErrOutcomeUnknown
	}
	if e := toModel(err); e != nil {
		return e
	}
	return nil
}

// errMetaBehind: this node cannot tell whether a collection or route
// exists, because its copy of the meta state is not current (it is
// starting, or cut off from the meta leader). Answering 404 then would be
// a lie a client would act on; unavailable makes it retry.
func errMetaBehind() *model.Error {
	return model.Unavailable(retrySoon, "this node is still loading the cluster's configuration (collections, routes); retry shortly")
}
