package slot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/timemachine-db/timemachine/internal/testutil"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/raftgroup"
	"github.com/timemachine-db/timemachine/rpc/mux"
	"github.com/timemachine-db/timemachine/storage"
)

// node is the storage one node's replicas share.
type sharedStorage struct {
	db    *storage.DB
	logDB *storage.RaftLogDB
	mux   *mux.Mux
	dir   string
	log   *slog.Logger
	meta  *raftfsm.MetaFSM
}

func openShared(t *testing.T) *sharedStorage {
	t.Helper()
	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	db, err := storage.Open(filepath.Join(dir, "pebble"), storage.Options{Logger: log, CacheBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	logDB, err := storage.OpenRaftLogDB(filepath.Join(dir, "slots.db"), log)
	if err != nil {
		t.Fatal(err)
	}
	m, err := mux.Listen("127.0.0.1:0", log)
	if err != nil {
		t.Fatal(err)
	}
	ss := &sharedStorage{db: db, logDB: logDB, mux: m, dir: dir, log: log, meta: raftfsm.NewMetaFSM()}
	t.Cleanup(func() {
		_ = m.Close()
		_ = logDB.Close()
		_ = db.Close()
	})
	return ss
}

func (ss *sharedStorage) slotDir(s int) string {
	return filepath.Join(ss.dir, fmt.Sprintf("slot-%04d", s))
}

// open opens (and, when it is new, bootstraps as a single voter) this
// node's replica of slot s and waits until it leads.
func (ss *sharedStorage) open(t *testing.T, s int) *Replica {
	t.Helper()
	sl, err := ss.mux.StreamLayer(uint16(s), nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open(Config{
		Slot: s, NodeID: "n1", Dir: ss.slotDir(s), LogDB: ss.logDB, DB: ss.db, Stream: sl,
		Meta: ss.meta.State, Deliverer: newFakeDeliverer(), Logger: ss.log,
		Timing: raftgroup.Timing{HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond, LeaderLeaseTimeout: 50 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Bootstrap([]raft.Server{{ID: "n1", Address: raft.ServerAddress(ss.mux.Addr().String())}}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, fmt.Sprintf("slot %d leads", s), testutil.True(r.IsLeader))
	return r
}

func (ss *sharedStorage) slotKeys(t *testing.T, s int) int {
	t.Helper()
	lo, hi := storage.SlotSpan(s)
	it, err := ss.db.NewIter(lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	return n
}

func writeJobs(ctx context.Context, r *Replica, prefix string, n int) error {
	due := time.Now().Add(time.Hour).UnixMilli()
	for i := 0; i < n; i++ {
		spec := model.JobSpec{TriggerTime: due, CallbackURL: "http://127.0.0.1:1/hook", Hash: uint64(i + 1)}
		if _, err := r.Propose(ctx, &raftfsm.Create{Coll: "default", ID: fmt.Sprintf("%s-%d", prefix, i), Spec: spec, Now: time.Now().UnixMilli()}); err != nil {
			return err
		}
	}
	return nil
}

// A replica destroyed and re-created on the same node, over and over,
// while its neighbours in the shared raft log file keep appending: every
// re-created replica starts from nothing (no log, no stable state, no
// snapshot, no keys) and opens — the old log tail that DropGroup used to
// leave behind made raft.NewRaft panic with "log not found".
func TestReplicaDestroyAndRecreate(t *testing.T) {
	ss := openShared(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for _, s := range []int{3, 5} {
		r := ss.open(t, s)
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				_ = writeJobs(ctx, r, fmt.Sprintf("n%d-%d", s, i), 20)
			}
		}(s)
		defer r.Close()
	}
	defer wg.Wait()
	defer cancel()
	g, _ := ss.logDB.Group("slot-4")
	for round := 0; round < 12; round++ {
		r := ss.open(t, 4)
		if st := r.Status(); st.Applied > 10 {
			t.Fatalf("round %d: the re-created replica starts at applied %d", round, st.Applied)
		}
		if err := writeJobs(ctx, r, fmt.Sprintf("r%d", round), 150); err != nil {
			t.Fatal(err)
		}
		if round%2 == 0 {
			if err := r.Snapshot(); err != nil { // truncates the log: a tail without its snapshot is what panicked
				t.Fatal(err)
			}
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if err := r.Destroy(); err != nil {
			t.Fatal(err)
		}
		if l, _ := g.LastIndex(); l != 0 {
			t.Fatalf("round %d: the destroyed replica's log still ends at %d", round, l)
		}
		if _, err := g.GetUint64([]byte("CurrentTerm")); !errors.Is(err, storage.ErrKeyNotFound) {
			t.Fatalf("round %d: stable state survived: %v", round, err)
		}
		if n := ss.slotKeys(t, 4); n != 0 {
			t.Fatalf("round %d: %d keys of the slot survived", round, n)
		}
		if HasData(ss.slotDir(4)) {
			t.Fatalf("round %d: the replica directory survived", round)
		}
	}
}

// A deletion cut short after its first step (the directory renamed to the
// marker, nothing else deleted) is finished by the next Open of the slot:
// the re-created replica never sees the old log, keys or snapshots.
func TestReplicaDestroyInterrupted(t *testing.T) {
	ss := openShared(t)
	r := ss.open(t, 4)
	if err := writeJobs(context.Background(), r, "old", 100); err != nil {
		t.Fatal(err)
	}
	if err := r.Snapshot(); err != nil {
		t.Fatal(err)
	}
	last := r.g.LastIndex()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := markDestroying(ss.slotDir(4)); err != nil { // the crash comes here
		t.Fatal(err)
	}
	if HasData(ss.slotDir(4)) {
		t.Fatal("a replica being deleted still counts as data on disk")
	}
	r = ss.open(t, 4)
	defer r.Close()
	if _, ok, err := r.Get("default", "old-7"); ok || err != nil {
		t.Fatalf("the re-created replica sees a job of the destroyed one (%v)", err)
	}
	if _, err := os.Stat(ss.slotDir(4) + destroyingSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the deletion marker is still there: %v", err)
	}
	// What the deleted replica had acknowledged stays behind as its vote
	// floor (storage.VoteFloor), for the re-created one.
	if f, err := ss.logDB.VoteFloor(groupName(4)); err != nil || f.Term == 0 || f.LastIndex < last {
		t.Fatalf("vote floor after the deletion = %+v, %v; want term > 0 and last index ≥ %d", f, err, last)
	}
}

// snapshotFloor reads the index and term of a replica's snapshots from
// their metadata: a follower that installed a snapshot may hold no log
// entry after it, and its floor must still cover the snapshot.
func TestSnapshotFloor(t *testing.T) {
	dir := t.TempDir()
	for id, meta := range map[string]string{
		"2-10-1": `{"Version":1,"ID":"2-10-1","Index":10,"Term":2}`,
		"3-40-2": `{"Version":1,"ID":"3-40-2","Index":40,"Term":3}`,
		"junk":   `not json`,
	} {
		if err := os.MkdirAll(filepath.Join(dir, "snapshots", id), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "snapshots", id, "meta.json"), []byte(meta), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if f := snapshotFloor(dir); f != (storage.VoteFloor{LastTerm: 3, LastIndex: 40}) {
		t.Fatalf("snapshotFloor = %+v", f)
	}
	if f := snapshotFloor(filepath.Join(dir, "none")); !f.IsZero() {
		t.Fatalf("no snapshots: %+v", f)
	}
}
