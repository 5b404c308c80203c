package raftfsm

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/storage"
)

// The fired-record cache (DESIGN.md, "The fired-record cache"): the slot
// leader reads each job's record to fire it, and the outcome it commits
// reads the same record again in ApplyBatch — a second Pebble seek through
// every level, ~2 µs a job. The leader's read is handed to the apply
// instead, under rules (generations, offers checked against the keys
// written since, epochs, restores) that keep a cached record equal to the
// committed one. In test binaries every hit is checked against a read.
const (
	firedWindow      = 64
	firedBudgetBytes = 64 << 20
)

// firedBytes is what every slot's cache holds, against firedBudgetBytes.
var firedBytes atomic.Int64

// verifyFired makes every cache hit read the record too and compare.
var verifyFired = testing.Testing()

type firedCache struct {
	mu        sync.Mutex
	active    bool
	restoring bool
	// epoch counts resets: a batch that started in another epoch than
	// the one it commits in may have written keys it did not track.
	epoch uint64
	gen   uint64
	floor uint64            // offers read before it are refused
	m     map[string][]byte // record key → the committed record
	bytes int64
	// written[g%firedWindow] is the set of record keys generation g
	// wrote (the batch's own touched set), kept only while a read is in
	// flight (reading > 0) and for at most firedWindow generations: only
	// a read that began before generation g needs it.
	written     [firedWindow]map[string]struct{}
	writtenKept bool
	reading     int
	// held is len(m), for the apply path to skip the lock when empty.
	held atomic.Int64

	hits atomic.Uint64 // outcomes' reads served (tests read it)
}

// beginRead is called before a read whose records may be offered: it
// returns the generation the read will see at least, and whether to
// offer at all. A read that began must end with offer.
func (c *firedCache) beginRead() (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.active || c.restoring {
		return 0, false
	}
	c.reading++
	return c.gen, true
}

// firedRead is one record a reader offers: key and value as read.
type firedRead struct{ key, val []byte }

// offer ends a read begun at generation g (beginRead) and caches its
// records: each one that no generation since g wrote.
func (c *firedCache) offer(g uint64, reads []firedRead) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reading--
	if !c.active || c.restoring || g < c.floor || c.gen-g >= firedWindow {
		return
	}
next:
	for _, r := range reads {
		for x := g + 1; x <= c.gen; x++ {
			if _, ok := c.written[x%firedWindow][string(r.key)]; ok {
				continue next
			}
		}
		if _, ok := c.m[string(r.key)]; ok {
			continue
		}
		n := int64(len(r.key) + len(r.val))
		if firedBytes.Add(n) > firedBudgetBytes {
			firedBytes.Add(-n)
			return
		}
		c.bytes += n
		c.m[string(r.key)] = r.val
		c.held.Add(1)
	}
}

// mayHold reports whether the cache may hold a record (the apply path
// asks before it takes).
func (c *firedCache) mayHold() bool { return c.held.Load() > 0 }

// take returns and forgets the cached record of key. Only the apply path
// calls it, for keys its batch has not written.
func (c *firedCache) take(key []byte) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[string(key)]
	if ok {
		c.forgetLocked(string(key), v)
		c.hits.Add(1)
	}
	return v, ok
}

func (c *firedCache) forgetLocked(k string, v []byte) {
	delete(c.m, k)
	c.held.Add(-1)
	n := int64(len(k) + len(v))
	c.bytes -= n
	firedBytes.Add(-n)
}

// epochNow is taken when a batch starts: whether the cache is on, and in
// which epoch.
func (c *firedCache) epochNow() (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch, c.active
}

// committed records a batch, started in epoch, that wrote the record keys
// in written and is now committed; the cache keeps the set. A batch that
// started in another epoch (the cache was turned on or reset meanwhile)
// resets the cache. born are records the batch created and that are about
// to be fired (a schedule's occurrences), with their committed values: on
// every replica, leader or not, they are cached for their outcome's apply
// (DESIGN.md, "Born records").
func (c *firedCache) committed(epoch uint64, written map[string]struct{}, born map[string][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.bearLocked(born)
	if epoch != c.epoch {
		c.resetLocked()
		return
	}
	if !c.active {
		// Not the leader's: nothing is offered, but born records of
		// earlier batches may be held.
		for k := range written {
			if v, ok := c.m[k]; ok {
				c.forgetLocked(k, v)
			}
		}
		return
	}
	if len(written) == 0 {
		return
	}
	c.gen++
	switch {
	case c.reading > 0:
		c.written[c.gen%firedWindow] = written
		c.writtenKept = true
	case c.writtenKept: // no read in flight needs them
		c.written = [firedWindow]map[string]struct{}{}
		c.writtenKept = false
	}
	if len(c.m) == 0 {
		return
	}
	for k := range written {
		if v, ok := c.m[k]; ok {
			c.forgetLocked(k, v)
		}
	}
}

// bearLocked caches the records a committed batch created (committed).
func (c *firedCache) bearLocked(born map[string][]byte) {
	if c.restoring || len(born) == 0 {
		return
	}
	if c.m == nil {
		c.m = map[string][]byte{}
	}
	for k, v := range born {
		if old, ok := c.m[k]; ok {
			c.forgetLocked(k, old)
		}
		n := int64(len(k) + len(v))
		// Born records wait on every replica, some of them long (behind
		// a rate-limited route, in a slot without a leader): they may
		// fill only half the budget, so the leaders' offers always have
		// the other half.
		if firedBytes.Add(n) > firedBudgetBytes/2 {
			firedBytes.Add(-n)
			return
		}
		c.bytes += n
		c.m[k] = v
		c.held.Add(1)
	}
}

// setActive starts (a leader's term) or ends caching. Either way nothing
// read before is offered any more.
func (c *firedCache) setActive(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resetLocked()
	c.active = on
}

// setRestoring refuses offers while a snapshot restore writes records
// outside ApplyBatch, and forgets everything once it is done.
func (c *firedCache) setRestoring(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resetLocked()
	c.restoring = on
}

func (c *firedCache) resetLocked() {
	for k, v := range c.m {
		c.forgetLocked(k, v)
	}
	c.m = map[string][]byte{}
	c.written = [firedWindow]map[string]struct{}{}
	c.writtenKept = false
	c.gen += firedWindow
	c.floor = c.gen
	c.epoch++
}

// CacheFired starts or stops handing the records this replica reads to
// fire (ReadJobsToFire) to the outcomes' apply: the slot leader turns it
// on for its term and off when the term ends.
func (f *SlotFSM) CacheFired(on bool) { f.fired.setActive(on) }

// ReadJobsToFire is GetJobs for the slot leader's dispatch: the records it
// reads are also offered to the fired-record cache.
func (f *SlotFSM) ReadJobsToFire(refs []storage.DueEntry) ([]*model.Job, error) {
	g, on := f.fired.beginRead()
	if !on {
		return GetJobs(f.db, f.slot, refs)
	}
	var reads []firedRead
	jobs, err := getJobs(f.db, f.slot, refs, func(key, val []byte, j *model.Job) {
		if j.Status == model.StatusScheduled { // only these have an outcome to come
			reads = append(reads, firedRead{bytes.Clone(key), bytes.Clone(val)})
		}
	})
	if err != nil {
		reads = nil
	}
	f.fired.offer(g, reads)
	return jobs, err
}

// firedRecord is the apply path's read of a record its batch has not
// written: from the cache when the leader read it to fire it.
func (s *applyState) firedRecord(key []byte, coll, id string) (*model.Job, bool, error) {
	v, ok := s.f.fired.take(key)
	if !ok {
		return nil, false, nil
	}
	if verifyFired {
		got, found, err := s.b.Get(key)
		if err != nil || !found || !bytes.Equal(got, v) {
			panic(fmt.Sprintf("raftfsm: fired-record cache of slot %d holds a record of %s/%s that is not the committed one (found %v, err %v)", s.f.slot, coll, id, found, err))
		}
	}
	j := &model.Job{Collection: coll, ID: id}
	if err := DecodeRecord(v, j); err != nil {
		return nil, false, fmt.Errorf("slot %d job %s/%s: %w", s.f.slot, coll, id, err)
	}
	return j, true, nil
}
