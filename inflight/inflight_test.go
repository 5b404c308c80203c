package inflight

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/internal/testutil"
	"github.com/timemachine-db/timemachine/rpc/peer"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// lead starts o's term and waits until its census is in.
func lead(t *testing.T, o *Owner) context.CancelFunc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	go o.Lead(ctx)
	t.Cleanup(cancel)
	testutil.Eventually(t, 5*time.Second, "census in", func() error {
		o.mu.Lock()
		defer o.mu.Unlock()
		if !o.ready {
			return errors.New("not ready")
		}
		return nil
	})
	return cancel
}

type result struct {
	name string
	err  error
}

// acquireAsync starts an Acquire and reports on ch when it returns.
func acquireAsync(o *Owner, ctx context.Context, name string, route string, max, due int64, k Key, ch chan<- result) {
	go func() { ch <- result{name, o.Acquire(ctx, route, max, due, k)} }()
}

func waitGranted(t *testing.T, ch <-chan result, want string) {
	t.Helper()
	select {
	case r := <-ch:
		if r.name != want || r.err != nil {
			t.Fatalf("got %s (%v), want %s granted", r.name, r.err, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s not granted", want)
	}
}

func nothingFor(t *testing.T, ch <-chan result, d time.Duration) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s returned (%v) while the route was full", r.name, r.err)
	case <-time.After(d):
	}
}

func key(n string, id uint64) Key { return Key{Node: n, ID: id} }

// TestOwnerGrantsUpToCapEarliestDueFirst: at most cap places at once; a
// place given back goes to the waiter with the earliest due time, not the
// first to ask.
func TestOwnerGrantsUpToCapEarliestDueFirst(t *testing.T) {
	o := NewOwner(OwnerConfig{Self: "a", Logger: quiet})
	lead(t, o)
	ctx := context.Background()
	ch := make(chan result, 4)
	acquireAsync(o, ctx, "first", "r", 2, 500, key("a", 1), ch)
	waitGranted(t, ch, "first")
	acquireAsync(o, ctx, "second", "r", 2, 500, key("b", 1), ch)
	waitGranted(t, ch, "second")
	acquireAsync(o, ctx, "late", "r", 2, 300, key("c", 1), ch)
	nothingFor(t, ch, 50*time.Millisecond)
	acquireAsync(o, ctx, "early", "r", 2, 100, key("c", 2), ch)
	nothingFor(t, ch, 50*time.Millisecond)
	if h := o.Held("r"); h != 2 {
		t.Fatalf("held %d, want 2", h)
	}
	if st := o.Stats(); st["r"] != (RouteStats{Held: 2, Waiting: 2}) || len(st) != 1 {
		t.Fatalf("stats %+v", st)
	}
	// Another route has places of its own.
	if err := o.Acquire(ctx, "other", 1, 900, key("a", 9)); err != nil {
		t.Fatal(err)
	}
	o.Release("r", key("a", 1))
	waitGranted(t, ch, "early")
	o.Release("r", key("b", 1))
	waitGranted(t, ch, "late")
	// A repeated acquire of a lease already held (an answer lost) is not
	// granted twice.
	if err := o.Acquire(ctx, "r", 2, 1, key("c", 2)); err != nil {
		t.Fatal(err)
	}
	if h := o.Held("r"); h != 2 {
		t.Fatalf("held %d after a repeated acquire, want 2", h)
	}
}

// TestOwnerLeasesExpireUnlessRenewed: a holder that stops renewing (dead,
// cut off) loses its place after Hold; one that renews keeps it, and a
// renewal of a lease the owner does not know (granted by the previous
// owner) is counted.
func TestOwnerLeasesExpireUnlessRenewed(t *testing.T) {
	const hold = 300 * time.Millisecond
	o := NewOwner(OwnerConfig{Self: "a", Hold: hold, Logger: quiet})
	lead(t, o)
	ctx := context.Background()
	if err := o.Acquire(ctx, "r", 1, 0, key("b", 1)); err != nil {
		t.Fatal(err)
	}
	ch := make(chan result, 1)
	acquireAsync(o, ctx, "waiter", "r", 1, 0, key("c", 1), ch)
	// Renewed for three Holds: the waiter waits.
	for range 9 {
		if err := o.Renew("b", []LeaseRef{{ID: 1, Route: "r"}}); err != nil {
			t.Fatal(err)
		}
		nothingFor(t, ch, hold/3)
	}
	start := time.Now()
	waitGranted(t, ch, "waiter")
	if d := time.Since(start); d < hold/2 {
		t.Fatalf("granted %v after the last renewal; the lease lives %v", d, hold)
	}
	// Adopted: a renewal of an unknown lease fills the place.
	o.Release("r", key("c", 1))
	if err := o.Renew("d", []LeaseRef{{ID: 7, Route: "r"}}); err != nil {
		t.Fatal(err)
	}
	if h := o.Held("r"); h != 1 {
		t.Fatalf("held %d after adopting, want 1", h)
	}
}

// TestOwnerCensus: a new owner counts the places the nodes report; a node
// that cannot be asked makes it wait one Hold; a node whose process is not
// running (refused) holds nothing.
func TestOwnerCensus(t *testing.T) {
	const hold = 400 * time.Millisecond
	for _, tc := range []struct {
		name      string
		answer    func() ([]LeaseRef, bool, error)
		heldAfter int
		waits     bool
	}{
		{"reports a place", func() ([]LeaseRef, bool, error) { return []LeaseRef{{ID: 3, Route: "r"}}, false, nil }, 1, true},
		{"holds none", func() ([]LeaseRef, bool, error) { return nil, false, nil }, 0, false},
		{"refused", func() ([]LeaseRef, bool, error) { return nil, true, syscall.ECONNREFUSED }, 0, false},
		{"no answer", func() ([]LeaseRef, bool, error) { return nil, false, context.DeadlineExceeded }, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOwner(OwnerConfig{
				Self: "a", Hold: hold, Logger: quiet,
				Peers: func() map[string]string { return map[string]string{"a": "x", "b": "y"} },
				Census: func(_ context.Context, node, _ string) ([]LeaseRef, bool, error) {
					if node != "b" {
						t.Errorf("census asked %s", node)
					}
					return tc.answer()
				},
				Local: func() []LeaseRef { return nil },
			})
			lead(t, o)
			if h := o.Held("r"); h != tc.heldAfter {
				t.Fatalf("held %d after the census, want %d", h, tc.heldAfter)
			}
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := o.Acquire(ctx, "r", 1, 0, key("c", 1)); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); tc.waits != (d > hold/2) {
				t.Fatalf("granted after %v; waits %v", d, tc.waits)
			}
		})
	}
}

// TestOwnerOnlyWhileLeading: no places before Lead, nor when Serving says
// this node lost its majority; waiters are turned away when the term ends.
func TestOwnerOnlyWhileLeading(t *testing.T) {
	var mu sync.Mutex
	serving := true
	o := NewOwner(OwnerConfig{Self: "a", Logger: quiet, Serving: func() bool { mu.Lock(); defer mu.Unlock(); return serving }})
	ctx := context.Background()
	if err := o.Acquire(ctx, "r", 1, 0, key("a", 1)); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("before Lead: %v", err)
	}
	end := lead(t, o)
	if err := o.Acquire(ctx, "r", 1, 0, key("a", 1)); err != nil {
		t.Fatal(err)
	}
	ch := make(chan result, 1)
	acquireAsync(o, ctx, "waiter", "r", 1, 0, key("a", 2), ch)
	nothingFor(t, ch, 50*time.Millisecond)
	end()
	select {
	case r := <-ch:
		if !errors.Is(r.err, ErrNotOwner) {
			t.Fatalf("waiter after the term: %v", r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not turned away")
	}
	lead(t, o)
	if h := o.Held("r"); h != 0 {
		t.Fatalf("a new term starts from the census, not the old term's %d places", h)
	}
	mu.Lock()
	serving = false
	mu.Unlock()
	if err := o.Acquire(ctx, "r", 1, 0, key("a", 3)); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("without a majority: %v", err)
	}
}

// fakeNet routes peer calls to the handlers registered per address.
type fakeNet struct {
	mu    sync.Mutex
	nodes map[string]map[peer.Method]peer.HandlerFunc
}

type fakeServer struct {
	n    *fakeNet
	addr string
}

func (s fakeServer) Handle(m peer.Method, h peer.HandlerFunc) {
	s.n.mu.Lock()
	defer s.n.mu.Unlock()
	if s.n.nodes[s.addr] == nil {
		s.n.nodes[s.addr] = map[peer.Method]peer.HandlerFunc{}
	}
	s.n.nodes[s.addr][m] = h
}

func (n *fakeNet) Call(ctx context.Context, addr string, m peer.Method, body []byte) ([]byte, error) {
	n.mu.Lock()
	hs, ok := n.nodes[addr]
	h := hs[m]
	n.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("dial %s: %w: %w", addr, peer.ErrUnreachable, syscall.ECONNREFUSED)
	}
	if h == nil {
		return nil, &peer.RemoteError{Code: peer.CodeUnknownMethod}
	}
	out, err := h(ctx, body)
	var re *peer.RemoteError
	if err != nil && !errors.As(err, &re) {
		err = &peer.RemoteError{Message: err.Error()}
	}
	return out, err
}

// TestHolderOverTheWire: a node's Holder takes and gives back places from
// the owner on another node, the owner's census sees what it holds, and a
// meta leader without the methods (an older version) is ErrUnsupported.
func TestHolderOverTheWire(t *testing.T) {
	net := &fakeNet{nodes: map[string]map[peer.Method]peer.HandlerFunc{}}
	var ownerA *Owner
	holders := map[string]*Holder{}
	for _, id := range []string{"a", "b"} {
		o := NewOwner(OwnerConfig{
			Self: id, Logger: quiet, Census: CensusOver(net),
			Peers: func() map[string]string { return map[string]string{"a": "a", "b": "b"} },
			Local: func() []LeaseRef { return holders[id].Held() },
		})
		h := NewHolder(HolderConfig{Self: id, Owner: func() (string, string) { return "a", "a" }, Client: net, Local: o, Logger: quiet})
		holders[id] = h
		Register(fakeServer{net, id}, o, h)
		if id == "a" {
			ownerA = o
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// b holds a place before a leads: a's census counts it.
	preB := holders["b"].granted("r", 99)
	lead(t, ownerA)
	if h := ownerA.Held("r"); h != 1 {
		t.Fatalf("census: held %d, want 1", h)
	}
	preB()
	testutil.Eventually(t, 5*time.Second, "released over the wire", func() error {
		if h := ownerA.Held("r"); h != 0 {
			return fmt.Errorf("held %d", h)
		}
		return nil
	})
	relB, err := holders["b"].Acquire(ctx, "r", 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	// a's own requests wait for b's place.
	done := make(chan error, 1)
	var relA func()
	go func() {
		var err error
		relA, err = holders["a"].Acquire(ctx, "r", 1, 20)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("a got a place while b held the only one (%v)", err)
	case <-time.After(100 * time.Millisecond):
	}
	relB()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	relA()
	if h := ownerA.Held("r"); h != 0 {
		t.Fatalf("held %d after both released", h)
	}
	// An owner that does not serve the methods.
	old := &fakeNet{nodes: map[string]map[peer.Method]peer.HandlerFunc{"z": {}}}
	h := NewHolder(HolderConfig{Self: "b", Owner: func() (string, string) { return "z", "z" }, Client: old, Logger: quiet})
	if _, err := h.Acquire(ctx, "r", 1, 0); !errors.Is(err, ErrUnsupported) || !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("older owner: %v", err)
	}
}

// TestOwnerTurnsAwayDeadNodes: a place that comes free is not granted to
// a waiting request of a node the liveness check judges dead (paused, cut
// off): it could not use it, and the route would wait for the lease to
// expire. The next waiter gets it; the dead node's request is told to ask
// again.
func TestOwnerTurnsAwayDeadNodes(t *testing.T) {
	o := NewOwner(OwnerConfig{Self: "a", Logger: quiet, Dead: func(n string) bool { return n == "p" }})
	ch := oneHeldTwoWaiting(t, o, "paused", key("p", 1), "alive", key("c", 1))
	o.Release("r", key("b", 1))
	got := map[string]error{}
	for range 2 {
		select {
		case r := <-ch:
			got[r.name] = r.err
		case <-time.After(5 * time.Second):
			t.Fatalf("only %v returned", got)
		}
	}
	if !errors.Is(got["paused"], errJudgedDead) || got["alive"] != nil {
		t.Fatalf("paused: %v, alive: %v", got["paused"], got["alive"])
	}
	if h := o.Held("r"); h != 1 {
		t.Fatalf("held %d, want 1", h)
	}
}

// TestOwnerReleaseWithdrawsAWaiter: a holder that stops waiting (its lane
// asks again for an earlier job) withdraws its request with Release; the
// owner must not grant it a place nobody would take, which would hold the
// route until the lease expired.
func TestOwnerReleaseWithdrawsAWaiter(t *testing.T) {
	o := NewOwner(OwnerConfig{Self: "a", Logger: quiet})
	ch := oneHeldTwoWaiting(t, o, "withdrawn", key("c", 1), "next", key("d", 1))
	o.Release("r", key("c", 1))
	select {
	case r := <-ch:
		if r.name != "withdrawn" || !errors.Is(r.err, errReleased) {
			t.Fatalf("%s: %v", r.name, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the withdrawn request still waits")
	}
	o.Release("r", key("b", 1))
	waitGranted(t, ch, "next")
	if h := o.Held("r"); h != 1 {
		t.Fatalf("held %d, want 1", h)
	}
}

// oneHeldTwoWaiting makes o lead, grants route "r" (cap 1) to b's key 1,
// then queues two requests behind it, first (due 10) before second (due
// 20), each checked to wait. Their answers come on the returned channel.
func oneHeldTwoWaiting(t *testing.T, o *Owner, first string, k1 Key, second string, k2 Key) chan result {
	t.Helper()
	lead(t, o)
	ctx := context.Background()
	if err := o.Acquire(ctx, "r", 1, 0, key("b", 1)); err != nil {
		t.Fatal(err)
	}
	ch := make(chan result, 2)
	acquireAsync(o, ctx, first, "r", 1, 10, k1, ch)
	nothingFor(t, ch, 30*time.Millisecond)
	acquireAsync(o, ctx, second, "r", 1, 20, k2, ch)
	nothingFor(t, ch, 30*time.Millisecond)
	return ch
}
