package raftfsm

import (
	"math"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/timemachine-db/timemachine/model"
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
			_, f, entry := benchSlot(b, 64<<20)
			const per = 3
			apply := func(k int) {
				cmds := make([]Command, 0, per)
				for i := 0; i < per; i++ {
					n := k*per + i
					cmds = append(cmds, &Create{Coll: "c", ID: "bench-" + strconv.Itoa(n),
						Spec: spec(int64(1e12+n), uint64(n)), Now: int64(1e12 + n)})
				}
				entry(cmds...)
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

// BenchmarkApplyOccurrences applies what a slot's replicas apply for
// every-second schedules (issue 11 c): each second, one ScheduleAdvance
// per schedule (creating the occurrence job, in entries of up to 1,000),
// then one Ack per occurrence (in entries of 100), on disk, so Pebble
// flushes and compacts as it goes. "cpu-µs/occ" is the process's CPU time
// (getrusage: Pebble's flushes and compactions included) per occurrence.
func BenchmarkApplyOccurrences(b *testing.B) {
	// What a replica spends, not the test binaries' check of each
	// fired-record cache hit against storage.
	defer func(v, w bool) { verifyFired, verifySchedRecs = v, w }(verifyFired, verifySchedRecs)
	verifyFired, verifySchedRecs = false, false
	db, _, entry := benchSlot(b, 64<<20)
	const schedules = 2000
	apply := func(cmds []Command) {
		for _, r := range entry(cmds...) {
			if r.Code != model.CodeOK && r.Code != model.CodeCreated {
				b.Fatalf("%v: the benchmark would measure refusals", r.Code)
			}
		}
	}
	const t0 = int64(1e12)
	var cmds []Command
	for i := 0; i < schedules; i++ {
		cmds = append(cmds, &PutSchedule{Coll: "c", ID: "sched-" + strconv.Itoa(i), Spec: schedSpec(uint64(i)), Next: t0 + 1000, Now: t0})
	}
	apply(cmds)
	version := make([]uint64, schedules)
	for i := range version {
		version[i] = 1
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b.ResetTimer()
	c0 := cpu()
	occ := 0
	for sec := int64(1); occ < b.N; sec++ {
		at := t0 + sec*1000
		n := min(schedules, b.N-occ)
		for lo := 0; lo < n; lo += 1000 {
			cmds = cmds[:0]
			for i := lo; i < min(lo+1000, n); i++ {
				cmds = append(cmds, &ScheduleAdvance{Coll: "c", ID: "sched-" + strconv.Itoa(i), Version: version[i],
					Expected: at, Occurrence: at, Next: at + 1000, Now: at - 250})
			}
			apply(cmds)
		}
		for lo := 0; lo < n; lo += 100 {
			cmds = cmds[:0]
			for i := lo; i < min(lo+100, n); i++ {
				cmds = append(cmds, &Ack{Coll: "c", ID: model.OccurrenceID("sched-"+strconv.Itoa(i), at), Version: 1, Success: true, Attempts: 1, Now: at + 5})
			}
			apply(cmds)
		}
		occ += n
	}
	b.StopTimer()
	b.ReportMetric(float64((cpu()-c0).Microseconds())/float64(b.N), "cpu-µs/occ")
	st := db.Stats()
	b.ReportMetric(float64(st.Compactions), "compactions")
}

// BenchmarkFireAndAck is the storage side of a batched delivery (issue
// 11 b) per job: jobs created well before they fire (their records
// flushed out of the memtable), then, 100 at a time in trigger order
// (random in the record key space), the leader's read of their records
// and the apply of the AckMany that finishes them. "plain" reads with
// GetJobs and the apply reads each record again; "fired" reads with
// ReadJobsToFire and the apply takes the records from the fired-record
// cache. ns/op is per job.
func BenchmarkFireAndAck(b *testing.B) {
	for _, mode := range []string{"plain", "fired"} {
		b.Run(mode, func(b *testing.B) {
			db, f, entry := benchSlot(b, 128<<20)
			f.CacheFired(mode == "fired")
			// No hit checks here: they are a second read per job.
			defer func(v bool) { verifyFired = v }(verifyFired)
			verifyFired = false
			apply := func(cmds []Command) { entry(cmds...) }
			// ids whose key order is not their trigger order, as hashed bench ids are
			id := func(n int) string { return "b" + strconv.FormatUint(uint64(n)*0x9E3779B97F4A7C15>>20, 36) }
			const t0 = int64(1e12)
			var cmds []Command
			for n := 0; n < b.N; n += 1000 {
				cmds = cmds[:0]
				for i := n; i < min(n+1000, b.N); i++ {
					cmds = append(cmds, &Create{Coll: "c", ID: id(i), Spec: spec(t0+int64(i), uint64(i)), Now: t0 - 1000})
				}
				apply(cmds)
			}
			if err := db.Flush(); err != nil {
				b.Fatal(err)
			}
			refs := make([]storage.DueEntry, 0, 100)
			b.ResetTimer()
			for n := 0; n < b.N; n += 100 {
				refs = refs[:0]
				c := &AckMany{Coll: "c", Now: t0 + int64(n)}
				for i := n; i < min(n+100, b.N); i++ {
					refs = append(refs, storage.DueEntry{Due: t0 + int64(i), Coll: "c", ID: id(i)})
					c.Jobs = append(c.Jobs, AckJob{ID: id(i), Version: 1, Success: true, Attempts: 1})
				}
				var jobs []*model.Job
				var err error
				if mode == "fired" {
					jobs, err = f.ReadJobsToFire(refs)
				} else {
					jobs, err = GetJobs(db, 1, refs)
				}
				if err != nil || jobs[0] == nil {
					b.Fatalf("read: %v", err)
				}
				apply([]Command{c})
			}
			b.StopTimer()
			if mode == "fired" && f.fired.hits.Load() != uint64(b.N) {
				b.Fatalf("%d of %d acks read from the cache", f.fired.hits.Load(), b.N)
			}
		})
	}
}

// benchSlot opens slot 1's state machine on a fresh on-disk store and
// returns an apply that commits cmds as the next raft entry (and returns
// its results).
func benchSlot(b *testing.B, cacheBytes int64) (*storage.DB, *SlotFSM, func(cmds ...Command) []model.Result) {
	b.Helper()
	db, err := storage.Open(b.TempDir(), storage.Options{CacheBytes: cacheBytes})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	f, err := OpenSlotFSM(db, 1, quiet, func(err error) { b.Errorf("fatal: %v", err) })
	if err != nil {
		b.Fatal(err)
	}
	var idx uint64
	return db, f, func(cmds ...Command) []model.Result {
		idx++
		out := f.ApplyBatch([]*raft.Log{{Index: idx, Type: raft.LogCommand, Data: Encode(cmds...)}})
		r, ok := out[0].([]model.Result)
		if !ok {
			b.Fatalf("entry %d: %v", idx, out[0])
		}
		return r
	}
}
