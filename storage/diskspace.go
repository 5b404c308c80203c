package storage

import (
	"log/slog"
	"sync"
	"time"
)

// diskWatch warns before the data directory's disk is full. Pebble's own
// low-space event fires only when it creates a file, and a node whose
// writes all went to its WAL and the raft log filled a disk without a
// word before the failure (a black-box review: two fills of a 64 MiB
// disk, no warning). Every diskCheckEvery it reads the file system's free
// space: below the threshold (lowSpace) it warns, again each time the free
// space has halved since the last warning, and says so when it is back
// above one and a half times the threshold.
type diskWatch struct {
	dir   string
	log   *slog.Logger
	free  func(dir string) (avail, total uint64, err error)
	stop  chan struct{}
	done  sync.WaitGroup
	once  sync.Once
	lastW uint64 // free bytes at the last warning; 0: not low
}

// diskCheckEvery is how often the free space is read: a statfs every 2 s
// costs an idle node nothing measurable, and a disk filling at the node's
// write rate (tens of MB/s) is seen with a few seconds to spare even on a
// small volume (a 64 MiB one filled in 10 s in the review's test).
const diskCheckEvery = 2 * time.Second

// lowSpace is the free space below which the disk counts as low: a tenth
// of the disk, at most 2 GiB.
func lowSpace(total uint64) uint64 { return min(total/10, 2<<30) }

func startDiskWatch(dir string, log *slog.Logger, free func(string) (uint64, uint64, error)) *diskWatch {
	w := &diskWatch{dir: dir, log: log, free: free, stop: make(chan struct{})}
	if free == nil {
		return w
	}
	w.check()
	w.done.Add(1)
	go func() {
		defer w.done.Done()
		t := time.NewTicker(diskCheckEvery)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
				w.check()
			}
		}
	}()
	return w
}

// check reads the free space once and logs what changed.
func (w *diskWatch) check() {
	avail, total, err := w.free(w.dir)
	if err != nil || total == 0 {
		return
	}
	low := lowSpace(total)
	switch {
	case avail < low && (w.lastW == 0 || avail <= w.lastW/2):
		w.lastW = max(avail, 1)
		w.log.Warn("the data directory's disk is running out of space: free some, or move the data directory to a larger disk (the node stops when it is full, exit 70)",
			"dir", w.dir, "available_bytes", avail, "total_bytes", total)
	case w.lastW != 0 && avail > low+low/2:
		w.lastW = 0
		w.log.Info("the data directory's disk has space again", "dir", w.dir, "available_bytes", avail, "total_bytes", total)
	}
}

func (w *diskWatch) close() {
	if w == nil {
		return
	}
	w.once.Do(func() { close(w.stop) })
	w.done.Wait()
}
