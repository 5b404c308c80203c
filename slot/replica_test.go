package slot

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/timemachine-db/timemachine/internal/testutil"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/raftgroup"
	"github.com/timemachine-db/timemachine/rpc/mux"
	"github.com/timemachine-db/timemachine/storage"
)

// fakeDeliverer records deliveries and answers with a scripted result.
type fakeDeliverer struct {
	mu     sync.Mutex
	got    map[string][]time.Time // id → receive times
	answer func(d *Delivery) DeliveryResult
	ch     chan string
}

func newFakeDeliverer() *fakeDeliverer {
	return &fakeDeliverer{got: map[string][]time.Time{}, ch: make(chan string, 100000)}
}

func (f *fakeDeliverer) Deliver(ctx context.Context, d *Delivery) DeliveryResult {
	now := time.Now()
	f.mu.Lock()
	f.got[d.Job.ID] = append(f.got[d.Job.ID], now)
	ans := f.answer
	f.mu.Unlock()
	f.ch <- d.Job.ID
	if ans != nil {
		return ans(d)
	}
	return DeliveryResult{StatusCode: 200}
}

func (f *fakeDeliverer) times(id string) []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.got[id]...)
}

type testSlot struct {
	r     *Replica
	db    *storage.DB
	logDB *storage.RaftLogDB
	mux   *mux.Mux
	dir   string
	meta  *raftfsm.MetaFSM
}

func openTestSlot(t *testing.T, dir string, d Deliverer, opts ...func(*Config)) *testSlot {
	t.Helper()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	db, err := storage.Open(filepath.Join(dir, "pebble"), storage.Options{Logger: log, CacheBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	m, err := mux.Listen("127.0.0.1:0", log)
	if err != nil {
		t.Fatal(err)
	}
	sl, err := m.StreamLayer(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	meta := raftfsm.NewMetaFSM()
	logDB, err := storage.OpenRaftLogDB(filepath.Join(dir, "raft.db"), log)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Slot: 0, NodeID: "n1", Dir: filepath.Join(dir, "raft"), LogDB: logDB, DB: db, Stream: sl,
		Meta: meta.State, Deliverer: d, Logger: log,
		Timing: raftgroup.Timing{HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond, LeaderLeaseTimeout: 100 * time.Millisecond},
	}
	for _, o := range opts {
		o(&cfg)
	}
	r, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Bootstrap([]raft.Server{{ID: "n1", Address: raft.ServerAddress(m.Addr().String())}}); err != nil {
		t.Fatal(err)
	}
	ts := &testSlot{r: r, db: db, logDB: logDB, mux: m, dir: dir, meta: meta}
	testutil.Eventually(t, 10*time.Second, "slot leader", testutil.True(r.IsLeader))
	return ts
}

func (ts *testSlot) close(t *testing.T) {
	t.Helper()
	if err := ts.r.Close(); err != nil {
		t.Error(err)
	}
	_ = ts.mux.Close()
	if err := ts.logDB.Close(); err != nil {
		t.Error(err)
	}
	if err := ts.db.Close(); err != nil {
		t.Error(err)
	}
}

func create(t *testing.T, r *Replica, id string, trigger int64) {
	t.Helper()
	spec := model.JobSpec{TriggerTime: trigger, CallbackURL: "http://127.0.0.1:1/hook", Hash: uint64(trigger)}
	res, err := r.Propose(context.Background(), &raftfsm.Create{Coll: "default", ID: id, Spec: spec, Now: time.Now().UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Code != model.CodeCreated {
		t.Fatalf("create %s: %v", id, res[0].Code)
	}
}

func TestFiresOnceNeverEarly(t *testing.T) {
	d := newFakeDeliverer()
	ts := openTestSlot(t, t.TempDir(), d)
	defer ts.close(t)
	base := time.Now().Add(300 * time.Millisecond).UnixMilli()
	const n = 200
	for i := 0; i < n; i++ {
		create(t, ts.r, fmt.Sprintf("j%d", i), base+int64(i%50)*7)
	}
	create(t, ts.r, "past", time.Now().Add(-time.Hour).UnixMilli())
	testutil.Eventually(t, 10*time.Second, "all fired", testutil.True(func() bool { return len(d.ch) >= n+1 }))
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("j%d", i)
		got := d.times(id)
		if len(got) != 1 {
			t.Fatalf("%s delivered %d times", id, len(got))
		}
		if trig := base + int64(i%50)*7; got[0].UnixMilli() < trig {
			t.Fatalf("%s fired %d ms early", id, trig-got[0].UnixMilli())
		}
	}
	testutil.Eventually(t, 5*time.Second, "acks applied", testutil.True(func() bool { return ts.r.fsm.Pending() == 0 }))
	j, ok, err := ts.r.Get("default", "j7")
	if err != nil || !ok || j.Status != model.StatusSucceeded || j.Attempts != 1 {
		t.Fatalf("j7 after firing: %+v %v %v", j, ok, err)
	}
}

func TestRetryThenFail(t *testing.T) {
	d := newFakeDeliverer()
	d.answer = func(*Delivery) DeliveryResult { return DeliveryResult{StatusCode: 503} }
	ts := openTestSlot(t, t.TempDir(), d)
	defer ts.close(t)
	spec := model.JobSpec{TriggerTime: time.Now().UnixMilli(), CallbackURL: "http://x/", Hash: 1,
		Retry: model.RetryPolicy{MaxAttempts: 3, InitialIntervalMs: 20, Multiplier: 2, MaxIntervalMs: 1000}}
	if _, err := ts.r.Propose(context.Background(), &raftfsm.Create{Coll: "default", ID: "r", Spec: spec, Now: 1}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "failed status", testutil.True(func() bool {
		j, ok, _ := ts.r.Get("default", "r")
		return ok && j.Status == model.StatusFailed
	}))
	got := d.times("r")
	if len(got) != 3 {
		t.Fatalf("attempts = %d, want 3", len(got))
	}
	if gap := got[1].Sub(got[0]); gap < 16*time.Millisecond {
		t.Errorf("first retry after %s, want >= 16ms (20ms -20%%)", gap)
	}
	if gap := got[2].Sub(got[1]); gap < 32*time.Millisecond {
		t.Errorf("second retry after %s, want >= 32ms (40ms -20%%)", gap)
	}
}

func TestRestartKeepsJobs(t *testing.T) {
	dir := t.TempDir()
	d := newFakeDeliverer()
	ts := openTestSlot(t, dir, d)
	trig := time.Now().Add(1500 * time.Millisecond).UnixMilli()
	for i := 0; i < 50; i++ {
		create(t, ts.r, fmt.Sprintf("k%d", i), trig)
	}
	ts.close(t)
	if len(d.ch) != 0 {
		t.Fatalf("fired before trigger")
	}
	ts = openTestSlot(t, dir, d)
	defer ts.close(t)
	if p := ts.r.fsm.Pending(); p != 50 {
		t.Fatalf("pending after restart = %d", p)
	}
	testutil.Eventually(t, 10*time.Second, "fired after restart", testutil.True(func() bool { return len(d.ch) >= 50 }))
	for i := 0; i < 50; i++ {
		if got := d.times(fmt.Sprintf("k%d", i)); len(got) != 1 || got[0].UnixMilli() < trig {
			t.Fatalf("k%d: %v", i, got)
		}
	}
}

// A job whose collection this node's meta state does not know yet (it is
// still being replayed after a restart) must not be forgotten: it fires
// once the collection appears.
func TestUnknownCollectionIsNotForgotten(t *testing.T) {
	d := newFakeDeliverer()
	ts := openTestSlot(t, t.TempDir(), d)
	defer ts.close(t)
	spec := model.JobSpec{TriggerTime: time.Now().UnixMilli(), CallbackURL: "http://x/", Hash: 1}
	if _, err := ts.r.Propose(context.Background(), &raftfsm.Create{Coll: "late", ID: "j", Spec: spec, Now: 1}); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-d.ch:
		t.Fatalf("%s fired while its collection was unknown", id)
	case <-time.After(300 * time.Millisecond):
	}
	ts.meta.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: raftfsm.Encode(&raftfsm.PutCollection{C: model.Collection{Name: "late"}, Now: 1})})
	testutil.Eventually(t, 10*time.Second, "the job to fire once its collection is known", testutil.True(func() bool { return len(d.times("j")) == 1 }))
}

// A job naming a route this node's meta state does not know is held back,
// not failed, while the meta state is not current (the route may be newer
// than this node's copy: a slot leader elected while the meta group has no
// leader); it fires once the route is known. With the meta state current,
// a route it does not know was deleted: the job fails at once.
func TestUnknownRouteWaitsWhileMetaIsNotCurrent(t *testing.T) {
	var current atomic.Bool
	d := newFakeDeliverer()
	ts := openTestSlot(t, t.TempDir(), d, func(c *Config) { c.MetaCurrent = current.Load })
	defer ts.close(t)
	now := time.Now().UnixMilli()
	for _, id := range []string{"held", "failed"} {
		spec := model.JobSpec{TriggerTime: now, Route: "r-" + id, Hash: 1}
		if _, err := ts.r.Propose(context.Background(), &raftfsm.Create{Coll: "default", ID: id, Spec: spec, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case id := <-d.ch:
		t.Fatalf("%s fired with its route unknown", id)
	case <-time.After(400 * time.Millisecond):
	}
	for _, id := range []string{"held", "failed"} {
		if j, ok, err := raftfsm.GetJob(ts.db, 0, "default", id); err != nil || !ok || j.Status != model.StatusScheduled {
			t.Fatalf("%s while the meta state is not current: %+v %v %v", id, j, ok, err)
		}
	}
	ts.meta.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: raftfsm.Encode(&raftfsm.PutRoute{R: model.Route{Name: "r-held", WebhookURL: "http://127.0.0.1:1/r"}, Now: 1})})
	current.Store(true)
	testutil.Eventually(t, 10*time.Second, "the job whose route appeared fired, the other failed", func() error {
		if n := len(d.times("held")); n != 1 {
			return fmt.Errorf("held delivered %d times", n)
		}
		j, _, err := raftfsm.GetJob(ts.db, 0, "default", "failed")
		if err != nil || j.Status != model.StatusFailed || !strings.Contains(j.LastError, `route "r-failed" does not exist`) {
			return fmt.Errorf("failed: %+v %v", j, err)
		}
		return nil
	})
}

// TestDeliveryCarriesRoutePipeline: a job naming a pipelined route is
// delivered with Pipeline set and its route's URL and headers; a job of a
// route without it, or with its own callback_url, is not pipelined.
func TestDeliveryCarriesRoutePipeline(t *testing.T) {
	d := newFakeDeliverer()
	var mu sync.Mutex
	got := map[string]Delivery{}
	d.answer = func(x *Delivery) DeliveryResult {
		mu.Lock()
		got[x.Job.ID] = *x
		mu.Unlock()
		return DeliveryResult{StatusCode: 200}
	}
	ts := openTestSlot(t, t.TempDir(), d)
	defer ts.close(t)
	ts.meta.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: raftfsm.Encode(
		&raftfsm.PutRoute{R: model.Route{Name: "fast", WebhookURL: "http://127.0.0.1:1/fast", Headers: map[string]string{"X-A": "1"}, Pipeline: true}, Now: 1},
		&raftfsm.PutRoute{R: model.Route{Name: "plain", WebhookURL: "http://127.0.0.1:1/plain"}, Now: 1})})
	now := time.Now().UnixMilli()
	for id, spec := range map[string]model.JobSpec{
		"fast":   {TriggerTime: now, Route: "fast", Hash: 1},
		"plain":  {TriggerTime: now, Route: "plain", Hash: 2},
		"direct": {TriggerTime: now, CallbackURL: "http://127.0.0.1:1/hook", Hash: 3},
	} {
		if _, err := ts.r.Propose(context.Background(), &raftfsm.Create{Coll: "default", ID: id, Spec: spec, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 10*time.Second, "three deliveries", func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 3 {
			return fmt.Errorf("%d delivered", len(got))
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if x := got["fast"]; !x.Pipeline || x.URL != "http://127.0.0.1:1/fast" || x.Headers["X-A"] != "1" {
		t.Errorf("pipelined route's delivery: %+v", x)
	}
	for _, id := range []string{"plain", "direct"} {
		if got[id].Pipeline {
			t.Errorf("%s: delivered pipelined", id)
		}
	}
}

// The leader's upkeep drops the tombstones of deleted jobs once they are
// older than tombstoneKeep (counted from their creates' stamps), and keeps
// the younger ones.
func TestOldTombstonesAreDropped(t *testing.T) {
	ts := openTestSlot(t, t.TempDir(), newFakeDeliverer(), func(c *Config) { c.MaintenanceInterval = 20 * time.Millisecond })
	defer ts.close(t)
	far := time.Now().Add(time.Hour).UnixMilli()
	for _, j := range []struct {
		id    string
		stamp int64
	}{{"old", time.Now().Add(-tombstoneKeep - time.Minute).UnixMilli()}, {"young", time.Now().UnixMilli()}} {
		spec := model.JobSpec{TriggerTime: far, CallbackURL: "http://127.0.0.1:1/hook", Hash: 1}
		if _, err := ts.r.Propose(context.Background(), &raftfsm.Create{Coll: "default", ID: j.id, Spec: spec, Now: j.stamp}); err != nil {
			t.Fatal(err)
		}
		if _, err := ts.r.Propose(context.Background(), &raftfsm.Delete{Coll: "default", ID: j.id}); err != nil {
			t.Fatal(err)
		}
	}
	tombs := func() (n int) {
		lo, hi := storage.TombSpan(0)
		it, err := ts.db.NewIter(lo, hi)
		if err != nil {
			t.Fatal(err)
		}
		for ok := it.First(); ok; ok = it.Next() {
			n++
		}
		_ = it.Close()
		return n
	}
	testutil.Eventually(t, 10*time.Second, "the old tombstone dropped", func() error {
		if n := tombs(); n != 1 {
			return fmt.Errorf("%d tombstones", n)
		}
		return nil
	})
}

// A finished job past its collection's retention is removed from storage
// only once it finished more than tombstoneKeep ago, however short the
// retention: until then a re-send of the create that made it (the service
// resolving an unknown outcome) must find the record, or it would make
// the job again and fire it twice.
func TestExpiredJobsStayForTheirCreatesResends(t *testing.T) {
	ts := openTestSlot(t, t.TempDir(), newFakeDeliverer(), func(c *Config) { c.MaintenanceInterval = 20 * time.Millisecond })
	defer ts.close(t)
	ts.meta.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: raftfsm.Encode(&raftfsm.PutCollection{C: model.Collection{Name: "short", RetentionMs: 1000}, Now: 1})})
	now := time.Now()
	far := now.Add(time.Hour).UnixMilli()
	for _, j := range []struct {
		id                string
		created, finished time.Duration // before now
	}{
		{"old", tombstoneKeep + 2*time.Minute, tombstoneKeep + time.Minute},
		{"recent", 10 * time.Second, 5 * time.Second}, // past its 1 s retention, not past the keep
	} {
		spec := model.JobSpec{TriggerTime: far, CallbackURL: "http://127.0.0.1:1/hook", Hash: 1}
		if _, err := ts.r.Propose(context.Background(), &raftfsm.Create{Coll: "short", ID: j.id, Spec: spec, Now: now.Add(-j.created).UnixMilli()}); err != nil {
			t.Fatal(err)
		}
		res, err := ts.r.Propose(context.Background(), &raftfsm.Ack{Coll: "short", ID: j.id, Version: 1, Success: true, Attempts: 1, Now: now.Add(-j.finished).UnixMilli()})
		if err != nil || res[0].Code != model.CodeOK {
			t.Fatalf("finish %s: %v %v", j.id, res, err)
		}
	}
	stored := func(id string) bool {
		_, ok, err := ts.db.Get(storage.RecordKey(nil, 0, "short", id))
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	testutil.Eventually(t, 10*time.Second, "the old job removed", testutil.True(func() bool { return !stored("old") }))
	passes := ts.r.maintPasses.Load()
	testutil.Eventually(t, 10*time.Second, "three more upkeep passes", testutil.True(func() bool { return ts.r.maintPasses.Load() >= passes+3 }))
	if !stored("recent") {
		t.Fatal("a job that finished 5 s ago was removed: a re-send of its create would make it again")
	}
}

// An idle leader writes no offset advance: not on a fresh slot (raft's
// own entries do not count), and not again once an advance followed the
// last change (a job fired and acknowledged), however many upkeep passes
// run. Before, every new leader's first pass proposed one (a raft entry
// per slot 30 s after each election), and the clock alone gave it a new
// offset to propose.
func TestIdleLeaderWritesNoOffsetAdvance(t *testing.T) {
	d := newFakeDeliverer()
	ts := openTestSlot(t, t.TempDir(), d, func(c *Config) { c.MaintenanceInterval = 20 * time.Millisecond })
	defer ts.close(t)
	r := ts.r
	passes := func(n int64) {
		t.Helper()
		from := r.maintPasses.Load()
		testutil.Eventually(t, 10*time.Second, fmt.Sprintf("%d upkeep passes", n), testutil.True(func() bool { return r.maintPasses.Load()-from >= n }))
	}
	passes(3)
	idle := r.LastIndex()
	passes(5)
	if got := r.LastIndex(); got != idle {
		t.Fatalf("a fresh idle leader wrote %d entries", got-idle)
	}
	create(t, r, "soon", time.Now().Add(100*time.Millisecond).UnixMilli())
	testutil.Eventually(t, 10*time.Second, "the job fired and the offset advanced past it", func() error {
		if len(d.times("soon")) == 0 || !r.fsm.OffsetCurrent() {
			return fmt.Errorf("fired %d times, offset current %v", len(d.times("soon")), r.fsm.OffsetCurrent())
		}
		return nil
	})
	passes(2)
	busy := r.LastIndex()
	passes(5)
	if got := r.LastIndex(); got != busy {
		t.Fatalf("an idle leader wrote %d entries after its offset caught up", got-busy)
	}
}

// An idle replica's snapshot loop sleeps until something is applied (no
// timer: at 1,024 slots its 8 s checks were ~130 wake-ups a second), and
// an apply wakes it: the log volume it brings is snapshotted as before.
func TestSnapshotLoopSleepsUntilApplied(t *testing.T) {
	check, idle := snapshotCheck, snapshotIdleCheck
	snapshotCheck, snapshotIdleCheck = 10*time.Millisecond, 40*time.Millisecond
	t.Cleanup(func() { snapshotCheck, snapshotIdleCheck = check, idle })
	ts := openTestSlot(t, t.TempDir(), newFakeDeliverer(), func(c *Config) { c.SnapshotBytes = 1 })
	defer ts.close(t)
	r := ts.r
	testutil.Eventually(t, 10*time.Second, "the idle snapshot loop asleep", testutil.True(r.snapIdle.Load))
	create(t, r, "j", time.Now().Add(time.Hour).UnixMilli())
	testutil.Eventually(t, 10*time.Second, "the applied create snapshotted", func() error {
		if got, want := r.snapBytes.Load(), r.fsm.AppliedBytes(); got != want {
			return fmt.Errorf("snapshotted up to %d of %d applied bytes", got, want)
		}
		return nil
	})
	testutil.Eventually(t, 10*time.Second, "asleep again", testutil.True(r.snapIdle.Load))
}
