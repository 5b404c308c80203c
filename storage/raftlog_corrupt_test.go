package storage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

// writeLogFile makes a raft log file holding entries 1..50 of group
// "slot-1", entry i's data being "mark-<i>-zzz…", and returns its path.
func writeLogFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "slots.db")
	db, err := OpenRaftLogDB(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := db.Group("slot-1")
	if err != nil {
		t.Fatal(err)
	}
	var ls []*raft.Log
	for i := uint64(1); i <= 50; i++ {
		ls = append(ls, &raft.Log{Index: i, Term: 3, Type: raft.LogCommand,
			Data: []byte(fmt.Sprintf("mark-%02d-%s", i, strings.Repeat("z", 40))), AppendedAt: time.Unix(0, int64(i))})
	}
	if err := g.StoreLogs(ls); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// A bit flipped inside an entry on disk stops the open with the file, the
// entry and what to do: it was replayed as written (a reviewer changed a
// job's trigger time this way, and the job fired 115 s early).
func TestRaftLogFlippedBitRefusedAtOpen(t *testing.T) {
	path := writeLogFile(t)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(raw, []byte("mark-17-"))
	if at < 0 {
		t.Fatal("entry 17 not found in the file")
	}
	raw[at+5] ^= 0x01 // "mark-07-…" would decode fine without a checksum
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = OpenRaftLogDB(path, nil)
	if err == nil || !errors.Is(err, ErrCorruptLog) {
		t.Fatalf("open: %v, want ErrCorruptLog", err)
	}
	for _, want := range []string{path, "slot-1", "index 17", "checksum mismatch", "move its data directory aside"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not name %q", err, want)
		}
	}
}

// A file cut short (a torn copy, a truncated disk image) or with a
// damaged page stops the open with a message naming the file and what to
// do, not with bolt's panic or a fault in its memory map.
func TestRaftLogDamagedFileRefusedAtOpen(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func([]byte) []byte
	}{
		{"truncated to half", func(b []byte) []byte { return b[:len(b)/2] }},
		{"last page cut", func(b []byte) []byte { return b[:len(b)-4096] }},
		{"a page header overwritten", func(b []byte) []byte {
			for i := 8192; i < 8192+16 && i < len(b); i++ {
				b[i] = 0xff
			}
			return b
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := writeLogFile(t)
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, c.damage(raw), 0o600); err != nil {
				t.Fatal(err)
			}
			db, err := OpenRaftLogDB(path, nil)
			if err == nil {
				// Damage bolt does not notice must still leave every entry
				// readable as written, or be refused.
				t.Log("opened: the damage hit nothing read")
				defer db.Close()
				g, gerr := db.Group("slot-1")
				if gerr != nil {
					t.Fatal(gerr)
				}
				for i := uint64(1); i <= 50; i++ {
					var l raft.Log
					if err := g.GetLog(i, &l); err != nil && !errors.Is(err, raft.ErrLogNotFound) {
						t.Fatalf("entry %d after an open that succeeded: %v", i, err)
					}
				}
				return
			}
			t.Logf("refused: %v", err)
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "move its data directory aside") {
				t.Fatalf("the error %q does not name the file and what to do", err)
			}
		})
	}
}

// Entries written before checksums (format 1) are read as they are.
func TestRaftLogReadsFormat1(t *testing.T) {
	path := writeLogFile(t)
	v1 := []byte{logV1, 3, byte(raft.LogCommand), 0}
	v1 = append(v1, byte(len("old")))
	v1 = append(v1, "old"...)
	v1 = append(v1, 0)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := &GroupLog{prefix: []byte("slot-1\x00")}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketLogs).Put(g.indexKey(51), v1) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	d, err := OpenRaftLogDB(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	gl, err := d.Group("slot-1")
	if err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := gl.GetLog(51, &l); err != nil || string(l.Data) != "old" || l.Term != 3 {
		t.Fatalf("format-1 entry: %+v %v", l, err)
	}
	if err := gl.GetLog(50, &l); err != nil || !strings.HasPrefix(string(l.Data), "mark-50-") {
		t.Fatalf("format-2 entry: %+v %v", l, err)
	}
}
