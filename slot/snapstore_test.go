package slot

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/storage"
)

// A local snapshot is a pointer; opening it for a follower streams the full
// state, which another replica can restore.
func TestSnapshotStoreStreamsFullState(t *testing.T) {
	d := newFakeDeliverer()
	ts := openTestSlot(t, t.TempDir(), d)
	defer ts.close(t)
	trig := time.Now().Add(time.Hour).UnixMilli()
	for i := 0; i < 300; i++ {
		create(t, ts.r, fmt.Sprintf("s%d", i), trig)
	}
	if err := ts.r.Snapshot(); err != nil {
		t.Fatal(err)
	}
	metas, err := ts.r.snaps.List()
	if err != nil || len(metas) == 0 {
		t.Fatalf("no snapshot: %v", err)
	}
	if metas[0].Size > 64 {
		t.Fatalf("local snapshot is %d bytes; want a small pointer", metas[0].Size)
	}
	store := ts.r.snaps
	meta, rc, err := store.Open(metas[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if meta.Size <= 64 || meta.Index != metas[0].Index {
		t.Fatalf("streamed meta: size %d index %d", meta.Size, meta.Index)
	}

	db, err := storage.Open(filepath.Join(t.TempDir(), "other"), storage.Options{CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	other, err := raftfsm.OpenSlotFSM(db, 0, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Restore(rc); err != nil {
		t.Fatal(err)
	}
	if other.Pending() != 300 || other.Applied() < meta.Index {
		t.Fatalf("restored: pending %d applied %d (snapshot index %d)", other.Pending(), other.Applied(), meta.Index)
	}
	if j, ok, err := raftfsm.GetJob(db, 0, "default", "s299"); err != nil || !ok || j.TriggerTime != trig {
		t.Fatalf("restored job: %+v %v %v", j, ok, err)
	}
	matches, _ := filepath.Glob(filepath.Join(ts.r.cfg.Dir, "stream-*.tmp"))
	if len(matches) != 0 {
		t.Fatalf("temporary stream files left behind: %v", matches)
	}
}

// A crash while a snapshot streams to a follower leaves its temporary file
// behind; the replica removes such files when it opens, and keeps the rest
// of its directory.
func TestOpenRemovesStaleStreamFiles(t *testing.T) {
	dir := t.TempDir()
	raftDir := filepath.Join(dir, "raft")
	if err := os.MkdirAll(raftDir, 0o755); err != nil {
		t.Fatal(err)
	}
	stale := []string{filepath.Join(raftDir, "stream-123.tmp"), filepath.Join(raftDir, "stream-456.tmp")}
	keep := filepath.Join(raftDir, "notes.txt")
	for _, f := range append(stale, keep) {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ts := openTestSlot(t, dir, newFakeDeliverer())
	defer ts.close(t)
	for _, f := range stale {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s survived the open: %v", f, err)
		}
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("an unrelated file was removed: %v", err)
	}
}
