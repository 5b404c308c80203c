package storage

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestIteratorsMustBeBounded(t *testing.T) {
	db, err := Open("db", Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.NewIter(nil, []byte{1}); err == nil {
		t.Error("an iterator without a lower bound was allowed")
	}
	if _, err := db.NewIter([]byte{1}, nil); err == nil {
		t.Error("an iterator without an upper bound was allowed")
	}
}

// TestCrashKeepsSyncedWrites is the storage half of the durability rule:
// writes committed without sync may be lost in a crash, but everything
// before a WAL sync survives — which is what a snapshot relies on before
// raft truncates the log behind it.
func TestCrashKeepsSyncedWrites(t *testing.T) {
	for _, unsynced := range []int{0, 50, 100} {
		t.Run(fmt.Sprintf("unsynced%d%%", unsynced), func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			db, err := Open("db", Options{FS: fs})
			if err != nil {
				t.Fatal(err)
			}
			put := func(from, to int) {
				b := db.NewBatch()
				for i := from; i < to; i++ {
					if err := b.Set(RecordKey(nil, 1, "c", fmt.Sprintf("k%05d", i)), []byte("v")); err != nil {
						t.Fatal(err)
					}
				}
				if err := b.Commit(false); err != nil {
					t.Fatal(err)
				}
				b.Close()
			}
			put(0, 500)
			put(500, 1000)
			if err := db.SyncWAL(); err != nil {
				t.Fatal(err)
			}
			put(1000, 1500) // not synced: may or may not survive
			crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: unsynced, RNG: rand.New(rand.NewPCG(uint64(unsynced), 7))})
			_ = db.Close()

			db2, err := Open("db", Options{FS: crashed})
			if err != nil {
				t.Fatal(err)
			}
			defer db2.Close()
			for i := 0; i < 1000; i++ {
				if _, ok, err := db2.Get(RecordKey(nil, 1, "c", fmt.Sprintf("k%05d", i))); err != nil || !ok {
					t.Fatalf("synced key %d lost in crash (err %v)", i, err)
				}
			}
			// Unsynced writes are all-or-nothing per batch, never torn.
			_, first, _ := db2.Get(RecordKey(nil, 1, "c", "k01000"))
			_, last, _ := db2.Get(RecordKey(nil, 1, "c", "k01499"))
			if first != last {
				t.Fatalf("unsynced batch torn by the crash: first=%v last=%v", first, last)
			}
		})
	}
}

func TestBatchReadsItsOwnWrites(t *testing.T) {
	db, err := Open("db", Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := db.NewIndexedBatch()
	defer b.Close()
	k := RecordKey(nil, 2, "c", "x")
	if err := b.Set(k, []byte("1")); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := b.Get(k); err != nil || !ok || string(v) != "1" {
		t.Fatalf("batch Get = %q %v %v", v, ok, err)
	}
	if _, ok, _ := db.Get(k); ok {
		t.Fatal("uncommitted write visible outside the batch")
	}
	lo, hi := SlotSpan(2)
	it, err := b.NewIter(lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	if !it.First() || string(it.Key()) != string(k) {
		t.Fatal("batch iterator misses its own write")
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	wo := db.NewBatch()
	defer wo.Close()
	if _, _, err := wo.Get(k); err == nil {
		t.Error("Get on a write-only batch succeeded")
	}
}

// Pebble takes each memtable's size out of the block cache it is given
// (a reservation), so a cache no larger than the memtables held no block
// at all while writes were going on: every read went to the file and its
// checksum. Open gives Pebble room for the memtables on top of
// CacheBytes, so that CacheBytes is what blocks get.
func TestMemtablesDoNotTakeTheBlockCache(t *testing.T) {
	db, err := Open(t.TempDir(), Options{CacheBytes: 1 << 20, MemTableBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := db.NewBatch()
	for i := 0; i < 20000; i++ {
		if err := b.Set([]byte(fmt.Sprintf("key-%06d", i)), []byte("value")); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	// The next memtable holds a write, and with it its reservation.
	b = db.NewBatch()
	if err := b.Set([]byte("another"), []byte("value")); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20000; i += 100 {
		if _, found, err := db.Get([]byte(fmt.Sprintf("key-%06d", i))); err != nil || !found {
			t.Fatalf("key-%06d: found %v, %v", i, found, err)
		}
	}
	if got := db.Stats().BlockCacheSize; got == 0 {
		t.Fatal("no block was cached: the memtables took the whole block cache")
	}
}
