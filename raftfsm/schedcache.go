package raftfsm

import (
	"bytes"
	"fmt"
	"sync/atomic"

	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/storage"
)

// The schedule-record cache: every advance of a schedule (each occurrence,
// on every replica) reads its record, a Pebble seek through the memtable
// and every level — about a tenth of the apply of an every-second
// schedule. The apply path keeps the records it read or wrote, as the
// bytes stored, per slot (SlotFSM.schedRecs):
//
//   - only ApplyBatch fills it and reads it, on raft's FSM goroutine, and
//     every schedule record write goes through putSchedule, which stores
//     the bytes it writes, or deleteScheduleCmd, which drops them; so an
//     entry is always the record the batch (and after its commit,
//     storage) holds;
//   - a restore (the same goroutine) empties it and keeps nothing while
//     it runs: it commits in parts, and a failed one may leave some of
//     what it wrote uncommitted;
//   - nothing is evicted: the first schedules read keep their place
//     until deleted, and past the budget the others are read from
//     storage;
//   - a read decodes the cached bytes, so a hit answers exactly what a
//     read of storage would (in test binaries each hit is also read from
//     storage and compared).
//
// The process keeps at most schedRecBudget bytes in all slots' caches;
// past it records are read from storage as before.
const schedRecBudget = 32 << 20

var schedRecBytes atomic.Int64

// verifySchedRecs makes every hit read the record too and compare.
var verifySchedRecs = verifyFired

// getSchedule reads a schedule record through the batch, from the cache
// when it holds it.
func (s *applyState) getSchedule(coll, id string) (*model.Schedule, bool, error) {
	k := schedKey{coll, id}
	v, ok := s.f.schedRecs[k]
	if ok && verifySchedRecs {
		got, found, err := s.b.Get(storage.ScheduleKey(nil, s.f.slot, coll, id))
		if err != nil || !found || !bytes.Equal(got, v) {
			panic(fmt.Sprintf("raftfsm: schedule-record cache of slot %d holds a record of %s/%s that is not the stored one (found %v, err %v)", s.f.slot, coll, id, found, err))
		}
	}
	if !ok {
		var err error
		if v, ok, err = s.b.Get(storage.ScheduleKey(nil, s.f.slot, coll, id)); err != nil || !ok {
			return nil, false, err
		}
		v = bytes.Clone(v)
		s.f.keepSchedRec(k, v)
	}
	sc := &model.Schedule{Collection: coll, ID: id}
	if err := DecodeScheduleRecord(v, sc); err != nil {
		return nil, false, fmt.Errorf("slot %d schedule %s/%s: %w", s.f.slot, coll, id, err)
	}
	return sc, true, nil
}

// keepSchedRec caches (or replaces) the stored bytes of a schedule, within
// the budget.
func (f *SlotFSM) keepSchedRec(k schedKey, v []byte) {
	if f.noSchedRecs || f.restoringRecs {
		return
	}
	old, had := f.schedRecs[k]
	n := int64(len(v) - len(old))
	if !had {
		n += int64(len(k.coll) + len(k.sched))
	}
	if schedRecBytes.Add(n) > schedRecBudget {
		schedRecBytes.Add(-n)
		f.dropSchedRec(k)
		return
	}
	if f.schedRecs == nil {
		f.schedRecs = make(map[schedKey][]byte)
	}
	f.schedRecs[k] = v
}

// dropSchedRec forgets a schedule's bytes.
func (f *SlotFSM) dropSchedRec(k schedKey) {
	if v, ok := f.schedRecs[k]; ok {
		delete(f.schedRecs, k)
		schedRecBytes.Add(-int64(len(v) + len(k.coll) + len(k.sched)))
	}
}

// Release returns the memory the replica's caches hold to the process's
// budgets (the fired-record cache's and this one's): the replica is
// closed and applies nothing more.
func (f *SlotFSM) Release() {
	f.fired.setActive(false)
	f.clearSchedRecs()
}

// clearSchedRecs empties the slot's cache (a restore).
func (f *SlotFSM) clearSchedRecs() {
	for k := range f.schedRecs {
		f.dropSchedRec(k)
	}
	f.schedRecs = nil
}
