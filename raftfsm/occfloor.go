package raftfsm

import (
	"bytes"
	"fmt"

	"github.com/timemachine-db/timemachine/storage"
)

// Occurrence floors: a schedule's advance (schedule.go) creates the job
// "{schedule}@{ms}" unless a job of that id exists already — an occurrence
// an earlier version of the schedule created ahead (a replacing PUT may
// fire at that very time), one of a deleted schedule of the same id, or a
// job a user created under that id. Looking it up was a full Pebble read
// per occurrence on every replica, the largest single item of 10,000
// every-second schedules on three nodes (docs/benchmarks.md, issue 11 c),
// and it almost never finds anything.
//
// occFloors keeps, per schedule that advanced since the replica opened,
// a bound on the occurrence times whose job ids exist in the slot: no
// record "{schedule}@{t}" with a canonical 13-digit t (every time from
// 2001-09-09 to 2286-11-20) exists for t above it. An advance to a later
// time skips the lookup; any other time (at or below the floor, or
// outside the 13 digits) reads as before.
//
//   - The floor of a schedule is computed from storage the first time one
//     of its advances needs it (a backward seek over the record keys
//     "{schedule}@1000000000000" to "{schedule}@9999999999999"), through
//     the apply's batch, so it sees the batch's own writes.
//   - Every record write (putJob) of a canonical occurrence id raises the
//     floor of its schedule when the schedule has one; deletes leave it
//     (a floor too high only costs a lookup).
//   - A schedule's delete drops its entry, a restore drops them all: the
//     next advance computes it again.
//
// It only decides whether to read, never what a read would find, so
// replicas stay identical whatever their floors (like tombMax). Only
// ApplyBatch and Restore touch it, both on raft's FSM goroutine.

// maxOccFloors bounds the floors one slot keeps (about 100 bytes each);
// past it an advance of a schedule without one looks its occurrence up.
const maxOccFloors = 1 << 16

// Canonical occurrence times have 13 digits.
const (
	occMinMs = 1_000_000_000_000
	occMaxMs = 9_999_999_999_999
)

// canonicalOccurrence splits an id shaped like "{schedule}@{t}" with t the
// canonical 13-digit decimal (model.OccurrenceID's form for those times).
func canonicalOccurrence(id string) (sched string, t int64, ok bool) {
	i := len(id) - 14
	if i <= 0 || id[i] != '@' || id[i+1] == '0' {
		return "", 0, false
	}
	for _, c := range []byte(id[i+1:]) {
		if c < '0' || c > '9' {
			return "", 0, false
		}
		t = t*10 + int64(c-'0')
	}
	return id[:i], t, true
}

// occurrenceAbsent reports whether the job "{sched}@{t}" cannot exist in
// the slot, so that the advance need not look it up.
func (s *applyState) occurrenceAbsent(coll, sched string, t int64) (bool, error) {
	if t < occMinMs || t > occMaxMs || sched == "" || s.f.noOccFloors {
		return false, nil
	}
	k := schedKey{coll, sched}
	floor, ok := s.f.occFloors[k]
	if !ok {
		if len(s.f.occFloors) >= maxOccFloors {
			return false, nil
		}
		var err error
		if floor, err = s.occFloor(coll, sched); err != nil {
			return false, err
		}
		if s.f.occFloors == nil {
			s.f.occFloors = make(map[schedKey]int64)
		}
		s.f.occFloors[k] = floor
	}
	return t > floor, nil
}

// occFloor reads the latest canonical occurrence time of sched whose job
// id exists in the slot (0: none).
func (s *applyState) occFloor(coll, sched string) (int64, error) {
	slot := s.f.slot
	prefix := storage.RecordKey(nil, slot, coll, "")
	lower := append(append(bytes.Clone(prefix), sched...), fmt.Sprintf("@%d", int64(occMinMs))...)
	upper := append(append(append(bytes.Clone(prefix), sched...), fmt.Sprintf("@%d", int64(occMaxMs))...), 0)
	it, err := s.b.NewIter(lower, upper)
	if err != nil {
		return 0, fmt.Errorf("slot %d: read the occurrences of schedule %s/%s: %w", slot, coll, sched, err)
	}
	floor := int64(0)
	for ok := it.Last(); ok; ok = it.Prev() {
		if sc, t, ok := canonicalOccurrence(string(it.Key()[len(prefix):])); ok && sc == sched {
			floor = t
			break
		}
	}
	if err := it.Close(); err != nil {
		return 0, fmt.Errorf("slot %d: read the occurrences of schedule %s/%s: %w", slot, coll, sched, err)
	}
	return floor, nil
}

// noteRecord raises the floor of the schedule whose occurrence id a record
// write names (putJob).
func (s *applyState) noteRecord(coll, id string) {
	if len(s.f.occFloors) == 0 {
		return
	}
	sched, t, ok := canonicalOccurrence(id)
	if !ok {
		return
	}
	k := schedKey{coll, sched}
	if floor, ok := s.f.occFloors[k]; ok && t > floor {
		s.f.occFloors[k] = t
	}
}
