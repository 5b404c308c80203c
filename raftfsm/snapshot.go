package raftfsm

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/cespare/xxhash/v2"
	"github.com/hashicorp/raft"
	"github.com/klauspost/compress/zstd"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/storage"
)

// A slot snapshot comes in two forms.
//
// The local form, written by Persist, is a pointer: "TMSLOTP1 | slot u16 |
// applied u64". The slot's state is already durable in Pebble (Persist
// syncs Pebble's WAL before it writes the pointer), so copying it into a
// file every time raft wants to truncate its log would only double the
// disk a slot needs and burn CPU during heavy loads.
//
// The full form, made by StreamState only when a snapshot must travel to
// another replica, is a zstd stream:
//
//	magic "TMSLOT01" | slot u16 | applied u64
//	repeated: 0x01 | uvarint len | record key suffix | uvarint len | record value
//	repeated: 0x02 | uvarint len | schedule key suffix | uvarint len | schedule value
//	repeated: 0x03 | uvarint len | tombstone key suffix | uvarint len (0)
//	0x00 | count u64 | xxhash64 of every record byte
//
// Only job records travel: the due, list and finished indexes, the offset
// and the pending count are all derived from the records on restore.
const (
	slotSnapshotMagic  = "TMSLOT01"
	slotPointerMagic   = "TMSLOTP1"
	slotSnapMagicBytes = 8
)

// restoreBatchBytes bounds one restore batch so a large slot never builds
// a giant in-memory batch.
const restoreBatchBytes = 4 << 20

// tombSnapshotTag marks a tombstone entry in the full snapshot form.
const tombSnapshotTag = 3

// fenceSnapshotTag marks a collection fence (fence.go) in a full
// snapshot: the key is the collection's name, the value the fence. A
// binary from before 2026-11-28 refuses such a snapshot (an unknown tag),
// as it refuses any newer entry: upgrade every node before deleting a
// collection (docs/operations.md, "Log format changes").
const fenceSnapshotTag = 4

// IsPointerSnapshot reports whether the first bytes of a snapshot are the
// local pointer form.
func IsPointerSnapshot(head []byte) bool {
	return len(head) >= slotSnapMagicBytes && string(head[:slotSnapMagicBytes]) == slotPointerMagic
}

type slotSnapshot struct {
	f       *SlotFSM
	snap    *storage.Snapshot
	applied uint64
}

// Snapshot implements raft.FSM. It runs on the FSM goroutine, so the pinned
// Pebble snapshot holds exactly the state at the applied index.
func (f *SlotFSM) Snapshot() (raft.FSMSnapshot, error) {
	if f.stopped.Load() {
		return nil, ErrStopped
	}
	return &slotSnapshot{f: f, applied: f.applied.Load()}, nil
}

// Persist writes the pointer form. It first syncs Pebble's WAL:
// state-machine writes are unsynced, and once this snapshot exists raft may
// truncate the log entries that were their only durable copy.
func (s *slotSnapshot) Persist(sink raft.SnapshotSink) error {
	err := s.f.db.SyncWAL()
	if err == nil {
		hdr := append([]byte(slotPointerMagic), byte(s.f.slot>>8), byte(s.f.slot))
		_, err = sink.Write(binary.BigEndian.AppendUint64(hdr, s.applied))
	}
	if err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("slot %d: persist snapshot at %d: %w", s.f.slot, s.applied, err)
	}
	return sink.Close()
}

// StreamState writes the slot's current state in the full form, for a
// replica that needs a snapshot. The state is taken now, so it may be ahead
// of the snapshot raft is sending; the receiver restores it with its own
// applied index and skips the entries it already holds.
func (f *SlotFSM) StreamState(w io.Writer) (applied uint64, err error) {
	snap := f.db.NewSnapshot()
	defer snap.Close()
	// The applied index inside the pinned view is the one that matches it.
	applied, _, _, _, err = readSlotMeta(snap, f.slot)
	if err != nil {
		return 0, err
	}
	s := &slotSnapshot{f: f, snap: snap, applied: applied}
	if err := s.writeFull(w); err != nil {
		return 0, fmt.Errorf("slot %d: stream state at %d: %w", f.slot, applied, err)
	}
	return applied, nil
}

func (s *slotSnapshot) writeFull(w io.Writer) error {
	zw, err := zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(zw, 256<<10)
	hdr := append([]byte(slotSnapshotMagic), byte(s.f.slot>>8), byte(s.f.slot))
	hdr = binary.BigEndian.AppendUint64(hdr, s.applied)
	if _, err := bw.Write(hdr); err != nil {
		return err
	}
	h := xxhash.New()
	var count uint64
	var buf []byte
	// stream writes every key of [lower, upper) as an entry tagged tag:
	// the key without the span's prefix, then the value.
	stream := func(tag byte, lower, upper []byte) error {
		it, err := s.snap.NewIter(lower, upper)
		if err != nil {
			return err
		}
		for ok := it.First(); ok; ok = it.Next() {
			buf = append(buf[:0], tag)
			buf = putBytes(buf, it.Key()[len(lower):])
			buf = putBytes(buf, it.Value())
			_, _ = h.Write(buf)
			if _, err := bw.Write(buf); err != nil {
				_ = it.Close()
				return err
			}
			count++
		}
		return it.Close()
	}
	// Job records (tag 1), then schedules (2): their indexes are derived
	// on restore. Then the tombstones of deleted jobs (3, empty values;
	// storage.TombKey): a replica restored from this snapshot must still
	// refuse to make a deleted job again for a re-sent create. Then the
	// fences of deleted collections (4): it must refuse their late
	// writes too.
	for _, part := range []struct {
		tag  byte
		span func(int) ([]byte, []byte)
	}{{1, storage.RecordSpan}, {scheduleSnapshotTag, storage.ScheduleSpan}, {tombSnapshotTag, storage.TombSpan}, {fenceSnapshotTag, storage.FenceSpan}} {
		lower, upper := part.span(s.f.slot)
		if err := stream(part.tag, lower, upper); err != nil {
			return err
		}
	}
	trailer := binary.BigEndian.AppendUint64([]byte{0}, count)
	trailer = binary.BigEndian.AppendUint64(trailer, h.Sum64())
	if _, err := bw.Write(trailer); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return zw.Close()
}

// Release implements raft.FSMSnapshot.
func (s *slotSnapshot) Release() {}

// Restore implements raft.FSM: it replaces the slot's whole state with the
// snapshot. A marker written (synced) before the old state is cleared and
// removed (synced) only after the new one is complete tells the next start
// that an interrupted restore must be redone.
func (f *SlotFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	f.fences = nil // the restored state has its own
	if err := f.restore(rc); err != nil {
		return fmt.Errorf("slot %d: restore snapshot: %w", f.slot, err)
	}
	if box := f.obs.Load(); box != nil {
		box.o.Reset()
	}
	return nil
}

func (f *SlotFSM) restore(r io.Reader) error {
	br0 := bufio.NewReader(r)
	if head, err := br0.Peek(slotSnapMagicBytes); err == nil && IsPointerSnapshot(head) {
		return f.restorePointer(br0)
	}
	zr, err := zstd.NewReader(br0, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return err
	}
	defer zr.Close()
	br := bufio.NewReaderSize(zr, 256<<10)
	hdr := make([]byte, len(slotSnapshotMagic)+2+8)
	if _, err := io.ReadFull(br, hdr); err != nil {
		return fmt.Errorf("%w: snapshot header: %v", ErrCorrupt, err)
	}
	if string(hdr[:len(slotSnapshotMagic)]) != slotSnapshotMagic {
		return fmt.Errorf("%w: not a slot snapshot", ErrCorrupt)
	}
	if slot := int(hdr[8])<<8 | int(hdr[9]); slot != f.slot {
		return fmt.Errorf("%w: snapshot of slot %d offered to slot %d", ErrCorrupt, slot, f.slot)
	}
	applied := binary.BigEndian.Uint64(hdr[10:])
	// Until the restored tombstones are known, every create looks its
	// tombstone up.
	f.tombMax.Store(math.MaxInt64)
	// The restore writes records outside ApplyBatch: no record read now
	// is cached, and none read before survives it.
	f.fired.setRestoring(true)
	defer f.fired.setRestoring(false)
	// The restored records are not what the occurrence floors bound,
	// nor the schedules cached (and a failed restore may not have
	// committed all it wrote).
	f.occFloors = nil
	f.clearSchedRecs()
	f.restoringRecs = true
	defer func() { f.restoringRecs = false }()

	// Mark, then clear: in one synced batch the range deletion and the
	// marker land together.
	lower, upper := storage.SlotSpan(f.slot)
	b := f.db.NewBatch()
	if err := b.DeleteRange(lower, upper); err != nil {
		b.Close()
		return err
	}
	if err := b.Set(storage.MetaKey(f.slot, storage.MetaRestoring), []byte{1}); err != nil {
		b.Close()
		return err
	}
	if err := b.Commit(true); err != nil {
		b.Close()
		return err
	}
	b.Close()
	f.restoring = true

	recLower, _ := storage.RecordSpan(f.slot)
	schedLower, _ := storage.ScheduleSpan(f.slot)
	tombLower, _ := storage.TombSpan(f.slot)
	s := &applyState{f: f, b: f.db.NewBatch(), offset: NoOffset}
	defer func() { s.b.Close() }()
	h := xxhash.New()
	var count uint64
	var buf []byte
	for {
		tag, err := br.ReadByte()
		if err != nil {
			return fmt.Errorf("%w: snapshot truncated: %v", ErrCorrupt, err)
		}
		if tag == 0 {
			break
		}
		if tag != 1 && tag != scheduleSnapshotTag && tag != tombSnapshotTag && tag != fenceSnapshotTag {
			return fmt.Errorf("%w: snapshot entry tag %d", ErrCorrupt, tag)
		}
		key, err := readChunk(br, 2*storage.MaxIDLen)
		if err != nil {
			return err
		}
		val, err := readChunk(br, maxMeta+64<<10)
		if err != nil {
			return err
		}
		buf = append(buf[:0], tag)
		buf = putBytes(buf, key)
		buf = putBytes(buf, val)
		_, _ = h.Write(buf)
		count++
		if tag == scheduleSnapshotTag {
			if err := s.restoreSchedule(schedLower, key, val); err != nil {
				return err
			}
			continue
		}
		if tag == tombSnapshotTag {
			if err := s.b.Set(append(append([]byte(nil), tombLower...), key...), nil); err != nil {
				return err
			}
			continue
		}
		if tag == fenceSnapshotTag {
			if err := s.b.Set(storage.FenceKey(f.slot, string(key)), val); err != nil {
				return err
			}
			continue
		}
		_, coll, id, err := storage.DecodeRecordKey(append(append([]byte(nil), recLower...), key...))
		if err != nil {
			return err
		}
		j := &model.Job{Collection: coll, ID: id}
		if err := DecodeRecord(val, j); err != nil {
			return err
		}
		if err := s.putJob(j); err != nil {
			return err
		}
		if err := s.addIndexes(j, true); err != nil {
			return err
		}
		s.notes = s.notes[:0]
		if s.b.Len() >= restoreBatchBytes {
			if err := s.b.Commit(false); err != nil {
				return err
			}
			s.b.Close()
			s.b = f.db.NewBatch()
		}
	}
	var trailer [16]byte
	if _, err := io.ReadFull(br, trailer[:]); err != nil {
		return fmt.Errorf("%w: snapshot trailer: %v", ErrCorrupt, err)
	}
	if n := binary.BigEndian.Uint64(trailer[:8]); n != count {
		return fmt.Errorf("%w: snapshot holds %d records, trailer says %d", ErrCorrupt, count, n)
	}
	if sum := binary.BigEndian.Uint64(trailer[8:]); sum != h.Sum64() {
		return fmt.Errorf("%w: snapshot checksum mismatch", ErrCorrupt)
	}
	if err := s.writeMeta(applied); err != nil {
		return err
	}
	if err := s.b.Delete(storage.MetaKey(f.slot, storage.MetaRestoring)); err != nil {
		return err
	}
	if err := s.b.Commit(true); err != nil {
		return err
	}
	tm, err := lastTombstone(f.db, f.slot)
	if err != nil {
		return err
	}
	f.tombMax.Store(tm)
	f.applied.Store(applied)
	f.offsetCurrent.Store(false)
	f.offset.Store(s.offset)
	f.pending.Store(s.pending)
	f.restoring = false
	return nil
}

// restorePointer accepts a pointer to local state only when that state is
// there: the replica's applied index is at or past the pointer's.
func (f *SlotFSM) restorePointer(r io.Reader) error {
	var b [slotSnapMagicBytes + 2 + 8]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return fmt.Errorf("%w: snapshot pointer: %v", ErrCorrupt, err)
	}
	if slot := int(b[8])<<8 | int(b[9]); slot != f.slot {
		return fmt.Errorf("%w: snapshot pointer of slot %d offered to slot %d", ErrCorrupt, slot, f.slot)
	}
	if at := binary.BigEndian.Uint64(b[10:]); f.applied.Load() < at || f.restoring {
		return fmt.Errorf("slot %d: the snapshot at index %d points to local state that is gone (applied index %d); remove this replica's data so it is re-created from its peers", f.slot, at, f.applied.Load())
	}
	return nil
}

func readChunk(br *bufio.Reader, max int) ([]byte, error) {
	n, err := binary.ReadUvarint(br)
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot chunk length: %v", ErrCorrupt, err)
	}
	if n > uint64(max) {
		return nil, fmt.Errorf("%w: snapshot chunk of %d bytes", ErrCorrupt, n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(br, b); err != nil {
		return nil, fmt.Errorf("%w: snapshot chunk: %v", ErrCorrupt, err)
	}
	return b, nil
}

// restoreSchedule writes one schedule of a full snapshot and its due entry.
func (s *applyState) restoreSchedule(lower, keySuffix, val []byte) error {
	coll, id, err := storage.DecodeScheduleKey(append(append([]byte(nil), lower...), keySuffix...))
	if err != nil {
		return err
	}
	sc := &model.Schedule{Collection: coll, ID: id}
	if err := DecodeScheduleRecord(val, sc); err != nil {
		return err
	}
	return s.putSchedule(sc, 0)
}
