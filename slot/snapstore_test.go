package slot

import (
	"fmt"
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
