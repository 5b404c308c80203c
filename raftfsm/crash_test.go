package raftfsm

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"

	"github.com/timemachine-db/timemachine/storage"
)

// Acknowledged creates survive a crash at any point, on a disk that loses
// whatever was not synced (Pebble's crashable MemFS, cloned as a crash
// would leave it: a random share of the unsynced data kept, the rest
// lost). A create is acknowledged once its raft entry is durable in the
// raft log (bbolt, fsynced on every append — modelled here as the entries
// the test keeps), while the state machine writes into Pebble without
// sync; a snapshot syncs Pebble before raft may drop the entries it
// covers. After the crash the node does what raft does on a restart:
// restore the latest snapshot, then replay the entries the log still
// holds. Every acknowledged job must be there, with the FSM's applied
// index never behind the snapshot that truncated the log.
func TestAcknowledgedCreatesSurviveACrashAtAnyPoint(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { crashOnce(t, seed) })
	}
}

func crashOnce(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 11))
	fs := vfs.NewCrashableMem()
	db, err := storage.Open("db", storage.Options{FS: fs, CacheBytes: 1 << 20, MemTableBytes: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	f, err := OpenSlotFSM(db, 3, quiet, func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	var (
		raftLog  []*raft.Log // the durable raft log: entries after the last truncation
		snap     []byte      // the latest persisted snapshot
		snapIdx  uint64
		acked    []string
		crashAt  = 1 + rng.IntN(300)
		index    uint64
		pendingB []*raft.Log
	)
	for n := 0; n < crashAt; n++ {
		index++
		id := fmt.Sprintf("j%d", index)
		l := &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: Encode(&Create{Coll: "c", ID: id, Spec: spec(int64(1000+index), index), Now: 1})}
		raftLog = append(raftLog, l) // durable: the create is acknowledged once applied
		pendingB = append(pendingB, l)
		if rng.IntN(3) == 0 || n == crashAt-1 {
			f.ApplyBatch(pendingB) // raft applies committed entries in batches
			for _, p := range pendingB {
				acked = append(acked, fmt.Sprintf("j%d", p.Index))
			}
			pendingB = nil
		}
		if len(pendingB) == 0 && rng.IntN(25) == 0 {
			s, err := f.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			var sk sink
			if err := s.Persist(&sk); err != nil {
				t.Fatal(err)
			}
			s.Release()
			snap, snapIdx = sk.Bytes(), f.Applied()
			// raft then truncates the log up to the snapshot.
			for len(raftLog) > 0 && raftLog[0].Index <= snapIdx {
				raftLog = raftLog[1:]
			}
		}
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rng})
	_ = db.Close()

	db2, err := storage.Open("db", storage.Options{FS: crashed, CacheBytes: 1 << 20})
	if err != nil {
		t.Fatalf("reopen after the crash: %v", err)
	}
	defer db2.Close()
	f2, err := OpenSlotFSM(db2, 3, quiet, func(err error) { t.Errorf("fatal after the crash: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	if f2.Applied() < snapIdx {
		t.Fatalf("after the crash the FSM is at %d, behind the snapshot at %d that truncated the log", f2.Applied(), snapIdx)
	}
	if snap != nil {
		if err := f2.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
			t.Fatalf("restore the snapshot at %d: %v", snapIdx, err)
		}
	}
	f2.ApplyBatch(raftLog) // raft replays what its log holds; the FSM skips what it has
	for _, id := range acked {
		if _, ok, err := GetJob(db2, 3, "c", id); err != nil || !ok {
			t.Fatalf("acknowledged %s lost in the crash (crash after %d entries, snapshot at %d, FSM at %d): %v",
				id, index, snapIdx, f2.Applied(), err)
		}
	}
	if f2.Applied() != index {
		t.Fatalf("applied %d after the replay, want %d", f2.Applied(), index)
	}
}
