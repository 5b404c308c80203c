package slot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/internal/testutil"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/raftgroup"
	"github.com/timemachine-db/timemachine/storage"
)

// The scheduler on its own, against an in-memory replica (fakeReplica):
// a sorted due index, job records, recorded fires and commits, and a
// clock the test can read-count or set.

const schedSlot = 7

// fireRec is one callback attempt as the fake replica saw it.
type fireRec struct {
	id  string
	due int64
	at  int64 // the scheduler's clock when fire was called (ms)
}

type fakeReplica struct {
	clock func() time.Time

	mu      sync.Mutex
	keys    [][]byte // the due index, sorted
	jobs    map[string]*model.Job
	fired   []fireRec
	commits []string
	off     int64

	loads  atomic.Int64 // dueIter calls
	rounds []int        // len(refs) of each readJobs call
	loaded atomic.Int64 // the last loadedUpTo

	// fireHook, when set, runs inside fire (after the record is taken) and
	// decides what fire returns.
	fireHook func(ctx context.Context, e storage.DueEntry) []byte
	// commitErrs fail the next commits, one error each.
	commitErrs []error
	// route, if set, is every job's paced route (lanes tests).
	route *model.Route
}

func newFakeReplica(clock func() time.Time) *fakeReplica {
	return &fakeReplica{clock: clock, jobs: map[string]*model.Job{}, off: raftfsm.NoOffset}
}

// add puts a scheduled job due at due in the index and returns its entry;
// telling the scheduler (scheduled) is up to the test, as the FSM's
// observer would.
func (f *fakeReplica) add(id string, due int64) storage.DueEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := storage.DueKey(nil, schedSlot, due, "c", id)
	i, _ := slices.BinarySearchFunc(f.keys, k, bytes.Compare)
	f.keys = slices.Insert(f.keys, i, k)
	f.jobs[id] = &model.Job{Collection: "c", ID: id, Status: model.StatusScheduled, TriggerTime: due, DueTime: due, Version: 1}
	return storage.DueEntry{Due: due, Coll: "c", ID: id}
}

func (f *fakeReplica) offset() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.off
}

type sliceIter struct {
	keys [][]byte
	i    int
}

func (it *sliceIter) First() bool  { it.i = 0; return it.i < len(it.keys) }
func (it *sliceIter) Next() bool   { it.i++; return it.i < len(it.keys) }
func (it *sliceIter) Key() []byte  { return it.keys[it.i] }
func (it *sliceIter) Close() error { return nil }

func (f *fakeReplica) dueIter(lower, upper []byte) (dueIter, error) {
	f.loads.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	var in [][]byte
	for _, k := range f.keys {
		if bytes.Compare(k, lower) >= 0 && bytes.Compare(k, upper) < 0 {
			in = append(in, k)
		}
	}
	return &sliceIter{keys: in}, nil
}

func (f *fakeReplica) readJobs(refs []storage.DueEntry) ([]*model.Job, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rounds = append(f.rounds, len(refs))
	out := make([]*model.Job, len(refs))
	for i, e := range refs {
		if j, ok := f.jobs[e.ID]; ok {
			c := *j
			out[i] = &c
		}
	}
	return out, nil
}

func (f *fakeReplica) fire(ctx context.Context, e storage.DueEntry, j *model.Job, slot *heldSlot, mayFire func() bool, done func(fireResult)) {
	done(f.fireNow(ctx, e, j, slot, mayFire))
}

func (f *fakeReplica) fireNow(ctx context.Context, e storage.DueEntry, j *model.Job, _ *heldSlot, mayFire func() bool) fireResult {
	if !mayFire() {
		return notNow
	}
	f.mu.Lock()
	f.fired = append(f.fired, fireRec{id: e.ID, due: e.Due, at: f.clock().UnixMilli()})
	hook := f.fireHook
	f.mu.Unlock()
	if hook != nil {
		switch cmd := hook(ctx, e); {
		case cmd == nil:
			return fireResult{}
		case len(cmd) == 0:
			return retryLater
		default:
			return outcome(cmd)
		}
	}
	return outcome([]byte("ack " + e.ID))
}

// commitOutcomes applies acks the way the FSM would: the job leaves the
// due index.
func (f *fakeReplica) commitOutcomes(ctx context.Context, cmds [][]byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.commitErrs) > 0 {
		err := f.commitErrs[0]
		f.commitErrs = f.commitErrs[1:]
		return err
	}
	for _, cmd := range cmds {
		f.commits = append(f.commits, string(cmd))
		id := string(bytes.TrimPrefix(cmd, []byte("ack ")))
		if j, ok := f.jobs[id]; ok {
			k := storage.DueKey(nil, schedSlot, j.DueTime, "c", id)
			if i, found := slices.BinarySearchFunc(f.keys, k, bytes.Compare); found {
				f.keys = slices.Delete(f.keys, i, i+1)
			}
			delete(f.jobs, id)
		}
	}
	return nil
}

func (f *fakeReplica) loadedUpTo(ms int64) { f.loaded.Store(ms) }

func (f *fakeReplica) pacedRoute(j *model.Job) *model.Route {
	if f.route == nil || j == nil {
		return nil
	}
	return f.route
}

func (f *fakeReplica) firedIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, len(f.fired))
	for i, r := range f.fired {
		out[i] = r.id
	}
	return out
}

func (f *fakeReplica) fires() []fireRec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fireRec(nil), f.fired...)
}

func (f *fakeReplica) commitCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.commits)
}

func (f *fakeReplica) waitFired(t *testing.T, n int) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, fmt.Sprintf("%d fires", n), func() error {
		if got := len(f.firedIDs()); got < n {
			return fmt.Errorf("%d fired: %v", got, f.firedIDs())
		}
		return nil
	})
}

// countingClock is the real clock, counting how often the scheduler reads
// it: every pass of its loop reads it, so a count that grew proves the
// loop went round.
type countingClock struct{ reads atomic.Int64 }

func (c *countingClock) now() time.Time { c.reads.Add(1); return time.Now() }

// manualClock stands still until the test moves it.
type manualClock struct {
	mu    sync.Mutex
	t     time.Time
	reads atomic.Int64
}

func (c *manualClock) now() time.Time {
	c.reads.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// waitPasses waits until the scheduler read its clock n more times.
func waitPasses(t *testing.T, reads *atomic.Int64, n int64) {
	t.Helper()
	from := reads.Load()
	testutil.Eventually(t, 10*time.Second, fmt.Sprintf("%d clock reads by the scheduler", n), func() error {
		if got := reads.Load() - from; got < n {
			return fmt.Errorf("%d reads", got)
		}
		return nil
	})
}

type runningSched struct {
	s      *scheduler
	cancel context.CancelFunc
	done   chan struct{}
}

// startSched runs a scheduler over f until the test ends (or stop).
func startSched(t *testing.T, f *fakeReplica, clock func() time.Time, sem chan struct{}, window time.Duration, maxLoaded int) *runningSched {
	t.Helper()
	s := newScheduler(f, schedConfig{
		slot: schedSlot, log: slog.New(slog.NewTextHandler(io.Discard, nil)), clock: clock, sem: sem,
		window: window, maxLoaded: maxLoaded, workers: newWorkers(time.Second),
	})
	ctx, cancel := context.WithCancel(context.Background())
	rs := &runningSched{s: s, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(rs.done)
		s.run(ctx)
	}()
	t.Cleanup(rs.stop)
	return rs
}

func (rs *runningSched) stop() {
	rs.cancel()
	<-rs.done
}

// Due jobs fire in due order (ties by collection and id, the due key's
// order), whatever order they were written in.
func TestSchedulerFiresInDueOrder(t *testing.T) {
	f := newFakeReplica(time.Now)
	now := time.Now().UnixMilli()
	for _, j := range []struct {
		id  string
		due int64
	}{{"e", now - 100}, {"a", now - 600}, {"c", now - 300}, {"b2", now - 400}, {"b1", now - 400}, {"d", now - 200}} {
		f.add(j.id, j.due)
	}
	f.off = now - 1000
	startSched(t, f, time.Now, make(chan struct{}, 1), 2*time.Second, 1000)
	f.waitFired(t, 6)
	if got, want := f.firedIDs(), []string{"a", "b1", "b2", "c", "d", "e"}; !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	testutil.Eventually(t, 5*time.Second, "every outcome committed", func() error {
		if n := f.commitCount(); n != 6 {
			return fmt.Errorf("%d commits", n)
		}
		return nil
	})
}

// Never early: with the clock standing still before a job's due time, the
// scheduler goes round without firing it; it fires once the clock reaches
// the due time, and every fire sees a clock at or past its due time.
func TestSchedulerNeverFiresEarly(t *testing.T) {
	t0 := time.UnixMilli(1_767_225_600_000)
	clock := &manualClock{t: t0}
	f := newFakeReplica(clock.now)
	f.add("soon", t0.UnixMilli()+100)
	f.add("later", t0.UnixMilli()+250)
	startSched(t, f, clock.now, make(chan struct{}, 8), 2*time.Second, 1000)

	waitPasses(t, &clock.reads, 12)
	if got := f.firedIDs(); len(got) != 0 {
		t.Fatalf("fired %v with the clock 100 ms before the first due time", got)
	}
	clock.set(t0.Add(99 * time.Millisecond))
	waitPasses(t, &clock.reads, 12)
	if got := f.firedIDs(); len(got) != 0 {
		t.Fatalf("fired %v 1 ms before the due time", got)
	}
	clock.set(t0.Add(100 * time.Millisecond))
	f.waitFired(t, 1)
	waitPasses(t, &clock.reads, 12)
	if got := f.firedIDs(); !slices.Equal(got, []string{"soon"}) {
		t.Fatalf("at the first due time fired %v, want [soon]", got)
	}
	clock.set(t0.Add(time.Second))
	f.waitFired(t, 2)
	for _, r := range f.fires() {
		if r.at < r.due {
			t.Fatalf("%s fired at %d, %d ms before its due time", r.id, r.at, r.due-r.at)
		}
	}
}

// A job scheduled inside the loaded window (below the cursor, where no
// later load will look) reaches the scheduler only through the FSM's note,
// and the note wakes the loop at once: it does not wait for the loop's
// timer (a second here, with a 10 s window). Without the wake a fire would
// come 0-1 s late, uniformly; the test takes the median of five, so one
// slow moment on a busy machine does not fail it.
func TestSchedulerWakesForANearerJob(t *testing.T) {
	f := newFakeReplica(time.Now)
	rs := startSched(t, f, time.Now, make(chan struct{}, 8), 10*time.Second, 1000)
	testutil.Eventually(t, 5*time.Second, "the first load", func() error {
		if f.loads.Load() == 0 {
			return errors.New("not loaded yet")
		}
		return nil
	})
	const trials = 5
	var late []int64
	for i := 0; i < trials; i++ {
		due := time.Now().Add(30 * time.Millisecond).UnixMilli()
		rs.s.scheduled(f.add(fmt.Sprintf("n%d", i), due))
		f.waitFired(t, i+1)
		r := f.fires()[i]
		if r.at < due {
			t.Fatalf("%s fired %d ms early", r.id, due-r.at)
		}
		late = append(late, r.at-due)
	}
	slices.Sort(late)
	if median := late[trials/2]; median > 150 {
		t.Fatalf("median lateness %d ms (all: %v): the notes did not wake the loop", median, late)
	}
}

// The loaded window moves forward as time passes (jobs beyond the first
// window fire too), and a window holding more due jobs than MaxLoaded is
// read in parts.
func TestSchedulerExtendsItsWindow(t *testing.T) {
	f := newFakeReplica(time.Now)
	now := time.Now().UnixMilli()
	var want []string
	for i := 0; i < 10; i++ {
		id := fmt.Sprintf("past-%02d", i)
		f.add(id, now-50)
		want = append(want, id)
	}
	f.add("later-1", now+400)
	f.add("later-2", now+800)
	want = append(want, "later-1", "later-2")
	f.off = now - 100
	startSched(t, f, time.Now, make(chan struct{}, 64), 200*time.Millisecond, 4)
	f.waitFired(t, len(want))
	got := f.firedIDs()
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	for _, r := range f.fires() {
		if r.at < r.due {
			t.Fatalf("%s fired %d ms early", r.id, r.due-r.at)
		}
	}
	if n := f.loads.Load(); n < 4 {
		t.Fatalf("%d loads for 12 jobs with MaxLoaded 4 and a 200 ms window", n)
	}
	if f.loaded.Load() < now+800 {
		t.Fatalf("loaded up to %d, before the last job's due time %d", f.loaded.Load(), now+800)
	}
}

// With the node's fire pool full (other slots' callbacks hold every slot),
// due jobs wait — while notes are still absorbed — and fire, in due order,
// as soon as a slot frees up.
func TestSchedulerWaitsForTheFirePool(t *testing.T) {
	clock := &countingClock{}
	f := newFakeReplica(clock.now)
	now := time.Now().UnixMilli()
	f.add("b", now-20)
	f.add("a", now-30)
	f.add("c", now-10)
	f.off = now - 100
	sem := make(chan struct{}, 2)
	sem <- struct{}{}
	sem <- struct{}{}
	rs := startSched(t, f, clock.now, sem, 2*time.Second, 1000)
	testutil.Eventually(t, 5*time.Second, "the due jobs loaded", func() error {
		if f.loads.Load() == 0 {
			return errors.New("not loaded yet")
		}
		return nil
	})
	rs.s.scheduled(f.add("d", now-5))
	testutil.Eventually(t, 5*time.Second, "the note absorbed while the pool is full", func() error {
		rs.s.mu.Lock()
		defer rs.s.mu.Unlock()
		if len(rs.s.notes) != 0 {
			return errors.New("note still queued")
		}
		return nil
	})
	waitPasses(t, &clock.reads, 2)
	if got := f.firedIDs(); len(got) != 0 {
		t.Fatalf("fired %v with no free slot in the pool", got)
	}
	released := time.Now().UnixMilli()
	<-sem // one slot frees up
	f.waitFired(t, 4)
	if got, want := f.firedIDs(), []string{"a", "b", "c", "d"}; !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	for _, r := range f.fires() {
		if r.at < released {
			t.Fatalf("%s fired before a pool slot was free", r.id)
		}
	}
}

// With the pool full, the slots it frees one at a time are gathered into
// one round (one read of the records) while more due jobs wait, up to
// minGather jobs or gatherWait, whichever comes first; never early.
func TestSchedulerGathersFreedSlotsIntoOneRound(t *testing.T) {
	savedMin, savedWait := minGather, gatherWait
	t.Cleanup(func() { minGather, gatherWait = savedMin, savedWait })
	for _, tc := range []struct {
		name    string
		min     int
		wait    time.Duration
		release int   // slots the test frees, one at a time
		want    []int // the rounds read
	}{
		// The round fills up to minGather as slots free, however slowly.
		{name: "filled to minGather", min: 6, wait: time.Hour, release: 6, want: []int{6}},
		// Fewer slots than minGather free up: gatherWait ends the round.
		{name: "cut short by gatherWait", min: 6, wait: 20 * time.Millisecond, release: 2, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			minGather, gatherWait = tc.min, tc.wait
			f := newFakeReplica(time.Now)
			now := time.Now().UnixMilli()
			for i := range 10 {
				f.add(fmt.Sprintf("j%02d", i), now-100+int64(i))
			}
			f.add("later", now+time.Hour.Milliseconds())
			f.off = now - 1000
			const pool = 8
			sem := make(chan struct{}, pool)
			for range pool {
				sem <- struct{}{}
			}
			startSched(t, f, time.Now, sem, 2*time.Second, 1000)
			testutil.Eventually(t, 5*time.Second, "the due jobs loaded", func() error {
				if f.loads.Load() == 0 {
					return errors.New("not loaded yet")
				}
				return nil
			})
			for range tc.release {
				<-sem // one at a time, as fires end
			}
			f.waitFired(t, tc.release)
			f.mu.Lock()
			rounds := slices.Clone(f.rounds)
			f.mu.Unlock()
			if tc.want != nil && !slices.Equal(rounds[:1], tc.want) {
				t.Fatalf("rounds read %v, want the first %v", rounds, tc.want)
			}
			if rounds[0] > tc.release {
				t.Fatalf("first round of %d jobs with %d slots free", rounds[0], tc.release)
			}
			for _, r := range f.fires() {
				if r.id == "later" {
					t.Fatal("a job not yet due was gathered")
				}
			}
		})
	}
}

// Losing leadership mid-fire: the callback in flight sees its ctx end and
// returns without an outcome, nothing is committed for it (the next leader
// fires it again), nothing is dispatched under the lost leadership, and
// the scheduler returns only once the fire has returned.
func TestSchedulerLeadershipLostMidFire(t *testing.T) {
	f := newFakeReplica(time.Now)
	now := time.Now().UnixMilli()
	f.add("inflight", now-10)
	f.off = now - 100
	entered := make(chan struct{})
	var returned, liveAfterLoss atomic.Bool
	var lost atomic.Bool
	f.fireHook = func(ctx context.Context, e storage.DueEntry) []byte {
		if e.ID != "inflight" {
			if lost.Load() && ctx.Err() == nil {
				liveAfterLoss.Store(true)
			}
			return nil
		}
		close(entered)
		<-ctx.Done()
		returned.Store(true)
		return nil // as Replica.fire: leadership lost, the next leader fires it
	}
	rs := startSched(t, f, time.Now, make(chan struct{}, 8), 2*time.Second, 1000)
	<-entered
	lost.Store(true)
	rs.cancel()
	rs.s.scheduled(f.add("next", now-5)) // due, but leadership is gone
	select {
	case <-rs.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the scheduler did not return after leadership ended")
	}
	if !returned.Load() {
		t.Fatal("the scheduler returned before the fire in flight did")
	}
	if n := f.commitCount(); n != 0 {
		t.Fatalf("%d outcomes committed after leadership was lost", n)
	}
	if liveAfterLoss.Load() {
		t.Fatal("a job was fired under a leadership that had ended")
	}
}

// A graceful hand-off (drain) dispatches nothing new and waits for the
// callbacks in flight to finish and commit; resume lets the scheduler go
// on when the hand-off did not happen.
func TestSchedulerDrainAndResume(t *testing.T) {
	f := newFakeReplica(time.Now)
	now := time.Now().UnixMilli()
	f.add("first", now-10)
	f.off = now - 100
	release := make(chan struct{})
	f.fireHook = func(ctx context.Context, e storage.DueEntry) []byte {
		if e.ID == "first" {
			<-release
		}
		return []byte("ack " + e.ID)
	}
	rs := startSched(t, f, time.Now, make(chan struct{}, 8), 2*time.Second, 1000)
	f.waitFired(t, 1)
	drained := make(chan bool, 1)
	go func() { drained <- rs.s.drain(10 * time.Second) }()
	testutil.Eventually(t, 5*time.Second, "the drain to begin", testutil.True(rs.s.stopping.Load))
	rs.s.scheduled(f.add("second", now-5))
	close(release)
	if !<-drained {
		t.Fatal("drain timed out with the fire released")
	}
	if n := f.commitCount(); n != 1 {
		t.Fatalf("drain returned with %d outcomes committed, want the one in flight", n)
	}
	if got := f.firedIDs(); !slices.Equal(got, []string{"first"}) {
		t.Fatalf("fired %v while draining", got)
	}
	rs.s.resume()
	f.waitFired(t, 2)
}

// An outcome that fails to commit while this replica still leads is
// retried, not fired again: the receiver already has the callback.
func TestSchedulerRetriesACommitRatherThanTheFire(t *testing.T) {
	f := newFakeReplica(time.Now)
	now := time.Now().UnixMilli()
	f.add("j", now-10)
	f.off = now - 100
	f.commitErrs = []error{errors.New("disk hiccup"), raftgroup.ErrOverloaded}
	startSched(t, f, time.Now, make(chan struct{}, 8), 2*time.Second, 1000)
	testutil.Eventually(t, 10*time.Second, "the outcome committed", func() error {
		if f.commitCount() != 1 {
			return errors.New("not committed")
		}
		return nil
	})
	if got := f.firedIDs(); len(got) != 1 {
		t.Fatalf("fired %v: a failed commit made the job fire again", got)
	}
}

// Once drain has returned, nothing may be fired until resume: the next
// leader owns every job not yet fired, and a fire that starts after the
// drain is a callback in flight at the transfer — the duplicate a planned
// move must not cause. Under load (the pool full, the loop waiting on it)
// the loop used to dispatch a popped job after the drain had already
// counted zero fires in flight.
func TestSchedulerNothingFiresAfterDrain(t *testing.T) {
	f := newFakeReplica(time.Now)
	now := time.Now().UnixMilli()
	for i := 0; i < 3000; i++ {
		f.add(fmt.Sprintf("j%04d", i), now-int64(3000-i))
	}
	f.off = now - 4000
	var drained atomic.Bool
	var late atomic.Int64
	f.fireHook = func(ctx context.Context, e storage.DueEntry) []byte {
		if drained.Load() {
			late.Add(1)
		}
		time.Sleep(200 * time.Microsecond)
		return []byte("ack " + e.ID)
	}
	rs := startSched(t, f, time.Now, make(chan struct{}, 4), 2*time.Second, 5000)
	for round := 0; round < 300 && f.commitCount() < 2900; round++ {
		time.Sleep(time.Duration(round%7) * 100 * time.Microsecond)
		if !rs.s.drain(5 * time.Second) {
			t.Fatal("drain timed out")
		}
		drained.Store(true)
		time.Sleep(300 * time.Microsecond)
		drained.Store(false)
		rs.s.resume()
	}
	if n := late.Load(); n > 0 {
		t.Fatalf("%d jobs fired after drain returned", n)
	}
}

// nextWake, the loop's sleep: the earliest loaded job, the window's
// extension (postponed past a stretch of the index known to be empty), a
// full heap's polling, and never more than idleWake.
func TestSchedulerNextWake(t *testing.T) {
	t0 := time.UnixMilli(1_767_225_600_000)
	now := t0.UnixMilli()
	const window = 2000
	for _, c := range []struct {
		name    string
		cursor  int64 // cursorTime
		quiet   int64 // quietUntil
		limited bool
		head    int64 // the heap's earliest due time, 0: empty
		blocked bool
		want    time.Duration
	}{
		{name: "extend the window halfway", cursor: now + window, want: time.Second},
		{name: "a job before that", cursor: now + window, head: now + 300, want: 300 * time.Millisecond},
		{name: "a due job waiting for the pool sleeps on the pool", cursor: now + window, head: now - 5, blocked: true, want: time.Second},
		{name: "quiet index: until its end comes within the window", cursor: now + window, quiet: now + 10_000, want: 8 * time.Second},
		{name: "quiet index, a loaded job first", cursor: now + window, quiet: now + 10_000, head: now + 1500, want: 1500 * time.Millisecond},
		{name: "quiet ending inside the window: the usual extension", cursor: now + window, quiet: now + 2500, want: time.Second},
		{name: "quiet for longer than idleWake", cursor: now + window, quiet: now + 3_600_000, want: idleWake},
		{name: "a full heap polls", cursor: now + window, quiet: now + 10_000, limited: true, want: 50 * time.Millisecond},
		{name: "overdue: at once", cursor: now - 10, want: 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newScheduler(newFakeReplica(nil), schedConfig{slot: schedSlot, clock: func() time.Time { return t0 }, window: window * time.Millisecond})
			s.cursorTime, s.quietUntil, s.cursorLimited = c.cursor, c.quiet, c.limited
			if c.head != 0 {
				s.add(storage.DueEntry{Due: c.head, Coll: "c", ID: "j"}, "k")
			}
			if got := s.nextWake(now, c.blocked); got != c.want {
				t.Fatalf("nextWake = %v, want %v", got, c.want)
			}
		})
	}
}

// An idle slot's loop sleeps until its next job comes within the window
// (it read the index every window/2 before: ~0.8 wake-ups a second per
// led slot), loads it in time, and fires it at its due time, not before.
func TestSchedulerSleepsUntilTheNextJob(t *testing.T) {
	f := newFakeReplica(time.Now)
	due := time.Now().Add(2 * time.Second).UnixMilli()
	f.add("far", due)
	startSched(t, f, time.Now, make(chan struct{}, 8), 200*time.Millisecond, 1000)
	f.waitFired(t, 1)
	r := f.fires()[0]
	if r.at < due {
		t.Fatalf("fired %d ms early", due-r.at)
	}
	// Every 100 ms over 2 s were ~20 loads; now the first (and its peek),
	// one as the job comes within the window, and the one after.
	if n := f.loads.Load(); n > 8 {
		t.Fatalf("%d reads of the due index for one job 2 s ahead with a 200 ms window", n)
	}
}

// A job created beyond the loaded window of a sleeping loop wakes it
// early enough: its note lowers the quiet stretch, and the loop loads the
// job before it is due instead of sleeping for idleWake.
func TestSchedulerNoteAboveTheWindowShortensTheSleep(t *testing.T) {
	f := newFakeReplica(time.Now)
	rs := startSched(t, f, time.Now, make(chan struct{}, 8), 200*time.Millisecond, 1000)
	testutil.Eventually(t, 5*time.Second, "the first load and its peek", func() error {
		if f.loads.Load() < 2 {
			return errors.New("not yet")
		}
		return nil
	})
	due := time.Now().Add(800 * time.Millisecond).UnixMilli()
	rs.s.scheduled(f.add("later", due))
	f.waitFired(t, 1)
	r := f.fires()[0]
	if r.at < due {
		t.Fatalf("fired %d ms early", due-r.at)
	}
	if late := r.at - due; late > 500 {
		t.Fatalf("fired %d ms late: the note did not shorten the loop's sleep", late)
	}
}

// After the wall clock stepped forward, the loop's timer (monotonic) would
// still run for the old distance to the next job; a signal (what
// Replica.ClockStepped sends) makes it look at the clock again at once.
func TestSchedulerLooksAgainAfterAClockStep(t *testing.T) {
	t0 := time.UnixMilli(1_767_225_600_000)
	clock := &manualClock{t: t0}
	f := newFakeReplica(clock.now)
	f.add("ahead", t0.UnixMilli()+30_000)
	rs := startSched(t, f, clock.now, make(chan struct{}, 8), time.Second, 1000)
	testutil.Eventually(t, 5*time.Second, "the first load and its peek", func() error {
		if f.loads.Load() < 2 {
			return errors.New("not yet")
		}
		return nil
	})
	clock.set(t0.Add(31 * time.Second))
	rs.s.signal()
	f.waitFired(t, 1) // waits 10 s at most; the loop's timer had ~29 s to go
}

// TestUntilTickAligns: a committer on an idle queue waits for the next
// multiple of outcomeTick, the same instant on every slot of the node.
func TestUntilTickAligns(t *testing.T) {
	base := time.Date(2026, 11, 27, 1, 0, 0, 0, time.UTC)
	for _, off := range []time.Duration{0, time.Nanosecond, time.Millisecond, outcomeTick - time.Nanosecond, outcomeTick, 7*outcomeTick + 1234567} {
		now := base.Add(off)
		d := untilTick(now)
		if d <= 0 || d > outcomeTick {
			t.Fatalf("untilTick(+%v) = %v, want in (0, %v]", off, d, outcomeTick)
		}
		if at := now.Add(d); at.UnixNano()%int64(outcomeTick) != 0 {
			t.Fatalf("untilTick(+%v) = %v: %v is not on a tick", off, d, at)
		}
	}
}
