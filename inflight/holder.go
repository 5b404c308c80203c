package inflight

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/timemachine-db/timemachine/rpc/peer"
)

// ErrUnsupported: the meta leader runs a version without this protocol (a
// rolling upgrade); the caller falls back to its local share.
var ErrUnsupported = fmt.Errorf("inflight: the meta leader does not hand out in-flight places: %w", errors.ErrUnsupported)

// acquireWait is how long one acquire call waits on the owner for a place
// before the holder asks again (the same lease: a place granted just as
// the call gave up is not granted twice).
const acquireWait = 5 * time.Second

// Caller is what a Holder needs of the node's peer client.
type Caller interface {
	Call(ctx context.Context, addr string, m peer.Method, body []byte) ([]byte, error)
}

// HolderConfig configures a Holder.
type HolderConfig struct {
	Self string
	// Owner returns the meta leader (id and internal address), or "".
	Owner  func() (id, addr string)
	Client Caller
	// Local is this node's Owner, called directly when this node leads.
	Local  *Owner
	Logger *slog.Logger
}

// Holder takes leases for this node's requests. Safe for concurrent use.
type Holder struct {
	cfg HolderConfig
	log *slog.Logger

	mu       sync.Mutex
	next     uint64
	held     map[uint64]heldLease
	renewing bool
}

type heldLease struct {
	route string
	since time.Time
}

// NewHolder returns a Holder.
func NewHolder(cfg HolderConfig) *Holder {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Holder{cfg: cfg, log: cfg.Logger.With("component", "inflight"), held: map[uint64]heldLease{}}
}

// Acquire waits for one of the route's max places, the request being for a
// job due at due (Unix ms; the earliest due is served first across the
// cluster), and returns the function that gives it back (call it once,
// when the request has ended). It fails when ctx ends, and with
// ErrUnsupported when the meta leader does not know the protocol.
func (h *Holder) Acquire(ctx context.Context, route string, max, due int64) (release func(), err error) {
	h.mu.Lock()
	h.next++
	id := h.next
	h.mu.Unlock()
	k := Key{Node: h.cfg.Self, ID: id}
	body, _ := json.Marshal(acquireReq{Key: k, Route: route, Max: max, Due: due, WaitMs: acquireWait.Milliseconds()})
	sent := false
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				if sent {
					h.sendRelease(route, k)
				}
				return nil, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
		ownerID, addr := h.cfg.Owner()
		switch {
		case ownerID == "":
			continue
		case ownerID == h.cfg.Self && h.cfg.Local != nil:
			wctx, cancel := context.WithTimeout(ctx, acquireWait)
			err = h.cfg.Local.Acquire(wctx, route, max, due, k)
			cancel()
		default:
			sent = true
			cctx, cancel := context.WithTimeout(ctx, acquireWait+time.Second)
			_, err = h.cfg.Client.Call(cctx, addr, MethodAcquire, body)
			cancel()
		}
		if err == nil {
			return h.granted(route, id), nil
		}
		var re *peer.RemoteError
		if errors.As(err, &re) && re.Code == peer.CodeUnknownMethod {
			return nil, ErrUnsupported
		}
		if ctx.Err() != nil {
			if sent {
				h.sendRelease(route, k)
			}
			return nil, ctx.Err()
		}
		// Not the owner (any more), unreachable, or the wait ran out: ask
		// again, wherever the owner is now.
	}
}

// granted records a lease and returns its release.
func (h *Holder) granted(route string, id uint64) func() {
	h.mu.Lock()
	h.held[id] = heldLease{route: route, since: time.Now()}
	if !h.renewing {
		h.renewing = true
		go h.renewLoop()
	}
	h.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			delete(h.held, id)
			h.mu.Unlock()
			h.sendRelease(route, Key{Node: h.cfg.Self, ID: id})
		})
	}
}

// sendRelease tells the owner, in the background; a release that is lost
// costs the place until the lease expires (Hold).
func (h *Holder) sendRelease(route string, k Key) {
	ownerID, addr := h.cfg.Owner()
	if ownerID == "" {
		return
	}
	if ownerID == h.cfg.Self && h.cfg.Local != nil {
		h.cfg.Local.Release(route, k)
		return
	}
	body, _ := json.Marshal(releaseReq{Key: k, Route: route})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if _, err := h.cfg.Client.Call(ctx, addr, MethodRelease, body); err != nil {
			h.log.Debug("in-flight place not given back; it expires", "route", route, "err", err)
		}
	}()
}

// Held lists the leases this node holds (the census).
func (h *Holder) Held() []LeaseRef {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]LeaseRef, 0, len(h.held))
	for id, l := range h.held {
		out = append(out, LeaseRef{ID: id, Route: l.route})
	}
	return out
}

// renewLoop renews the leases kept longer than RenewEvery, every
// RenewEvery, while any is held.
func (h *Holder) renewLoop() {
	t := time.NewTicker(RenewEvery)
	defer t.Stop()
	for range t.C {
		h.mu.Lock()
		if len(h.held) == 0 {
			h.renewing = false
			h.mu.Unlock()
			return
		}
		var refs []LeaseRef
		for id, l := range h.held {
			if time.Since(l.since) >= RenewEvery {
				refs = append(refs, LeaseRef{ID: id, Route: l.route})
			}
		}
		h.mu.Unlock()
		if len(refs) > 0 {
			if err := h.renew(refs); err != nil {
				h.log.Warn("in-flight places not renewed; they expire unless the next renewal arrives", "leases", len(refs), "err", err)
			}
		}
	}
}

func (h *Holder) renew(refs []LeaseRef) error {
	ownerID, addr := h.cfg.Owner()
	if ownerID == "" {
		return errors.New("no meta leader")
	}
	if ownerID == h.cfg.Self && h.cfg.Local != nil {
		return h.cfg.Local.Renew(h.cfg.Self, refs)
	}
	body, _ := json.Marshal(renewReq{Node: h.cfg.Self, Leases: refs})
	ctx, cancel := context.WithTimeout(context.Background(), RenewEvery)
	defer cancel()
	if _, err := h.cfg.Client.Call(ctx, addr, MethodRenew, body); err != nil {
		return fmt.Errorf("renew at %s: %w", ownerID, err)
	}
	return nil
}

// CensusOver returns the Census that asks a node's Holder over client.
func CensusOver(client Caller) Census {
	return func(ctx context.Context, _ string, addr string) ([]LeaseRef, bool, error) {
		out, err := client.Call(ctx, addr, MethodHeld, nil)
		if err != nil {
			var re *peer.RemoteError
			if errors.As(err, &re) && re.Code == peer.CodeUnknownMethod {
				return nil, true, nil // an older version: it holds none of ours
			}
			return nil, errors.Is(err, syscall.ECONNREFUSED), err
		}
		var rep heldReply
		if err := json.Unmarshal(out, &rep); err != nil {
			return nil, false, fmt.Errorf("census answer: %w", err)
		}
		return rep.Leases, false, nil
	}
}
