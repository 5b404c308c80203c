package storage

import (
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// quietScheduler is Pebble's ConcurrencyLimitScheduler without its idle
// ticker. Pebble's own wakes every 100 ms for the life of the DB to grant
// compactions that were refused (its periodicGranter): ten wake-ups a
// second on an idle node, ~6 % of all an idle 12-slot node had
// (docs/scaling.md, fifth pass). This one grants the same way — up to the
// DB's allowance at once, on TrySchedule, Done and a raised allowance —
// and runs the 100 ms granter only while a refused compaction may be
// waiting, which only happens while compactions run.
type quietScheduler struct {
	db    pebble.DBForCompaction
	poke  chan struct{} // wakes the granter
	stop  chan struct{}
	every time.Duration

	mu           sync.Mutex
	running      int
	lastAllowed  int
	refused      bool // a TrySchedule was refused since the last grant pass that found nothing waiting
	unregistered bool
	granting     bool
	grantingDone *sync.Cond
}

var _ pebble.CompactionScheduler = (*quietScheduler)(nil)

func newQuietScheduler() *quietScheduler {
	s := &quietScheduler{poke: make(chan struct{}, 1), stop: make(chan struct{}), every: 100 * time.Millisecond}
	s.grantingDone = sync.NewCond(&s.mu)
	return s
}

// Register implements pebble.CompactionScheduler.
func (s *quietScheduler) Register(_ int, db pebble.DBForCompaction) {
	s.db = db
	go s.granter()
}

// Unregister implements pebble.CompactionScheduler: no call into the DB
// happens after it returns.
func (s *quietScheduler) Unregister() {
	close(s.stop)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unregistered = true
	for s.granting {
		s.grantingDone.Wait()
	}
}

// TrySchedule implements pebble.CompactionScheduler.
func (s *quietScheduler) TrySchedule() (bool, pebble.CompactionGrantHandle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unregistered {
		return false, nil
	}
	s.lastAllowed = s.db.GetAllowedWithoutPermission()
	if s.lastAllowed > s.running {
		s.running++
		return true, s
	}
	s.refused = true
	s.wake()
	return false, nil
}

// UpdateGetAllowedWithoutPermission implements pebble.CompactionScheduler.
func (s *quietScheduler) UpdateGetAllowedWithoutPermission() {
	s.mu.Lock()
	allowed := s.db.GetAllowedWithoutPermission()
	raised := allowed > s.lastAllowed
	s.lastAllowed = allowed
	s.mu.Unlock()
	if raised {
		s.wake()
	}
}

// Started, MeasureCPU and CumulativeStats implement
// pebble.CompactionGrantHandle.
func (s *quietScheduler) Started()                                          {}
func (s *quietScheduler) MeasureCPU(pebble.CompactionGoroutineKind)         {}
func (s *quietScheduler) CumulativeStats(pebble.CompactionGrantHandleStats) {}

// Done implements pebble.CompactionGrantHandle.
func (s *quietScheduler) Done() {
	s.mu.Lock()
	s.running--
	s.mu.Unlock()
	s.grant()
}

func (s *quietScheduler) wake() {
	select {
	case s.poke <- struct{}{}:
	default:
	}
}

// granter grants on a poke, and every 100 ms while a refused compaction
// may still be waiting.
func (s *quietScheduler) granter() {
	var tick *time.Ticker
	var tc <-chan time.Time
	for {
		select {
		case <-s.stop:
			if tick != nil {
				tick.Stop()
			}
			return
		case <-s.poke:
		case <-tc:
		}
		waiting := s.grant()
		switch {
		case waiting && tick == nil:
			tick = time.NewTicker(s.every)
			tc = tick.C
		case !waiting && tick != nil:
			tick.Stop()
			tick, tc = nil, nil
		}
	}
}

// grant grants what the DB's allowance leaves room for, to compactions
// the DB has waiting, and reports whether one may still wait.
func (s *quietScheduler) grant() bool {
	s.mu.Lock()
	if s.unregistered {
		s.mu.Unlock()
		return false
	}
	for s.granting {
		s.grantingDone.Wait()
	}
	if s.unregistered {
		s.mu.Unlock()
		return false
	}
	s.lastAllowed = s.db.GetAllowedWithoutPermission()
	room := s.lastAllowed - s.running
	if room <= 0 {
		// Full: one may wait, and a running one's Done grants it.
		waiting := s.refused
		s.mu.Unlock()
		return waiting
	}
	s.granting = true
	s.refused = false
	s.mu.Unlock()
	waiting := false
	for room > 0 {
		ok, _ := s.db.GetWaitingCompaction()
		if !ok {
			break
		}
		if !s.db.Schedule(s) {
			waiting = true
			break
		}
		s.mu.Lock()
		s.running++
		s.mu.Unlock()
		room--
	}
	if room == 0 {
		waiting = true // there may be more than the allowance took
	}
	s.mu.Lock()
	s.granting = false
	s.refused = s.refused || waiting
	waiting = s.refused
	s.grantingDone.Broadcast()
	s.mu.Unlock()
	return waiting
}
