package raftfsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"

	"github.com/hashicorp/raft"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/storage"
)

// Observer hears about state changes the slot-leader's scheduler cares about.
// Calls come from raft's FSM goroutine after the change is committed to
// storage, on every replica; they must not block.
type Observer interface {
	// Scheduled reports a due entry written at due for a job.
	Scheduled(due int64, coll, id string)
	// Reset reports that a snapshot restore replaced the whole state.
	Reset()
}

// ScheduleObserver, when the Observer also implements it, hears that
// schedule due entries were written, the earliest at earliest (the
// leader's schedule loop looks again, from there).
type ScheduleObserver interface {
	SchedulesChanged(earliest int64)
}

// ApplyObserver, when the Observer also implements it, hears after every
// batch that applied entries (AppliedBytes grew): the replica's snapshot
// loop sleeps until then while idle.
type ApplyObserver interface {
	Applied()
}

// ErrStopped is returned for every command after a storage failure stopped
// the replica.
var ErrStopped = errors.New("slot state machine stopped after a storage failure")

// NoOffset is the offset of a slot with no due entries.
const NoOffset = math.MaxInt64

// SlotFSM is the state machine of one slot replica. Its state lives in the
// node's Pebble under the slot's key span; the applied index is written in
// the same batch as the data it describes, so after a crash the state and
// the index agree and raft's replay of older entries is skipped.
type SlotFSM struct {
	slot    int
	db      *storage.DB
	log     *slog.Logger
	obs     atomic.Pointer[observerBox]
	onFatal func(error)

	applied atomic.Uint64
	offset  atomic.Int64
	pending atomic.Int64
	stopped atomic.Bool
	// offsetCurrent: the latest command applied was an offset advance
	// (OffsetCurrent). Raft's own entries (configurations, no-ops,
	// barriers) do not change it.
	offsetCurrent atomic.Bool
	// appliedBytes counts command bytes applied since the process started,
	// so the replica can snapshot by log volume, not just entry count.
	appliedBytes atomic.Uint64
	// tombMax bounds the created stamps of the slot's tombstones: no
	// tombstone with a larger stamp exists (math.MinInt64: none at all). A
	// create stamped after it cannot be the re-send of a deleted
	// incarnation, so its tombstone lookup — a full Pebble Get, ~8 µs on
	// the benchmark machine, as much as the id lookup — is skipped. Raised
	// by every delete before its tombstone is written, recomputed from
	// storage on open and after a restore (math.MaxInt64 while one runs),
	// never lowered otherwise (dropped tombstones leave it high, which only
	// costs lookups). It only decides whether to read, never what a read
	// would say, so replicas stay identical whatever its value.
	tombMax atomic.Int64

	// fired hands the leader's reads of the records it fires to the
	// apply of their outcomes (fired.go).
	fired firedCache

	// occFloors spare a schedule's advance the lookup of its new
	// occurrence's id (occfloor.go); noOccFloors turns them off (tests
	// compare against it).
	occFloors   map[schedKey]int64
	noOccFloors bool
	// schedRecs: the schedule records the apply path read or wrote, as
	// stored (schedcache.go); noSchedRecs turns it off, noBorn the born
	// records (fired.go; both for tests that compare against a replica
	// without them).
	schedRecs   map[schedKey][]byte
	noSchedRecs bool
	noBorn      bool
	// restoringRecs: a restore runs; it keeps no schedule record.
	restoringRecs bool
	// fences caches each collection's fence as stored (0: none), read on
	// first use; only the apply goroutine touches it, and a restore
	// clears it (fence.go).
	fences map[string]uint64

	restoring bool
}

// schedKey names a schedule within a slot (occFloors, schedRecs).
type schedKey struct{ coll, sched string }

type observerBox struct{ o Observer }

// OpenSlotFSM loads a slot replica's state machine from storage. onFatal is
// called once if a storage write fails; the replica must then stop.
func OpenSlotFSM(db *storage.DB, slot int, log *slog.Logger, onFatal func(error)) (*SlotFSM, error) {
	if log == nil {
		log = slog.Default()
	}
	f := &SlotFSM{slot: slot, db: db, log: log, onFatal: onFatal}
	applied, offset, pending, restoring, err := readSlotMeta(db, slot)
	if err != nil {
		return nil, err
	}
	f.applied.Store(applied)
	// Whatever came before is not known: one advance is due, unless
	// nothing was ever applied.
	f.offsetCurrent.Store(applied == 0)
	f.offset.Store(offset)
	f.pending.Store(pending)
	f.restoring = restoring
	tm, err := lastTombstone(db, slot)
	if err != nil {
		return nil, err
	}
	f.tombMax.Store(tm)
	return f, nil
}

// lastTombstone returns the largest created stamp among the slot's
// tombstones, math.MinInt64 when it has none.
func lastTombstone(r storage.Reader, slot int) (int64, error) {
	lower, upper := storage.TombSpan(slot)
	it, err := r.NewIter(lower, upper)
	if err != nil {
		return 0, fmt.Errorf("slot %d: read tombstones: %w", slot, err)
	}
	last := int64(math.MinInt64)
	if it.Last() {
		k := it.Key()
		if len(k) < len(lower)+8 {
			_ = it.Close()
			return 0, fmt.Errorf("slot %d: %w: short tombstone key", slot, ErrCorrupt)
		}
		last = storage.DecodeTime(k[len(lower):])
	}
	if err := it.Close(); err != nil {
		return 0, fmt.Errorf("slot %d: read tombstones: %w", slot, err)
	}
	return last, nil
}

func readSlotMeta(r storage.Reader, slot int) (applied uint64, offset, pending int64, restoring bool, err error) {
	offset = NoOffset
	if v, ok, err := r.Get(storage.MetaKey(slot, storage.MetaApplied)); err != nil {
		return 0, 0, 0, false, fmt.Errorf("slot %d: read applied index: %w", slot, err)
	} else if ok {
		if len(v) != 8 {
			return 0, 0, 0, false, fmt.Errorf("slot %d: %w: applied index", slot, ErrCorrupt)
		}
		applied = binary.BigEndian.Uint64(v)
	}
	if v, ok, err := r.Get(storage.MetaKey(slot, storage.MetaOffset)); err != nil {
		return 0, 0, 0, false, fmt.Errorf("slot %d: read offset: %w", slot, err)
	} else if ok {
		if len(v) != 8 {
			return 0, 0, 0, false, fmt.Errorf("slot %d: %w: offset", slot, ErrCorrupt)
		}
		offset = storage.DecodeTime(v)
	}
	if v, ok, err := r.Get(storage.MetaKey(slot, storage.MetaPending)); err != nil {
		return 0, 0, 0, false, fmt.Errorf("slot %d: read pending: %w", slot, err)
	} else if ok {
		n, k := binary.Varint(v)
		if k <= 0 {
			return 0, 0, 0, false, fmt.Errorf("slot %d: %w: pending count", slot, ErrCorrupt)
		}
		pending = n
	}
	_, restoring, err = r.Get(storage.MetaKey(slot, storage.MetaRestoring))
	if err != nil {
		return 0, 0, 0, false, fmt.Errorf("slot %d: read restore marker: %w", slot, err)
	}
	return applied, offset, pending, restoring, nil
}

// SetObserver installs the observer (the slot's scheduler).
func (f *SlotFSM) SetObserver(o Observer) { f.obs.Store(&observerBox{o}) }

// Slot is the slot number.
func (f *SlotFSM) Slot() int { return f.slot }

// Applied is the last applied raft index.
func (f *SlotFSM) Applied() uint64 { return f.applied.Load() }

// Offset is the scan offset: no due entry is earlier.
func (f *SlotFSM) Offset() int64 { return f.offset.Load() }

// OffsetCurrent reports that no command was applied since the latest
// offset advance (on a replica that opened with nothing applied, none
// since it opened): a new advance could only restate the clock, since no
// due entry was written or removed below it.
func (f *SlotFSM) OffsetCurrent() bool { return f.offsetCurrent.Load() }

// AppliedBytes is the number of command bytes applied since open.
func (f *SlotFSM) AppliedBytes() uint64 { return f.appliedBytes.Load() }

// Pending is the number of scheduled jobs.
func (f *SlotFSM) Pending() int64 { return f.pending.Load() }

// NeedsRestore reports that a restore was interrupted: the state is partial
// and must be restored again before the replica serves.
func (f *SlotFSM) NeedsRestore() bool { return f.restoring }

// Apply implements raft.FSM.
func (f *SlotFSM) Apply(l *raft.Log) interface{} { return f.ApplyBatch([]*raft.Log{l})[0] }

// applyState is the working state of one ApplyBatch.
type applyState struct {
	f       *SlotFSM
	b       *storage.Batch
	offset  int64
	pending int64
	notes   []storage.DueEntry
	kb      []byte // key scratch
	vb      []byte // value scratch

	// exists reads records for the whole batch: one iterator with
	// bloom-filtered prefix seeks is several times cheaper than a Get per
	// job (creates look up ids that are almost always new; acks look up the
	// job they finish). Records the batch wrote are tracked in touched and
	// read through the batch with a Get.
	exists  *storage.Iter
	touched map[string]struct{}
	// born: records this batch created that are about to fire, with
	// their latest value in the batch (fired.go committed).
	born map[string][]byte

	// firedOn: the fired-record cache was on when the batch started, in
	// epoch firedEpoch (fired.go).
	firedOn    bool
	firedEpoch uint64

	// schedNotes is set when a schedule due entry was written, the
	// earliest at schedMin: the leader's schedule loop looks again.
	schedNotes bool
	schedMin   int64

	offsetCurrent bool // SlotFSM.offsetCurrent as of the command applied last
}

// ApplyBatch implements raft.BatchingFSM: every entry of the batch goes into
// one Pebble batch, committed without sync together with the new applied
// index.
func (f *SlotFSM) ApplyBatch(logs []*raft.Log) []interface{} {
	res := make([]interface{}, len(logs))
	if f.stopped.Load() {
		for i := range res {
			res[i] = ErrStopped
		}
		return res
	}
	s := &applyState{f: f, b: f.db.NewIndexedBatch(), offset: f.offset.Load(), pending: f.pending.Load(), offsetCurrent: f.offsetCurrent.Load()}
	s.firedEpoch, s.firedOn = f.fired.epochNow()
	defer s.b.Close()
	defer s.closeExists()
	applied := f.applied.Load()
	last := applied
	for i, l := range logs {
		if l.Index <= applied {
			continue // already in storage: raft replays after a restart
		}
		last = l.Index
		f.appliedBytes.Add(uint64(len(l.Data)))
		if l.Type != raft.LogCommand {
			continue
		}
		cmds, err := Decode(l.Data)
		if errors.Is(err, ErrNewerCommand) {
			f.fail(newerCommand(fmt.Sprintf("slot %d", f.slot), l.Index, err))
			for k := range res {
				res[k] = ErrStopped
			}
			return res
		}
		if err != nil {
			// Every replica rejects the same bytes the same way.
			f.log.Error("rejecting undecodable command", "slot", f.slot, "index", l.Index, "error", err)
			res[i] = err
			continue
		}
		out := make([]model.Result, len(cmds))
		for j, c := range cmds {
			_, s.offsetCurrent = c.(*AdvanceOffset)
			r, err := s.apply(c)
			if err != nil {
				f.fail(fmt.Errorf("slot %d: apply index %d: %w", f.slot, l.Index, err))
				for k := range res {
					res[k] = ErrStopped
				}
				return res
			}
			out[j] = r
		}
		res[i] = out
	}
	if last == applied {
		return res
	}
	if err := s.writeMeta(last); err == nil {
		err = s.b.Commit(false)
		if err != nil {
			f.fail(fmt.Errorf("slot %d: commit index %d: %w", f.slot, last, err))
			for k := range res {
				res[k] = ErrStopped
			}
			return res
		}
	} else {
		f.fail(err)
		for k := range res {
			res[k] = ErrStopped
		}
		return res
	}
	f.fired.committed(s.firedEpoch, s.touched, s.born)
	f.offsetCurrent.Store(s.offsetCurrent)
	f.applied.Store(last)
	f.offset.Store(s.offset)
	f.pending.Store(s.pending)
	if box := f.obs.Load(); box != nil {
		for _, n := range s.notes {
			box.o.Scheduled(n.Due, n.Coll, n.ID)
		}
		if so, ok := box.o.(ScheduleObserver); ok && s.schedNotes {
			so.SchedulesChanged(s.schedMin)
		}
		if ao, ok := box.o.(ApplyObserver); ok {
			ao.Applied()
		}
	}
	return res
}

func (f *SlotFSM) fail(err error) {
	if f.stopped.Swap(true) {
		return
	}
	if errors.Is(err, ErrNewerCommand) {
		f.log.Error("slot replica stopped", "slot", f.slot, "error", err)
	} else {
		f.log.Error("slot replica stopped: storage write failed; free disk space or fix the disk, then restart the node (nothing acknowledged is lost: the raft log replays on restart)",
			"slot", f.slot, "error", err)
	}
	if f.onFatal != nil {
		f.onFatal(err)
	}
}

func (s *applyState) writeMeta(applied uint64) error {
	slot := s.f.slot
	if err := s.b.Set(storage.MetaKey(slot, storage.MetaApplied), binary.BigEndian.AppendUint64(nil, applied)); err != nil {
		return err
	}
	if err := s.b.Set(storage.MetaKey(slot, storage.MetaOffset), storage.EncodeTime(nil, s.offset)); err != nil {
		return err
	}
	return s.b.Set(storage.MetaKey(slot, storage.MetaPending), binary.AppendVarint(nil, s.pending))
}

func (s *applyState) apply(c Command) (model.Result, error) {
	switch c := c.(type) {
	case *Create:
		return s.create(c)
	case *Upsert:
		return s.upsert(c)
	case *Delete:
		return s.delete(c)
	case *DeleteIncarnation:
		return s.deleteIncarnation(c)
	case *DropTombstones:
		return s.dropTombstones(c)
	case *Ack:
		return s.ack(c)
	case *AckMany:
		return s.ackMany(c)
	case *Retry:
		return s.retry(c)
	case *Reschedule:
		return s.reschedule(c)
	case *AdvanceOffset:
		return s.advanceOffset(c)
	case *DropDue:
		return s.dropDue(c)
	case *RemoveFinished:
		return s.removeFinished(c)
	case *PurgeCollection:
		return s.purgeCollection(c)
	case *PutSchedule:
		return s.putScheduleCmd(c)
	case *DeleteSchedule:
		return s.deleteScheduleCmd(c)
	case *ScheduleAdvance:
		return s.advance(c)
	case *Redrive:
		return s.redrive(c)
	}
	return model.Result{Code: model.CodeRejected}, nil
}

// getJob reads a job as of everything applied so far in this batch.
func (s *applyState) getJob(coll, id string) (*model.Job, bool, error) {
	key := storage.RecordKey(nil, s.f.slot, coll, id)
	if _, ok := s.touched[string(key)]; ok {
		return GetJob(s.b, s.f.slot, coll, id)
	}
	if s.firedOn || s.f.fired.mayHold() {
		if j, ok, err := s.firedRecord(key, coll, id); ok || err != nil {
			return j, ok, err
		}
	}
	if s.exists == nil {
		lo, hi := storage.RecordSpan(s.f.slot)
		it, err := s.b.NewIter(lo, hi)
		if err != nil {
			return nil, false, err
		}
		s.exists = it
	}
	if !s.exists.SeekPrefixGE(key) || !bytes.Equal(s.exists.Key(), key) {
		return nil, false, nil
	}
	j := &model.Job{Collection: coll, ID: id}
	if err := DecodeRecord(s.exists.Value(), j); err != nil {
		return nil, false, fmt.Errorf("slot %d job %s/%s: %w", s.f.slot, coll, id, err)
	}
	return j, true, nil
}

func newJob(coll, id string, spec *model.JobSpec, now int64) *model.Job {
	return &model.Job{
		Collection:        coll,
		ID:                id,
		Version:           1,
		Status:            model.StatusScheduled,
		TriggerTime:       spec.TriggerTime,
		DueTime:           spec.TriggerTime,
		CreatedAt:         now,
		UpdatedAt:         now,
		CallbackURL:       spec.CallbackURL,
		Route:             spec.Route,
		Meta:              spec.Meta,
		Retry:             spec.Retry,
		CallbackTimeoutMs: spec.CallbackTimeoutMs,
		SpecHash:          spec.Hash,
	}
}

// touch notes a record key the batch wrote: later reads of it go through
// the batch, and the fired-record cache forgets it at commit.
func (s *applyState) touch(key []byte) {
	if s.touched == nil {
		s.touched = make(map[string]struct{})
	}
	s.touched[string(key)] = struct{}{}
}

func (s *applyState) closeExists() {
	if s.exists != nil {
		_ = s.exists.Close()
	}
}

func (s *applyState) create(c *Create) (model.Result, error) {
	if shut, err := s.fenced(c.Coll, c.CollInc); shut || err != nil {
		return model.Result{Code: model.CodeRejected}, err
	}
	old, found, err := s.getJob(c.Coll, c.ID)
	if err != nil {
		return model.Result{}, err
	}
	if found {
		if old.SpecHash == c.Spec.Hash {
			return model.Result{Code: model.CodeExists, Job: old}, nil
		}
		return model.Result{Code: model.CodeConflict, Job: old}, nil
	}
	j := newJob(c.Coll, c.ID, &c.Spec, c.Now)
	// This very create (its stamp) made the job once already, and a
	// DELETE removed it: a re-send after an unknown outcome must not make
	// it again. It is answered as the create it was. Only a create stamped
	// no later than the newest tombstone can have one (tombMax).
	if c.Now <= s.f.tombMax.Load() {
		if _, made, err := s.b.Get(storage.TombKey(s.kb[:0], s.f.slot, c.Now, c.Coll, c.ID)); err != nil || made {
			return model.Result{Code: model.CodeCreated, Job: j}, err
		}
	}
	if err := s.putJob(j); err != nil {
		return model.Result{}, err
	}
	if err := s.addIndexes(j, true); err != nil {
		return model.Result{}, err
	}
	return model.Result{Code: model.CodeCreated, Job: j}, nil
}

func (s *applyState) upsert(c *Upsert) (model.Result, error) {
	if shut, err := s.fenced(c.Coll, c.CollInc); shut || err != nil {
		return model.Result{Code: model.CodeRejected}, err
	}
	old, found, err := s.getJob(c.Coll, c.ID)
	if err != nil {
		return model.Result{}, err
	}
	if c.IfMatch != 0 && (!found || old.Version != c.IfMatch) {
		return model.Result{Code: model.CodePreconditionFailed, Job: old}, nil
	}
	j := newJob(c.Coll, c.ID, &c.Spec, c.Now)
	code := model.CodeCreated
	if found {
		if err := s.removeIndexes(old, true); err != nil {
			return model.Result{}, err
		}
		j.Version = old.Version + 1
		j.CreatedAt = old.CreatedAt
		j.Schedule = old.Schedule // a replaced occurrence stays its schedule's
		code = model.CodeOK
	}
	if err := s.putJob(j); err != nil {
		return model.Result{}, err
	}
	if err := s.addIndexes(j, true); err != nil {
		return model.Result{}, err
	}
	return model.Result{Code: code, Job: j}, nil
}

func (s *applyState) delete(c *Delete) (model.Result, error) {
	old, found, err := s.getJob(c.Coll, c.ID)
	if err != nil || !found {
		return model.Result{Code: model.CodeNotFound}, err
	}
	if err := s.removeIndexes(old, true); err != nil {
		return model.Result{}, err
	}
	if err := s.deleteRecord(c.Coll, c.ID); err != nil {
		return model.Result{}, err
	}
	// The incarnation's tombstone: see create. DropTombstones removes it
	// once no re-send of its create can come any more. tombMax is raised
	// first, so a create later in this very batch looks it up.
	if old.CreatedAt > s.f.tombMax.Load() {
		s.f.tombMax.Store(old.CreatedAt)
	}
	if err := s.b.Set(storage.TombKey(s.kb[:0], s.f.slot, old.CreatedAt, c.Coll, c.ID), nil); err != nil {
		return model.Result{}, err
	}
	return model.Result{Code: model.CodeOK, Job: old}, nil
}

func (s *applyState) dropTombstones(c *DropTombstones) (model.Result, error) {
	lower, upper := storage.TombsBefore(s.f.slot, c.Before)
	return model.Result{Code: model.CodeOK}, s.b.DeleteRange(lower, upper)
}

func (s *applyState) deleteIncarnation(c *DeleteIncarnation) (model.Result, error) {
	old, found, err := s.getJob(c.Coll, c.ID)
	if err != nil || !found || old.CreatedAt != c.CreatedAt {
		return model.Result{Code: model.CodeNotFound}, err
	}
	return s.delete(&Delete{Coll: c.Coll, ID: c.ID})
}

// firedVersion loads the job an outcome is about, or reports it stale: the
// job was deleted, replaced or already finished since the leader fired it.
func (s *applyState) firedVersion(coll, id string, version uint64) (*model.Job, bool, error) {
	j, found, err := s.getJob(coll, id)
	if err != nil || !found || j.Version != version || j.Status != model.StatusScheduled {
		return nil, false, err
	}
	return j, true, nil
}

// outcome applies one outcome to the fired version of a job: it takes the
// job's index entries out, lets change edit the job, bumps the version and
// writes job and indexes back. moveList is set when the change moves the
// trigger time (the list index is keyed by it).
func (s *applyState) outcome(coll, id string, version uint64, now int64, moveList bool, change func(j *model.Job)) (model.Result, error) {
	j, ok, err := s.firedVersion(coll, id, version)
	if err != nil || !ok {
		return model.Result{Code: model.CodeStale}, err
	}
	if err := s.removeIndexes(j, moveList); err != nil {
		return model.Result{}, err
	}
	change(j)
	j.UpdatedAt = now
	j.Version++
	if err := s.putJob(j); err != nil {
		return model.Result{}, err
	}
	if err := s.addIndexes(j, moveList); err != nil {
		return model.Result{}, err
	}
	return model.Result{Code: model.CodeOK, Job: j}, nil
}

func (s *applyState) ack(c *Ack) (model.Result, error) {
	return s.finish(c.Coll, c.ID, c.Version, c.Success, c.Attempts, c.LastError, c.Now)
}

// finish is one ack (Ack, or a job of AckMany): outcome without the
// closure, as it runs once per delivered job.
func (s *applyState) finish(coll, id string, version uint64, success bool, attempts int64, lastError string, now int64) (model.Result, error) {
	j, ok, err := s.firedVersion(coll, id, version)
	if err != nil || !ok {
		return model.Result{Code: model.CodeStale}, err
	}
	if err := s.removeIndexes(j, false); err != nil {
		return model.Result{}, err
	}
	j.Status = model.StatusFailed
	if success {
		j.Status = model.StatusSucceeded
	}
	j.Attempts = attempts
	j.LastError = lastError
	j.FinishedAt = now
	j.UpdatedAt = now
	j.Version++
	if err := s.putJob(j); err != nil {
		return model.Result{}, err
	}
	if err := s.addIndexes(j, false); err != nil {
		return model.Result{}, err
	}
	return model.Result{Code: model.CodeOK, Job: j}, nil
}

func (s *applyState) retry(c *Retry) (model.Result, error) {
	return s.outcome(c.Coll, c.ID, c.Version, c.Now, false, func(j *model.Job) {
		j.DueTime = c.NextDue
		j.Attempts = c.Attempts
		j.LastError = c.LastError
	})
}

func (s *applyState) reschedule(c *Reschedule) (model.Result, error) {
	return s.outcome(c.Coll, c.ID, c.Version, c.Now, true, func(j *model.Job) {
		j.TriggerTime = c.TriggerTime
		j.DueTime = c.TriggerTime
		j.Attempts = 0
		j.LastError = ""
	})
}

// advanceOffset moves the offset forward to the proposal, but never past
// the first live due entry: whatever the leader believed, a new leader that
// scans from the offset must find every scheduled job.
func (s *applyState) advanceOffset(c *AdvanceOffset) (model.Result, error) {
	if c.Offset <= s.offset {
		return model.Result{Code: model.CodeOK}, nil
	}
	lower := storage.DueBound(s.f.slot, s.offset)
	if s.offset == NoOffset {
		lower, _ = storage.DueSpan(s.f.slot)
	}
	it, err := s.b.NewIter(lower, storage.DueBound(s.f.slot, c.Offset))
	if err != nil {
		return model.Result{}, err
	}
	next := c.Offset
	if it.First() {
		e, err := storage.DecodeDueKey(it.Key())
		if err != nil {
			_ = it.Close()
			return model.Result{}, err
		}
		next = e.Due
	}
	if err := it.Close(); err != nil {
		return model.Result{}, err
	}
	s.offset = next
	return model.Result{Code: model.CodeOK}, nil
}

func (s *applyState) dropDue(c *DropDue) (model.Result, error) {
	key := storage.DueKey(nil, s.f.slot, c.Due, c.Coll, c.ID)
	if _, ok, err := s.b.Get(key); err != nil || !ok {
		return model.Result{Code: model.CodeNotFound}, err
	}
	j, found, err := s.getJob(c.Coll, c.ID)
	if err != nil {
		return model.Result{}, err
	}
	if found && j.Status == model.StatusScheduled && j.DueTime == c.Due {
		return model.Result{Code: model.CodeStale}, nil // still live
	}
	return model.Result{Code: model.CodeOK}, s.b.Delete(key)
}

type listRef struct {
	coll, id string
	t        int64
	key      []byte
}

// collect reads up to limit keys of [lower, upper), plus whether more exist.
// Keys are collected before any deletion so the iteration never races the
// batch it reads from.
func (s *applyState) collect(lower, upper []byte, limit int64, decode func([]byte) (listRef, error)) ([]listRef, bool, error) {
	if limit <= 0 || limit > 100_000 {
		limit = 100_000
	}
	it, err := s.b.NewIter(lower, upper)
	if err != nil {
		return nil, false, err
	}
	var refs []listRef
	more := false
	for ok := it.First(); ok; ok = it.Next() {
		if int64(len(refs)) == limit {
			more = true
			break
		}
		r, err := decode(it.Key())
		if err != nil {
			_ = it.Close()
			return nil, false, err
		}
		r.key = append([]byte(nil), it.Key()...)
		refs = append(refs, r)
	}
	return refs, more, it.Close()
}

func (s *applyState) removeFinished(c *RemoveFinished) (model.Result, error) {
	lower, upper := storage.FinishedBefore(s.f.slot, c.Coll, c.Before)
	refs, more, err := s.collect(lower, upper, c.Limit, func(k []byte) (listRef, error) {
		coll, t, id, err := storage.DecodeFinishedKey(k)
		return listRef{coll: coll, id: id, t: t}, err
	})
	if err != nil {
		return model.Result{}, err
	}
	var n int64
	for _, r := range refs {
		j, found, err := s.getJob(r.coll, r.id)
		if err != nil {
			return model.Result{}, err
		}
		if found && j.Status.Finished() && j.FinishedAt == r.t {
			if err := s.removeIndexes(j, true); err != nil {
				return model.Result{}, err
			}
			if err := s.deleteRecord(j.Collection, j.ID); err != nil {
				return model.Result{}, err
			}
			n++
			continue
		}
		if err := s.b.Delete(r.key); err != nil { // orphan index entry
			return model.Result{}, err
		}
	}
	return model.Result{Code: model.CodeOK, More: more, N: n}, nil
}

func (s *applyState) purgeCollection(c *PurgeCollection) (model.Result, error) {
	if err := s.raiseFence(c.Coll, c.Fence); err != nil {
		return model.Result{}, err
	}
	lower, upper := storage.CollectionListSpan(s.f.slot, c.Coll)
	refs, more, err := s.collect(lower, upper, c.Limit, func(k []byte) (listRef, error) {
		coll, t, id, err := storage.DecodeListKey(k)
		return listRef{coll: coll, id: id, t: t}, err
	})
	if err != nil {
		return model.Result{}, err
	}
	var n int64
	for _, r := range refs {
		j, found, err := s.getJob(r.coll, r.id)
		if err != nil {
			return model.Result{}, err
		}
		if found {
			if err := s.removeIndexes(j, true); err != nil {
				return model.Result{}, err
			}
			if err := s.deleteRecord(j.Collection, j.ID); err != nil {
				return model.Result{}, err
			}
			n++
		}
		if err := s.b.Delete(r.key); err != nil {
			return model.Result{}, err
		}
	}
	if !more {
		// The jobs are gone: the collection's schedules go next.
		m, err := s.purgeSchedules(c.Coll, c.Limit)
		if err != nil {
			return model.Result{}, err
		}
		more = m
	}
	return model.Result{Code: model.CodeOK, More: more, N: n}, nil
}

// purgeSchedules removes up to limit schedules of a deleted collection.
func (s *applyState) purgeSchedules(coll string, limit int64) (bool, error) {
	lower, upper := storage.CollectionScheduleSpan(s.f.slot, coll)
	refs, more, err := s.collect(lower, upper, limit, func(k []byte) (listRef, error) {
		c, id, err := storage.DecodeScheduleKey(k)
		return listRef{coll: c, id: id}, err
	})
	if err != nil {
		return false, err
	}
	for _, r := range refs {
		if _, err := s.deleteScheduleCmd(&DeleteSchedule{Coll: r.coll, ID: r.id}); err != nil {
			return false, err
		}
	}
	return more, nil
}

func (s *applyState) putJob(j *model.Job) error {
	s.noteRecord(j.Collection, j.ID)
	s.kb = storage.RecordKey(s.kb[:0], s.f.slot, j.Collection, j.ID)
	s.touch(s.kb)
	s.vb = AppendRecord(s.vb[:0], j)
	if _, ok := s.born[string(s.kb)]; ok {
		s.born[string(s.kb)] = bytes.Clone(s.vb) // its latest value
	}
	return s.b.Set(s.kb, s.vb)
}

// bear notes that the record putJob wrote last is about to be fired, so
// that its outcome's apply finds it in the fired-record cache on every
// replica (fired.go committed).
func (s *applyState) bear() {
	if s.f.noBorn {
		return
	}
	if s.born == nil {
		s.born = make(map[string][]byte)
	}
	s.born[string(s.kb)] = bytes.Clone(s.vb)
}

func (s *applyState) deleteRecord(coll, id string) error {
	s.kb = storage.RecordKey(s.kb[:0], s.f.slot, coll, id)
	s.touch(s.kb)
	delete(s.born, string(s.kb))
	return s.b.Delete(s.kb)
}

// addIndexes writes the index entries of j's current state. The list
// entry depends only on the trigger time, so outcomes that keep it (ack,
// retry) pass list=false and save a write per fire.
func (s *applyState) addIndexes(j *model.Job, list bool) error {
	slot := s.f.slot
	if list {
		s.kb = storage.ListKey(s.kb[:0], slot, j.Collection, j.TriggerTime, j.ID)
		if err := s.b.Set(s.kb, nil); err != nil {
			return err
		}
	}
	switch {
	case j.Status == model.StatusScheduled:
		s.kb = storage.DueKey(s.kb[:0], slot, j.DueTime, j.Collection, j.ID)
		if err := s.b.Set(s.kb, nil); err != nil {
			return err
		}
		s.pending++
		if j.DueTime < s.offset {
			s.offset = j.DueTime
		}
		s.notes = append(s.notes, storage.DueEntry{Due: j.DueTime, Coll: j.Collection, ID: j.ID})
	case j.Status.Finished():
		s.kb = storage.FinishedKey(s.kb[:0], slot, j.Collection, j.FinishedAt, j.ID)
		if err := s.b.Set(s.kb, nil); err != nil {
			return err
		}
	}
	return nil
}

// removeIndexes deletes the index entries of j's current state.
func (s *applyState) removeIndexes(j *model.Job, list bool) error {
	slot := s.f.slot
	if list {
		s.kb = storage.ListKey(s.kb[:0], slot, j.Collection, j.TriggerTime, j.ID)
		if err := s.b.Delete(s.kb); err != nil {
			return err
		}
	}
	switch {
	case j.Status == model.StatusScheduled:
		s.kb = storage.DueKey(s.kb[:0], slot, j.DueTime, j.Collection, j.ID)
		if err := s.b.Delete(s.kb); err != nil {
			return err
		}
		s.pending--
	case j.Status.Finished():
		s.kb = storage.FinishedKey(s.kb[:0], slot, j.Collection, j.FinishedAt, j.ID)
		if err := s.b.Delete(s.kb); err != nil {
			return err
		}
	}
	return nil
}

// newerCommand is the error a state machine stops the node with on an entry
// a newer binary wrote.
func newerCommand(group string, index uint64, err error) error {
	return fmt.Errorf("%s: log entry %d: %w — the cluster runs a newer timemachine than this node: install the same version here and restart it (the entry is applied then; skipping it would make this replica's state drift from its peers')", group, index, err)
}
