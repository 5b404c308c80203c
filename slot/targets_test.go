package slot

import (
	"context"
	"fmt"
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
