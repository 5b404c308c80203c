package storage

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/timemachine-db/timemachine/internal/testutil"
)

// fakeCompactDB is a DB with an allowance and a number of compactions it
// wants to run.
type fakeCompactDB struct {
	mu      sync.Mutex
	allowed int
	want    int
	granted int
	polls   int // GetWaitingCompaction calls
}

func (d *fakeCompactDB) GetAllowedWithoutPermission() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.allowed
}

func (d *fakeCompactDB) GetWaitingCompaction() (bool, pebble.WaitingCompaction) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.polls++
	return d.want > 0, pebble.WaitingCompaction{}
}

func (d *fakeCompactDB) Schedule(pebble.CompactionGrantHandle) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.want == 0 {
		return false
	}
	d.want--
	d.granted++
	return true
}

func (d *fakeCompactDB) get(f func(d *fakeCompactDB) int) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return f(d)
}

// The scheduler grants up to the DB's allowance; a refused compaction is
// granted when a running one is done, or by the periodic granter once the
// allowance grows; and with nothing waiting the granter does not tick.
func TestQuietScheduler(t *testing.T) {
	db := &fakeCompactDB{allowed: 1}
	s := newQuietScheduler()
	s.every = 5 * time.Millisecond
	s.Register(1, db)
	defer s.Unregister()

	// Idle: nothing is polled however long it runs (Pebble's ticks).
	time.Sleep(50 * time.Millisecond) // ten ticks' worth of Pebble's granter, scaled
	if n := db.get(func(d *fakeCompactDB) int { return d.polls }); n != 0 {
		t.Fatalf("an idle scheduler polled the DB %d times", n)
	}

	ok, h := s.TrySchedule()
	if !ok {
		t.Fatal("the first compaction was refused with an allowance of 1")
	}
	if ok, _ := s.TrySchedule(); ok {
		t.Fatal("a second compaction was granted beyond the allowance")
	}
	db.mu.Lock()
	db.want = 1 // the refused one waits in the DB
	db.mu.Unlock()
	h.Done()
	testutil.Eventually(t, 5*time.Second, "the waiting compaction granted on Done", func() error {
		if g := db.get(func(d *fakeCompactDB) int { return d.granted }); g != 1 {
			return fmt.Errorf("%d granted", g)
		}
		return nil
	})

	// Full again (the granted one runs); two more wait and are refused.
	db.mu.Lock()
	db.want = 2
	db.mu.Unlock()
	if ok, _ := s.TrySchedule(); ok {
		t.Fatal("granted beyond the allowance")
	}
	// The allowance grows without a Done or an update: the periodic
	// granter, running while something waits, grants both.
	db.mu.Lock()
	db.allowed = 3
	db.mu.Unlock()
	testutil.Eventually(t, 5*time.Second, "the waiting compactions granted by the granter", func() error {
		if g := db.get(func(d *fakeCompactDB) int { return d.granted }); g != 3 {
			return fmt.Errorf("%d granted", g)
		}
		return nil
	})
	// Nothing waits any more: the ticks stop.
	testutil.Eventually(t, 5*time.Second, "the granter stopped", func() error {
		a := db.get(func(d *fakeCompactDB) int { return d.polls })
		time.Sleep(30 * time.Millisecond)
		if b := db.get(func(d *fakeCompactDB) int { return d.polls }); b != a {
			return fmt.Errorf("%d polls in 30 ms", b-a)
		}
		return nil
	})
}
