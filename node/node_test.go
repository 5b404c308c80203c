package node

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftgroup"
	"github.com/timemachine-db/timemachine/rpc/httpapi"
)

func testConfig(dir string) Config {
	return Config{
		DataDir:    dir,
		HTTPAddr:   "127.0.0.1:0",
		BindAddr:   "127.0.0.1:0",
		SerfAddr:   "127.0.0.1:0",
		FastGossip: true,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Slots:      4,
		Timing: raftgroup.Timing{HeartbeatTimeout: 150 * time.Millisecond, ElectionTimeout: 150 * time.Millisecond,
			LeaderLeaseTimeout: 100 * time.Millisecond},
		CacheBytes: 8 << 20,
	}
}

func startReady(t *testing.T, cfg Config) *Node {
	t.Helper()
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.WaitReady(ctx); err != nil {
		_ = n.Close()
		t.Fatal(err)
	}
	return n
}

func TestRestartKeepsIdentityAndJobs(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.NodeID = "n1"
	n := startReady(t, cfg)
	ctx := context.Background()
	in := []model.JobInput{{ID: "a", Spec: model.JobSpec{TriggerTime: time.Now().Add(time.Hour).UnixMilli(), CallbackURL: "http://127.0.0.1:9/", Hash: 1}}}
	res, err := n.svc.CreateJobs(ctx, "default", in)
	if err != nil || res[0].Err != nil || res[0].Code != model.CodeCreated {
		t.Fatalf("create: %v %+v", err, res)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	cfg.NodeID = "" // remembered by the data directory
	n = startReady(t, cfg)
	defer n.Close()
	if n.ID() != "n1" {
		t.Fatalf("node id after restart = %q", n.ID())
	}
	j, err := n.svc.GetJob(ctx, "default", "a")
	if err != nil || j.Status != model.StatusScheduled {
		t.Fatalf("job after restart: %+v %v", j, err)
	}
}

func TestDataDirGuards(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.NodeID = "n1"
	n := startReady(t, cfg)

	second := testConfig(dir)
	if _, err := Start(second); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("a second process on the same data dir: %v", err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	other := testConfig(dir)
	other.NodeID = "n2"
	if _, err := Start(other); err == nil || !strings.Contains(err.Error(), `belongs to node "n1"`) {
		t.Fatalf("another node id on the data dir: %v", err)
	}
	slots := testConfig(dir)
	slots.Slots = 8
	if _, err := Start(slots); err == nil || !strings.Contains(err.Error(), "fixed when the cluster forms") {
		t.Fatalf("a different slot count: %v", err)
	}
}

func TestBackendErrors(t *testing.T) {
	n := startReady(t, testConfig(t.TempDir()))
	defer n.Close()
	ctx := context.Background()
	var ae *model.Error
	check := func(err error, status int) {
		t.Helper()
		if err == nil {
			t.Fatalf("want %d, got nil", status)
		}
		var e *model.Error
		if !asErr(err, &e) || httpapi.StatusOf(e.Kind) != status {
			t.Fatalf("want %d, got %v", status, err)
		}
		ae = e
	}
	_, err := n.svc.CreateJobs(ctx, "nope", []model.JobInput{{ID: "a"}})
	check(err, 404)
	res, err := n.svc.CreateJobs(ctx, "default", []model.JobInput{{ID: "a", Spec: model.JobSpec{Route: "missing", Hash: 1}}})
	if err != nil || res[0].Err == nil || httpapi.StatusOf(res[0].Err.Kind) != 404 {
		t.Fatalf("unknown route: %v %+v", err, res)
	}
	check(n.svc.DeleteCollection(ctx, "default"), 400)
	check(n.svc.DeleteJob(ctx, "default", "nothing"), 404)
	_, err = n.svc.UpsertJob(ctx, "default", "x", model.JobSpec{TriggerTime: 1, CallbackURL: "http://x/", Hash: 2}, 3)
	check(err, 412)
	if !strings.Contains(ae.Message, "does not exist") {
		t.Errorf("412 message: %q", ae.Message)
	}
}

func asErr(err error, target **model.Error) bool {
	e, ok := err.(*model.Error)
	if ok {
		*target = e
	}
	return ok
}
