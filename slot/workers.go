package slot

import (
	"sync/atomic"
	"time"
)

// workers runs functions on reused goroutines. A fire's call path (webhook
// client, fasthttp, signing) grows a goroutine's stack well past the
// starting size; with a fresh goroutine per fire, every fire paid for that
// growth again (runtime.newstack was about 5% of a firing node's CPU). A
// worker keeps its grown stack and waits for the next function; one idle
// for longer than idle exits, so a quiet node holds no workers.
//
// There is no bound here: callers bound concurrency themselves (the
// node-wide FireSlots), and a worker is only started when none is idle.
type workers struct {
	work chan func()
	idle time.Duration
	live atomic.Int64 // workers running, busy or idle
}

func newWorkers(idle time.Duration) *workers {
	return &workers{work: make(chan func()), idle: idle}
}

// Go runs fn on an idle worker, or on a new one if none is idle.
func (w *workers) Go(fn func()) {
	select {
	case w.work <- fn:
	default:
		w.live.Add(1)
		go w.loop(fn)
	}
}

func (w *workers) loop(fn func()) {
	defer w.live.Add(-1)
	fn()
	t := time.NewTimer(w.idle)
	defer t.Stop()
	for {
		select {
		case fn := <-w.work:
			fn()
			t.Reset(w.idle)
		case <-t.C:
			return
		}
	}
}

// fireWorkers is shared by every scheduler in the process, like the
// node-wide FireSlots that bounds how many of its workers are busy firing.
var fireWorkers = newWorkers(10 * time.Second)
