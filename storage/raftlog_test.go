package storage

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

func logs(from, to uint64, tag string) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		out = append(out, &raft.Log{Index: i, Term: 2, Type: raft.LogCommand, Data: []byte(fmt.Sprintf("%s-%d", tag, i)),
			AppendedAt: time.Unix(0, int64(i))})
	}
	return out
}

func TestRaftLogDBGroupsAreIsolated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "slots.db")
	db, err := OpenRaftLogDB(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	// "slot-1" is a prefix of "slot-10": the NUL separator keeps them apart.
	a, _ := db.Group("slot-1")
	b, _ := db.Group("slot-10")
	if err := a.StoreLogs(logs(1, 50, "a")); err != nil {
		t.Fatal(err)
	}
	if err := b.StoreLogs(logs(7, 9, "b")); err != nil {
		t.Fatal(err)
	}
	check := func(g *GroupLog, first, last uint64) {
		t.Helper()
		if f, _ := g.FirstIndex(); f != first {
			t.Fatalf("first = %d, want %d", f, first)
		}
		if l, _ := g.LastIndex(); l != last {
			t.Fatalf("last = %d, want %d", l, last)
		}
	}
	check(a, 1, 50)
	check(b, 7, 9)
	var l raft.Log
	if err := b.GetLog(8, &l); err != nil || string(l.Data) != "b-8" || l.Term != 2 || l.AppendedAt.UnixNano() != 8 {
		t.Fatalf("GetLog: %+v %v", l, err)
	}
	if err := b.GetLog(10, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("missing log: %v", err)
	}
	if err := a.DeleteRange(1, 40); err != nil {
		t.Fatal(err)
	}
	check(a, 41, 50)
	check(b, 7, 9)
	// Stable store.
	if _, err := a.GetUint64([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
		t.Fatalf("missing stable key must be raft's not found: %v", err)
	}
	if err := a.SetUint64([]byte("CurrentTerm"), 9); err != nil {
		t.Fatal(err)
	}
	if v, _ := a.GetUint64([]byte("CurrentTerm")); v != 9 {
		t.Fatalf("term = %d", v)
	}
	if _, err := b.GetUint64([]byte("CurrentTerm")); err == nil {
		t.Fatal("stable state leaked between groups")
	}
	// Everything survives a reopen.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = OpenRaftLogDB(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	a, _ = db.Group("slot-1")
	b, _ = db.Group("slot-10")
	check(a, 41, 50)
	if v, _ := a.GetUint64([]byte("CurrentTerm")); v != 9 {
		t.Fatalf("term after reopen = %d", v)
	}
	// Dropping a group removes exactly its keys.
	if err := db.DropGroup("slot-1", VoteFloor{}); err != nil {
		t.Fatal(err)
	}
	check(a, 0, 0)
	check(b, 7, 9)
	if _, err := a.Get([]byte("CurrentTerm")); err == nil {
		t.Fatal("stable state survived DropGroup")
	}
}

// Concurrent appends from many groups all land, each group in order.
func TestRaftLogDBConcurrentAppends(t *testing.T) {
	db, err := OpenRaftLogDB(filepath.Join(t.TempDir(), "slots.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var wg sync.WaitGroup
	for g := 0; g < 12; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			gl, _ := db.Group(fmt.Sprintf("slot-%04d", g))
			for i := uint64(1); i <= 200; i++ {
				if err := gl.StoreLog(&raft.Log{Index: i, Term: 1, Data: []byte{byte(g)}}); err != nil {
					t.Error(err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	for g := 0; g < 12; g++ {
		gl, _ := db.Group(fmt.Sprintf("slot-%04d", g))
		if f, _ := gl.FirstIndex(); f != 1 {
			t.Fatalf("group %d first %d", g, f)
		}
		if l, _ := gl.LastIndex(); l != 200 {
			t.Fatalf("group %d last %d", g, l)
		}
		var l raft.Log
		if err := gl.GetLog(123, &l); err != nil || !bytes.Equal(l.Data, []byte{byte(g)}) {
			t.Fatalf("group %d entry 123: %v %v", g, l.Data, err)
		}
	}
	// The counters: every append is one write and one entry; the groups'
	// writes share commits (at most one commit per write). The bucket
	// creation on open is not a queued write.
	st := db.WriterStats()
	if st.Entries != 12*200 || st.Writes != 12*200 || st.Commits == 0 || st.Commits > st.Writes {
		t.Fatalf("writer stats %+v", st)
	}
}

func TestRaftLogDBClosedRefusesWrites(t *testing.T) {
	db, err := OpenRaftLogDB(filepath.Join(t.TempDir(), "slots.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := db.Group("meta")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g.StoreLog(&raft.Log{Index: 1}); err == nil {
		t.Fatal("write after close succeeded")
	}
}

// Writers racing with Close either commit or get an error; none waits
// forever for an answer the stopped writer will never give.
func TestRaftLogDBCloseWithWritersInFlight(t *testing.T) {
	for round := 0; round < 20; round++ {
		db, err := OpenRaftLogDB(filepath.Join(t.TempDir(), "slots.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			gl, _ := db.Group(fmt.Sprintf("slot-%d", g))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := uint64(1); ; i++ {
					if err := gl.StoreLog(&raft.Log{Index: i, Term: 1}); err != nil {
						return
					}
				}
			}()
		}
		time.Sleep(time.Duration(round%5) * time.Millisecond)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("a writer is still waiting 10 s after Close")
		}
	}
}

// A group dropped (or compacted) in the same commit as an append of its
// neighbour — the shared writer folds them together — must lose every key.
// With bolt's delete-while-iterating, the leaf page the neighbour's append
// had already changed kept every other key of the dropped group: a replica
// re-created on the node then found a stray log tail without a snapshot and
// raft.NewRaft panicked with "log not found".
func TestRaftLogDBDropAndCompactInASharedCommit(t *testing.T) {
	db, err := OpenRaftLogDB(filepath.Join(t.TempDir(), "slots.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	g3, _ := db.Group("slot-3")
	g4, _ := db.Group("slot-4")
	g5, _ := db.Group("slot-5")
	for _, g := range []*GroupLog{g3, g4, g5} {
		if err := g.StoreLogs(logs(1, 300, "x")); err != nil {
			t.Fatal(err)
		}
		if err := g.SetUint64([]byte("CurrentTerm"), 7); err != nil {
			t.Fatal(err)
		}
	}
	appendTo := func(g *GroupLog, i uint64) *logWrite {
		l := logs(i, i, "y")[0]
		return &logWrite{done: make(chan error, 1), fn: func(tx *bolt.Tx) error {
			if err := tx.Bucket(bucketConf).Put(g.key(nil, []byte("LastVoteTerm")), []byte{0, 0, 0, 0, 0, 0, 0, 8}); err != nil {
				return err
			}
			return tx.Bucket(bucketLogs).Put(g.indexKey(i), encodeLog(l))
		}}
	}
	// slot-5's compaction shares a commit with an append of slot-4, whose
	// last keys sit on slot-5's first page.
	db.commit([]*logWrite{appendTo(g4, 301), {fn: g5.deleteRange(1, 200), done: make(chan error, 1)}})
	if f, _ := g5.FirstIndex(); f != 201 {
		t.Fatalf("slot-5 after compacting 1..200 starts at %d", f)
	}
	// slot-4 is dropped in the same commit as appends of both neighbours.
	drop := &logWrite{fn: dropGroup("slot-4"), done: make(chan error, 1)}
	db.commit([]*logWrite{appendTo(g3, 301), appendTo(g5, 301), drop})
	if err := <-drop.done; err != nil {
		t.Fatal(err)
	}
	f, _ := g4.FirstIndex()
	l, _ := g4.LastIndex()
	if f != 0 || l != 0 {
		t.Fatalf("slot-4 after DropGroup: first %d last %d, want an empty log", f, l)
	}
	if _, err := g4.Get([]byte("CurrentTerm")); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("slot-4's stable state survived DropGroup: %v", err)
	}
	for _, g := range []*GroupLog{g3, g5} {
		if l, _ := g.LastIndex(); l != 301 {
			t.Fatalf("a neighbour lost its log: last %d", l)
		}
	}
}
