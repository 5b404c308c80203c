package slot

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/internal/testutil"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
)

func TestTargetKey(t *testing.T) {
	for in, want := range map[string]string{
		"http://Example.com/hook":      "example.com:80",
		"https://example.com/x?y=1":    "example.com:443",
		"http://127.0.0.1:9000/a":      "127.0.0.1:9000",
		"http://[::1]:81/":             "[::1]:81",
		"HTTPS://user@h.example:8443/": "h.example:8443",
	} {
		if got := targetKey(in); got != want {
			t.Errorf("targetKey(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTargetsShareAndHandOff(t *testing.T) {
	lim := NewTargets(2)
	for i, want := range []bool{true, true, false} {
		if got := lim.TryAcquire("a"); got != want {
			t.Fatalf("TryAcquire #%d = %v: the share of a is not 2", i+1, got)
		}
	}
	if !lim.TryAcquire("b") {
		t.Fatal("a saturated target took b's place")
	}
	got := make(chan int, 2)
	for i := 1; i <= 2; i++ {
		go func() {
			if err := lim.Wait(context.Background(), "a"); err == nil {
				got <- i
			}
		}()
		testutil.Eventually(t, 5*time.Second, "waiter queued", func() error {
			lim.mu.Lock()
			defer lim.mu.Unlock()
			if n := lim.m["a"].waiters.Len(); n != i {
				return fmt.Errorf("%d waiters", n)
			}
			return nil
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if lim.Wait(ctx, "a") == nil {
		t.Fatal("a cancelled wait got a place")
	}
	lim.Release("a")
	if w := <-got; w != 1 {
		t.Fatalf("waiter %d served first", w)
	}
	if lim.TryAcquire("a") {
		t.Fatal("TryAcquire jumped the queue")
	}
	lim.Release("a")
	<-got
	lim.Release("a")
	lim.Release("a")
	lim.Release("b")
	lim.mu.Lock()
	defer lim.mu.Unlock()
	if len(lim.m) != 0 {
		t.Fatalf("entries left: %v", lim.m)
	}
}

// One receiver that never answers must not delay the jobs of other
// receivers: with the whole fire pool (4) smaller than the black hole's
// backlog (40), the unrelated jobs fired on time only because each target
// gets a share (2) and a job waiting for its target holds no pool slot.
func TestBlackHoleReceiverDelaysNoOtherTarget(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	stop := func() { once.Do(func() { close(release) }) }
	defer stop()
	d := newFakeDeliverer()
	d.answer = func(dv *Delivery) DeliveryResult {
		if targetKey(dv.URL) == "127.0.0.1:1" {
			<-release // a receiver that never answers (until the test ends)
		}
		return DeliveryResult{StatusCode: 200}
	}
	ts := openTestSlot(t, t.TempDir(), d, func(c *Config) {
		c.FireSlots = make(chan struct{}, 4)
		c.Targets = NewTargets(2)
	})
	defer ts.close(t)
	defer stop()
	now := time.Now()
	for i := 0; i < 40; i++ {
		create(t, ts.r, fmt.Sprintf("hole-%d", i), now.Add(-time.Second).UnixMilli())
	}
	testutil.Eventually(t, 10*time.Second, "the black hole's share in flight", testutil.True(func() bool { return len(d.ch) >= 2 }))
	due := time.Now().Add(300 * time.Millisecond).UnixMilli()
	for i := 0; i < 20; i++ {
		id := fmt.Sprintf("other-%d", i)
		spec := model.JobSpec{TriggerTime: due, CallbackURL: fmt.Sprintf("http://127.0.0.1:%d/hook", 2+i%3), Hash: uint64(i + 1)}
		res, err := ts.r.Propose(context.Background(), &raftfsm.Create{Coll: "default", ID: id, Spec: spec, Now: time.Now().UnixMilli()})
		if err != nil || res[0].Code != model.CodeCreated {
			t.Fatalf("create %s: %v %v", id, err, res)
		}
	}
	testutil.Eventually(t, 10*time.Second, "the other targets' jobs delivered", func() error {
		for i := 0; i < 20; i++ {
			if len(d.times(fmt.Sprintf("other-%d", i))) == 0 {
				return fmt.Errorf("other-%d not delivered", i)
			}
		}
		return nil
	})
	for i := 0; i < 20; i++ {
		at := d.times(fmt.Sprintf("other-%d", i))[0]
		if late := at.Sub(time.UnixMilli(due)); late > time.Second {
			t.Errorf("other-%d was %v late behind the black hole", i, late)
		}
	}
	holes := 0
	for i := 0; i < 40; i++ {
		holes += len(d.times(fmt.Sprintf("hole-%d", i)))
	}
	if holes != 2 {
		t.Errorf("%d callbacks in flight to the black hole, want its share of 2", holes)
	}
}

// A fire parked behind its saturated target is a continuation: handed
// places in order, or told it got none when its context ends, exactly
// once either way, and nothing is left behind.
func TestTargetsParkedFires(t *testing.T) {
	lim := NewTargets(1)
	if !lim.Acquire(context.Background(), "a", func(bool) { t.Error("a free place parked the fire") }) {
		t.Fatal("Acquire of a free place = false")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type call struct {
		n       int
		granted bool
	}
	calls := make(chan call, 10)
	for i := 1; i <= 3; i++ {
		if lim.Acquire(ctx, "a", func(ok bool) { calls <- call{i, ok} }) {
			t.Fatalf("fire %d got the saturated target's place", i)
		}
	}
	lim.Release("a")
	if c := <-calls; c != (call{1, true}) {
		t.Fatalf("first handed place went to %+v, want fire 1 granted", c)
	}
	cancel() // the term ends: 2 and 3 get no place
	got := map[call]bool{<-calls: true, <-calls: true}
	if !got[call{2, false}] || !got[call{3, false}] {
		t.Fatalf("after the cancel: %v, want 2 and 3 refused", got)
	}
	lim.Release("a") // fire 1's place
	select {
	case c := <-calls:
		t.Fatalf("a dropped fire ran again: %+v", c)
	case <-time.After(50 * time.Millisecond):
	}
	lim.mu.Lock()
	defer lim.mu.Unlock()
	if len(lim.m) != 0 || len(lim.abandon) != 0 {
		t.Fatalf("entries left: %v, %d contexts", lim.m, len(lim.abandon))
	}
}

// A burst for one saturated target parks its fires without a goroutine
// each: 300 jobs due at once behind a receiver that holds its share (2)
// add only a handful of goroutines, and every job is delivered once when
// it answers. Before, each parked fire was a goroutine blocked in Wait
// (with the stack the fire path had grown), which made a 100,000-job burst
// drain at a fifth of the rate.
func TestBurstParksWithoutGoroutines(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	stop := func() { once.Do(func() { close(release) }) }
	defer stop()
	d := newFakeDeliverer()
	d.answer = func(*Delivery) DeliveryResult {
		<-release
		return DeliveryResult{StatusCode: 200}
	}
	ts := openTestSlot(t, t.TempDir(), d, func(c *Config) {
		c.FireSlots = make(chan struct{}, 4)
		c.Targets = NewTargets(2)
	})
	defer ts.close(t)
	defer stop()
	g0 := runtime.NumGoroutine()
	const n = 300
	due := time.Now().Add(-time.Second).UnixMilli()
	for i := 0; i < n; i++ {
		create(t, ts.r, fmt.Sprintf("burst-%d", i), due)
	}
	testutil.Eventually(t, 10*time.Second, "the target's share in flight", testutil.True(func() bool { return len(d.ch) >= 2 }))
	parked := func() int {
		ts.r.cfg.Targets.mu.Lock()
		defer ts.r.cfg.Targets.mu.Unlock()
		if tg := ts.r.cfg.Targets.m["127.0.0.1:1"]; tg != nil {
			return tg.waiters.Len()
		}
		return 0
	}
	testutil.Eventually(t, 10*time.Second, "the rest parked", func() error {
		if p := parked(); p != n-2 {
			return fmt.Errorf("%d parked", p)
		}
		return nil
	})
	if g := runtime.NumGoroutine(); g-g0 > 100 {
		t.Errorf("%d goroutines more with %d fires parked: parked fires hold goroutines", g-g0, n-2)
	}
	stop()
	testutil.Eventually(t, 20*time.Second, "every job delivered", func() error {
		for i := 0; i < n; i++ {
			if len(d.times(fmt.Sprintf("burst-%d", i))) == 0 {
				return fmt.Errorf("burst-%d not delivered", i)
			}
		}
		return nil
	})
	for i := 0; i < n; i++ {
		if got := len(d.times(fmt.Sprintf("burst-%d", i))); got != 1 {
			t.Errorf("burst-%d delivered %d times", i, got)
		}
	}
}

func TestTargetsKeyCache(t *testing.T) {
	lim := NewTargets(1)
	for i := 0; i < maxTargetKeys+10; i++ {
		u := fmt.Sprintf("http://Host-%d.example:8%03d/hook?i=%d", i%7, i%100, i)
		if got, want := lim.Key(u), targetKey(u); got != want {
			t.Fatalf("Key(%q) = %q, want %q", u, got, want)
		}
		if got := lim.Key(u); got != targetKey(u) {
			t.Fatalf("cached Key(%q) = %q", u, got)
		}
	}
	if n := lim.keyCount.Load(); n > maxTargetKeys {
		t.Fatalf("%d cached keys, bound %d", n, maxTargetKeys)
	}
}
