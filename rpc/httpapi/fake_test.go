package httpapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/model"
	"github.com/valyala/fasthttp"
)

// fakeBackend records every call and answers from its fields. The zero
// value creates every valid job, finds nothing and is ready.
type fakeBackend struct {
	mu    sync.Mutex
	calls []string

	createColl string
	createIn   []model.JobInput
	createFn   func(coll string, in []model.JobInput) ([]model.JobResult, error)

	upsertColl, upsertID string
	upsertSpec           model.JobSpec
	upsertIfMatch        uint64
	upsertFn             func() (model.Result, error)

	job      *model.Job
	err      error // returned by the simple calls when set
	listQ    model.ListQuery
	listJobs []*model.Job
	listNext *model.ListPos

	putColl     model.Collection
	coll        *model.Collection
	colls       []*model.Collection
	putRoute    model.Route
	route       *model.Route
	routes      []*model.Route
	created     bool
	cluster     *model.ClusterInfo
	readyErr    error
	moves       []model.Move
	dryRun      bool
	compactRes  []model.CompactResult
	transferN   int
	transferTo  string
	nodeArg     string
	force       bool
	deletedColl string
	deletedJob  [2]string
	sf          scheduleFake
}

func (f *fakeBackend) record(name string) {
	f.mu.Lock()
	f.calls = append(f.calls, name)
	f.mu.Unlock()
}

// inputs returns the last CreateJobs inputs (under the lock: the server
// may run on another goroutine).
func (f *fakeBackend) inputs() []model.JobInput {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.createIn
}

func (f *fakeBackend) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// storedJob is the job a real backend would store for a valid input.
func storedJob(coll, id string, s model.JobSpec) *model.Job {
	return &model.Job{
		Collection: coll, ID: id, Version: 1, Status: model.StatusScheduled,
		TriggerTime: s.TriggerTime, DueTime: s.TriggerTime, CreatedAt: 1000, UpdatedAt: 1000,
		CallbackURL: s.CallbackURL, Route: s.Route, Meta: s.Meta, Retry: s.Retry,
		CallbackTimeoutMs: s.CallbackTimeoutMs, SpecHash: s.Hash,
	}
}

func (f *fakeBackend) CreateJobs(ctx context.Context, coll string, in []model.JobInput) ([]model.JobResult, error) {
	f.record("CreateJobs")
	if _, ok := ctx.Deadline(); !ok {
		panic("backend call without a deadline")
	}
	f.mu.Lock()
	f.createColl, f.createIn = coll, in
	f.mu.Unlock()
	if f.createFn != nil {
		return f.createFn(coll, in)
	}
	out := make([]model.JobResult, len(in))
	for i, x := range in {
		if x.Err != nil {
			out[i] = model.JobResult{ID: x.ID, Err: x.Err}
			continue
		}
		out[i] = model.JobResult{ID: x.ID, Code: model.CodeCreated, Job: storedJob(coll, x.ID, x.Spec)}
	}
	return out, nil
}

func (f *fakeBackend) UpsertJob(_ context.Context, coll, id string, spec model.JobSpec, ifMatch uint64) (model.Result, error) {
	f.record("UpsertJob")
	f.upsertColl, f.upsertID, f.upsertSpec, f.upsertIfMatch = coll, id, spec, ifMatch
	if f.upsertFn != nil {
		return f.upsertFn()
	}
	return model.Result{Code: model.CodeCreated, Job: storedJob(coll, id, spec)}, nil
}

func (f *fakeBackend) GetJob(_ context.Context, coll, id string) (*model.Job, error) {
	f.record("GetJob")
	if f.err != nil {
		return nil, f.err
	}
	if f.job == nil {
		return nil, model.NotFound("job %q not found", id)
	}
	return f.job, nil
}

func (f *fakeBackend) DeleteJob(_ context.Context, coll, id string) error {
	f.record("DeleteJob")
	f.deletedJob = [2]string{coll, id}
	return f.err
}

func (f *fakeBackend) ListJobs(_ context.Context, q model.ListQuery) ([]*model.Job, *model.ListPos, error) {
	f.record("ListJobs")
	f.listQ = q
	return f.listJobs, f.listNext, f.err
}

func (f *fakeBackend) PutCollection(_ context.Context, c model.Collection) (bool, error) {
	f.record("PutCollection")
	f.putColl = c
	return f.created, f.err
}

func (f *fakeBackend) GetCollection(_ context.Context, name string) (*model.Collection, error) {
	f.record("GetCollection")
	if f.err != nil {
		return nil, f.err
	}
	if f.coll == nil {
		return nil, model.NotFound("collection %q not found", name)
	}
	return f.coll, nil
}

func (f *fakeBackend) ListCollections(context.Context) ([]*model.Collection, error) {
	f.record("ListCollections")
	return f.colls, f.err
}

func (f *fakeBackend) DeleteCollection(_ context.Context, name string) error {
	f.record("DeleteCollection")
	f.deletedColl = name
	return f.err
}

func (f *fakeBackend) PutRoute(_ context.Context, r model.Route) (bool, error) {
	f.record("PutRoute")
	f.putRoute = r
	return f.created, f.err
}

func (f *fakeBackend) GetRoute(_ context.Context, name string) (*model.Route, error) {
	f.record("GetRoute")
	if f.err != nil {
		return nil, f.err
	}
	if f.route == nil {
		return nil, model.NotFound("route %q not found", name)
	}
	return f.route, nil
}

func (f *fakeBackend) ListRoutes(context.Context) ([]*model.Route, error) {
	f.record("ListRoutes")
	return f.routes, f.err
}

func (f *fakeBackend) DeleteRoute(context.Context, string) error {
	f.record("DeleteRoute")
	return f.err
}

func (f *fakeBackend) Cluster(context.Context) (*model.ClusterInfo, error) {
	f.record("Cluster")
	return f.cluster, f.err
}

func (f *fakeBackend) Ready() error {
	f.record("Ready")
	return f.readyErr
}

func (f *fakeBackend) Rebalance(_ context.Context, dryRun bool) ([]model.Move, error) {
	f.record("Rebalance")
	f.dryRun = dryRun
	return f.moves, f.err
}

func (f *fakeBackend) Compact(context.Context) ([]model.CompactResult, error) {
	f.record("Compact")
	return f.compactRes, f.err
}

func (f *fakeBackend) TransferSlot(_ context.Context, slot int, to string) (*model.TransferResult, error) {
	f.record("TransferSlot")
	f.transferN, f.transferTo = slot, to
	if f.err != nil {
		return nil, f.err
	}
	return &model.TransferResult{Slot: slot, From: "n1", To: to, Leader: to, PreferredLeader: to}, nil
}

func (f *fakeBackend) DrainNode(_ context.Context, id string) (*model.DrainResult, error) {
	f.record("DrainNode")
	f.nodeArg = id
	if f.err != nil {
		return nil, f.err
	}
	return &model.DrainResult{Node: id, Status: "draining", Replicas: 3, SlotsLed: 1}, nil
}

func (f *fakeBackend) RemoveNode(_ context.Context, id string, force bool) (*model.RemoveResult, error) {
	f.record("RemoveNode")
	f.nodeArg, f.force = id, force
	if f.err != nil {
		return nil, f.err
	}
	return &model.RemoveResult{Node: id, Removed: true, Forced: force}, nil
}

// testNow is the fixed clock of the tests.
var testNow = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newTestServer(f *fakeBackend, mod ...func(*Options)) *Server {
	o := Options{Clock: func() time.Time { return testNow }, Logger: slog.New(slog.DiscardHandler)}
	for _, m := range mod {
		m(&o)
	}
	return New(f, o)
}

// resp is a finished in-memory exchange.
type resp struct {
	status int
	header map[string]string
	body   []byte
}

func (r resp) errorBody(t *testing.T) (code, msg string) {
	t.Helper()
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("error body %q: %v", r.body, err)
	}
	if e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("error body without code or message: %s", r.body)
	}
	return e.Error.Code, e.Error.Message
}

// do runs one request through h with an in-memory RequestCtx. hdr is
// name, value pairs.
func do(h fasthttp.RequestHandler, method, uri, body string, hdr ...string) resp {
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(uri)
	if body != "" {
		req.SetBodyString(body)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, nil, nil)
	h(&ctx)
	r := resp{status: ctx.Response.StatusCode(), header: map[string]string{}, body: append([]byte(nil), ctx.Response.Body()...)}
	for k, v := range ctx.Response.Header.All() {
		r.header[string(k)] = string(v)
	}
	return r
}

func mustJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("answer is not JSON (%v): %s", err, b)
	}
}

func (f *fakeBackend) GossipKeys(_ context.Context, op, key string) (*model.GossipKeyring, error) {
	f.record("GossipKeys " + op)
	return &model.GossipKeyring{Keys: map[string]int{"sha256:0123456789abcdef": 1}, Nodes: 1, Responses: 1}, f.err
}
