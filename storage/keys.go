package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Key layout. Every key of a slot starts with kindSlot and the slot number, so
// a slot's whole state is one contiguous span that can be range-deleted,
// snapshotted or compacted on its own:
//
//	0x01 slot(2) 0x01 name                               slot metadata (applied index, offset, ...)
//	0x01 slot(2) 0x10 len(coll) coll id                  job record
//	0x01 slot(2) 0x20 due(8) len(coll) coll id           due index: scheduled jobs by next fire time
//	0x01 slot(2) 0x30 len(coll) coll trigger(8) id       list index: every job of a collection by trigger time (empty value)
//	0x01 slot(2) 0x40 len(coll) coll finished(8) id      finished index: retention cleanup
//	0x01 slot(2) 0x50 len(coll) coll id                  schedule record
//	0x01 slot(2) 0x60 next(8) len(coll) coll id          schedule due index: schedules by next occurrence
//	0x01 slot(2) 0x70 created(8) len(coll) coll id       tombstone: a deleted job's incarnation, for a while (empty value)
//
// Times are unix milliseconds encoded big-endian with the sign bit flipped,
// so byte order is time order. The collection is length-prefixed, so a
// collection's keys form a span that no other collection's keys fall into.
const (
	kindSlot byte = 0x01

	subMeta     byte = 0x01
	subRecord   byte = 0x10
	subDue      byte = 0x20
	subList     byte = 0x30
	subFinished byte = 0x40
	subSchedule byte = 0x50
	subSchedDue byte = 0x60
	subTomb     byte = 0x70
)

// MaxCollectionLen and MaxIDLen bound the variable parts of keys.
const (
	MaxCollectionLen = 64
	MaxIDLen         = 255
)

// MaxSlots is the largest slot count the key encoding supports.
const MaxSlots = 1 << 16

// Metadata names inside a slot's metadata span.
const (
	MetaApplied   = "applied"   // last raft index applied to this slot's state
	MetaOffset    = "offset"    // no due entry is earlier than this (ms)
	MetaPending   = "pending"   // number of scheduled jobs
	MetaRestoring = "restoring" // present while a snapshot restore is in progress
)

// ErrBadKey reports a key that does not decode as the expected kind.
var ErrBadKey = errors.New("storage: malformed key")

func slotPrefix(dst []byte, slot int, sub byte) []byte {
	return append(dst, kindSlot, byte(slot>>8), byte(slot), sub)
}

// EncodeTime maps a signed millisecond time to 8 bytes whose byte order is
// numeric order.
func EncodeTime(dst []byte, ms int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(ms)^(1<<63))
}

// DecodeTime is the inverse of EncodeTime.
func DecodeTime(b []byte) int64 {
	return int64(binary.BigEndian.Uint64(b) ^ (1 << 63))
}

func appendColl(dst []byte, coll string) []byte {
	dst = append(dst, byte(len(coll)))
	return append(dst, coll...)
}

// SlotSpan returns the [lower, upper) bounds of every key of a slot.
func SlotSpan(slot int) (lower, upper []byte) {
	lower = []byte{kindSlot, byte(slot >> 8), byte(slot)}
	upper = []byte{kindSlot, byte((slot + 1) >> 8), byte(slot + 1)}
	if slot+1 == MaxSlots {
		upper = []byte{kindSlot + 1}
	}
	return lower, upper
}

// MetaFencePrefix starts the slot metadata names of collection fences
// (FenceKey).
const MetaFencePrefix = "fence/"

// FenceKey is the key of a deleted collection's fence in a slot: the
// lowest collection incarnation the slot still accepts writes of
// (raftfsm, PurgeCollection).
func FenceKey(slot int, coll string) []byte { return MetaKey(slot, MetaFencePrefix+coll) }

// FenceSpan returns the [lower, upper) bounds of a slot's fence keys.
func FenceSpan(slot int) (lower, upper []byte) {
	return MetaKey(slot, MetaFencePrefix), MetaKey(slot, "fence0") // '0' follows '/'
}

// MetaKey is the key of a slot metadata value.
func MetaKey(slot int, name string) []byte {
	return append(slotPrefix(make([]byte, 0, 4+len(name)), slot, subMeta), name...)
}

// RecordKey is the key of a job record.
func RecordKey(dst []byte, slot int, coll, id string) []byte {
	dst = slotPrefix(dst, slot, subRecord)
	dst = appendColl(dst, coll)
	return append(dst, id...)
}

// RecordSpan bounds every record of a slot.
func RecordSpan(slot int) (lower, upper []byte) {
	return slotPrefix(nil, slot, subRecord), slotPrefix(nil, slot, subRecord+1)
}

// CollectionRecordSpan bounds the records of one collection in a slot.
func CollectionRecordSpan(slot int, coll string) (lower, upper []byte) {
	lower = appendColl(slotPrefix(nil, slot, subRecord), coll)
	return lower, prefixEnd(lower)
}

// DecodeRecordKey returns the collection and id of a record key.
func DecodeRecordKey(key []byte) (slot int, coll, id string, err error) {
	slot, rest, err := splitSlotKey(key, subRecord)
	if err != nil {
		return 0, "", "", err
	}
	coll, rest, err = takeColl(rest)
	if err != nil {
		return 0, "", "", err
	}
	if len(rest) == 0 || len(rest) > MaxIDLen {
		return 0, "", "", fmt.Errorf("%w: record id length %d", ErrBadKey, len(rest))
	}
	return slot, coll, string(rest), nil
}

// DueKey is the key of a due-index entry.
func DueKey(dst []byte, slot int, due int64, coll, id string) []byte {
	dst = slotPrefix(dst, slot, subDue)
	dst = EncodeTime(dst, due)
	dst = appendColl(dst, coll)
	return append(dst, id...)
}

// DueBound is the smallest due key at or after time t; use it as an
// iterator bound.
func DueBound(slot int, t int64) []byte {
	return EncodeTime(slotPrefix(nil, slot, subDue), t)
}

// DueSpan bounds the whole due index of a slot.
func DueSpan(slot int) (lower, upper []byte) {
	return slotPrefix(nil, slot, subDue), slotPrefix(nil, slot, subDue+1)
}

// DueEntry is a decoded due-index key.
type DueEntry struct {
	Due  int64
	Coll string
	ID   string
}

// DecodeDueKey decodes a due-index key.
func DecodeDueKey(key []byte) (DueEntry, error) {
	_, rest, err := splitSlotKey(key, subDue)
	if err != nil {
		return DueEntry{}, err
	}
	if len(rest) < 8 {
		return DueEntry{}, fmt.Errorf("%w: short due key", ErrBadKey)
	}
	due := DecodeTime(rest)
	coll, rest, err := takeColl(rest[8:])
	if err != nil {
		return DueEntry{}, err
	}
	if len(rest) == 0 {
		return DueEntry{}, fmt.Errorf("%w: due key without id", ErrBadKey)
	}
	return DueEntry{Due: due, Coll: coll, ID: string(rest)}, nil
}

// ListKey is the key of a list-index entry: a collection's jobs by trigger
// time, whatever their status.
func ListKey(dst []byte, slot int, coll string, trigger int64, id string) []byte {
	dst = appendColl(slotPrefix(dst, slot, subList), coll)
	dst = EncodeTime(dst, trigger)
	return append(dst, id...)
}

// ListBound is the first list key of coll at or after trigger time t with an
// id at or after id.
func ListBound(slot int, coll string, t int64, id string) []byte {
	return ListKey(nil, slot, coll, t, id)
}

// CollectionListSpan bounds the list index of one collection in a slot.
func CollectionListSpan(slot int, coll string) (lower, upper []byte) {
	lower = appendColl(slotPrefix(nil, slot, subList), coll)
	return lower, prefixEnd(lower)
}

// DecodeListKey returns the trigger time and id of a list key.
func DecodeListKey(key []byte) (coll string, trigger int64, id string, err error) {
	return decodeCollTimeID(key, subList)
}

// FinishedKey is the key of a finished-index entry.
func FinishedKey(dst []byte, slot int, coll string, finished int64, id string) []byte {
	dst = appendColl(slotPrefix(dst, slot, subFinished), coll)
	dst = EncodeTime(dst, finished)
	return append(dst, id...)
}

// FinishedBefore bounds the finished entries of coll with finished time < t.
func FinishedBefore(slot int, coll string, t int64) (lower, upper []byte) {
	lower = appendColl(slotPrefix(nil, slot, subFinished), coll)
	upper = EncodeTime(append([]byte(nil), lower...), t)
	return lower, upper
}

// CollectionFinishedSpan bounds the finished index of one collection in a slot.
func CollectionFinishedSpan(slot int, coll string) (lower, upper []byte) {
	lower = appendColl(slotPrefix(nil, slot, subFinished), coll)
	return lower, prefixEnd(lower)
}

// DecodeFinishedKey returns the finished time and id of a finished key.
func DecodeFinishedKey(key []byte) (coll string, finished int64, id string, err error) {
	return decodeCollTimeID(key, subFinished)
}

// decodeCollTimeID decodes the shared shape of list and finished keys:
// collection, time, id.
func decodeCollTimeID(key []byte, sub byte) (coll string, t int64, id string, err error) {
	_, rest, err := splitSlotKey(key, sub)
	if err != nil {
		return "", 0, "", err
	}
	coll, rest, err = takeColl(rest)
	if err != nil {
		return "", 0, "", err
	}
	if len(rest) < 9 {
		return "", 0, "", fmt.Errorf("%w: short key of kind %#x", ErrBadKey, sub)
	}
	return coll, DecodeTime(rest), string(rest[8:]), nil
}

func splitSlotKey(key []byte, sub byte) (int, []byte, error) {
	if len(key) < 4 || key[0] != kindSlot || key[3] != sub {
		return 0, nil, fmt.Errorf("%w: want sub-kind %#x", ErrBadKey, sub)
	}
	return int(key[1])<<8 | int(key[2]), key[4:], nil
}

func takeColl(b []byte) (string, []byte, error) {
	if len(b) < 1 {
		return "", nil, fmt.Errorf("%w: missing collection", ErrBadKey)
	}
	n := int(b[0])
	if n == 0 || n > MaxCollectionLen || len(b) < 1+n {
		return "", nil, fmt.Errorf("%w: collection length %d", ErrBadKey, n)
	}
	return string(b[1 : 1+n]), b[1+n:], nil
}

// prefixEnd returns the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// ScheduleKey is the key of a schedule record. A schedule lives in the slot
// its collection and id hash to, like a job of that id.
func ScheduleKey(dst []byte, slot int, coll, id string) []byte {
	dst = slotPrefix(dst, slot, subSchedule)
	dst = appendColl(dst, coll)
	return append(dst, id...)
}

// ScheduleSpan bounds every schedule record of a slot.
func ScheduleSpan(slot int) (lower, upper []byte) {
	return slotPrefix(nil, slot, subSchedule), slotPrefix(nil, slot, subSchedule+1)
}

// CollectionScheduleSpan bounds the schedule records of one collection in a
// slot.
func CollectionScheduleSpan(slot int, coll string) (lower, upper []byte) {
	lower = appendColl(slotPrefix(nil, slot, subSchedule), coll)
	return lower, prefixEnd(lower)
}

// DecodeScheduleKey returns the collection and id of a schedule key.
func DecodeScheduleKey(key []byte) (coll, id string, err error) {
	_, rest, err := splitSlotKey(key, subSchedule)
	if err != nil {
		return "", "", err
	}
	coll, rest, err = takeColl(rest)
	if err != nil {
		return "", "", err
	}
	if len(rest) == 0 || len(rest) > MaxIDLen {
		return "", "", fmt.Errorf("%w: schedule id length %d", ErrBadKey, len(rest))
	}
	return coll, string(rest), nil
}

// SchedDueKey is the key of a schedule due-index entry: the schedule's next
// occurrence.
func SchedDueKey(dst []byte, slot int, next int64, coll, id string) []byte {
	dst = slotPrefix(dst, slot, subSchedDue)
	dst = EncodeTime(dst, next)
	dst = appendColl(dst, coll)
	return append(dst, id...)
}

// SchedDueBound is the smallest schedule due key at or after time t.
func SchedDueBound(slot int, t int64) []byte {
	return EncodeTime(slotPrefix(nil, slot, subSchedDue), t)
}

// SchedDueSpan bounds the whole schedule due index of a slot.
func SchedDueSpan(slot int) (lower, upper []byte) {
	return slotPrefix(nil, slot, subSchedDue), slotPrefix(nil, slot, subSchedDue+1)
}

// DecodeSchedDueKey decodes a schedule due-index key.
func DecodeSchedDueKey(key []byte) (DueEntry, error) {
	_, rest, err := splitSlotKey(key, subSchedDue)
	if err != nil {
		return DueEntry{}, err
	}
	if len(rest) < 8 {
		return DueEntry{}, fmt.Errorf("%w: short schedule due key", ErrBadKey)
	}
	due := DecodeTime(rest)
	coll, rest, err := takeColl(rest[8:])
	if err != nil {
		return DueEntry{}, err
	}
	if len(rest) == 0 {
		return DueEntry{}, fmt.Errorf("%w: schedule due key without id", ErrBadKey)
	}
	return DueEntry{Due: due, Coll: coll, ID: string(rest)}, nil
}

// TombKey is the tombstone of a deleted job's incarnation: the job's
// created_at (its create request's stamp), collection and id. While it
// lasts, a create carrying that stamp again — re-sent after its outcome was
// unknown — is known to have been applied already.
func TombKey(dst []byte, slot int, created int64, coll, id string) []byte {
	dst = slotPrefix(dst, slot, subTomb)
	dst = EncodeTime(dst, created)
	dst = appendColl(dst, coll)
	return append(dst, id...)
}

// TombsBefore bounds the tombstones of incarnations created before t.
func TombsBefore(slot int, t int64) (lower, upper []byte) {
	lower = slotPrefix(nil, slot, subTomb)
	return lower, EncodeTime(append([]byte(nil), lower...), t)
}

// TombSpan bounds every tombstone of a slot.
func TombSpan(slot int) (lower, upper []byte) {
	return slotPrefix(nil, slot, subTomb), slotPrefix(nil, slot, subTomb+1)
}
