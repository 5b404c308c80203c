package storage

import (
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
)

func TestVoteFloorCoversAndMax(t *testing.T) {
	f := VoteFloor{Term: 5, LastTerm: 4, LastIndex: 10}
	for _, c := range []struct {
		term, index uint64
		want        bool
	}{
		{4, 10, true}, {4, 11, true}, {5, 1, true}, {4, 9, false}, {3, 99, false}, {0, 0, false},
	} {
		if got := f.Covers(c.term, c.index); got != c.want {
			t.Errorf("Covers(%d, %d) = %v, want %v", c.term, c.index, got, c.want)
		}
	}
	if !(VoteFloor{}).Covers(0, 0) {
		t.Error("the zero floor must cover an empty log")
	}
	for _, c := range []struct{ a, b, want VoteFloor }{
		{VoteFloor{Term: 5, LastTerm: 4, LastIndex: 10}, VoteFloor{Term: 3, LastTerm: 4, LastIndex: 12}, VoteFloor{Term: 5, LastTerm: 4, LastIndex: 12}},
		{VoteFloor{Term: 5, LastTerm: 4, LastIndex: 10}, VoteFloor{Term: 6, LastTerm: 3, LastIndex: 99}, VoteFloor{Term: 6, LastTerm: 4, LastIndex: 10}},
		{VoteFloor{}, VoteFloor{Term: 1, LastTerm: 1, LastIndex: 1}, VoteFloor{Term: 1, LastTerm: 1, LastIndex: 1}},
		{VoteFloor{Learn: true}, VoteFloor{Term: 4, LastTerm: 4, LastIndex: 7}, VoteFloor{Term: 4, LastTerm: 4, LastIndex: 7, Learn: true}},
	} {
		if got := c.a.Max(c.b); got != c.want {
			t.Errorf("%+v.Max(%+v) = %+v, want %+v", c.a, c.b, got, c.want)
		}
		if got := c.b.Max(c.a); got != c.want {
			t.Errorf("%+v.Max(%+v) = %+v, want %+v", c.b, c.a, got, c.want)
		}
	}
}

func TestVoteFloorCodec(t *testing.T) {
	f := VoteFloor{Term: 1 << 40, LastTerm: 3, LastIndex: 1<<63 + 5}
	got, err := decodeFloor(encodeFloor(f))
	if err != nil || got != f {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	if b := encodeFloor(f); b[0] != floorV1 {
		t.Fatalf("a floor without Learn is written as format %d, want 1 (older binaries read it)", b[0])
	}
	learning := VoteFloor{Term: 9, LastTerm: 9, LastIndex: 400, Learn: true}
	if got, err := decodeFloor(encodeFloor(learning)); err != nil || got != learning {
		t.Fatalf("round trip of a learning floor: %+v, %v", got, err)
	}
	if got, err := decodeFloor(encodeFloor(VoteFloor{Learn: true})); err != nil || got != (VoteFloor{Learn: true}) || got.IsZero() {
		t.Fatalf("a learning floor with nothing learnt yet: %+v, %v (it must not read as zero)", got, err)
	}
	for _, bad := range [][]byte{nil, {2}, {floorV1}, append(encodeFloor(f), 0), {floorV2, 0x80, 1, 1, 1}, {floorV2, floorLearn, 1, 1}} {
		if _, err := decodeFloor(bad); err == nil {
			t.Errorf("decodeFloor(%x) accepted", bad)
		}
	}
}

// DropGroup records what the dropped replica had acknowledged — its term and
// last entry, or a snapshot past it — keeps the highest across drops, and
// the floor survives a reopen of the file.
func TestDropGroupRecordsTheVoteFloor(t *testing.T) {
	path := filepath.Join(t.TempDir(), "slots.db")
	db, err := OpenRaftLogDB(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := db.Group("slot-3")
	other, _ := db.Group("slot-30")
	var logs []*raft.Log
	for i := uint64(5); i <= 20; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 2 + i/10, Type: raft.LogCommand, Data: []byte("x")})
	}
	if err := g.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := other.StoreLogs([]*raft.Log{{Index: 1, Term: 99}}); err != nil {
		t.Fatal(err)
	}
	if err := g.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if f, _ := db.VoteFloor("slot-3"); !f.IsZero() {
		t.Fatalf("floor before any drop: %+v", f)
	}
	if err := db.DropGroup("slot-3", VoteFloor{}); err != nil {
		t.Fatal(err)
	}
	want := VoteFloor{Term: 7, LastTerm: 4, LastIndex: 20}
	if f, err := db.VoteFloor("slot-3"); err != nil || f != want {
		t.Fatalf("floor = %+v, %v; want %+v", f, err, want)
	}
	// A later replica, dropped with nothing in its log but a snapshot
	// further on: the floor moves up; a lower term does not lower it.
	if err := g.SetUint64([]byte("CurrentTerm"), 3); err != nil {
		t.Fatal(err)
	}
	if err := db.DropGroup("slot-3", VoteFloor{LastTerm: 5, LastIndex: 30}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = OpenRaftLogDB(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	want = VoteFloor{Term: 7, LastTerm: 5, LastIndex: 30}
	if f, err := db.VoteFloor("slot-3"); err != nil || f != want {
		t.Fatalf("floor after reopen = %+v, %v; want %+v", f, err, want)
	}
	if f, _ := db.VoteFloor("slot-30"); !f.IsZero() {
		t.Fatalf("another group got a floor: %+v", f)
	}
}

// SetVoteFloor replaces the recorded floor (a learning floor, then the
// learnt one), keeps it across a reopen, and the zero floor removes it.
func TestSetVoteFloor(t *testing.T) {
	path := filepath.Join(t.TempDir(), "slots.db")
	db, err := OpenRaftLogDB(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	steps := []VoteFloor{
		{Learn: true},
		{Term: 6, LastTerm: 6, LastIndex: 90, Learn: true},
		{Term: 6, LastTerm: 6, LastIndex: 120}, // learnt: replaces, Learn cleared
	}
	for _, f := range steps {
		if err := db.SetVoteFloor("meta", f); err != nil {
			t.Fatal(err)
		}
		if got, err := db.VoteFloor("meta"); err != nil || got != f {
			t.Fatalf("after SetVoteFloor(%+v): %+v, %v", f, got, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = OpenRaftLogDB(path, nil); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got, _ := db.VoteFloor("meta"); got != steps[2] {
		t.Fatalf("after reopen: %+v, want %+v", got, steps[2])
	}
	if got, _ := db.VoteFloor("slot-1"); !got.IsZero() {
		t.Fatalf("another group's floor: %+v", got)
	}
	if err := db.SetVoteFloor("meta", VoteFloor{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.VoteFloor("meta"); !got.IsZero() {
		t.Fatalf("after setting the zero floor: %+v", got)
	}
}
