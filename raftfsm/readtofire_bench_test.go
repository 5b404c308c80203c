package raftfsm

import (
	"context"
	"github.com/timemachine-db/timemachine/model"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/timemachine-db/timemachine/storage"
)

// BenchmarkReadToFire is the slot leader's read of each record it fires
// (GetJobs), per record, over 300,000 records whose key order is not
// their due order (hashed ids, as real ids are), compacted into one
// level, under 0, 5 or 10 L0 sublevels of outcomes rewriting records all
// over the key space (what a node firing 100,000 jobs a second carries,
// docs/benchmarks.md). "rounds" reads in dispatch rounds of 256 jobs, as
// the scheduler does; "window" reads 8,192 due jobs in one key-ordered
// pass, to show what reading a whole window at once would save; "scan"
// reads 8,192 records in key order with Next, what a record layout
// clustered by due time would make of firing. All three decode every
// record.
func BenchmarkReadToFire(b *testing.B) {
	const records = 300_000
	const acked = 120_000 // the last ids, rewritten by the L0 flushes
	id := func(n int) string { return "b" + strconv.FormatUint(uint64(n)*0x9E3779B97F4A7C15>>20, 36) }
	const t0 = int64(1e12)
	for _, l0 := range []int{0, 5, 10} {
		for _, mode := range []string{"rounds", "window", "scan"} {
			b.Run("l0="+strconv.Itoa(l0)+"/"+mode, func(b *testing.B) {
				db, _, entry := benchSlot(b, 128<<20)
				var cmds []Command
				for n := 0; n < records; n += 1000 {
					cmds = cmds[:0]
					for i := n; i < n+1000; i++ {
						cmds = append(cmds, &Create{Coll: "c", ID: id(i), Spec: spec(t0+int64(i), uint64(i)), Now: t0 - 1000})
					}
					entry(cmds...)
				}
				lo, hi := storage.RecordSpan(1)
				if err := db.Flush(); err != nil {
					b.Fatal(err)
				}
				if err := db.Compact(context.Background(), lo, hi); err != nil {
					b.Fatal(err)
				}
				for r := 0; r < l0; r++ {
					for n := 0; n < 20000; n += 100 {
						c := &AckMany{Coll: "c", Now: t0 + 1}
						for i := n; i < n+100; i++ {
							k := records - acked + (i*7+r*40009)%acked
							c.Jobs = append(c.Jobs, AckJob{ID: id(k), Version: 1, Success: true, Attempts: 1})
						}
						slices.SortFunc(c.Jobs, func(x, y AckJob) int { return strings.Compare(x.ID, y.ID) })
						entry(c)
					}
					if err := db.Flush(); err != nil {
						b.Fatal(err)
					}
				}
				per := 256
				if mode != "rounds" {
					per = 8192
				}
				refs := make([]storage.DueEntry, 0, per)
				read := 0
				b.ResetTimer()
				for n := 0; n < b.N; n += per {
					refs = refs[:0]
					for i := n; i < min(n+per, b.N); i++ {
						k := i % (records - acked)
						refs = append(refs, storage.DueEntry{Due: t0 + int64(k), Coll: "c", ID: id(k)})
					}
					if mode == "scan" {
						read += scanRecords(b, db, id(n%(records-acked)), min(per, b.N-n))
						continue
					}
					jobs, err := GetJobs(db, 1, refs)
					if err != nil {
						b.Fatal(err)
					}
					for _, j := range jobs {
						if j != nil {
							read++
						}
					}
				}
				if read != b.N {
					b.Fatalf("read %d of %d records", read, b.N)
				}
			})
		}
	}
}

// scanRecords decodes n records of slot 1 in key order from the first at
// or after from's (wrapping to the start of the span).
func scanRecords(b *testing.B, db *storage.DB, from string, n int) int {
	lo, hi := storage.RecordSpan(1)
	it, err := db.NewIter(lo, hi)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = it.Close() }()
	read := 0
	for ok := it.SeekGE(storage.RecordKey(nil, 1, "c", from)); read < n; ok = it.Next() {
		if !ok && !it.First() {
			b.Fatal("no records")
		}
		_, coll, jid, err := storage.DecodeRecordKey(it.Key())
		if err != nil {
			b.Fatal(err)
		}
		j := &model.Job{Collection: coll, ID: jid}
		if err := DecodeRecord(it.Value(), j); err != nil {
			b.Fatal(err)
		}
		read++
	}
	return read
}
