package raftfsm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/storage"
)

// Schedules (docs/api.md#schedules) live in the slot their collection and
// id hash to, next to that slot's jobs: a record per schedule and a due
// index by next occurrence. The slot leader reads the due index and, when
// an occurrence is due by its clock, proposes ScheduleAdvance, which
// materialises the occurrence as an ordinary job in this slot. Every time
// in these commands is stamped by the leader: the state machine reads no
// clock and evaluates no cron expression, so replicas with different
// zoneinfo databases still agree.

// Slot command types of schedules and redrive (12–19 are theirs).
const (
	CmdPutSchedule      CmdType = 12
	CmdDeleteSchedule   CmdType = 13
	CmdScheduleAdvance  CmdType = 14
	CmdRedrive          CmdType = 15
	scheduleRecordV1            = 1
	maxRedriveIDs               = 1000
	scheduleSnapshotTag         = 2
)

func appendScheduleSpec(dst []byte, s *model.ScheduleSpec) []byte {
	dst = putStr(dst, s.Cron)
	dst = binary.AppendVarint(dst, s.EveryMs)
	dst = putStr(dst, s.Timezone)
	dst = putStr(dst, s.CallbackURL)
	dst = putStr(dst, s.Route)
	if s.Meta == nil {
		dst = append(dst, 0)
	} else {
		dst = append(dst, 1)
		dst = putBytes(dst, s.Meta)
	}
	dst = appendRetry(dst, s.Retry)
	dst = binary.AppendVarint(dst, s.CallbackTimeoutMs)
	dst = binary.AppendVarint(dst, s.StartAt)
	dst = binary.AppendVarint(dst, s.EndAt)
	p := byte(0)
	if s.Paused {
		p = 1
	}
	dst = append(dst, p)
	return binary.LittleEndian.AppendUint64(dst, s.Hash)
}

func (r *reader) scheduleSpec() model.ScheduleSpec {
	var s model.ScheduleSpec
	s.Cron = r.str(maxStr)
	s.EveryMs = r.varint()
	s.Timezone = r.str(maxStr)
	s.CallbackURL = r.str(maxStr)
	s.Route = r.str(maxStr)
	if r.byte() == 1 {
		s.Meta = append([]byte{}, r.bytes(maxMeta)...)
	}
	s.Retry = r.retryPolicy()
	s.CallbackTimeoutMs = r.varint()
	s.StartAt = r.varint()
	s.EndAt = r.varint()
	s.Paused = r.byte() == 1
	s.Hash = r.u64le()
	return s
}

func (r *reader) u64le() uint64 {
	if r.err == nil && len(r.b) >= 8 {
		v := binary.LittleEndian.Uint64(r.b)
		r.b = r.b[8:]
		return v
	}
	r.fail("short u64")
	return 0
}

// AppendScheduleRecord encodes s (without collection and id) after dst.
func AppendScheduleRecord(dst []byte, s *model.Schedule) []byte {
	dst = append(dst, scheduleRecordV1)
	dst = appendScheduleSpec(dst, &s.Spec)
	dst = binary.AppendUvarint(dst, s.Version)
	for _, v := range []int64{s.Anchor, s.NextFireAt, s.LastFireAt, s.Missed, s.CreatedAt, s.UpdatedAt} {
		dst = binary.AppendVarint(dst, v)
	}
	return dst
}

// DecodeScheduleRecord decodes a record written by AppendScheduleRecord.
func DecodeScheduleRecord(b []byte, s *model.Schedule) error {
	r := reader{b: b}
	if v := r.byte(); v != scheduleRecordV1 && r.err == nil {
		return fmt.Errorf("%w: schedule record version %d (written by a newer binary?)", ErrCorrupt, v)
	}
	s.Spec = r.scheduleSpec()
	s.Version = r.uvarint()
	for _, p := range []*int64{&s.Anchor, &s.NextFireAt, &s.LastFireAt, &s.Missed, &s.CreatedAt, &s.UpdatedAt} {
		*p = r.varint()
	}
	return r.done()
}

// PutSchedule creates or replaces a schedule. The leader computed Anchor
// and Next (the first occurrence, 0 when paused or ended) from its clock;
// they are used only when the spec changes: a PUT of the same spec again
// keeps the schedule as it is. IfMatch, when not zero, must be the
// schedule's version (If-Match); it is encoded only when set, so a PUT
// without it is the same entry older binaries write and read.
type PutSchedule struct {
	Coll, ID string
	Spec     model.ScheduleSpec
	Anchor   int64
	Next     int64
	Now      int64
	IfMatch  uint64
	CollInc  uint64 // as for Create
}

// Type implements Command.
func (*PutSchedule) Type() CmdType { return CmdPutSchedule }
func (c *PutSchedule) appendBody(dst []byte) []byte {
	dst = putStr(putStr(dst, c.Coll), c.ID)
	dst = appendScheduleSpec(dst, &c.Spec)
	dst = binary.AppendVarint(dst, c.Anchor)
	dst = binary.AppendVarint(dst, c.Next)
	dst = binary.AppendVarint(dst, c.Now)
	// Both optional, in this order: IfMatch is written (0 for none) when
	// CollInc follows it.
	if c.IfMatch != 0 || c.CollInc != 0 {
		dst = binary.AppendUvarint(dst, c.IfMatch)
	}
	if c.CollInc != 0 {
		dst = binary.AppendUvarint(dst, c.CollInc)
	}
	return dst
}

// DeleteSchedule removes a schedule. Occurrences already created stay.
type DeleteSchedule struct{ Coll, ID string }

// Type implements Command.
func (*DeleteSchedule) Type() CmdType { return CmdDeleteSchedule }
func (c *DeleteSchedule) appendBody(dst []byte) []byte {
	return putStr(putStr(dst, c.Coll), c.ID)
}

// ScheduleAdvance materialises one occurrence of a schedule as a job and
// moves the schedule to its next occurrence. It applies only when the
// schedule is still at Version with next_fire_at == Expected (what the
// leader saw), so a repeated or late proposal — a retry, or a deposed
// leader's — changes nothing: each occurrence is created once.
type ScheduleAdvance struct {
	Coll, ID   string
	Version    uint64
	Expected   int64 // next_fire_at the leader saw
	Occurrence int64 // the occurrence to create (the latest due one)
	Missed     int64 // occurrences skipped before it
	Next       int64 // the occurrence after it (0: none)
	Now        int64
}

// Type implements Command.
func (*ScheduleAdvance) Type() CmdType { return CmdScheduleAdvance }
func (c *ScheduleAdvance) appendBody(dst []byte) []byte {
	dst = putStr(putStr(dst, c.Coll), c.ID)
	dst = binary.AppendUvarint(dst, c.Version)
	for _, v := range []int64{c.Expected, c.Occurrence, c.Missed, c.Next, c.Now} {
		dst = binary.AppendVarint(dst, v)
	}
	return dst
}

// Redrive schedules failed jobs (dead letters) again at Now with attempts
// reset: the ones named in IDs, or, with no IDs, those of the collection
// whose trigger time is in [From, To), at most Limit list entries per
// command (Result.More says there are more).
type Redrive struct {
	Coll     string
	IDs      []string
	From, To int64
	Limit    int64
	Now      int64
}

// Type implements Command.
func (*Redrive) Type() CmdType { return CmdRedrive }
func (c *Redrive) appendBody(dst []byte) []byte {
	dst = putStr(dst, c.Coll)
	dst = binary.AppendUvarint(dst, uint64(len(c.IDs)))
	for _, id := range c.IDs {
		dst = putStr(dst, id)
	}
	for _, v := range []int64{c.From, c.To, c.Limit, c.Now} {
		dst = binary.AppendVarint(dst, v)
	}
	return dst
}

// decodeSchedule decodes the schedule and redrive commands (nil, false for
// any other type).
func decodeSchedule(t CmdType, r *reader) (Command, bool) {
	switch t {
	case CmdPutSchedule:
		x := &PutSchedule{Coll: r.str(maxStr), ID: r.str(maxStr)}
		x.Spec = r.scheduleSpec()
		x.Anchor, x.Next, x.Now = r.varint(), r.varint(), r.varint()
		if r.err == nil && len(r.b) > 0 {
			x.IfMatch = r.uvarint()
		}
		if r.err == nil && len(r.b) > 0 {
			x.CollInc = r.uvarint()
		}
		return x, true
	case CmdDeleteSchedule:
		return &DeleteSchedule{Coll: r.str(maxStr), ID: r.str(maxStr)}, true
	case CmdScheduleAdvance:
		x := &ScheduleAdvance{Coll: r.str(maxStr), ID: r.str(maxStr), Version: r.uvarint()}
		x.Expected, x.Occurrence, x.Missed, x.Next, x.Now = r.varint(), r.varint(), r.varint(), r.varint(), r.varint()
		return x, true
	case CmdRedrive:
		x := &Redrive{Coll: r.str(maxStr)}
		n := r.uvarint()
		if n > maxRedriveIDs || n > uint64(len(r.b)) {
			r.fail("redrive id count")
			n = 0
		}
		for i := uint64(0); i < n && r.err == nil; i++ {
			x.IDs = append(x.IDs, r.str(maxStr))
		}
		x.From, x.To, x.Limit, x.Now = r.varint(), r.varint(), r.varint(), r.varint()
		return x, true
	}
	return nil, false
}

// GetSchedule reads one schedule of a slot.
func GetSchedule(r storage.Reader, slot int, coll, id string) (*model.Schedule, bool, error) {
	v, ok, err := r.Get(storage.ScheduleKey(nil, slot, coll, id))
	if err != nil || !ok {
		return nil, false, err
	}
	s := &model.Schedule{Collection: coll, ID: id}
	if err := DecodeScheduleRecord(v, s); err != nil {
		return nil, false, fmt.Errorf("slot %d schedule %s/%s: %w", slot, coll, id, err)
	}
	return s, true, nil
}

// GetSchedules reads the schedules of due entries with one iterator, in
// key order (nil where a schedule is gone): what the schedule loop reads
// for each round of advances, up to a thousand at a time.
func GetSchedules(r storage.Reader, slot int, refs []storage.DueEntry) ([]*model.Schedule, error) {
	out := make([]*model.Schedule, len(refs))
	if len(refs) == 0 {
		return out, nil
	}
	lo, hi := storage.ScheduleSpan(slot)
	it, err := r.NewIter(lo, hi)
	if err != nil {
		return nil, err
	}
	order := keyOrder(refs)
	var key []byte
	for _, i := range order {
		e := refs[i]
		key = storage.ScheduleKey(key[:0], slot, e.Coll, e.ID)
		if !it.SeekPrefixGE(key) || !bytes.Equal(it.Key(), key) {
			continue
		}
		sc := &model.Schedule{Collection: e.Coll, ID: e.ID}
		if err := DecodeScheduleRecord(it.Value(), sc); err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("slot %d schedule %s/%s: %w", slot, e.Coll, e.ID, err)
		}
		out[i] = sc
	}
	return out, it.Close()
}

// ListSchedules lists up to limit schedules of a collection in one slot
// with ids after after, in id order.
func ListSchedules(r storage.Reader, slot int, coll, after string, limit int) (model.ScheduleListPage, error) {
	var page model.ScheduleListPage
	lower, upper := storage.CollectionScheduleSpan(slot, coll)
	if after != "" {
		lower = append(storage.ScheduleKey(nil, slot, coll, after), 0)
	}
	it, err := r.NewIter(lower, upper)
	if err != nil {
		return page, err
	}
	for ok := it.First(); ok; ok = it.Next() {
		if len(page.Schedules) == limit {
			page.More = true
			break
		}
		c, id, err := storage.DecodeScheduleKey(it.Key())
		if err != nil {
			_ = it.Close()
			return page, err
		}
		s := &model.Schedule{Collection: c, ID: id}
		if err := DecodeScheduleRecord(it.Value(), s); err != nil {
			_ = it.Close()
			return page, fmt.Errorf("slot %d schedule %s/%s: %w", slot, c, id, err)
		}
		page.Schedules = append(page.Schedules, s)
	}
	return page, it.Close()
}

// ScanScheduleDue calls fn for the schedule due entries of a slot with
// from <= next < to, in time order, until fn returns false or limit were
// seen. from bounds the scan below: every advance leaves a tombstone at
// the head of the index, and a scan from the span's start would walk them
// all (the Pebble trap of docs/architecture.md); math.MinInt64 scans all.
func ScanScheduleDue(r storage.Reader, slot int, from, to int64, limit int, fn func(storage.DueEntry) bool) error {
	lower, _ := storage.SchedDueSpan(slot)
	if from != math.MinInt64 {
		lower = storage.SchedDueBound(slot, from)
	}
	it, err := r.NewIter(lower, storage.SchedDueBound(slot, to))
	if err != nil {
		return err
	}
	n := 0
	for ok := it.First(); ok && n < limit; ok = it.Next() {
		e, err := storage.DecodeSchedDueKey(it.Key())
		if err != nil {
			_ = it.Close()
			return err
		}
		n++
		if !fn(e) {
			break
		}
	}
	return it.Close()
}

// putSchedule writes a schedule record; the due entry follows next.
func (s *applyState) putSchedule(sc *model.Schedule, oldNext int64) error {
	slot := s.f.slot
	if oldNext != 0 && oldNext != sc.NextFireAt {
		if err := s.b.Delete(storage.SchedDueKey(nil, slot, oldNext, sc.Collection, sc.ID)); err != nil {
			return err
		}
	}
	if sc.NextFireAt != 0 && sc.NextFireAt != oldNext {
		if err := s.b.Set(storage.SchedDueKey(nil, slot, sc.NextFireAt, sc.Collection, sc.ID), nil); err != nil {
			return err
		}
		if !s.schedNotes || sc.NextFireAt < s.schedMin {
			s.schedMin = sc.NextFireAt
		}
		s.schedNotes = true
	}
	v := AppendScheduleRecord(nil, sc)
	if err := s.b.Set(storage.ScheduleKey(nil, slot, sc.Collection, sc.ID), v); err != nil {
		return err
	}
	s.f.keepSchedRec(schedKey{sc.Collection, sc.ID}, v) // schedcache.go
	return nil
}

func (s *applyState) putScheduleCmd(c *PutSchedule) (model.Result, error) {
	if shut, err := s.fenced(c.Coll, c.CollInc); shut || err != nil {
		return model.Result{Code: model.CodeRejected}, err
	}
	old, found, err := s.getSchedule(c.Coll, c.ID)
	if err != nil {
		return model.Result{}, err
	}
	if c.IfMatch != 0 && (!found || old.Version != c.IfMatch) {
		return model.Result{Code: model.CodePreconditionFailed, Schedule: old}, nil
	}
	if found && old.Spec.Hash == c.Spec.Hash {
		return model.Result{Code: model.CodeExists, Schedule: old}, nil
	}
	sc := &model.Schedule{Collection: c.Coll, ID: c.ID, Spec: c.Spec, Version: 1,
		Anchor: c.Anchor, NextFireAt: c.Next, CreatedAt: c.Now, UpdatedAt: c.Now}
	code, oldNext := model.CodeCreated, int64(0)
	if found {
		sc.Version = old.Version + 1
		sc.CreatedAt = old.CreatedAt
		sc.LastFireAt, sc.Missed = old.LastFireAt, old.Missed
		code, oldNext = model.CodeOK, old.NextFireAt
	}
	if err := s.putSchedule(sc, oldNext); err != nil {
		return model.Result{}, err
	}
	return model.Result{Code: code, Schedule: sc}, nil
}

func (s *applyState) deleteScheduleCmd(c *DeleteSchedule) (model.Result, error) {
	old, found, err := s.getSchedule(c.Coll, c.ID)
	if err != nil || !found {
		return model.Result{Code: model.CodeNotFound}, err
	}
	if old.NextFireAt != 0 {
		if err := s.b.Delete(storage.SchedDueKey(nil, s.f.slot, old.NextFireAt, c.Coll, c.ID)); err != nil {
			return model.Result{}, err
		}
	}
	if err := s.b.Delete(storage.ScheduleKey(nil, s.f.slot, c.Coll, c.ID)); err != nil {
		return model.Result{}, err
	}
	delete(s.f.occFloors, schedKey{c.Coll, c.ID})
	s.f.dropSchedRec(schedKey{c.Coll, c.ID})
	return model.Result{Code: model.CodeOK, Schedule: old}, nil
}

func (s *applyState) advance(c *ScheduleAdvance) (model.Result, error) {
	sc, found, err := s.getSchedule(c.Coll, c.ID)
	if err != nil {
		return model.Result{}, err
	}
	if !found || sc.Version != c.Version || sc.NextFireAt != c.Expected || c.Expected == 0 || c.Occurrence < c.Expected {
		return model.Result{Code: model.CodeStale, Schedule: sc}, nil
	}
	id := model.OccurrenceID(c.ID, c.Occurrence)
	var j *model.Job
	exists := false
	// Nearly always the id is new; a lookup is needed only where a job of
	// it may exist (occfloor.go).
	if absent, err := s.occurrenceAbsent(c.Coll, c.ID, c.Occurrence); err != nil {
		return model.Result{}, err
	} else if !absent {
		if j, exists, err = s.getJob(c.Coll, id); err != nil {
			return model.Result{}, err
		}
	}
	if !exists {
		spec := sc.Occurrence(c.Occurrence)
		j = newJob(c.Coll, id, &spec, c.Now)
		j.Schedule = c.ID
		if err := s.putJob(j); err != nil {
			return model.Result{}, err
		}
		s.bear() // fired within a second: its outcome reads it back
		if err := s.addIndexes(j, true); err != nil {
			return model.Result{}, err
		}
	}
	oldNext := sc.NextFireAt
	sc.LastFireAt = c.Occurrence
	sc.Missed += c.Missed
	sc.NextFireAt = c.Next
	if err := s.putSchedule(sc, oldNext); err != nil {
		return model.Result{}, err
	}
	return model.Result{Code: model.CodeOK, Schedule: sc, Job: j}, nil
}

func (s *applyState) redrive(c *Redrive) (model.Result, error) {
	var n int64
	one := func(coll, id string) error {
		j, found, err := s.getJob(coll, id)
		if err != nil || !found || j.Status != model.StatusFailed {
			return err
		}
		if err := s.removeIndexes(j, true); err != nil {
			return err
		}
		j.Status = model.StatusScheduled
		j.TriggerTime, j.DueTime = c.Now, c.Now
		j.Attempts, j.LastError, j.FinishedAt = 0, "", 0
		j.UpdatedAt = c.Now
		j.Version++
		if err := s.putJob(j); err != nil {
			return err
		}
		n++
		return s.addIndexes(j, true)
	}
	if len(c.IDs) > 0 {
		for _, id := range c.IDs {
			if err := one(c.Coll, id); err != nil {
				return model.Result{}, err
			}
		}
		return model.Result{Code: model.CodeOK, N: n}, nil
	}
	lower, upper := storage.CollectionListSpan(s.f.slot, c.Coll)
	if c.From > 0 {
		lower = storage.ListBound(s.f.slot, c.Coll, c.From, "")
	}
	if c.To > 0 {
		upper = storage.ListBound(s.f.slot, c.Coll, c.To, "")
	}
	if bytes.Compare(lower, upper) >= 0 {
		return model.Result{Code: model.CodeOK}, nil
	}
	refs, more, err := s.collect(lower, upper, c.Limit, func(k []byte) (listRef, error) {
		coll, t, id, err := storage.DecodeListKey(k)
		return listRef{coll: coll, id: id, t: t}, err
	})
	if err != nil {
		return model.Result{}, err
	}
	for _, r := range refs {
		if err := one(r.coll, r.id); err != nil {
			return model.Result{}, err
		}
	}
	return model.Result{Code: model.CodeOK, More: more, N: n}, nil
}
