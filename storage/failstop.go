package storage

import (
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// failStopFS is the filesystem under Pebble: the first write, sync or
// file creation that fails stops storage there. It reports the failure
// (the operator's message, then Options.OnFatal with an error wrapping
// ErrFatal) and never returns into Pebble, as Fatalf does.
//
// Why not let Pebble see the error: Pebble cannot go on after a failed
// write-ahead-log write and panics, and where it panics decides whether
// the node can stop cleanly. A commit that finds the WAL broken panics in
// the committing goroutine, which DB.write recovers; but a commit that
// rotates the memtable at that moment panics with one of Pebble's locks
// already released, and the deferred unlock that follows is a fatal
// runtime error ("sync: unlock of unlocked mutex") that no recover sees:
// the node died with exit status 2 and a goroutine dump instead of the
// documented status 70 and a message saying to check the disk
// (TestFullDiskWALWriteStopsTheNode failed about one run in ten).
// Stopping at the file keeps Pebble out of both paths: its flusher, and
// then any goroutine waiting for it, blocks, while the node exits on
// OnFatal. Reads are untouched: a failed read is an error to its caller.
type failStopFS struct {
	vfs.FS
	once sync.Once
	stop func(error) // reports, once
}

func newFailStopFS(fs vfs.FS, log pebbleLogger) *failStopFS {
	f := &failStopFS{FS: fs}
	f.stop = func(err error) {
		f.once.Do(func() {
			msg := err.Error()
			log.report(msg)
			if log.onFatal != nil {
				log.onFatal(fmt.Errorf("%w: %s", ErrFatal, msg))
			}
		})
	}
	return f
}

// failed reports err (once for the whole filesystem) and blocks forever.
func (f *failStopFS) failed(op, name string, err error) {
	f.stop(fmt.Errorf("pebble: %s %s: %w", op, name, err))
	select {} // Pebble's state is unknown past this point: never return into it
}

func (f *failStopFS) wrap(file vfs.File, name string) vfs.File {
	return &failStopFile{File: file, fs: f, name: name}
}

// Create implements vfs.FS.
func (f *failStopFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.Create(name, c)
	if err != nil {
		f.failed("create", name, err)
	}
	return f.wrap(file, name), nil
}

// OpenReadWrite implements vfs.FS.
func (f *failStopFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	file, err := f.FS.OpenReadWrite(name, c, opts...)
	if err != nil {
		return nil, err // may be a missing file: Pebble decides
	}
	return f.wrap(file, name), nil
}

// ReuseForWrite implements vfs.FS.
func (f *failStopFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.ReuseForWrite(oldname, newname, c)
	if err != nil {
		f.failed("reuse", newname, err)
	}
	return f.wrap(file, newname), nil
}

// OpenDir implements vfs.FS: a directory is synced after files are
// created in it.
func (f *failStopFS) OpenDir(name string) (vfs.File, error) {
	file, err := f.FS.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return f.wrap(file, name), nil
}

// Unwrap implements vfs.FS.
func (f *failStopFS) Unwrap() vfs.FS { return f.FS }

// failStopFile stops storage on the first failed write or sync.
type failStopFile struct {
	vfs.File
	fs   *failStopFS
	name string
}

func (w *failStopFile) Write(p []byte) (int, error) {
	n, err := w.File.Write(p)
	if err != nil {
		w.fs.failed("write", w.name, err)
	}
	return n, nil
}

func (w *failStopFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := w.File.WriteAt(p, off)
	if err != nil {
		w.fs.failed("write", w.name, err)
	}
	return n, nil
}

func (w *failStopFile) Sync() error {
	if err := w.File.Sync(); err != nil {
		w.fs.failed("sync", w.name, err)
	}
	return nil
}

func (w *failStopFile) SyncData() error {
	if err := w.File.SyncData(); err != nil {
		w.fs.failed("sync", w.name, err)
	}
	return nil
}

func (w *failStopFile) SyncTo(length int64) (bool, error) {
	full, err := w.File.SyncTo(length)
	if err != nil {
		w.fs.failed("sync", w.name, err)
	}
	return full, nil
}
