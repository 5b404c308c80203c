package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

// VoteFloor is what a deleted replica of a raft group had acknowledged, kept
// after its log is dropped so that a replica of the same group re-created
// later on this node, under the same server id, does not vote as if it were
// the old one with its memory wiped. A floor with Learn set stands for a
// replica that started with nothing stored and may be one whose node lost
// its data: it is learnt from the group's leaders (raftgroup's vote gate).
//
// Why: raft's safety rests on a voter never forgetting what it
// acknowledged. When a slot moves off a node and back (a drain and a
// rebalance seconds apart), the node deletes its replica and later opens an
// empty one with the same id. A peer that missed the move — restarted from
// before it, its configuration still naming the old replica — can ask the
// empty one for a vote; an empty raft grants any vote (it cannot tell a
// stale candidate from a group being formed), and the stale peer became
// leader next to the real one, without entries the old replica had helped
// commit (the nemesis: acknowledged creates, deletes and acks undone). The
// new replica therefore votes only once its own log is at least as
// up-to-date as the old one's last entry, and only in terms after the old
// one's (raftgroup's vote gate).
type VoteFloor struct {
	// Term is the old replica's current term: it may have voted in it.
	Term uint64
	// LastTerm and LastIndex are its last log entry (or snapshot).
	LastTerm, LastIndex uint64
	// Learn marks a floor still being learnt: the replica opened with
	// nothing stored, so what an earlier replica under its server id may
	// have acknowledged (a node whose data directory was lost, rejoining
	// under its old --node-id) is unknown. Term, LastTerm and LastIndex
	// are then what the group's leaders have said so far.
	Learn bool
}

// IsZero reports whether the floor asks nothing (no replica was deleted).
func (f VoteFloor) IsZero() bool { return f == VoteFloor{} }

// Covers reports whether a log whose last entry is (lastTerm, lastIndex) is
// at least as up-to-date as the floor's, by raft's rule: a later last term,
// or the same last term and an index at least as high.
func (f VoteFloor) Covers(lastTerm, lastIndex uint64) bool {
	return lastTerm > f.LastTerm || (lastTerm == f.LastTerm && lastIndex >= f.LastIndex)
}

// Max is the floor that asks what both ask (learning if either is).
func (f VoteFloor) Max(o VoteFloor) VoteFloor {
	out := f
	out.Term = max(f.Term, o.Term)
	out.Learn = f.Learn || o.Learn
	if o.LastTerm > f.LastTerm || (o.LastTerm == f.LastTerm && o.LastIndex > f.LastIndex) {
		out.LastTerm, out.LastIndex = o.LastTerm, o.LastIndex
	}
	return out
}

// bucketFloors holds one VoteFloor per group name that had a replica
// deleted on this node. Floors are never removed: a few bytes per slot.
var bucketFloors = []byte("floors")

// Floor formats: v1 is three uvarints (term, last term, last index); v2
// adds a flags byte before them (bit 0: Learn). A floor without Learn is
// still written as v1, so a binary from before v2 reads what it can.
const (
	floorV1 = 1
	floorV2 = 2

	floorLearn = 1 << 0
)

var errBadFloor = errors.New("corrupt vote floor")

func encodeFloor(f VoteFloor) []byte {
	b := []byte{floorV1}
	if f.Learn {
		b = []byte{floorV2, floorLearn}
	}
	b = binary.AppendUvarint(b, f.Term)
	b = binary.AppendUvarint(b, f.LastTerm)
	return binary.AppendUvarint(b, f.LastIndex)
}

func decodeFloor(b []byte) (VoteFloor, error) {
	var learn bool
	switch {
	case len(b) >= 1 && b[0] == floorV1:
		b = b[1:]
	case len(b) >= 2 && b[0] == floorV2:
		if b[1]&^floorLearn != 0 {
			return VoteFloor{}, fmt.Errorf("%w: unknown flags %#x", errBadFloor, b[1])
		}
		learn = b[1]&floorLearn != 0
		b = b[2:]
	default:
		return VoteFloor{}, fmt.Errorf("%w: unknown format", errBadFloor)
	}
	var v [3]uint64
	for i := range v {
		x, n := binary.Uvarint(b)
		if n <= 0 {
			return VoteFloor{}, fmt.Errorf("%w: truncated", errBadFloor)
		}
		v[i], b = x, b[n:]
	}
	if len(b) != 0 {
		return VoteFloor{}, fmt.Errorf("%w: trailing bytes", errBadFloor)
	}
	return VoteFloor{Term: v[0], LastTerm: v[1], LastIndex: v[2], Learn: learn}, nil
}

// SetVoteFloor records f as the group's floor, replacing what was there
// (raftgroup's vote gate: a learning floor as it is learnt, then the
// learnt one). The write is durable when it returns.
func (d *RaftLogDB) SetVoteFloor(group string, f VoteFloor) error {
	err := d.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketFloors)
		if err != nil {
			return err
		}
		if f.IsZero() {
			return b.Delete([]byte(group))
		}
		return b.Put([]byte(group), encodeFloor(f))
	})
	if err != nil {
		return fmt.Errorf("record vote floor of %s: %w", group, err)
	}
	return nil
}

// VoteFloor returns the floor recorded for group (zero when no replica of
// it was ever deleted here).
func (d *RaftLogDB) VoteFloor(group string) (VoteFloor, error) {
	var f VoteFloor
	err := d.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketFloors)
		if b == nil {
			return nil
		}
		v := b.Get([]byte(group))
		if v == nil {
			return nil
		}
		var err error
		f, err = decodeFloor(v)
		return err
	})
	if err != nil {
		return VoteFloor{}, fmt.Errorf("read vote floor of %s: %w", group, err)
	}
	return f, nil
}

// groupFloor reads, inside tx, what the group's stored raft state says it
// acknowledged: its current term and its last log entry.
func groupFloor(tx *bolt.Tx, name string) (VoteFloor, error) {
	prefix := append([]byte(name), 0)
	var f VoteFloor
	if v := tx.Bucket(bucketConf).Get(append(append([]byte(nil), prefix...), keyCurrentTerm...)); len(v) == 8 {
		f.Term = binary.BigEndian.Uint64(v)
	}
	c := tx.Bucket(bucketLogs).Cursor()
	end := append([]byte(name), 1) // the first key after the group's
	var k, v []byte
	if next, _ := c.Seek(end); next == nil {
		// No key after the group's: its last key, if any, is the file's.
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	if k != nil && bytes.HasPrefix(k, prefix) && len(k) == len(prefix)+8 {
		idx := binary.BigEndian.Uint64(k[len(prefix):])
		var l raft.Log
		if err := decodeLog(idx, v, &l); err != nil {
			return VoteFloor{}, err
		}
		f.LastTerm, f.LastIndex = l.Term, idx
	}
	return f, nil
}

// recordFloor raises the group's stored floor to what its raft state in
// tx says, and to extra (what the replica's snapshots say: a follower that
// installed a snapshot may have no log entry after it).
func recordFloor(tx *bolt.Tx, name string, extra VoteFloor) error {
	f, err := groupFloor(tx, name)
	if err != nil {
		return err
	}
	b, err := tx.CreateBucketIfNotExists(bucketFloors)
	if err != nil {
		return err
	}
	f = f.Max(extra)
	if v := b.Get([]byte(name)); v != nil {
		old, err := decodeFloor(v)
		if err != nil {
			return err
		}
		f = f.Max(old)
	}
	if f.IsZero() {
		return nil
	}
	return b.Put([]byte(name), encodeFloor(f))
}

// keyCurrentTerm is hashicorp/raft's stable-store key for the current term.
var keyCurrentTerm = []byte("CurrentTerm")
