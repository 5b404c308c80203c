package slot

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/raftgroup"
	"github.com/timemachine-db/timemachine/storage"
	"github.com/timemachine-db/timemachine/tune"
)

// item is one due entry the scheduler holds in memory.
type item struct {
	e          storage.DueEntry
	key        string // the due key: unique per (due, collection, id)
	idx        int    // position in the heap, -1 when not in it
	inflight   bool
	renotified bool // a new version was scheduled at the same key while in flight
}

// itemHeap is the scheduler's due heap; push and pop are typed, like the
// lanes' (pendingHeap): every due job passes through it.
type itemHeap []*item

func (h *itemHeap) push(it *item) {
	*h = append(*h, it)
	q := *h
	i := len(q) - 1
	it.idx = i
	for i > 0 {
		up := (i - 1) / 2
		if !q.Less(i, up) {
			break
		}
		q.Swap(i, up)
		i = up
	}
}

func (h *itemHeap) pop() *item {
	q := *h
	n := len(q) - 1
	top := q[0]
	q.Swap(0, n)
	q[n] = nil
	q = q[:n]
	*h = q
	for i := 0; ; {
		m := 2*i + 1
		if m >= n {
			break
		}
		if r := m + 1; r < n && q.Less(r, m) {
			m = r
		}
		if !q.Less(m, i) {
			break
		}
		q.Swap(i, m)
		i = m
	}
	top.idx = -1
	return top
}

func (h itemHeap) Len() int { return len(h) }
func (h itemHeap) Less(i, j int) bool {
	if h[i].e.Due != h[j].e.Due {
		return h[i].e.Due < h[j].e.Due
	}
	return h[i].key < h[j].key
}
func (h itemHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx = i
	h[j].idx = j
}

// schedReplica is what the scheduler needs from its slot replica: the
// committed offset, reads of the due index and of job records, one
// callback attempt, and the commit of its outcome. The replica implements
// it over Pebble and raft; the scheduler's tests implement it in memory.
// Nothing here is called per job except readJobs (once per round), fire
// and commitOutcomes (once per group of outcomes), so the interface costs
// the fire path nothing it did not already pay.
type schedReplica interface {
	// offset is the slot's committed offset (raftfsm.NoOffset when no
	// due entry is left): every due entry not yet done is at or after it.
	offset() int64
	// dueIter iterates the slot's due keys in [lower, upper).
	dueIter(lower, upper []byte) (dueIter, error)
	// readJobs reads the records of due entries (nil where a job is gone).
	readJobs(refs []storage.DueEntry) ([]*model.Job, error)
	// fire makes one callback attempt and hands done what to do next:
	// commit an outcome, nothing, or look at the job again after a pause
	// (it cannot be delivered now but must not be forgotten). done runs
	// exactly once, on fire's goroutine or later on another (a fire parked
	// behind its saturated target holds no goroutine meanwhile). mayFire
	// is asked right before the request would leave; when it says no,
	// nothing is sent and the job is looked at again shortly.
	fire(ctx context.Context, e storage.DueEntry, j *model.Job, slot *heldSlot, mayFire func() bool, done func(fireResult))
	// commitOutcomes commits outcomes through raft, in one proposal.
	commitOutcomes(ctx context.Context, cmds [][]byte) error
	// loadedUpTo tells the replica how far (ms) the due index is loaded:
	// the offset it may propose once what is below it is done.
	loadedUpTo(ms int64)
	// pacedRoute is the job's route when it has delivery control (its
	// jobs go through the node's Lanes), nil otherwise.
	pacedRoute(j *model.Job) *model.Route
}

// dueIter is the part of *storage.Iter the scheduler uses.
type dueIter interface {
	First() bool
	Next() bool
	Key() []byte
	Close() error
}

// fireResult is what one fire asks the scheduler to do next: commit cmd
// (an outcome), or, with cmd nil, look at the job again after again (zero:
// the job is done with).
type fireResult struct {
	cmd   []byte
	again time.Duration
	// busyUntil, when set, is how long an attempt abandoned mid-flight
	// (the term ended) may still be with its receiver (jobGuard.disarmAfter).
	busyUntil time.Time
}

// schedConfig is the scheduler's configuration, taken from the replica's.
type schedConfig struct {
	slot      int
	log       *slog.Logger
	clock     func() time.Time
	sem       chan struct{} // the node-wide bound on callbacks in flight
	window    time.Duration // how far ahead of now the due index is kept loaded
	maxLoaded int           // jobs held in memory at most
	workers   *workers      // where fires run
	guard     *jobGuard     // the fire/write rule per job; nil: a private one
	lanes     *Lanes        // route delivery control; nil: none
}

// scheduler is the slot-leader's firing loop
// (docs/architecture.md#fire-path). It keeps a short window of the due
// index in a heap, loads the next window before the current one runs out,
// hears about jobs scheduled inside the loaded window from the FSM, and
// dispatches due jobs to a bounded pool of concurrent fires. Only the
// leader runs one; it lives exactly as long as a leadership term.
type scheduler struct {
	r       schedReplica
	slot    int
	log     *slog.Logger
	clock   func() time.Time
	sem     chan struct{}
	window  int64 // ms of due index kept loaded ahead of now
	maxHeap int
	workers *workers
	guard   *jobGuard
	lanes   *Lanes

	heap          itemHeap
	known         map[string]*item
	cursor        []byte // every due key below it is loaded (or done)
	cursorTime    int64
	cursorLimited bool
	// quietUntil (ms): no due key lies in [cursor, DueBound(quietUntil))
	// but those noted since (which lower it), so the window need not be
	// extended before quietUntil comes within it; 0: not known. It lets
	// the loop of an idle slot sleep until its next job, or a note, instead
	// of reading the index every window/2 (docs/scaling.md, fifth pass).
	quietUntil int64

	mu    sync.Mutex
	notes []storage.DueEntry
	dones []doneEvent
	reset bool
	wake  chan struct{}

	fires    sync.WaitGroup
	stopping atomic.Bool // graceful stop: dispatch nothing new
	// gate orders dispatches against drain: a dispatch checks stopping and
	// counts its fire under it, and drain sets stopping under it, so once
	// drain waits on fires no fire can start any more.
	gate sync.Mutex

	// The outcomes of single fires waiting to be committed, and the
	// goroutines committing them (queueOutcome).
	omu        sync.Mutex
	oq         []queuedOutcome
	committers int
	ticking    bool // a committer is waiting for the next outcomeTick
}

func newScheduler(r schedReplica, c schedConfig) *scheduler {
	if c.guard == nil {
		c.guard = newJobGuard()
	}
	return &scheduler{
		guard:   c.guard,
		lanes:   c.lanes,
		r:       r,
		slot:    c.slot,
		log:     c.log,
		clock:   c.clock,
		sem:     c.sem,
		window:  c.window.Milliseconds(),
		maxHeap: c.maxLoaded,
		workers: c.workers,
		known:   make(map[string]*item),
		wake:    make(chan struct{}, 1),
	}
}

func (s *scheduler) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// scheduled is called by the FSM observer (any goroutine).
func (s *scheduler) scheduled(e storage.DueEntry) {
	s.mu.Lock()
	s.notes = append(s.notes, e)
	s.mu.Unlock()
	s.signal()
}

func (s *scheduler) resetAll() {
	s.mu.Lock()
	s.reset = true
	s.mu.Unlock()
	s.signal()
}

// doneEvent ends a fire; again asks for the job to be fired again (its
// outcome could not be committed while this replica still leads).
type doneEvent struct {
	key   string
	again bool
}

func (s *scheduler) done(key string) { s.finish(key, false) }

func (s *scheduler) finish(key string, again bool) {
	s.mu.Lock()
	s.dones = append(s.dones, doneEvent{key, again})
	s.mu.Unlock()
	s.signal()
}

// finishAll ends the fires of keys at once (one lock and one wake-up for
// a committed group of outcomes, not one per job).
func (s *scheduler) finishAll(keys []string, again bool) {
	s.mu.Lock()
	s.dones = slices.Grow(s.dones, len(keys))
	for _, k := range keys {
		s.dones = append(s.dones, doneEvent{k, again})
	}
	s.mu.Unlock()
	s.signal()
}

func (s *scheduler) now() int64 { return s.clock().UnixMilli() }

// restart positions the cursor at the committed offset: everything the
// previous leader did not finish is at or after it.
func (s *scheduler) restart() {
	for _, it := range s.heap {
		delete(s.known, it.key)
		it.idx = -1
	}
	s.heap = s.heap[:0]
	from := s.r.offset()
	if now := s.now(); from == raftfsm.NoOffset || from > now {
		from = now
	}
	s.cursor = storage.DueBound(s.slot, from)
	s.cursorTime = from
	s.cursorLimited = false
	s.quietUntil = 0
}

func (s *scheduler) run(ctx context.Context) {
	defer s.fires.Wait()
	if s.lanes != nil {
		s.lanes.lead(1)
		defer s.lanes.lead(-1)
		// Before fires.Wait: jobs held back in lanes count as fires.
		defer s.lanes.forget(s)
	}
	s.restart()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if ctx.Err() != nil {
			return
		}
		s.absorb()
		now := s.now()
		if err := s.load(now); err != nil {
			s.log.Error("scheduler: reading the due index failed; retrying", "slot", s.slot, "error", err)
		}
		now = s.now()
		s.dispatchDue(ctx, now, nil)
		// With a due job waiting for a free callback slot, the loop sleeps
		// on the pool (and on new events), not on the clock.
		var sem chan struct{}
		blocked := len(s.heap) > 0 && s.heap[0].e.Due <= now
		if blocked && !s.stopping.Load() {
			sem = s.sem
		}
		timer.Reset(s.nextWake(now, blocked))
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-timer.C:
		case sem <- struct{}{}:
			s.dispatchDue(ctx, s.now(), s.heap.pop())
		}
	}
}

// nextWake is how long the loop may sleep: until the earliest loaded job is
// due, or until the loaded window needs extending — which, past a stretch
// of the index known to be empty (quietUntil), is when its end comes
// within the window. At most idleWake.
func (s *scheduler) nextWake(now int64, blocked bool) time.Duration {
	next := s.cursorTime - s.window/2
	if s.quietUntil != 0 {
		next = max(next, s.quietUntil-s.window)
	}
	if s.cursorLimited {
		next = now + 50
	}
	if !blocked && len(s.heap) > 0 && s.heap[0].e.Due < next {
		next = s.heap[0].e.Due
	}
	d := time.UnixMilli(next).Sub(s.clock())
	return min(max(d, 0), idleWake)
}

// idleWake is the longest the loop sleeps with nothing to do. The loop
// sleeps on the monotonic clock for a wall-clock due time, so a wall clock
// stepped forward would make it late by the step; the node wakes every
// scheduler when it sees a step (Replica.ClockStepped), and this bounds
// what a step it misses can cost. It was a second for every slot leader,
// idle or not: ~0.8 wake-ups a second per led slot, 86 a second on a node
// of 256 slots (docs/scaling.md, fifth pass).
const idleWake = time.Minute

// quietPeek bounds how far past the loaded window a load looks for the
// next due key (peekQuiet): a bounded walk even over tombstones of jobs
// deleted far ahead.
const quietPeek = time.Minute

// absorb applies the events queued by the FSM and finished fires.
func (s *scheduler) absorb() {
	s.mu.Lock()
	notes, dones, reset := s.notes, s.dones, s.reset
	s.notes, s.dones, s.reset = nil, nil, false
	s.mu.Unlock()
	if reset {
		s.restart()
	}
	var kb []byte
	for _, e := range notes {
		kb = storage.DueKey(kb[:0], s.slot, e.Due, e.Coll, e.ID)
		if bytes.Compare(kb, s.cursor) >= 0 {
			// The next load will read it; it must come before the job.
			if s.quietUntil != 0 {
				s.quietUntil = min(s.quietUntil, e.Due)
			}
			continue
		}
		if it := s.known[string(kb)]; it != nil {
			if it.inflight {
				it.renotified = true
			}
			continue
		}
		s.add(e, string(kb))
	}
	for _, d := range dones {
		it := s.known[d.key]
		if it == nil {
			continue
		}
		it.inflight = false
		if it.renotified || d.again {
			it.renotified = false
			s.heap.push(it)
			continue
		}
		delete(s.known, d.key)
	}
}

func (s *scheduler) add(e storage.DueEntry, key string) {
	it := &item{e: e, key: key, idx: -1}
	s.known[key] = it
	s.heap.push(it)
}

// load extends the in-memory window from the cursor. Its iterator is
// bounded below by the cursor, so the tombstones of everything already
// fired are never walked.
func (s *scheduler) load(now int64) error {
	horizon := now + s.window
	if s.cursorLimited {
		if len(s.heap) >= s.maxHeap/2 {
			return nil
		}
	} else if s.cursorTime > now+s.window/2 {
		return nil
	}
	upper := storage.DueBound(s.slot, horizon)
	if bytes.Compare(s.cursor, upper) >= 0 {
		return nil
	}
	room := s.maxHeap - len(s.heap)
	if room <= 0 {
		s.cursorLimited = true
		return nil
	}
	it, err := s.r.dueIter(s.cursor, upper)
	if err != nil {
		return err
	}
	added := 0
	limited := false
	var last []byte
	var lastDue int64
	for ok := it.First(); ok; ok = it.Next() {
		if added == room {
			limited = true
			break
		}
		k := it.Key()
		if _, dup := s.known[string(k)]; dup {
			continue
		}
		e, err := storage.DecodeDueKey(k)
		if err != nil {
			_ = it.Close()
			return err
		}
		last = append(last[:0], k...)
		lastDue = e.Due
		s.add(e, string(k))
		added++
	}
	if err := it.Close(); err != nil {
		return err
	}
	if limited {
		s.cursor = append(last, 0)
		s.cursorTime = lastDue
	} else {
		s.cursor = upper
		s.cursorTime = horizon
	}
	s.cursorLimited = limited
	s.r.loadedUpTo(s.cursorTime)
	s.quietUntil = 0
	if !limited && added == 0 {
		return s.peekQuiet(horizon)
	}
	return nil
}

// peekQuiet finds the next due key at or after from (up to quietPeek
// further) and notes that nothing lies before it (quietUntil): after a load
// that found nothing, the loop can sleep until that key comes within the
// window. Only an empty load peeks, so a busy slot pays nothing for it.
func (s *scheduler) peekQuiet(from int64) error {
	end := from + quietPeek.Milliseconds()
	it, err := s.r.dueIter(s.cursor, storage.DueBound(s.slot, end))
	if err != nil {
		return err
	}
	quiet := end
	if it.First() {
		e, err := storage.DecodeDueKey(it.Key())
		if err != nil {
			_ = it.Close()
			return err
		}
		quiet = e.Due
	}
	if err := it.Close(); err != nil {
		return err
	}
	s.quietUntil = quiet
	return nil
}

// retryLaterPause is how long a job that could not be delivered for now
// (its collection unknown or being deleted) waits before another look.
const retryLaterPause = 2 * time.Second

// maxRound bounds the jobs dispatched (and read) together.
const maxRound = 256

// wakeRound is the round size that tells the process's idle governor a
// burst has started (tune.Wake): 2,000 fires/s over 12 slots make rounds
// of one or two jobs, a burst or a backlog rounds of tens to maxRound.
const wakeRound = 32

// When the pool is full, a round smaller than minGather waits up to
// gatherWait for the slots the pool frees meanwhile, as long as more due
// jobs wait for one. A round costs about as much for one job as for
// dozens (an iterator over the records, the guard's lock, a worker
// hand-off and the loop's wake-up): in a 100,000-job burst to one
// receiver the schedulers took the slots of parking fires one or two at a
// time, ~55,000 rounds, and the record reads alone were ~11% of the
// node's CPU. It only ever delays jobs that are already waiting for the
// pool, and by at most gatherWait.
// (Variables only so that tests can stretch them.)
var (
	minGather  = 32
	gatherWait = time.Millisecond
)

// dispatchDue dispatches due jobs while callback slots are free: first
// (already holding its slot) and as many more as the pool allows. The
// records of the whole round are read with one iterator, right before the
// callbacks start.
func (s *scheduler) dispatchDue(ctx context.Context, now int64, first *item) {
	var gather *time.Timer
	defer func() {
		if gather != nil {
			gather.Stop()
		}
	}()
	for {
		round := make([]*item, 0, 16)
		if first != nil {
			round = append(round, first)
			first = nil
		}
		gathering := true
		for len(round) < maxRound && len(s.heap) > 0 && s.heap[0].e.Due <= now && !s.stopping.Load() {
			select {
			case s.sem <- struct{}{}:
				round = append(round, s.heap.pop())
				continue
			default:
			}
			if len(round) == 0 || len(round) >= minGather || !gathering {
				break
			}
			// The pool is full and the round small: gather (once per
			// round, for at most gatherWait).
			if gather == nil {
				gather = time.NewTimer(gatherWait)
			} else {
				gather.Reset(gatherWait)
			}
			for gathering && len(round) < minGather && len(s.heap) > 0 && s.heap[0].e.Due <= now && !s.stopping.Load() {
				select {
				case s.sem <- struct{}{}:
					round = append(round, s.heap.pop())
				case <-gather.C:
					gathering = false
				case <-ctx.Done():
					gathering = false
				}
			}
			gathering = false
		}
		if len(round) == 0 {
			return
		}
		if len(round) >= wakeRound {
			tune.Wake()
		}
		// Armed before the records are read: a DELETE or PUT that begins
		// after this point cancels the fire (jobGuard).
		refs := make([]storage.DueEntry, len(round))
		tokens := make([]fireToken, len(round))
		for i, it := range round {
			refs[i] = it.e
		}
		s.guard.armRound(refs, tokens)
		jobs, err := s.r.readJobs(refs)
		if err != nil {
			s.log.Error("scheduler: reading due jobs failed; they will be retried", "slot", s.slot, "error", err)
			for i, it := range round {
				s.guard.disarm(tokens[i], false)
				<-s.sem
				it.inflight = true
				s.finish(it.key, true)
			}
			return
		}
		var paced []*pending
		var routes []*model.Route
		for i, it := range round {
			if p, rt := s.dispatch(ctx, it, jobs[i], tokens[i]); p != nil {
				paced = append(paced, p)
				routes = append(routes, rt)
			}
		}
		if len(paced) > 0 {
			s.lanes.enqueueRound(paced, routes)
		}
		if len(round) < maxRound {
			return
		}
	}
}

// dispatch fires one job on a worker goroutine; the caller holds a pool
// slot, released as soon as the callback returns. The worker stays on the
// job until the outcome is committed, so a graceful stop can wait for it.
// A job of a paced route is returned instead, with its route, for the
// caller to queue in the route's lane (with the rest of its round).
func (s *scheduler) dispatch(ctx context.Context, it *item, j *model.Job, tok fireToken) (*pending, *model.Route) {
	s.gate.Lock()
	if s.stopping.Load() {
		// A drain began after this job was popped: it stays for whoever
		// leads next (or for resume), and is not fired here.
		s.gate.Unlock()
		s.guard.disarm(tok, false)
		<-s.sem
		s.heap.push(it)
		return nil, nil
	}
	it.inflight = true
	s.fires.Add(1)
	s.gate.Unlock()
	if s.lanes != nil {
		if rt := s.r.pacedRoute(j); rt != nil {
			// The route's lane sends it when its limits allow; meanwhile
			// it holds no pool slot and no goroutine.
			<-s.sem
			return &pending{e: it.e, s: s, ctx: ctx, it: it, j: j, tok: tok}, rt
		}
	}
	s.workers.Go(func() {
		slot := &heldSlot{sem: s.sem, held: true}
		s.fireOne(ctx, it, j, tok, slot, nil, func(res fireResult, sent bool) {
			slot.release()
			s.settle(ctx, it.key, res, sent, tok)
		})
	})
	return nil, nil
}

// fireOne makes one callback attempt of a dispatched job and hands its
// result to done: on this goroutine, or on a fire worker later when the
// job was parked behind its saturated target (Replica.fire). lateness, if
// set, observes the first attempt's lateness as the request leaves.
func (s *scheduler) fireOne(ctx context.Context, it *item, j *model.Job, tok fireToken, slot *heldSlot, lateness func(time.Duration), done func(res fireResult, sent bool)) {
	sent := false
	s.r.fire(ctx, it.e, j, slot, func() bool {
		sent = s.guard.startSend(tok)
		if sent && lateness != nil && j.Attempts == 0 {
			lateness(s.clock().Sub(time.UnixMilli(j.DueTime)))
		}
		return sent
	}, func(res fireResult) { done(res, sent) })
}

// settle ends a fire: the callback is over (answered, failed or
// abandoned), so a DELETE or PUT from now on no longer races it — its
// outcome commit is ignored for a job the write changed (outcomes carry
// the version). The outcome is committed, or the job looked at again. The
// worker stays on the job until the outcome is committed, so a graceful
// stop can wait for it.
func (s *scheduler) settle(ctx context.Context, key string, res fireResult, sent bool, tok fireToken) {
	if sent && !res.busyUntil.IsZero() {
		s.guard.disarmAfter(tok, res.busyUntil)
	} else {
		s.guard.disarm(tok, sent)
	}
	switch {
	case res.cmd != nil:
		s.queueOutcome(ctx, key, res.cmd) // its committer ends the fire
		return
	case res.again > 0:
		select {
		case <-ctx.Done():
		case <-time.After(res.again):
		}
		s.finish(key, true)
	default:
		s.done(key)
	}
	s.fires.Done()
}

// queuedOutcome is a single fire's outcome waiting for a committer.
type queuedOutcome struct {
	key string
	cmd []byte
}

// maxCommitters bounds the goroutines committing a scheduler's queued
// outcomes at once; maxCommitCmds bounds the outcomes of one proposal.
const (
	maxCommitters = 4
	maxCommitCmds = 4096
)

// outcomeTick aligns the commits of single fires' outcomes: a committer
// that starts on an idle queue waits for the next multiple of it on the
// wall clock, so the outcomes of every slot this node leads reach the
// shared raft log together and are made durable by one write (storage's
// RaftLogDB commits what is waiting as one transaction), instead of one
// commit (two fdatasyncs) per fire. Without it, 2,000 fires/s spread over
// 12 slots cost ~1,200 raft log commits a second, a quarter of the node's
// CPU on the benchmark machine; with a 5 ms tick the node used a fifth
// less, with 20 ms a third less, and a 3-node cluster (where followers'
// appends arrive unaligned) an eighth less (docs/benchmarks.md,
// 2026-11-27). The wait adds at most a tick to when a delivered job shows
// as such, and to the window in which a failover repeats a callback
// (at-least-once, as before); the callback itself is not delayed, and
// under load committers run back to back without waiting.
const outcomeTick = 20 * time.Millisecond

// untilTick is how long from now to the next multiple of outcomeTick.
func untilTick(now time.Time) time.Duration {
	return now.Truncate(outcomeTick).Add(outcomeTick).Sub(now)
}

// queueOutcome hands a fire's outcome to the scheduler's committers, so
// the fire's worker goes back to the pool at once instead of waiting for
// raft. Before, every fire's goroutine waited out its own commit: at 10k
// fires/s thousands of them, each with the stack a callback grew, and
// new workers (and stack growth) for the fires behind them. The
// outcomes queued while a commit is under way go out together in the
// next proposal; the fire ends (fires.Done) when its outcome is
// committed, exactly as before, so drain still waits for it.
func (s *scheduler) queueOutcome(ctx context.Context, key string, cmd []byte) {
	s.omu.Lock()
	s.oq = append(s.oq, queuedOutcome{key, cmd})
	if s.ticking || s.committers >= maxCommitters {
		s.omu.Unlock()
		return
	}
	s.committers++
	s.ticking = true
	s.omu.Unlock()
	go s.commitQueued(ctx)
}

// commitQueued waits for the next outcomeTick, then commits queued
// outcomes until the queue is empty.
func (s *scheduler) commitQueued(ctx context.Context) {
	t := time.NewTimer(untilTick(time.Now()))
	select {
	case <-t.C:
	case <-ctx.Done(): // leadership over: commit (or fail) at once
		t.Stop()
	}
	s.omu.Lock()
	s.ticking = false
	s.omu.Unlock()
	for {
		s.omu.Lock()
		q := s.oq
		if len(q) > maxCommitCmds {
			q = q[:maxCommitCmds:maxCommitCmds]
			s.oq = s.oq[maxCommitCmds:]
		} else {
			s.oq = nil
		}
		if len(q) == 0 {
			s.committers--
			s.omu.Unlock()
			return
		}
		s.omu.Unlock()
		keys := make([]string, len(q))
		cmds := make([][]byte, len(q))
		for i, o := range q {
			keys[i], cmds[i] = o.key, o.cmd
		}
		s.commitMany(ctx, s.r, keys, cmds)
	}
}

// outcomeCommitter commits outcomes through raft (a *Replica).
type outcomeCommitter interface {
	commitOutcomes(ctx context.Context, cmds [][]byte) error
}

// commitMany commits outcomes of this slot in one proposal and ends their
// fires. While this replica still leads, a failed proposal is retried:
// the callbacks were delivered and firing them again would be needless
// duplicates. Once leadership is gone the new leader owns the jobs and
// fires them again (at-least-once).
func (s *scheduler) commitMany(ctx context.Context, br outcomeCommitter, keys []string, cmds [][]byte) {
	defer s.fires.Add(-len(keys))
	for attempt := 0; ; attempt++ {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := br.commitOutcomes(cctx, cmds)
		cancel()
		if err == nil || ctx.Err() != nil || errors.Is(err, raftgroup.ErrNotLeader) || errors.Is(err, raftgroup.ErrClosed) {
			s.finishAll(keys, false)
			return
		}
		if attempt >= 20 {
			s.log.Error("scheduler: committing batch outcomes failed; the jobs will fire again", "slot", s.slot, "error", err)
			s.finishAll(keys, true)
			return
		}
		select {
		case <-ctx.Done():
			s.finishAll(keys, false)
			return
		case <-time.After(time.Duration(attempt+1) * 50 * time.Millisecond):
		}
	}
}

// resume lets a drained scheduler dispatch again (a leadership transfer
// that did not happen).
func (s *scheduler) resume() {
	s.stopping.Store(false)
	s.signal()
}

// drain stops dispatching and waits (up to timeout) for the fires in
// flight to finish and commit their outcomes, so a graceful stop does not
// make receivers see a duplicate.
func (s *scheduler) drain(timeout time.Duration) bool {
	s.gate.Lock()
	s.stopping.Store(true)
	s.gate.Unlock()
	if s.lanes != nil {
		s.lanes.forget(s) // held back, not in flight: they stay for the next leader
	}
	s.signal()
	done := make(chan struct{})
	go func() {
		s.fires.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}
