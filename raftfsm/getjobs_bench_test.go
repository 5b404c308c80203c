package raftfsm

import (
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/timemachine-db/timemachine/storage"
)

// BenchmarkGetJobs reads due jobs the way a firing scheduler does: rounds
// of up to 256 refs in due order over 200k records spread across levels.
func BenchmarkGetJobs(b *testing.B) {
	db, err := storage.Open(b.TempDir(), storage.Options{CacheBytes: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	f, err := OpenSlotFSM(db, 1, quiet, func(err error) { b.Errorf("fatal: %v", err) })
	if err != nil {
		b.Fatal(err)
	}
	const n, per = 200000, 1000
	refs := make([]storage.DueEntry, 0, n)
	for idx := 0; idx < n/per; idx++ {
		cmds := make([]Command, 0, per)
		for i := 0; i < per; i++ {
			k := idx*per + i
			id := fmt.Sprintf("bench-%d", k)
			cmds = append(cmds, &Create{Coll: "c", ID: id, Spec: spec(int64(k), uint64(k)), Now: 1})
			refs = append(refs, storage.DueEntry{Due: int64(k), Coll: "c", ID: id})
		}
		f.ApplyBatch([]*raft.Log{{Index: uint64(idx + 1), Type: raft.LogCommand, Data: Encode(cmds...)}})
	}
	if err := db.Flush(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	const round = 256
	for i := 0; i < b.N; i++ {
		lo := (i * round) % (n - round)
		jobs, err := GetJobs(db, 1, refs[lo:lo+round])
		if err != nil || jobs[0] == nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*round), "ns/job")
}
