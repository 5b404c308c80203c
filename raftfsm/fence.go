package raftfsm

import (
	"encoding/binary"

	"github.com/timemachine-db/timemachine/storage"
)

// Collection fences (DESIGN.md, "Collection fences"). Deleting a
// collection marks it deleting in the meta group, purges it from every
// slot, then forgets it. A node decides whether a collection is live from
// its own copy of the meta state, which may trail the deletion: a create
// it accepted could reach a slot after that slot's purge, answer 201 and
// outlive the DELETE — hidden while the name is gone, back and firing
// once a collection of that name is made again. So the purge leaves a
// fence in the slot (storage.FenceKey: the deleted incarnation plus one),
// and a Create, Upsert or PutSchedule whose collection incarnation
// (CollInc, model.Collection.Incarnation) is below it is Rejected. A
// collection made again has a later incarnation (its meta log index) and
// passes. The fence is slot state like any other: replicas decide alike,
// and snapshots carry it.

// fenced reports whether writes of collection coll at incarnation inc are
// fenced off in this slot.
func (s *applyState) fenced(coll string, inc uint64) (bool, error) {
	f, err := s.fence(coll)
	return inc < f, err
}

// fence is coll's fence in this slot (0: none), from the cache or read
// through the batch (which sees this entry's own writes).
func (s *applyState) fence(coll string) (uint64, error) {
	if v, ok := s.f.fences[coll]; ok {
		return v, nil
	}
	raw, found, err := s.b.Get(storage.FenceKey(s.f.slot, coll))
	if err != nil {
		return 0, err
	}
	var v uint64
	if found {
		v, _ = binary.Uvarint(raw)
	}
	if s.f.fences == nil {
		s.f.fences = map[string]uint64{}
	}
	s.f.fences[coll] = v
	return v, nil
}

// raiseFence sets coll's fence to at least fence (0: leave it).
func (s *applyState) raiseFence(coll string, fence uint64) error {
	if fence == 0 {
		return nil
	}
	cur, err := s.fence(coll)
	if err != nil || fence <= cur {
		return err
	}
	if err := s.b.Set(storage.FenceKey(s.f.slot, coll), binary.AppendUvarint(nil, fence)); err != nil {
		return err
	}
	s.f.fences[coll] = fence
	return nil
}
