package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// processCPU is the process's user + system CPU time in ns: a commit's
// cost on the cores it shares with everything else, fsync syscalls
// included.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkRaftLogAppend compares the two ways of giving 12 slot groups a
// durable raft log, each group appending small entries back to back (what
// a busy slot leader does): one raft-boltdb file per group, and the
// node's one shared RaftLogDB whose committer folds concurrent appends of
// all groups into one bolt transaction. ns/entry is wall time per appended
// entry over all groups, cpu-ns/entry the process CPU per entry (fsync
// syscalls included); docs/architecture.md explains the choice.
func BenchmarkRaftLogAppend(b *testing.B) {
	const groups, perAppend = 12, 4
	type appender interface {
		StoreLogs([]*raft.Log) error
	}
	run := func(b *testing.B, stores []appender) {
		data := make([]byte, 120) // about one small job's create command
		per := b.N/(groups*perAppend) + 1
		b.ResetTimer()
		start, cpu0 := time.Now(), processCPU()
		var wg sync.WaitGroup
		for g := range stores {
			wg.Add(1)
			go func(s appender) {
				defer wg.Done()
				idx := uint64(1)
				for i := 0; i < per; i++ {
					batch := make([]*raft.Log, perAppend)
					for k := range batch {
						batch[k] = &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}
						idx++
					}
					if err := s.StoreLogs(batch); err != nil {
						b.Error(err)
						return
					}
				}
			}(stores[g])
		}
		wg.Wait()
		n := per * groups * perAppend
		b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(n), "ns/entry")
		b.ReportMetric(float64(processCPU()-cpu0)/float64(n), "cpu-ns/entry")
	}
	b.Run("file-per-group", func(b *testing.B) {
		var stores []appender
		for g := 0; g < groups; g++ {
			rs, err := OpenRaftStores(filepath.Join(b.TempDir(), fmt.Sprint(g)), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer rs.Close()
			stores = append(stores, rs.Log)
		}
		run(b, stores)
	})
	b.Run("shared", func(b *testing.B) {
		db, err := OpenRaftLogDB(filepath.Join(b.TempDir(), "slots.db"), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		var stores []appender
		for g := 0; g < groups; g++ {
			gl, err := db.Group(fmt.Sprintf("slot-%d", g))
			if err != nil {
				b.Fatal(err)
			}
			stores = append(stores, gl)
		}
		run(b, stores)
		if st := db.WriterStats(); st.Commits > 0 {
			b.ReportMetric(float64(st.Entries)/float64(st.Commits), "entries/commit")
		}
	})
}

// BenchmarkTwoSyncCommit is the floor under every raft log commit on this
// disk: what a bolt commit does at the system-call level, without bolt —
// write the changed pages (8 × 4 KiB) and fdatasync, then write the meta
// page and fdatasync again. cpu-ns/commit is the process CPU of that
// (mostly kernel time in fdatasync), which a commit costs however few
// entries it carries.
func BenchmarkTwoSyncCommit(b *testing.B) {
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "x"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	pages, meta := make([]byte, 8*4096), make([]byte, 4096)
	// Written once, so the commits below overwrite allocated blocks (no
	// block allocation to journal), as a bolt file in steady state does.
	const span = 1000
	for i := 0; i < span; i++ {
		if _, err := f.WriteAt(pages, int64(4096+i*len(pages))); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		if _, err := f.WriteAt(pages, int64(4096+(i%span)*len(pages))); err != nil {
			b.Fatal(err)
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
		if _, err := f.WriteAt(meta, 0); err != nil {
			b.Fatal(err)
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/commit")
}
