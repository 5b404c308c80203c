package inflight

import (
	"container/heap"
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Hold is how long a lease lives without a renewal. A holder renews the
// leases it keeps every RenewEvery.
const (
	Hold       = 5 * time.Second
	RenewEvery = 1500 * time.Millisecond
)

// censusTimeout bounds the wait for one node's census answer.
const censusTimeout = time.Second

// errJudgedDead turns away a request whose node the owner's liveness
// check judges dead; the node, if it is alive after all, asks again.
var errJudgedDead = errors.New("inflight: the owner judges the asking node dead; ask again")

// errReleased answers a request its holder gave up (Release) while it
// waited: nobody waits for the answer any more.
var errReleased = errors.New("inflight: released before it was granted")

// ErrNotOwner: this node does not grant leases now (it is not the meta
// leader, or it lost its majority).
var ErrNotOwner = errors.New("inflight: this node does not hand out in-flight places")

// Key names one lease: the holder's node id and the holder's number for it.
type Key struct {
	Node string `json:"n"`
	ID   uint64 `json:"i"`
}

// LeaseRef is a lease as a holder reports or renews it.
type LeaseRef struct {
	ID    uint64 `json:"i"`
	Route string `json:"r"`
}

// Census asks one node which leases it holds now; refused reports that
// the node's process is not running (it holds nothing: a restarted
// process starts with no leases, and a dead one's connections are gone).
type Census func(ctx context.Context, node, addr string) (held []LeaseRef, refused bool, err error)

// OwnerConfig configures an Owner.
type OwnerConfig struct {
	Self string
	// Serving reports whether this node may grant now: it leads the meta
	// group and a majority of its voters answers (forward.MetaQuorate).
	Serving func() bool
	// Peers returns the other members (id → internal address) to ask in a
	// census.
	Peers  func() map[string]string
	Census Census
	// Dead reports a member the liveness check judges dead (paused, cut
	// off): its waiting requests are turned away rather than granted a
	// place it could not use, which would hold the route for Hold.
	Dead func(node string) bool
	// Local answers this node's own census (its Holder).
	Local func() []LeaseRef
	Clock func() time.Time // monotonic use only; default time.Now
	// Hold is how long a lease lives unrenewed (default Hold; tests
	// shorten it).
	Hold   time.Duration
	Logger *slog.Logger
}

// Owner grants the leases of every route while this node leads the meta
// group (Lead). Safe for concurrent use.
type Owner struct {
	cfg OwnerConfig
	log *slog.Logger

	mu     sync.Mutex
	term   uint64 // counts Lead calls; 0: never led
	leader bool   // within a Lead call
	// ready: the census of this term is in. blindUntil: a node could not be
	// asked; nothing is granted before it (one Hold after the term began).
	ready      bool
	blindUntil time.Time
	routes     map[string]*routeState
	seq        uint64
	timer      *time.Timer
	timerAt    time.Time
}

type routeState struct {
	cap     int64
	held    map[Key]time.Time // expiry
	waiters waitHeap
}

type waiter struct {
	key     Key
	due     int64 // the trigger time of the job it is for (ms): earlier goes first
	seq     uint64
	ch      chan struct{} // closed when granted or turned away
	granted bool
	refused bool // turned away: its node is judged dead
	dropped bool // given up by its holder (Release) before it was granted
	idx     int
}

// NewOwner returns an Owner that grants nothing until Lead.
func NewOwner(cfg OwnerConfig) *Owner {
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Serving == nil {
		cfg.Serving = func() bool { return true }
	}
	if cfg.Hold <= 0 {
		cfg.Hold = Hold
	}
	return &Owner{cfg: cfg, log: cfg.Logger.With("component", "inflight"), routes: map[string]*routeState{}}
}

// Lead grants leases until ctx ends (the meta leadership term): it forgets
// what an earlier term knew, takes the census, then serves.
func (o *Owner) Lead(ctx context.Context) {
	o.mu.Lock()
	o.term++
	term := o.term
	o.leader, o.ready = true, false
	o.blindUntil = time.Time{}
	o.dropAllLocked()
	o.mu.Unlock()

	start := o.cfg.Clock()
	held, blind := o.census(ctx)
	o.mu.Lock()
	if o.term == term && o.leader {
		now := o.cfg.Clock()
		for k, refs := range held {
			for _, r := range refs {
				o.route(r.Route).held[Key{Node: k, ID: r.ID}] = now.Add(o.cfg.Hold)
			}
		}
		if blind {
			o.blindUntil = start.Add(o.cfg.Hold)
			o.log.Info("a node could not say which in-flight places it holds; routes capped below the node count wait until its places have expired", "wait", time.Until(o.blindUntil).Round(time.Millisecond))
		}
		o.ready = true
		o.pumpAllLocked(now)
	}
	o.mu.Unlock()

	<-ctx.Done()
	o.mu.Lock()
	if o.term == term {
		o.leader, o.ready = false, false
		o.dropAllLocked()
	}
	o.mu.Unlock()
}

// census asks every node (this one directly) which leases it holds.
func (o *Owner) census(ctx context.Context) (map[string][]LeaseRef, bool) {
	out := map[string][]LeaseRef{}
	if o.cfg.Local != nil {
		out[o.cfg.Self] = o.cfg.Local()
	}
	if o.cfg.Peers == nil || o.cfg.Census == nil {
		return out, false
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	blind := false
	for id, addr := range o.cfg.Peers() {
		if id == o.cfg.Self {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, censusTimeout)
			defer cancel()
			held, refused, err := o.cfg.Census(cctx, id, addr)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				out[id] = held
			case refused:
			default:
				blind = true
				o.log.Debug("in-flight census: no answer", "node", id, "err", err)
			}
		}()
	}
	wg.Wait()
	return out, blind
}

// dropAllLocked forgets every lease and turns the waiters away.
func (o *Owner) dropAllLocked() {
	for name, rs := range o.routes {
		for _, w := range rs.waiters {
			w.idx = -1
			close(w.ch)
		}
		delete(o.routes, name)
	}
	if o.timer != nil {
		o.timer.Stop()
		o.timer = nil
	}
}

func (o *Owner) route(name string) *routeState {
	rs := o.routes[name]
	if rs == nil {
		rs = &routeState{held: map[Key]time.Time{}}
		o.routes[name] = rs
	}
	return rs
}

// Acquire waits until the lease k of route may be granted (at most max of
// the route's leases at once, earliest due first) or ctx ends. A lease
// granted is counted until Release or until it expires unrenewed.
func (o *Owner) Acquire(ctx context.Context, route string, max int64, due int64, k Key) error {
	if max < 1 {
		max = 1
	}
	if !o.cfg.Serving() {
		return ErrNotOwner
	}
	o.mu.Lock()
	if !o.leader {
		o.mu.Unlock()
		return ErrNotOwner
	}
	rs := o.route(route)
	rs.cap = max
	if _, ok := rs.held[k]; ok { // a retried request that was granted already
		rs.held[k] = o.cfg.Clock().Add(o.cfg.Hold)
		o.mu.Unlock()
		return nil
	}
	o.seq++
	w := &waiter{key: k, due: due, seq: o.seq, ch: make(chan struct{})}
	heap.Push(&rs.waiters, w)
	o.pumpLocked(rs, o.cfg.Clock())
	o.mu.Unlock()

	select {
	case <-w.ch:
	case <-ctx.Done():
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if w.granted {
		if ctx.Err() != nil { // the answer would not arrive: give it back
			delete(rs.held, k)
			o.pumpLocked(rs, o.cfg.Clock())
			return ctx.Err()
		}
		return nil
	}
	if w.idx >= 0 {
		heap.Remove(&rs.waiters, w.idx)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if w.refused {
		return errJudgedDead
	}
	if w.dropped {
		return errReleased
	}
	return ErrNotOwner // the term ended
}

// Release gives a lease back, or withdraws the request for it if it is
// still waiting: a holder that stopped waiting (an earlier job came, and
// it asks again for that one) must not be granted a place nobody takes,
// which would hold the route until the lease expired.
func (o *Owner) Release(route string, k Key) {
	o.mu.Lock()
	defer o.mu.Unlock()
	rs := o.routes[route]
	if rs == nil {
		return
	}
	delete(rs.held, k)
	for _, w := range rs.waiters {
		if w.key == k {
			heap.Remove(&rs.waiters, w.idx)
			w.dropped = true
			close(w.ch)
			break
		}
	}
	o.pumpLocked(rs, o.cfg.Clock())
}

// Renew extends the node's leases; one this owner does not know (granted
// by an earlier owner, or expired) is adopted: its request is still open.
func (o *Owner) Renew(node string, refs []LeaseRef) error {
	if !o.cfg.Serving() {
		return ErrNotOwner
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.leader {
		return ErrNotOwner
	}
	now := o.cfg.Clock()
	for _, r := range refs {
		o.route(r.Route).held[Key{Node: node, ID: r.ID}] = now.Add(o.cfg.Hold)
	}
	return nil
}

// RouteStats is one route's places on the owner.
type RouteStats struct {
	Held, Waiting int
}

// Stats returns the places held and the requests waiting, by route (empty
// when this node is not the owner).
func (o *Owner) Stats() map[string]RouteStats {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[string]RouteStats, len(o.routes))
	for name, rs := range o.routes {
		if len(rs.held) > 0 || len(rs.waiters) > 0 {
			out[name] = RouteStats{Held: len(rs.held), Waiting: len(rs.waiters)}
		}
	}
	return out
}

// Held returns how many leases of route are counted now (tests, metrics).
func (o *Owner) Held(route string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if rs := o.routes[route]; rs != nil {
		return len(rs.held)
	}
	return 0
}

func (o *Owner) pumpAllLocked(now time.Time) {
	for _, rs := range o.routes {
		o.pumpLocked(rs, now)
	}
}

// pumpLocked drops expired leases and grants to the earliest waiters while
// the route has places; it arms the timer for the next moment that can
// change that (an expiry, the end of a blind wait).
func (o *Owner) pumpLocked(rs *routeState, now time.Time) {
	if !o.ready {
		return
	}
	var next time.Time
	for k, exp := range rs.held {
		if !now.Before(exp) {
			delete(rs.held, k)
		} else if next.IsZero() || exp.Before(next) {
			next = exp
		}
	}
	if now.Before(o.blindUntil) {
		if len(rs.waiters) > 0 {
			o.wakeAtLocked(o.blindUntil)
		}
		return
	}
	for len(rs.waiters) > 0 && int64(len(rs.held)) < rs.cap {
		w := heap.Pop(&rs.waiters).(*waiter)
		if w.key.Node != o.cfg.Self && o.cfg.Dead != nil && o.cfg.Dead(w.key.Node) {
			w.refused = true
			close(w.ch)
			continue
		}
		w.granted = true
		rs.held[w.key] = now.Add(o.cfg.Hold)
		close(w.ch)
	}
	if len(rs.waiters) > 0 && !next.IsZero() {
		o.wakeAtLocked(next)
	}
}

// wakeAtLocked makes sure the routes are pumped again at t (one timer for
// all routes, set for the earliest moment asked).
func (o *Owner) wakeAtLocked(t time.Time) {
	if o.timer != nil {
		if !t.Before(o.timerAt) {
			return
		}
		o.timer.Stop()
	}
	o.timerAt = t
	o.timer = time.AfterFunc(max(t.Sub(o.cfg.Clock()), time.Millisecond), func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.timer = nil
		o.pumpAllLocked(o.cfg.Clock())
	})
}

type waitHeap []*waiter

func (h waitHeap) Len() int { return len(h) }
func (h waitHeap) Less(i, j int) bool {
	if h[i].due != h[j].due {
		return h[i].due < h[j].due
	}
	return h[i].seq < h[j].seq
}
func (h waitHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx = i
	h[j].idx = j
}
func (h *waitHeap) Push(x any) {
	w := x.(*waiter)
	w.idx = len(*h)
	*h = append(*h, w)
}
func (h *waitHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	w.idx = -1
	return w
}
