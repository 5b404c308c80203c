package clienttest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/client"
	"github.com/timemachine-db/timemachine/client/clienttest"
	"github.com/timemachine-db/timemachine/client/webhook"
)

func setup(t *testing.T, opts ...client.Option) (*clienttest.Server, *client.Client) {
	t.Helper()
	srv := clienttest.NewServer()
	t.Cleanup(srv.Close)
	c, err := client.New([]string{srv.Addr()}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return srv, c
}

// TestJobLifecycle drives the job endpoints of docs/api.md#jobs through the
// client against the fake.
func TestJobLifecycle(t *testing.T) {
	srv, c := setup(t)
	ctx := context.Background()
	at := time.Date(2027, 1, 1, 9, 0, 0, 0, time.UTC).UnixMilli()
	spec := client.Job{ID: "r1", TriggerTime: at, CallbackURL: "https://example.com/hook", Meta: client.MustMeta(map[string]int{"user": 42})}

	j, created, err := c.CreateJob(ctx, "default", spec)
	if err != nil || !created || j.Status != client.StatusScheduled || j.Version != 1 || j.Collection != "default" {
		t.Fatalf("create: %+v %v %v", j, created, err)
	}
	// The same spec again: 200 with the same job (a safe retry).
	if j2, created, err := c.CreateJob(ctx, "default", spec); err != nil || created || j2.CreatedAt != j.CreatedAt {
		t.Errorf("repeat: %+v %v %v", j2, created, err)
	}
	// A different spec under the id: 409 carrying the existing job.
	other := spec
	other.TriggerTime++
	_, _, err = c.CreateJob(ctx, "default", other)
	var e *client.Error
	if !errors.As(err, &e) || !errors.Is(err, client.ErrConflict) || e.Job == nil || e.Job.ID != "r1" {
		t.Errorf("conflict: %v", err)
	}
	// Invalid input: 400 with the contract's body.
	if _, _, err := c.CreateJob(ctx, "default", client.Job{ID: "bad id", Delay: "1s", CallbackURL: "https://x"}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("bad id: %v", err)
	}
	if _, _, err := c.CreateJob(ctx, "nope", spec); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("unknown collection: %v", err)
	}
	// Upsert with If-Match.
	if _, _, err := c.PutJob(ctx, "default", "r1", spec, client.IfMatch(7)); !errors.Is(err, client.ErrPreconditionFailed) {
		t.Errorf("stale If-Match: %v", err)
	}
	j3, created, err := c.PutJob(ctx, "default", "r1", other, client.IfMatch(1))
	if err != nil || created || j3.Version != 2 || j3.TriggerTime != at+1 {
		t.Errorf("put: %+v %v %v", j3, created, err)
	}
	// Read, delete, read again.
	if g, err := c.GetJob(ctx, "default", "r1"); err != nil || g.Meta.String() != `{"user":42}` {
		t.Errorf("get: %+v %v", g, err)
	}
	if err := c.DeleteJob(ctx, "default", "r1"); err != nil {
		t.Errorf("delete: %v", err)
	}
	if _, err := c.GetJob(ctx, "default", "r1"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("get after delete: %v", err)
	}
	if srv.Requests() == 0 {
		t.Error("no requests counted")
	}
}

func TestBatchPagingRedrive(t *testing.T) {
	srv, c := setup(t)
	ctx := context.Background()
	jobs := make([]client.Job, 250)
	for i := range jobs {
		jobs[i] = client.Job{ID: fmt.Sprintf("j%03d", i), TriggerTime: int64(1000 + i%50), Route: "r"}
	}
	jobs = append(jobs, client.Job{ID: "j000", TriggerTime: 5, Route: "r"}) // conflicts with the first
	res, err := c.CreateJobs(ctx, "default", jobs)
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Created() || !errors.Is(res[250].Err(), client.ErrConflict) {
		t.Errorf("results: %+v ... %+v", res[0], res[250])
	}
	// Every job once, in (trigger_time, id) order, over three pages.
	var got []string
	last := ""
	for j, err := range c.Jobs(ctx, "default", client.ListOptions{Limit: 100}) {
		if err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprintf("%08d/%s", j.TriggerTime, j.ID)
		if key <= last {
			t.Fatalf("out of order: %s after %s", key, last)
		}
		last = key
		got = append(got, j.ID)
	}
	if len(got) != 250 {
		t.Fatalf("iterated %d jobs", len(got))
	}
	p, err := c.ListJobs(ctx, "default", client.ListOptions{Limit: 100})
	if err != nil || len(p.Jobs) != 100 || p.NextCursor == "" {
		t.Fatalf("first page: %d jobs, cursor %q, %v", len(p.Jobs), p.NextCursor, err)
	}
	// Filters: a time range, and the dead letters.
	p, err = c.ListJobs(ctx, "default", client.ListOptions{From: ptr(int64(1000)), To: ptr(int64(1001))})
	if err != nil || len(p.Jobs) != 5 {
		t.Errorf("range: %d jobs, %v", len(p.Jobs), err)
	}
	srv.Fail("default", "j007", "HTTP 410 from the receiver")
	srv.Fail("default", "j008", "HTTP 410 from the receiver")
	p, err = c.ListJobs(ctx, "default", client.ListOptions{Status: client.StatusFailed})
	if err != nil || len(p.Jobs) != 2 || p.Jobs[0].LastError == "" {
		t.Fatalf("dead letters: %+v, %v", p.Jobs, err)
	}
	r, err := c.Redrive(ctx, "default", client.RedriveRequest{IDs: []string{"j007", "j008", "j009"}})
	if err != nil || r.Redriven != 2 {
		t.Errorf("redrive: %+v %v", r, err)
	}
	if j, _ := c.GetJob(ctx, "default", "j007"); j.Status != client.StatusScheduled || j.Attempts != 0 {
		t.Errorf("after redrive: %+v", j)
	}
	// Stopping an iteration early sends no further page request.
	n0 := srv.Requests()
	for range c.Jobs(ctx, "default", client.ListOptions{Limit: 10}) {
		break
	}
	if srv.Requests() != n0+1 {
		t.Errorf("early stop sent %d requests", srv.Requests()-n0)
	}
}

func TestSchedulesCollectionsRoutes(t *testing.T) {
	srv, c := setup(t)
	ctx := context.Background()
	secret, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	col, created, err := c.PutCollection(ctx, "billing", client.Collection{Retention: "48h", SigningSecret: secret})
	if err != nil || !created || !col.SigningSecretSet || col.SigningSecret != "" {
		t.Fatalf("collection: %+v %v %v", col, created, err)
	}
	if _, _, err := c.PutCollection(ctx, "billing", client.Collection{SigningSecret: "whsec_short"}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("short secret: %v", err)
	}
	cols, err := c.ListCollections(ctx)
	if err != nil || len(cols) != 2 || cols[0].Name != "billing" || cols[1].Name != "default" {
		t.Errorf("collections: %+v %v", cols, err)
	}
	rt, _, err := c.PutRoute(ctx, "invoices", client.Route{WebhookURL: "https://b.example/hook",
		Headers: map[string]string{"Authorization": "Bearer x", "X-Team": "billing"}, SigningSecret: secret,
		RateLimit: &client.RateLimit{PerSecond: 50, Burst: 10}, MaxInFlight: 4, Batch: &client.RouteBatch{MaxJobs: 100, MaxWait: "20ms"}})
	if err != nil || rt.Headers["Authorization"] == "Bearer x" || rt.Headers["X-Team"] != "billing" || rt.Batch.MaxJobs != 100 || !rt.SigningSecretSet {
		t.Errorf("route: %+v %v", rt, err)
	}
	if rt, _, err := c.PutRoute(ctx, "fast", client.Route{WebhookURL: "https://f.example/hook", Pipeline: true}); err != nil || !rt.Pipeline {
		t.Errorf("pipelined route: %+v %v", rt, err)
	}
	if rt, err := c.GetRoute(ctx, "invoices"); err != nil || rt.Pipeline {
		t.Errorf("route without pipeline: %+v %v", rt, err)
	}
	s, created, err := c.PutSchedule(ctx, "billing", "nightly", client.Schedule{Cron: "0 2 * * *", Timezone: "Europe/Berlin", Route: "invoices"})
	if err != nil || !created || s.ID != "nightly" || s.Version != 1 {
		t.Fatalf("schedule: %+v %v", s, err)
	}
	if _, _, err := c.PutSchedule(ctx, "billing", "bad", client.Schedule{Cron: "0 2 * *", Every: "1m", Route: "invoices"}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("cron and every: %v", err)
	}
	srv.Occur("billing", "nightly", 1767229200000)
	srv.Occur("billing", "nightly", 1767315600000)
	var occ []string
	for j, err := range c.Occurrences(ctx, "billing", "nightly", client.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		sched, at, ok := client.ParseOccurrenceID(j.ID)
		if !ok || sched != "nightly" || at != j.TriggerTime || j.Schedule != "nightly" {
			t.Errorf("occurrence %+v", j)
		}
		occ = append(occ, j.ID)
	}
	if len(occ) != 2 {
		t.Errorf("occurrences %v", occ)
	}
	for s, err := range c.Schedules(ctx, "billing", client.ListSchedulesOptions{}) {
		if err != nil || s.ID != "nightly" || s.LastFireAt != 1767315600000 {
			t.Errorf("schedules: %+v %v", s, err)
		}
	}
	if err := c.DeleteSchedule(ctx, "billing", "nightly"); err != nil {
		t.Error(err)
	}
	if err := c.DeleteCollection(ctx, "billing"); err != nil {
		t.Error(err)
	}
	if _, err := c.GetJob(ctx, "billing", occ[0]); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("jobs go with their collection: %v", err)
	}
}

func TestAuthAndRetries(t *testing.T) {
	srv, anon := setup(t)
	srv.SetToken("r-tok", "reader")
	srv.SetToken("w-tok", "writer", "billing")
	srv.SetToken("a-tok", "admin")
	ctx := context.Background()
	if _, err := anon.Cluster(ctx); !errors.Is(err, client.ErrUnauthenticated) {
		t.Errorf("no token: %v", err)
	}
	if err := anon.Healthy(ctx); err != nil {
		t.Errorf("healthz stays open: %v", err)
	}
	newc := func(tok string) *client.Client {
		c, err := client.New([]string{srv.URL()}, client.WithToken(tok))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	admin, writer, reader := newc("a-tok"), newc("w-tok"), newc("r-tok")
	if _, _, err := admin.PutCollection(ctx, "billing", client.Collection{}); err != nil {
		t.Fatal(err)
	}
	job := client.Job{ID: "x", Delay: "1m", CallbackURL: "https://example.com"}
	if _, _, err := writer.CreateJob(ctx, "billing", job); err != nil {
		t.Errorf("writer in its collection: %v", err)
	}
	if _, _, err := writer.CreateJob(ctx, "default", job); !errors.Is(err, client.ErrPermissionDenied) {
		t.Errorf("writer elsewhere: %v", err)
	}
	if _, _, err := writer.PutCollection(ctx, "billing", client.Collection{}); !errors.Is(err, client.ErrPermissionDenied) {
		t.Errorf("writer on collections: %v", err)
	}
	if _, _, err := reader.CreateJob(ctx, "billing", job); !errors.Is(err, client.ErrPermissionDenied) {
		t.Errorf("reader writes: %v", err)
	}
	if _, err := reader.GetJob(ctx, "billing", "x"); err != nil {
		t.Errorf("reader reads: %v", err)
	}
	// Injected 503s: a GET rides them out, a POST without id gives up.
	srv.FailNext(2, 503, 0)
	if _, err := admin.Cluster(ctx); err != nil {
		t.Errorf("GET through two 503s: %v", err)
	}
	srv.FailNext(1, 429, time.Second)
	_, _, err := admin.CreateJob(ctx, "billing", client.Job{Delay: "1m", CallbackURL: "https://example.com"})
	if !errors.Is(err, client.ErrOverloaded) || client.RetryAfterOf(err) != time.Second {
		t.Errorf("POST without id through a 429: %v", err)
	}
	// Admin endpoints.
	if r, err := admin.Rebalance(ctx, true); err != nil || !r.DryRun {
		t.Errorf("rebalance: %+v %v", r, err)
	}
	if r, err := admin.Compact(ctx); err != nil || len(r.Results) != 1 || !r.Results[0].OK {
		t.Errorf("compact: %+v %v", r, err)
	}
	if _, err := admin.TransferSlot(ctx, 3, "n1"); err != nil {
		t.Errorf("transfer: %v", err)
	}
	if _, err := admin.TransferSlot(ctx, 3, "n9"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("transfer to unknown node: %v", err)
	}
	if _, err := admin.Drain(ctx, "n1"); err != nil {
		t.Errorf("drain: %v", err)
	}
	if err := admin.RemoveNode(ctx, "n1", false); !errors.Is(err, client.ErrConflict) {
		t.Errorf("remove a node with replicas: %v", err)
	}
	if err := admin.RemoveNode(ctx, "n1", true); err != nil {
		t.Errorf("remove with force: %v", err)
	}
	if ci, err := admin.Cluster(ctx); err != nil || len(ci.Nodes) != 0 || ci.SlotCount != 12 {
		t.Errorf("cluster after remove: %+v %v", ci, err)
	}
	if b, err := admin.OpenAPI(ctx); err != nil || !strings.Contains(string(b), `"openapi":"3.1.0"`) {
		t.Errorf("openapi: %s %v", b, err)
	}
	if err := admin.Ready(ctx); err != nil {
		t.Errorf("ready: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }
