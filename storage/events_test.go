package storage

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// A write stall is logged when it begins, with Pebble's reason, and when it
// ends, with how long writes waited; a low disk says what to do.
func TestStallLog(t *testing.T) {
	var buf bytes.Buffer
	at := time.Unix(100, 0)
	s := &stallLog{log: slog.New(slog.NewTextHandler(&buf, nil)), now: func() time.Time { return at }}
	l := s.listener()
	l.WriteStallEnd() // no stall began: nothing
	l.WriteStallBegin(pebble.WriteStallBeginInfo{Reason: "memtable count limit reached"})
	at = at.Add(1500 * time.Millisecond)
	l.WriteStallEnd()
	l.LowDiskSpace(pebble.LowDiskSpaceInfo{AvailBytes: 1 << 20, TotalBytes: 1 << 30, PercentThreshold: 5})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("logged %d lines:\n%s", len(lines), buf.String())
	}
	for i, want := range []string{
		`level=WARN msg="storage write stall`,
		`stalled_for=1.5s`,
		`available_bytes=1048576`,
	} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d: %s; want %s", i, lines[i], want)
		}
	}
	if !strings.Contains(lines[0], `reason="memtable count limit reached"`) {
		t.Errorf("the reason is missing: %s", lines[0])
	}
}
