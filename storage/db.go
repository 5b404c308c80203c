package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Options configures the node's Pebble database.
type Options struct {
	// CacheBytes is the block cache size. Default 128 MiB: enough for the
	// hot head of every slot's due index and the records about to fire, small
	// enough that ten million pending jobs fit a 1 GiB resident budget.
	CacheBytes int64
	// MemTableBytes is the size of one memtable. Default 64 MiB: each
	// flush adds a sublevel to L0 that every record read then consults,
	// and a leader acknowledging 100,000 fired jobs a second rewrites
	// records all over the key space, faster than L0 compacts into the
	// levels below. With 32 MiB the read amplification reached 13–18
	// within 20 s of such firing and the node fell behind (89–91k of
	// 100k jobs/s in three of four runs, one write stall); with 64 MiB it
	// stayed at 6–10 and the node kept up in three of three
	// (docs/benchmarks.md, 2026-11-27). The memtables' memory is only
	// touched as it fills: an idle node's RSS does not change.
	MemTableBytes uint64
	// FS replaces the real filesystem (tests use a crashable in-memory FS).
	FS vfs.FS
	// Logger receives Pebble's own log lines. Default slog.Default().
	Logger *slog.Logger
	// OnFatal is called (once per failure) when Pebble reports an
	// unrecoverable error — corruption, a WAL write or sync that failed,
	// typically on a full disk. Carrying on could acknowledge writes that
	// are not durable, so the node must stop; the error wraps ErrFatal.
	// Pebble requires its Fatalf not to return: after OnFatal the
	// reporting goroutine blocks forever, and the database must not be
	// used (or closed) again. Without OnFatal it just blocks.
	OnFatal func(error)
}

// ErrFatal marks the errors Options.OnFatal receives: storage failed and
// the process must stop without using it again.
var ErrFatal = errors.New("storage failed")

// memTableStopWrites is how many memtables may exist at once (one being
// written, the rest waiting for their flush) before Pebble stops writes.
const memTableStopWrites = 4

// DB is the node's single Pebble instance.
type DB struct {
	pdb     *pebble.DB
	dir     string
	log     *slog.Logger
	onFatal func(error)
	disk    *diskWatch
}

// Open opens (creating if needed) the Pebble database in dir.
func Open(dir string, o Options) (*DB, error) {
	if o.CacheBytes <= 0 {
		o.CacheBytes = 128 << 20
	}
	if o.MemTableBytes == 0 {
		o.MemTableBytes = 64 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	lg := o.Logger.With("component", "pebble")
	plog := pebbleLogger{l: lg, onFatal: o.OnFatal}
	fs := o.FS
	if fs == nil {
		fs = vfs.Default
	}
	// Pebble reserves each memtable's size in the block cache it is given.
	// Given CacheBytes alone (as until 2026-11-27), the default 128 MiB
	// held 64–96 MiB of blocks while one or two 32 MiB memtables (the size
	// then) existed, and none at all when writes queued four: every record
	// read went to the file, its checksum and its decompression (a quarter
	// of the apply's CPU for every-second schedules, docs/benchmarks.md).
	// Room for the memtables on top keeps CacheBytes for blocks; the
	// memtables' own memory is allocated as it always was.
	cache := pebble.NewCache(o.CacheBytes + memTableStopWrites*int64(o.MemTableBytes))
	defer cache.Unref()
	po := &pebble.Options{
		Cache:                       cache,
		MemTableSize:                o.MemTableBytes,
		MemTableStopWritesThreshold: memTableStopWrites,
		L0CompactionThreshold:       4,
		L0StopWritesThreshold:       24,
		LBaseMaxBytes:               64 << 20,
		FormatMajorVersion:          pebble.FormatNewest,
		Logger:                      plog,
		FS:                          newFailStopFS(fs, plog),
		EventListener:               (&stallLog{log: lg, now: time.Now}).listener(),
	}
	po.CompactionConcurrencyRange = func() (int, int) { return 1, 2 }
	po.Experimental.CompactionScheduler = newQuietScheduler() // no 100 ms ticker while idle
	for i := range po.Levels {
		// Point lookups dominate (does this job id exist? read the record
		// about to fire): bloom filters make the misses nearly free.
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	// Job records are small and repetitive (same URL, same collection):
	// zstd on the lower levels is what keeps a pending job near 100 bytes.
	po.ApplyCompressionSettings(func() pebble.DBCompressionSettings { return pebble.DBCompressionFastest })
	pdb, err := pebble.Open(dir, po)
	if err != nil {
		return nil, fmt.Errorf("open storage at %s: %w (if the files are corrupt, stop the node, move the data directory aside and restore it from a replica or a backup)", dir, err)
	}
	return &DB{pdb: pdb, dir: dir, log: lg, onFatal: o.OnFatal, disk: startDiskWatch(dir, lg, statfsFree)}, nil
}

// Close flushes nothing extra: every acknowledged write is in a raft log,
// so an unflushed memtable is replayed from there after a restart.
func (d *DB) Close() error {
	d.disk.close()
	if err := d.pdb.Close(); err != nil {
		return fmt.Errorf("close storage: %w", err)
	}
	return nil
}

// Get copies the value of key into a new slice. found is false when the key
// does not exist.
func (d *DB) Get(key []byte) (val []byte, found bool, err error) {
	return get(d.pdb, key)
}

// NewIter returns an iterator over [lower, upper). Both bounds are required:
// see the package comment.
func (d *DB) NewIter(lower, upper []byte) (*Iter, error) {
	return newIter(d.pdb, lower, upper)
}

// NewBatch returns a write-only batch.
func (d *DB) NewBatch() *Batch { return &Batch{b: d.pdb.NewBatch(), db: d} }

// NewIndexedBatch returns a batch whose reads see its own writes merged with
// the database, which is what a state machine applying many commands in one
// batch needs (a later command must see an earlier one's effect).
func (d *DB) NewIndexedBatch() *Batch {
	return &Batch{b: d.pdb.NewIndexedBatch(), indexed: true, db: d}
}

// NewSnapshot pins a consistent point-in-time view.
func (d *DB) NewSnapshot() *Snapshot { return &Snapshot{s: d.pdb.NewSnapshot()} }

// SyncWAL makes every write committed so far durable. State-machine writes
// are committed without sync (the raft log is the durable record); a snapshot
// must sync before raft truncates the log behind it.
func (d *DB) SyncWAL() error {
	if err := d.write(func() error { return d.pdb.LogData(nil, pebble.Sync) }); err != nil {
		return fmt.Errorf("sync storage WAL: %w", err)
	}
	return nil
}

// write runs one write into Pebble (a batch commit, a WAL record),
// turning a panic into the storage-failure path. Pebble panics, rather
// than returning an error, when the write-ahead log cannot be written (a
// full disk: "pebble: error writing WAL"); unrecovered, that killed the
// node with exit status 2 and a goroutine dump instead of the documented
// exit 70 and an actionable message. The panic has left Pebble's commit
// pipeline locked, so no later write can succeed: like Fatalf, it is
// reported through OnFatal, and the error returned wraps ErrFatal.
func (d *DB) write(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			msg := fmt.Sprint(r)
			if e, ok := r.(error); ok {
				msg = e.Error()
			}
			pebbleLogger{l: d.log}.report(msg)
			err = fmt.Errorf("%w: %s", ErrFatal, msg)
			if d.onFatal != nil {
				d.onFatal(err)
			}
		}
	}()
	return fn()
}

// Compact compacts [lower, upper) fully, dropping tombstones.
func (d *DB) Compact(ctx context.Context, lower, upper []byte) error {
	if err := d.pdb.Compact(ctx, lower, upper, true); err != nil {
		return fmt.Errorf("compact storage: %w", err)
	}
	return nil
}

// DeleteSlot removes every key of a slot (a replica that moved away) with
// one range deletion, synced.
func (d *DB) DeleteSlot(slot int) error {
	lo, hi := SlotSpan(slot)
	b := d.pdb.NewBatch()
	defer b.Close()
	if err := b.DeleteRange(lo, hi, nil); err != nil {
		return fmt.Errorf("delete slot %d: %w", slot, err)
	}
	if err := d.write(func() error { return b.Commit(pebble.Sync) }); err != nil {
		return fmt.Errorf("delete slot %d: %w", slot, err)
	}
	return nil
}

// Flush writes the memtable to an sstable.
func (d *DB) Flush() error {
	if err := d.pdb.Flush(); err != nil {
		return fmt.Errorf("flush storage: %w", err)
	}
	return nil
}

// DiskUsage estimates the on-disk bytes of [lower, upper).
func (d *DB) DiskUsage(lower, upper []byte) (uint64, error) {
	n, err := d.pdb.EstimateDiskUsage(lower, upper)
	if err != nil {
		return 0, fmt.Errorf("estimate disk usage: %w", err)
	}
	return n, nil
}

// Stats are a few numbers about the engine worth exporting.
type Stats struct {
	DiskBytes      uint64
	MemTableBytes  uint64
	BlockCacheSize int64
	L0Files        int64
	Compactions    int64
	ReadAmp        int
}

// Stats reads the engine's metrics.
func (d *DB) Stats() Stats {
	m := d.pdb.Metrics()
	return Stats{
		DiskBytes:      m.DiskSpaceUsage(),
		MemTableBytes:  m.MemTable.Size,
		BlockCacheSize: m.BlockCache.Size,
		L0Files:        m.Levels[0].TablesCount,
		Compactions:    m.Compact.Count,
		ReadAmp:        m.ReadAmp(),
	}
}

// Reader is what both the database, a snapshot and an indexed batch offer.
type Reader interface {
	Get(key []byte) (val []byte, found bool, err error)
	NewIter(lower, upper []byte) (*Iter, error)
}

var (
	_ Reader = (*DB)(nil)
	_ Reader = (*Snapshot)(nil)
	_ Reader = (*Batch)(nil)
)

// Snapshot is a pinned read-only view.
type Snapshot struct{ s *pebble.Snapshot }

// Get reads key from the snapshot.
func (s *Snapshot) Get(key []byte) ([]byte, bool, error) { return get(s.s, key) }

// NewIter iterates [lower, upper) of the snapshot.
func (s *Snapshot) NewIter(lower, upper []byte) (*Iter, error) { return newIter(s.s, lower, upper) }

// Close releases the snapshot.
func (s *Snapshot) Close() error { return s.s.Close() }

// Batch collects writes committed atomically.
type Batch struct {
	b       *pebble.Batch
	indexed bool
	db      *DB
}

// Set writes key=val. The batch copies both.
func (b *Batch) Set(key, val []byte) error { return b.b.Set(key, val, nil) }

// Delete removes key.
func (b *Batch) Delete(key []byte) error { return b.b.Delete(key, nil) }

// DeleteRange removes every key in [lower, upper).
func (b *Batch) DeleteRange(lower, upper []byte) error { return b.b.DeleteRange(lower, upper, nil) }

// Get reads through the batch (indexed batches only).
func (b *Batch) Get(key []byte) ([]byte, bool, error) {
	if !b.indexed {
		return nil, false, errors.New("storage: Get on a write-only batch")
	}
	return get(b.b, key)
}

// NewIter iterates the batch merged with the database (indexed batches only).
func (b *Batch) NewIter(lower, upper []byte) (*Iter, error) {
	if !b.indexed {
		return nil, errors.New("storage: NewIter on a write-only batch")
	}
	return newIter(b.b, lower, upper)
}

// Empty reports whether the batch holds no writes.
func (b *Batch) Empty() bool { return b.b.Empty() }

// Len is the encoded size of the batch in bytes.
func (b *Batch) Len() int { return b.b.Len() }

// Commit applies the batch. sync=false leaves durability to the raft log.
func (b *Batch) Commit(sync bool) error {
	wo := pebble.NoSync
	if sync {
		wo = pebble.Sync
	}
	if err := b.db.write(func() error { return b.b.Commit(wo) }); err != nil {
		return fmt.Errorf("commit storage batch: %w", err)
	}
	return nil
}

// Close releases the batch; it must be called whether or not it committed.
func (b *Batch) Close() error { return b.b.Close() }

type getter interface {
	Get(key []byte) ([]byte, io.Closer, error)
}

func get(g getter, key []byte) ([]byte, bool, error) {
	v, closer, err := g.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("storage get: %w", err)
	}
	out := append([]byte(nil), v...)
	if err := closer.Close(); err != nil {
		return nil, false, fmt.Errorf("storage get: %w", err)
	}
	return out, true, nil
}

type iterMaker interface {
	NewIter(*pebble.IterOptions) (*pebble.Iterator, error)
}

func newIter(m iterMaker, lower, upper []byte) (*Iter, error) {
	if lower == nil || upper == nil {
		return nil, errors.New("storage: iterator needs both bounds")
	}
	it, err := m.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("storage iterator: %w", err)
	}
	return &Iter{it: it}, nil
}

// Iter is a bounded forward iterator. Key and Value are only valid until the
// next call that moves it; copy what must outlive that.
type Iter struct{ it *pebble.Iterator }

// First moves to the first key in bounds.
func (i *Iter) First() bool { return i.it.First() }

// SeekGE moves to the first key >= key.
func (i *Iter) SeekGE(key []byte) bool { return i.it.SeekGE(key) }

// SeekPrefixGE moves to key if it exists, using the bloom filters to skip
// levels that cannot hold it; the iterator is then valid only while it
// stays on key. It is the fast way to test many keys for existence with one
// iterator.
func (i *Iter) SeekPrefixGE(key []byte) bool { return i.it.SeekPrefixGE(key) }

// Last moves to the last key in bounds.
func (i *Iter) Last() bool { return i.it.Last() }

// Next advances.
func (i *Iter) Next() bool { return i.it.Next() }

// Prev moves back.
func (i *Iter) Prev() bool { return i.it.Prev() }

// Valid reports whether the iterator is positioned at a key.
func (i *Iter) Valid() bool { return i.it.Valid() }

// Key is the current key.
func (i *Iter) Key() []byte { return i.it.Key() }

// Value is the current value.
func (i *Iter) Value() []byte {
	v, err := i.it.ValueAndErr()
	if err != nil {
		return nil
	}
	return v
}

// Close releases the iterator and reports any error met while iterating.
func (i *Iter) Close() error {
	if err := i.it.Close(); err != nil {
		return fmt.Errorf("storage iterator: %w", err)
	}
	return nil
}

type pebbleLogger struct {
	l       *slog.Logger
	onFatal func(error)
}

func (p pebbleLogger) Infof(format string, args ...interface{}) {
	p.l.Debug(fmt.Sprintf(format, args...))
}

func (p pebbleLogger) Errorf(format string, args ...interface{}) {
	p.l.Error(fmt.Sprintf(format, args...))
}

// report logs the actionable message of a storage failure.
func (p pebbleLogger) report(msg string) {
	p.l.Error("storage failed; the node stops to protect acknowledged data. Check the disk (space, errors in dmesg), then restart the node; if the files are corrupt, move the data directory aside and let it re-replicate or restore it from a backup",
		"error", msg)
}

// Fatalf is called by Pebble on an unrecoverable error (corruption, a
// failed sync): carrying on would risk acknowledging writes that are gone.
// It reports the failure and never returns, as Pebble requires; stopping
// the process is the caller's (OnFatal) business.
func (p pebbleLogger) Fatalf(format string, args ...interface{}) {
	msg := fmt.Sprintf(format, args...)
	p.report(msg)
	if p.onFatal != nil {
		p.onFatal(fmt.Errorf("%w: %s", ErrFatal, msg))
	}
	select {} // Pebble's state is unknown past this point: never return into it
}
