package slot

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Every function given to Go runs exactly once, concurrently when the
// callers need it, and idle workers go away.
func TestWorkersRunEveryFunctionAndRetire(t *testing.T) {
	w := newWorkers(20 * time.Millisecond)
	var ran atomic.Int64
	var wg sync.WaitGroup
	const n = 1000
	release := make(chan struct{})
	var started sync.WaitGroup
	// 8 functions that block until released: they must all run at once.
	for i := 0; i < 8; i++ {
		wg.Add(1)
		started.Add(1)
		w.Go(func() {
			defer wg.Done()
			started.Done()
			<-release
			ran.Add(1)
		})
	}
	started.Wait()
	close(release)
	for i := 0; i < n; i++ {
		wg.Add(1)
		w.Go(func() { defer wg.Done(); ran.Add(1) })
	}
	wg.Wait()
	if got := ran.Load(); got != n+8 {
		t.Fatalf("ran %d functions, want %d", got, n+8)
	}
	if live := w.live.Load(); live < 8 || live > n+8 {
		t.Fatalf("%d workers after 8 concurrent functions", live)
	}
	// Workers idle for longer than the idle time exit.
	deadline := time.Now().Add(5 * time.Second)
	for w.live.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d idle workers did not retire", w.live.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
