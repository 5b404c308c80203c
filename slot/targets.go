package slot

import (
	"container/list"
	"context"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
)

// Targets gives each callback target (host:port) a fair share of the
// node's fire pool: at most PerTarget callbacks to one target are in
// flight at once, across every slot of the node. Without it one receiver
// that never answers fills the whole pool with its callbacks (each held
// for its timeout) and every other job waits behind them. A fire that
// finds its target saturated gives its node-wide slot back and is parked
// here (Acquire) holding nothing, not even a goroutine, so it delays no
// other target's job; waiters of one target are served first come, first
// served. Safe for concurrent use; one per node.
//
// Parked fires are continuations, not goroutines: 100,000 jobs due at one
// instant for one receiver used to be 100,000 goroutines blocked in Wait,
// each with a stack the fire path had grown (runtime stack allocation was
// ~45% of the node's CPU during such a burst, and the burst drained at a
// fifth of the rate).
type Targets struct {
	per int

	mu sync.Mutex
	m  map[string]*target
	// abandon holds, per context that has fires parked here, the stop of
	// the context.AfterFunc that hands them back when it ends.
	abandon map[context.Context]func() bool

	// keys caches targetKey by callback URL (at most maxTargetKeys, then
	// it starts over): parsing the URL of every fire was ~4% of a
	// firing node's CPU, and a node's jobs share few URLs.
	keys     sync.Map // string → string
	keyCount atomic.Int32
}

// maxTargetKeys bounds the URL → target cache.
const maxTargetKeys = 4096

// Key is targetKey(raw), cached.
func (t *Targets) Key(raw string) string {
	if k, ok := t.keys.Load(raw); ok {
		return k.(string)
	}
	k := targetKey(raw)
	if t.keyCount.Add(1) > maxTargetKeys {
		t.keys.Clear()
		t.keyCount.Store(1)
	}
	t.keys.Store(raw, k)
	return k
}

type target struct {
	busy    int
	waiters *list.List // of *waiter
}

// waiter is a place in a target's queue: a blocked Wait (ch, closed when
// handed a place) or a parked fire (run, called on a fire worker).
type waiter struct {
	ctx context.Context
	ch  chan struct{}
	run func(granted bool)
}

// NewTargets returns a limiter of perTarget callbacks in flight per
// target (at least 1).
func NewTargets(perTarget int) *Targets {
	return &Targets{per: max(perTarget, 1), m: map[string]*target{}, abandon: map[context.Context]func() bool{}}
}

// DefaultPerTarget is the default share of a pool of fireConcurrency:
// max(8, fireConcurrency/4).
func DefaultPerTarget(fireConcurrency int) int { return max(8, fireConcurrency/4) }

// PerTarget is the share of one target.
func (t *Targets) PerTarget() int { return t.per }

// TryAcquire takes a place for key if one is free.
func (t *Targets) TryAcquire(key string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.take(key) == nil
}

// take takes a place for key if one is free (nil), else returns the
// target to queue on. Under mu.
func (t *Targets) take(key string) *target {
	tg := t.m[key]
	if tg == nil {
		tg = &target{waiters: list.New()}
		t.m[key] = tg
	}
	if tg.busy < t.per && tg.waiters.Len() == 0 {
		tg.busy++
		return nil
	}
	return tg
}

// Acquire takes a place for key and returns true when one is free.
// Otherwise it parks then and returns false: then(true) runs on a fire
// worker once a place is handed to it (the caller then holds it), or
// then(false) once ctx ended first (holding none). Either runs exactly
// once, never on the caller's goroutine.
func (t *Targets) Acquire(ctx context.Context, key string, then func(granted bool)) bool {
	t.mu.Lock()
	tg := t.take(key)
	if tg == nil {
		t.mu.Unlock()
		return true
	}
	tg.waiters.PushBack(&waiter{ctx: ctx, run: then})
	if _, ok := t.abandon[ctx]; !ok && ctx.Done() != nil {
		t.abandon[ctx] = context.AfterFunc(ctx, func() { t.drop(ctx) })
	}
	t.mu.Unlock()
	return false
}

// drop hands back every fire parked with ctx (it ended): each leaves its
// queue and learns it got no place. The fires of a leadership term end
// with the term, so the term's scheduler does not wait behind other
// slots' jobs for them.
func (t *Targets) drop(ctx context.Context) {
	var gone []func(bool)
	t.mu.Lock()
	delete(t.abandon, ctx)
	for key, tg := range t.m {
		for el := tg.waiters.Front(); el != nil; {
			next := el.Next()
			if w := el.Value.(*waiter); w.run != nil && w.ctx == ctx {
				tg.waiters.Remove(el)
				gone = append(gone, w.run)
			}
			el = next
		}
		if tg.busy <= 0 && tg.waiters.Len() == 0 {
			delete(t.m, key)
		}
	}
	t.mu.Unlock()
	for _, run := range gone {
		run(false)
	}
}

// Wait blocks until it holds a place for key, or ctx ends (then it holds
// none and returns ctx's error).
func (t *Targets) Wait(ctx context.Context, key string) error {
	t.mu.Lock()
	tg := t.take(key)
	if tg == nil {
		t.mu.Unlock()
		return nil
	}
	w := &waiter{ctx: ctx, ch: make(chan struct{})}
	el := tg.waiters.PushBack(w)
	t.mu.Unlock()
	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
		t.mu.Lock()
		select {
		case <-w.ch:
			// Handed a place just as ctx ended: give it on.
			t.mu.Unlock()
			t.Release(key)
		default:
			tg.waiters.Remove(el)
			if tg.busy <= 0 && tg.waiters.Len() == 0 {
				delete(t.m, key)
			}
			t.mu.Unlock()
		}
		return ctx.Err()
	}
}

// Release gives back a place for key: to the first waiter, if any.
func (t *Targets) Release(key string) {
	t.mu.Lock()
	tg := t.m[key]
	if tg == nil {
		t.mu.Unlock()
		return
	}
	if front := tg.waiters.Front(); front != nil {
		tg.waiters.Remove(front) // the place passes on: busy stays
		t.mu.Unlock()
		w := front.Value.(*waiter)
		if w.ch != nil {
			close(w.ch)
		} else {
			fireWorkers.Go(func() { w.run(true) })
		}
		return
	}
	tg.busy--
	if tg.busy <= 0 {
		delete(t.m, key)
	}
	t.mu.Unlock()
}

// targetKey is the host:port a callback URL is sent to (the URL itself
// when it does not parse: it fails on its own then).
func targetKey(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return raw
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "80"
		if strings.EqualFold(u.Scheme, "https") {
			port = "443"
		}
	}
	return net.JoinHostPort(strings.ToLower(host), port)
}

// heldSlot is the node-wide fire-pool slot a fire holds. A fire that waits
// for its target yields it and reclaims it before it sends.
type heldSlot struct {
	sem  chan struct{}
	held bool
}

func (h *heldSlot) yield() {
	if h.held {
		<-h.sem
		h.held = false
	}
}

func (h *heldSlot) reclaim(ctx context.Context) bool {
	if h.held {
		return true
	}
	select {
	case h.sem <- struct{}{}:
		h.held = true
		return true
	case <-ctx.Done():
		return false
	}
}

// release gives the slot back for good (once the callback is over).
func (h *heldSlot) release() { h.yield() }
