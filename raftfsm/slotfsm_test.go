package raftfsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
	"github.com/klauspost/compress/zstd"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/storage"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func memDB(t *testing.T) *storage.DB {
	t.Helper()
	db, err := storage.Open("db", storage.Options{FS: vfs.NewMem(), CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func openFSM(t *testing.T, db *storage.DB, slot int) *SlotFSM {
	t.Helper()
	f, err := OpenSlotFSM(db, slot, quiet, func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Release) // the caches' process-wide budgets
	return f
}

// logOf turns command groups into raft log entries starting at index 1.
func logOf(groups ...[]Command) []*raft.Log {
	out := make([]*raft.Log, len(groups))
	for i, g := range groups {
		out[i] = &raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: Encode(g...)}
	}
	return out
}

func spec(trigger int64, hash uint64) model.JobSpec {
	return model.JobSpec{TriggerTime: trigger, CallbackURL: "http://127.0.0.1/hook", Hash: hash}
}

func results(t *testing.T, v interface{}) []model.Result {
	t.Helper()
	r, ok := v.([]model.Result)
	if !ok {
		t.Fatalf("apply returned %T (%v)", v, v)
	}
	return r
}

// dump returns every key and value of a slot's span.
func dump(t *testing.T, r storage.Reader, slot int) string {
	t.Helper()
	lo, hi := storage.SlotSpan(slot)
	it, err := r.NewIter(lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for ok := it.First(); ok; ok = it.Next() {
		fmt.Fprintf(&b, "%x=%x\n", it.Key(), it.Value())
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// workload is a log that exercises every slot command.
func workload() []*raft.Log {
	return logOf(
		[]Command{&Create{Coll: "c", ID: "a", Spec: spec(100, 1), Now: 10}, &Create{Coll: "c", ID: "b", Spec: spec(200, 2), Now: 10}},
		[]Command{&Create{Coll: "c", ID: "a", Spec: spec(100, 1), Now: 11}}, // exists
		[]Command{&Create{Coll: "c", ID: "a", Spec: spec(101, 9), Now: 11}}, // conflict
		[]Command{&Create{Coll: "d", ID: "x", Spec: spec(50, 3), Now: 12}, &Create{Coll: "c", ID: "gone", Spec: spec(300, 4), Now: 12}},
		[]Command{&Ack{Coll: "c", ID: "a", Version: 1, Success: true, Attempts: 1, Now: 105}},
		[]Command{&Retry{Coll: "c", ID: "b", Version: 1, NextDue: 260, Attempts: 1, LastError: "503", Now: 205}},
		[]Command{&Ack{Coll: "c", ID: "b", Version: 1, Success: true, Now: 206}}, // stale: b is at version 2
		[]Command{&Reschedule{Coll: "d", ID: "x", Version: 1, TriggerTime: 400, Now: 60}},
		[]Command{&Delete{Coll: "c", ID: "gone"}},
		[]Command{&Upsert{Coll: "c", ID: "b", Spec: spec(500, 5), IfMatch: 1, Now: 70}}, // precondition failed
		[]Command{&Upsert{Coll: "c", ID: "b", Spec: spec(500, 5), IfMatch: 2, Now: 70}},
		[]Command{&AdvanceOffset{Offset: 450}},
		[]Command{&RemoveFinished{Coll: "c", Before: 1000, Limit: 10}},
	)
}

func TestApplyOutcomes(t *testing.T) {
	db := memDB(t)
	f := openFSM(t, db, 3)
	out := f.ApplyBatch(workload())
	codes := []model.Code{}
	for _, o := range out {
		for _, r := range results(t, o) {
			codes = append(codes, r.Code)
		}
	}
	want := []model.Code{model.CodeCreated, model.CodeCreated, model.CodeExists, model.CodeConflict, model.CodeCreated, model.CodeCreated, model.CodeOK, model.CodeOK, model.CodeStale, model.CodeOK, model.CodeOK, model.CodePreconditionFailed, model.CodeOK, model.CodeOK, model.CodeOK}
	if fmt.Sprint(codes) != fmt.Sprint(want) {
		t.Fatalf("codes\n got %v\nwant %v", codes, want)
	}
	if f.Applied() != 13 {
		t.Fatalf("applied = %d", f.Applied())
	}
	// a: finished then removed by retention; b: rescheduled by upsert to 500 (v3);
	// x: rescheduled to 400; gone: deleted.
	if _, ok, _ := GetJob(db, 3, "c", "a"); ok {
		t.Error("finished job a survived RemoveFinished")
	}
	b, ok, _ := GetJob(db, 3, "c", "b")
	if !ok || b.Version != 3 || b.DueTime != 500 || b.Attempts != 0 || b.Status != model.StatusScheduled {
		t.Errorf("b = %+v", b)
	}
	if f.Pending() != 2 {
		t.Errorf("pending = %d, want 2 (b, x)", f.Pending())
	}
	// The offset was proposed at 450 but x is due at 400: it stops there.
	if f.Offset() != 400 {
		t.Errorf("offset = %d, want 400 (first live due entry)", f.Offset())
	}
	var dues []int64
	if _, err := ScanDue(db, 3, 0, 1000, 100, func(e storage.DueEntry) bool { dues = append(dues, e.Due); return true }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(dues) != "[400 500]" {
		t.Errorf("due index = %v", dues)
	}
}

// TestReplayIsIdempotentAndDeterministic: applying the same log twice (raft
// replays after a restart) changes nothing, and a fresh replica applying the
// log reaches byte-identical state.
func TestReplayIsIdempotentAndDeterministic(t *testing.T) {
	db1 := memDB(t)
	f1 := openFSM(t, db1, 1)
	f1.ApplyBatch(workload())
	first := dump(t, db1, 1)

	for _, l := range workload() { // one by one this time
		if r := f1.Apply(l); r != nil {
			if res, ok := r.([]model.Result); !ok || len(res) != 0 {
				t.Fatalf("replayed index %d returned %v", l.Index, r)
			}
		}
	}
	if again := dump(t, db1, 1); again != first {
		t.Fatal("replaying the log changed the state")
	}
	// Reopen (as after a restart): applied index comes back from storage.
	f1b := openFSM(t, db1, 1)
	if f1b.Applied() != 13 || f1b.Pending() != f1.Pending() || f1b.Offset() != f1.Offset() {
		t.Fatalf("reopened: applied %d pending %d offset %d", f1b.Applied(), f1b.Pending(), f1b.Offset())
	}

	db2 := memDB(t)
	f2 := openFSM(t, db2, 1)
	for _, l := range workload() {
		f2.Apply(l)
	}
	if other := dump(t, db2, 1); other != first {
		t.Fatalf("two replicas diverged:\n%s\nvs\n%s", first, other)
	}
}

type sink struct {
	bytes.Buffer
	cancelled bool
}

func (s *sink) ID() string    { return "test" }
func (s *sink) Cancel() error { s.cancelled = true; return nil }
func (s *sink) Close() error  { return nil }

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	src := memDB(t)
	f := openFSM(t, src, 5)
	f.ApplyBatch(workload())
	want := dump(t, src, 5)

	// The local snapshot is a pointer to the state in Pebble.
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var ptr sink
	if err := snap.Persist(&ptr); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	if !IsPointerSnapshot(ptr.Bytes()) || ptr.Len() != 18 {
		t.Fatalf("local snapshot is %d bytes, not a pointer", ptr.Len())
	}
	if err := f.Restore(io.NopCloser(bytes.NewReader(ptr.Bytes()))); err != nil {
		t.Fatalf("restoring a pointer to state that is present: %v", err)
	}
	if fresh := openFSM(t, memDB(t), 5); fresh.Restore(io.NopCloser(bytes.NewReader(ptr.Bytes()))) == nil {
		t.Fatal("a pointer was accepted by a replica whose state is behind it")
	}

	// The full form travels to other replicas.
	var s sink
	applied, err := f.StreamState(&s)
	if err != nil || applied != 13 {
		t.Fatalf("StreamState: applied %d, %v", applied, err)
	}
	// Writes after the stream was taken must not leak into it.
	f.ApplyBatch([]*raft.Log{{Index: 14, Type: raft.LogCommand, Data: Encode(&Create{Coll: "c", ID: "late", Spec: spec(9, 9), Now: 1})}})

	// The target holds another slot's data and stale data of this slot.
	dst := memDB(t)
	other := openFSM(t, dst, 6)
	other.ApplyBatch(logOf([]Command{&Create{Coll: "c", ID: "neighbour", Spec: spec(1, 1), Now: 1}}))
	neighbour := dump(t, dst, 6)
	g := openFSM(t, dst, 5)
	g.ApplyBatch(logOf([]Command{&Create{Coll: "c", ID: "stale", Spec: spec(1, 1), Now: 1}}))

	if err := g.Restore(io.NopCloser(bytes.NewReader(s.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if got := dump(t, dst, 5); got != want {
		t.Fatalf("restored state differs:\n got %s\nwant %s", got, want)
	}
	if got := dump(t, dst, 6); got != neighbour {
		t.Fatal("restore touched another slot")
	}
	if g.Applied() != 13 || g.Pending() != 2 || g.Offset() != 400 {
		t.Fatalf("restored meta: applied %d pending %d offset %d", g.Applied(), g.Pending(), g.Offset())
	}
	// Restore into the wrong slot is refused.
	wrong := openFSM(t, dst, 7)
	if err := wrong.Restore(io.NopCloser(bytes.NewReader(s.Bytes()))); err == nil {
		t.Fatal("slot 7 accepted slot 5's snapshot")
	}
	// A truncated snapshot is refused.
	h := openFSM(t, dst, 5)
	if err := h.Restore(io.NopCloser(bytes.NewReader(s.Bytes()[:len(s.Bytes())-3]))); err == nil {
		t.Fatal("truncated snapshot restored")
	}
	// A snapshot that breaks after the old state was cleared leaves the
	// restore marker, so the next start redoes the restore.
	var broken bytes.Buffer
	zw, _ := zstd.NewWriter(&broken)
	hdr := append([]byte(slotSnapshotMagic), 0, 5)
	hdr = binary.BigEndian.AppendUint64(hdr, 99)
	_, _ = zw.Write(append(hdr, 7)) // 7: no such entry tag
	_ = zw.Close()
	if err := h.Restore(io.NopCloser(&broken)); err == nil {
		t.Fatal("broken snapshot restored")
	}
	if again := openFSM(t, dst, 5); !again.NeedsRestore() {
		t.Fatal("interrupted restore not marked")
	}
}

func TestOffsetNeverPassesLiveEntries(t *testing.T) {
	db := memDB(t)
	f := openFSM(t, db, 0)
	if f.Offset() != NoOffset {
		t.Fatalf("empty slot offset = %d", f.Offset())
	}
	f.ApplyBatch(logOf(
		[]Command{&Create{Coll: "c", ID: "a", Spec: spec(1000, 1), Now: 1}},
		[]Command{&AdvanceOffset{Offset: 5000}},
		[]Command{&Create{Coll: "c", ID: "past", Spec: spec(10, 2), Now: 2}}, // below the offset: lowers it
	))
	if f.Offset() != 10 {
		t.Fatalf("offset = %d, want 10", f.Offset())
	}
	f.ApplyBatch([]*raft.Log{
		{Index: 4, Type: raft.LogCommand, Data: Encode(&Ack{Coll: "c", ID: "past", Version: 1, Success: true, Now: 11})},
		{Index: 5, Type: raft.LogCommand, Data: Encode(&AdvanceOffset{Offset: 5000})},
	})
	if f.Offset() != 1000 {
		t.Fatalf("offset = %d, want 1000", f.Offset())
	}
}

func TestPurgeCollectionIsBounded(t *testing.T) {
	db := memDB(t)
	f := openFSM(t, db, 0)
	var cmds []Command
	for i := 0; i < 25; i++ {
		cmds = append(cmds, &Create{Coll: "gone", ID: fmt.Sprint(i), Spec: spec(int64(i), 1), Now: 1})
	}
	cmds = append(cmds, &Create{Coll: "keep", ID: "k", Spec: spec(1, 1), Now: 1})
	f.ApplyBatch(logOf(cmds))
	idx := uint64(2)
	rounds := 0
	for {
		out := f.ApplyBatch([]*raft.Log{{Index: idx, Type: raft.LogCommand, Data: Encode(&PurgeCollection{Coll: "gone", Limit: 10})}})
		idx++
		rounds++
		if !results(t, out[0])[0].More {
			break
		}
	}
	if rounds != 3 {
		t.Errorf("purge of 25 jobs in steps of 10 took %d rounds, want 3", rounds)
	}
	if f.Pending() != 1 {
		t.Errorf("pending = %d, want 1", f.Pending())
	}
	if _, ok, _ := GetJob(db, 0, "keep", "k"); !ok {
		t.Error("purge removed another collection's job")
	}
}

func TestListJobsCursor(t *testing.T) {
	db := memDB(t)
	f := openFSM(t, db, 0)
	var cmds []Command
	for i := 0; i < 10; i++ {
		cmds = append(cmds, &Create{Coll: "c", ID: fmt.Sprintf("j%d", i), Spec: spec(int64(100+i/2), 1), Now: 1})
	}
	f.ApplyBatch(logOf(cmds, []Command{&Ack{Coll: "c", ID: "j3", Version: 1, Success: false, Now: 5}}))
	var seen []string
	q := model.ListQuery{Coll: "c", From: 0, To: 1 << 40, Limit: 3}
	for {
		page, err := ListJobs(db, 0, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range page.Jobs {
			seen = append(seen, j.ID)
		}
		if !page.Stopped {
			break
		}
		q.After = &page.Pos
	}
	if fmt.Sprint(seen) != "[j0 j1 j2 j3 j4 j5 j6 j7 j8 j9]" {
		t.Fatalf("paged list = %v", seen)
	}
	page, _ := ListJobs(db, 0, model.ListQuery{Coll: "c", Status: model.StatusFailed, From: 0, To: 1 << 40, Limit: 10})
	if len(page.Jobs) != 1 || page.Jobs[0].ID != "j3" {
		t.Fatalf("failed jobs = %v", page.Jobs)
	}
}

// A DELETE re-sent after its outcome was unknown deletes only the
// incarnation its sender read: a job deleted and created again since (by
// a client that gave up on the first DELETE) stays. Replayed, the same
// log gives the same state.
func TestDeleteIncarnation(t *testing.T) {
	log := logOf(
		[]Command{&Create{Coll: "c", ID: "j", Spec: spec(100, 1), Now: 10}},
		[]Command{&DeleteIncarnation{Coll: "c", ID: "j", CreatedAt: 9}},  // another incarnation: stays
		[]Command{&DeleteIncarnation{Coll: "c", ID: "j", CreatedAt: 10}}, // this one: deleted
		[]Command{&DeleteIncarnation{Coll: "c", ID: "j", CreatedAt: 10}}, // gone
		[]Command{&Create{Coll: "c", ID: "j", Spec: spec(100, 1), Now: 20}},
		[]Command{&DeleteIncarnation{Coll: "c", ID: "j", CreatedAt: 10}}, // the old one's re-send: the new job stays
	)
	db := memDB(t)
	f := openFSM(t, db, 1)
	var codes []model.Code
	for _, o := range f.ApplyBatch(log) {
		for _, r := range results(t, o) {
			codes = append(codes, r.Code)
		}
	}
	want := []model.Code{model.CodeCreated, model.CodeNotFound, model.CodeOK, model.CodeNotFound, model.CodeCreated, model.CodeNotFound}
	if fmt.Sprint(codes) != fmt.Sprint(want) {
		t.Fatalf("codes\n got %v\nwant %v", codes, want)
	}
	j, ok, err := GetJob(db, 1, "c", "j")
	if err != nil || !ok || j.CreatedAt != 20 || j.Version != 1 {
		t.Fatalf("the re-created job: %+v, %v, %v", j, ok, err)
	}
	if f.Pending() != 1 {
		t.Fatalf("pending = %d, want 1", f.Pending())
	}
	// One entry at a time reaches the same state as the whole batch.
	db2 := memDB(t)
	f2 := openFSM(t, db2, 1)
	for _, l := range log {
		f2.ApplyBatch([]*raft.Log{l})
	}
	if dump(t, db, 1) != dump(t, db2, 1) {
		t.Fatal("applying entry by entry differs from the batch")
	}
}

// What a create over an expired job proposes (service createOverExpired,
// upsertResolved): the old incarnation's DeleteIncarnation and the new
// create in one entry. The new job is made; a late re-send of the old
// job's create (its stamp) finds the new job and changes nothing.
func TestDeleteIncarnationThenCreateInOneEntry(t *testing.T) {
	old := &Create{Coll: "c", ID: "j", Spec: spec(100, 1), Now: 10}
	log := logOf(
		[]Command{old},
		[]Command{&Ack{Coll: "c", ID: "j", Version: 1, Success: true, Attempts: 1, Now: 105}},
		[]Command{&DeleteIncarnation{Coll: "c", ID: "j", CreatedAt: 10}, &Create{Coll: "c", ID: "j", Spec: spec(300, 1), Now: 120}},
		[]Command{old},
	)
	db := memDB(t)
	f := openFSM(t, db, 1)
	var codes []model.Code
	for _, o := range f.ApplyBatch(log) {
		for _, r := range results(t, o) {
			codes = append(codes, r.Code)
		}
	}
	want := []model.Code{model.CodeCreated, model.CodeOK, model.CodeOK, model.CodeCreated, model.CodeExists}
	if fmt.Sprint(codes) != fmt.Sprint(want) {
		t.Fatalf("codes\n got %v\nwant %v", codes, want)
	}
	j, ok, err := GetJob(db, 1, "c", "j")
	if err != nil || !ok || j.CreatedAt != 120 || j.Version != 1 || j.Status != model.StatusScheduled || j.TriggerTime != 300 {
		t.Fatalf("the new job: %+v, %v, %v", j, ok, err)
	}
	if f.Pending() != 1 {
		t.Fatalf("pending = %d, want 1", f.Pending())
	}
}

// A create re-sent after its outcome was unknown does not make a job again
// that it made once and a DELETE removed since: the delete left a
// tombstone of that incarnation (its create's stamp). Another create — a
// new stamp — makes it; once the tombstones are dropped, so would the old.
func TestResentCreateAfterADeleteMakesNothing(t *testing.T) {
	create := func(now int64) *Create { return &Create{Coll: "c", ID: "j", Spec: spec(100, 1), Now: now} }
	log := logOf(
		[]Command{create(10)},
		[]Command{&Delete{Coll: "c", ID: "j"}},
		[]Command{create(10)}, // the re-send: answered created, makes nothing
		[]Command{create(20)}, // its client's new create
		[]Command{&Delete{Coll: "c", ID: "j"}},
		[]Command{&DropTombstones{Before: 15}}, // 10's tombstone goes, 20's stays
		[]Command{create(20)},                  // a re-send of 20: nothing
		[]Command{create(10)},                  // 10 again, past its tombstone: made
	)
	db := memDB(t)
	f := openFSM(t, db, 2)
	var codes []model.Code
	for _, o := range f.ApplyBatch(log) {
		for _, r := range results(t, o) {
			codes = append(codes, r.Code)
		}
	}
	want := []model.Code{model.CodeCreated, model.CodeOK, model.CodeCreated, model.CodeCreated, model.CodeOK, model.CodeOK, model.CodeCreated, model.CodeCreated}
	if fmt.Sprint(codes) != fmt.Sprint(want) {
		t.Fatalf("codes\n got %v\nwant %v", codes, want)
	}
	j, ok, err := GetJob(db, 2, "c", "j")
	if err != nil || !ok || j.CreatedAt != 10 {
		t.Fatalf("the job: %+v, %v, %v; want the one created at 10 after its tombstone went", j, ok, err)
	}
	if f.Pending() != 1 {
		t.Fatalf("pending = %d, want 1", f.Pending())
	}
	// Entry by entry reaches the same state as the batch (the tombstone
	// reads see the batch's own writes).
	db2 := memDB(t)
	f2 := openFSM(t, db2, 2)
	for _, l := range log {
		f2.ApplyBatch([]*raft.Log{l})
	}
	if dump(t, db, 2) != dump(t, db2, 2) {
		t.Fatal("applying entry by entry differs from the batch")
	}
	// Between the steps, the re-send made nothing: replay only the first
	// three entries.
	db3 := memDB(t)
	openFSM(t, db3, 2).ApplyBatch(log[:3])
	if _, ok, _ := GetJob(db3, 2, "c", "j"); ok {
		t.Fatal("the re-sent create made the deleted job again")
	}
}

// The tombstone lookup of a create is skipped when the create's stamp is
// newer than every tombstone of the slot (SlotFSM.tombMax). That bound must
// hold after a restart (read back from storage) and after a snapshot is
// restored on another replica, or a re-send would make a deleted job again
// on one replica and not on another.
func TestTombstoneBoundSurvivesReopenAndRestore(t *testing.T) {
	create := func(id string, now int64) *Create {
		return &Create{Coll: "c", ID: id, Spec: spec(100, 1), Now: now}
	}
	db := memDB(t)
	f := openFSM(t, db, 3)
	if got := f.tombMax.Load(); got != math.MinInt64 {
		t.Fatalf("an empty slot's tombstone bound is %d", got)
	}
	f.ApplyBatch(logOf(
		[]Command{create("a", 10), create("b", 30)},
		[]Command{&Delete{Coll: "c", ID: "a"}, &Delete{Coll: "c", ID: "b"}},
		[]Command{create("b", 40)}, // newer than every tombstone: made without a lookup
	))
	if got := f.tombMax.Load(); got != 30 {
		t.Fatalf("tombstone bound after deletes = %d, want 30", got)
	}
	if _, ok, _ := GetJob(db, 3, "c", "b"); !ok {
		t.Fatal("a create newer than every tombstone made nothing")
	}
	resend := func(f *SlotFSM, db *storage.DB, index uint64) {
		t.Helper()
		out := f.ApplyBatch([]*raft.Log{{Index: index, Term: 1, Type: raft.LogCommand, Data: Encode(create("a", 10))}})
		if r := results(t, out[0]); r[0].Code != model.CodeCreated {
			t.Fatalf("re-send answered %v", r[0].Code)
		}
		if _, ok, _ := GetJob(db, 3, "c", "a"); ok {
			t.Fatal("a re-sent create made a deleted job again")
		}
	}
	// Reopened on the same storage: the bound is read back.
	g := openFSM(t, db, 3)
	if got := g.tombMax.Load(); got != 30 {
		t.Fatalf("tombstone bound after reopen = %d, want 30", got)
	}
	resend(g, db, 4)

	// Restored from a snapshot on another replica.
	var s sink
	if _, err := g.StreamState(&s); err != nil {
		t.Fatal(err)
	}
	dst := memDB(t)
	h := openFSM(t, dst, 3)
	if err := h.Restore(io.NopCloser(bytes.NewReader(s.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if got := h.tombMax.Load(); got != 30 {
		t.Fatalf("tombstone bound after restore = %d, want 30", got)
	}
	resend(h, dst, 5)
}

// An entry a newer binary wrote (a command type this one does not know)
// stops the replica instead of being skipped: skipped, the replica's state
// would drift from its peers'. A garbled body of a known command is still
// rejected by every replica alike, and the log goes on.
func TestNewerCommandStopsTheReplica(t *testing.T) {
	var fatal error
	f, err := OpenSlotFSM(memDB(t), 4, quiet, func(err error) { fatal = err })
	if err != nil {
		t.Fatal(err)
	}
	garbled := append(Encode(&Create{Coll: "c", ID: "a", Spec: spec(1, 1), Now: 1}), 0xff)
	out := f.ApplyBatch([]*raft.Log{
		{Index: 1, Type: raft.LogCommand, Data: garbled},
		{Index: 2, Type: raft.LogCommand, Data: Encode(&Create{Coll: "c", ID: "b", Spec: spec(1, 1), Now: 1})},
	})
	if _, ok := out[0].(error); !ok || fatal != nil || f.Applied() != 2 {
		t.Fatalf("a garbled entry: %v, fatal %v, applied %d", out[0], fatal, f.Applied())
	}
	out = f.ApplyBatch([]*raft.Log{{Index: 3, Type: raft.LogCommand, Data: []byte{99, 1, 0}}})
	if !errors.Is(fatal, ErrNewerCommand) || out[0] != ErrStopped || f.Applied() != 2 {
		t.Fatalf("a newer command: fatal %v, result %v, applied %d", fatal, out[0], f.Applied())
	}
}

func TestNewerCommandStopsTheMetaNode(t *testing.T) {
	f := NewMetaFSM()
	var fatal error
	f.OnFatal = func(err error) { fatal = err }
	f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: Encode(&ForgetCollection{Name: "x"})})
	f.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: []byte{99, 1}})
	if !errors.Is(fatal, ErrNewerCommand) || f.State().Index != 1 {
		t.Fatalf("fatal %v, index %d", fatal, f.State().Index)
	}
}

// OffsetCurrent: true while no command was applied since the latest offset
// advance (an idle leader then proposes none), whatever raft's own
// entries do; a replica that reopens with something applied owes one.
func TestOffsetCurrent(t *testing.T) {
	create := func(id string) Command {
		return &Create{Coll: "c", ID: id, Spec: spec(5000, 1), Now: 1}
	}
	adv := &AdvanceOffset{Offset: 4000}
	cfg := &raft.Log{Type: raft.LogConfiguration}
	for _, c := range []struct {
		name    string
		entries []any // []Command (one entry), or *raft.Log (raft's own)
		want    bool
	}{
		{name: "nothing applied", want: true},
		{name: "a configuration only", entries: []any{cfg}, want: true},
		{name: "a create", entries: []any{[]Command{create("a")}}, want: false},
		{name: "a create, then an advance", entries: []any{[]Command{create("a")}, []Command{adv}}, want: true},
		{name: "an advance riding after outcomes", entries: []any{[]Command{create("a"), adv}}, want: true},
		{name: "a create after the advance in one entry", entries: []any{[]Command{adv, create("a")}}, want: false},
		{name: "an advance, then a create", entries: []any{[]Command{adv}, []Command{create("b")}}, want: false},
		{name: "an advance, then a configuration", entries: []any{[]Command{create("a")}, []Command{adv}, cfg}, want: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := openFSM(t, memDB(t), 3)
			var logs []*raft.Log
			for i, e := range c.entries {
				l, ok := e.(*raft.Log)
				if ok {
					l = &raft.Log{Type: l.Type, Data: l.Data}
				} else {
					l = &raft.Log{Type: raft.LogCommand, Data: Encode(e.([]Command)...)}
				}
				l.Index, l.Term = uint64(i+1), 1
				logs = append(logs, l)
			}
			// One batch and one entry at a time must agree.
			f.ApplyBatch(logs)
			if got := f.OffsetCurrent(); got != c.want {
				t.Fatalf("batched: OffsetCurrent = %v, want %v", got, c.want)
			}
			g := openFSM(t, memDB(t), 3)
			for _, l := range logs {
				g.ApplyBatch([]*raft.Log{l})
			}
			if got := g.OffsetCurrent(); got != c.want {
				t.Fatalf("one by one: OffsetCurrent = %v, want %v", got, c.want)
			}
		})
	}
	t.Run("reopened with commands applied", func(t *testing.T) {
		db := memDB(t)
		f := openFSM(t, db, 3)
		f.ApplyBatch(logOf([]Command{create("a")}, []Command{adv}))
		if !f.OffsetCurrent() {
			t.Fatal("not current after an advance")
		}
		if openFSM(t, db, 3).OffsetCurrent() {
			t.Fatal("a reopened replica owes one advance (what came before is not known)")
		}
	})
}
