package raftfsm

import (
	"math"
	"strconv"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/timemachine-db/timemachine/storage"
)

// BenchmarkApplySingleCreates applies creates the way single-job requests
// from many clients arrive: three creates per raft entry (the measured
// mean under 64 clients and 12 slots, docs/benchmarks.md), new ids, stamps
// that grow. "tomb-lookup" forces the tombstone Get every create did
// before SlotFSM.tombMax; "bounded" is the normal path.
func BenchmarkApplySingleCreates(b *testing.B) {
	for _, mode := range []string{"tomb-lookup", "bounded"} {
		b.Run(mode, func(b *testing.B) {
			db, err := storage.Open(b.TempDir(), storage.Options{CacheBytes: 64 << 20})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			f, err := OpenSlotFSM(db, 1, quiet, func(err error) { b.Errorf("fatal: %v", err) })
			if err != nil {
				b.Fatal(err)
			}
			const per = 3
			var idx uint64
			apply := func(k int) {
				cmds := make([]Command, 0, per)
				for i := 0; i < per; i++ {
					n := k*per + i
					cmds = append(cmds, &Create{Coll: "c", ID: "bench-" + strconv.Itoa(n),
						Spec: spec(int64(1e12+n), uint64(n)), Now: int64(1e12 + n)})
				}
				idx++
				f.ApplyBatch([]*raft.Log{{Index: idx, Type: raft.LogCommand, Data: Encode(cmds...)}})
			}
			// 60k jobs already there, as in the middle of a benchmark run.
			for k := 0; k < 20000; k++ {
				apply(k)
			}
			if mode == "tomb-lookup" {
				f.tombMax.Store(math.MaxInt64)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				apply(20000 + i)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*per), "ns/create")
		})
	}
}
