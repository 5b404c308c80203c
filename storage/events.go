package storage

import (
	"log/slog"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// stallLog reports what Pebble otherwise keeps to itself and an operator
// needs to see: a write stall (every write of the node waits for a flush or
// a compaction: too many memtables or L0 files, a slow or saturated disk)
// and a disk running low on space. A stall is logged when it begins, with
// Pebble's reason, and when it ends, with how long writes waited.
type stallLog struct {
	log *slog.Logger
	now func() time.Time

	mu    sync.Mutex
	since time.Time // zero: no stall
}

func (s *stallLog) listener() *pebble.EventListener {
	return &pebble.EventListener{
		WriteStallBegin: s.begin,
		WriteStallEnd:   s.end,
		LowDiskSpace: func(i pebble.LowDiskSpaceInfo) {
			s.log.Warn("the data directory's disk is running out of space: free some, or move the data directory to a larger disk (writes stop when it is full)",
				"available_bytes", i.AvailBytes, "total_bytes", i.TotalBytes, "below_percent", i.PercentThreshold)
		},
	}
}

func (s *stallLog) begin(i pebble.WriteStallBeginInfo) {
	s.mu.Lock()
	s.since = s.now()
	s.mu.Unlock()
	s.log.Warn("storage write stall: writes wait for Pebble's flushes or compactions (a slow or saturated disk, or more writes than it can absorb)", "reason", i.Reason)
}

func (s *stallLog) end() {
	s.mu.Lock()
	since := s.since
	s.since = time.Time{}
	s.mu.Unlock()
	if since.IsZero() {
		return
	}
	s.log.Info("storage write stall ended", "stalled_for", s.now().Sub(since).Round(time.Millisecond))
}
