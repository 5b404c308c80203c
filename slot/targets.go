package slot

import (
	"container/list"
	"context"
	"net"
	"net/url"
	"strings"
	"sync"
)

// Targets gives each callback target (host:port) a fair share of the
// node's fire pool: at most PerTarget callbacks to one target are in
// flight at once, across every slot of the node. Without it one receiver
// that never answers fills the whole pool with its callbacks (each held
// for its timeout) and every other job waits behind them. A fire that
// finds its target saturated gives its node-wide slot back and waits here
// holding nothing, so it delays no other target's job; waiters of one
// target are served first come, first served. Safe for concurrent use;
// one per node.
type Targets struct {
	per int

	mu sync.Mutex
	m  map[string]*target
}

type target struct {
	busy    int
	waiters *list.List // of chan struct{}, closed when handed a place
}

// NewTargets returns a limiter of perTarget callbacks in flight per
// target (at least 1).
func NewTargets(perTarget int) *Targets {
	return &Targets{per: max(perTarget, 1), m: map[string]*target{}}
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
	tg := t.m[key]
	if tg == nil {
		tg = &target{waiters: list.New()}
		t.m[key] = tg
	}
	if tg.busy < t.per && tg.waiters.Len() == 0 {
		tg.busy++
		return true
	}
	return false
}

// Wait blocks until it holds a place for key, or ctx ends (then it holds
// none and returns ctx's error).
func (t *Targets) Wait(ctx context.Context, key string) error {
	t.mu.Lock()
	tg := t.m[key]
	if tg == nil {
		tg = &target{waiters: list.New()}
		t.m[key] = tg
	}
	if tg.busy < t.per && tg.waiters.Len() == 0 {
		tg.busy++
		t.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	el := tg.waiters.PushBack(ch)
	t.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		t.mu.Lock()
		select {
		case <-ch:
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
	defer t.mu.Unlock()
	tg := t.m[key]
	if tg == nil {
		return
	}
	if front := tg.waiters.Front(); front != nil {
		tg.waiters.Remove(front)
		close(front.Value.(chan struct{})) // the place passes on: busy stays
		return
	}
	tg.busy--
	if tg.busy <= 0 {
		delete(t.m, key)
	}
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
