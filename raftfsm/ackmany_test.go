package raftfsm

import (
	"bytes"
	"io"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/timemachine-db/timemachine/model"
)

// ackManyBase creates the jobs the AckMany tests finish: a–f in "c", one
// in "other"; then d is deleted, e replaced (version 2) and f already
// finished (version 2, succeeded), all after "the leader fired them" at
// version 1.
func ackManyBase() [][]Command {
	return [][]Command{
		{
			&Create{Coll: "c", ID: "a", Spec: spec(100, 1), Now: 10},
			&Create{Coll: "c", ID: "b", Spec: spec(110, 2), Now: 10},
			&Create{Coll: "c", ID: "d", Spec: spec(120, 3), Now: 10},
			&Create{Coll: "c", ID: "e", Spec: spec(130, 4), Now: 10},
			&Create{Coll: "c", ID: "f", Spec: spec(140, 5), Now: 10},
			&Create{Coll: "other", ID: "a", Spec: spec(150, 6), Now: 10},
		},
		{&Delete{Coll: "c", ID: "d"}},
		{&Upsert{Coll: "c", ID: "e", Spec: spec(135, 7), Now: 20}},
		{&Ack{Coll: "c", ID: "f", Version: 1, Success: true, Attempts: 1, Now: 141}},
	}
}

// The acks of the tests: a succeeds, b fails for good with an error, d
// (deleted), e (replaced) and f (finished) are stale, "nope" never
// existed, and a is named twice (the second is stale: the first bumped
// its version).
var ackManyJobs = []AckJob{
	{ID: "a", Version: 1, Success: true, Attempts: 1},
	{ID: "b", Version: 1, Attempts: 3, LastError: "callback answered 500"},
	{ID: "d", Version: 1, Success: true, Attempts: 1},
	{ID: "e", Version: 1, Success: true, Attempts: 1},
	{ID: "f", Version: 1, Success: true, Attempts: 1},
	{ID: "nope", Version: 1, Success: true, Attempts: 1},
	{ID: "a", Version: 1, Success: false, Attempts: 9, LastError: "late duplicate"},
}

// TestAckManyAppliesLikeAcks: an AckMany leaves exactly the state that
// the same acks one by one leave, byte for byte, and finishes only the
// fired versions: a deleted job is not resurrected, a replaced one keeps
// its new version scheduled, a finished one stays as it finished.
func TestAckManyAppliesLikeAcks(t *testing.T) {
	many := openFSM(t, memDB(t), 2)
	one := openFSM(t, memDB(t), 2)
	base := ackManyBase()

	out := many.ApplyBatch(logOf(append(base, []Command{&AckMany{Coll: "c", Now: 500, Jobs: ackManyJobs}})...))
	res := results(t, out[len(out)-1])
	if len(res) != 1 || res[0].Code != model.CodeOK || res[0].N != 2 {
		t.Fatalf("AckMany result %+v, want OK with N=2", res)
	}
	var acks []Command
	for _, a := range ackManyJobs {
		acks = append(acks, &Ack{Coll: "c", ID: a.ID, Version: a.Version, Success: a.Success, Attempts: a.Attempts, LastError: a.LastError, Now: 500})
	}
	one.ApplyBatch(logOf(append(base, acks)...))
	if got, want := dump(t, many.db, 2), dump(t, one.db, 2); got != want {
		t.Fatalf("AckMany and single acks diverged:\n%s\nvs\n%s", got, want)
	}
	if many.Pending() != one.Pending() || many.Offset() != one.Offset() {
		t.Fatalf("meta diverged: pending %d/%d offset %d/%d", many.Pending(), one.Pending(), many.Offset(), one.Offset())
	}

	cases := []struct {
		coll, id string
		found    bool
		status   model.Status
		version  uint64
		attempts int64
		lastErr  string
	}{
		{"c", "a", true, model.StatusSucceeded, 2, 1, ""},
		{"c", "b", true, model.StatusFailed, 2, 3, "callback answered 500"},
		{"c", "d", false, 0, 0, 0, ""},
		{"c", "e", true, model.StatusScheduled, 2, 0, ""},
		{"c", "f", true, model.StatusSucceeded, 2, 1, ""},
		{"c", "nope", false, 0, 0, 0, ""},
		{"other", "a", true, model.StatusScheduled, 1, 0, ""}, // same id, other collection
	}
	for _, c := range cases {
		j, found, err := GetJob(many.db, 2, c.coll, c.id)
		if err != nil {
			t.Fatal(err)
		}
		if found != c.found {
			t.Errorf("%s/%s: found %v, want %v", c.coll, c.id, found, c.found)
			continue
		}
		if !found {
			continue
		}
		if j.Status != c.status || j.Version != c.version || j.Attempts != c.attempts || j.LastError != c.lastErr {
			t.Errorf("%s/%s: status %v version %d attempts %d last_error %q; want %v %d %d %q",
				c.coll, c.id, j.Status, j.Version, j.Attempts, j.LastError, c.status, c.version, c.attempts, c.lastErr)
		}
		if c.status.Finished() && c.id != "f" && j.FinishedAt != 500 {
			t.Errorf("%s/%s: finished_at %d, want 500", c.coll, c.id, j.FinishedAt)
		}
	}
	if e, _, _ := GetJob(many.db, 2, "c", "e"); e.DueTime != 135 {
		t.Errorf("replaced job's due time %d, want 135 (its new version's)", e.DueTime)
	}
	if many.Pending() != 2 { // e's new version and other/a
		t.Errorf("pending %d, want 2", many.Pending())
	}
}

// TestAckManyReplayAndSnapshot: a log with AckMany replays to the same
// state (twice, and on a second replica), and the state travels in a
// snapshot.
func TestAckManyReplayAndSnapshot(t *testing.T) {
	log := func() []*raft.Log {
		return logOf(append(ackManyBase(), []Command{&AckMany{Coll: "c", Now: 500, Jobs: ackManyJobs}, &AdvanceOffset{Offset: 1 << 40}})...)
	}
	f1 := openFSM(t, memDB(t), 4)
	f1.ApplyBatch(log())
	first := dump(t, f1.db, 4)
	for _, l := range log() {
		f1.Apply(l)
	}
	if dump(t, f1.db, 4) != first {
		t.Fatal("replaying the log changed the state")
	}
	reopened := openFSM(t, f1.db, 4)
	if reopened.Applied() != uint64(len(log())) || reopened.Pending() != f1.Pending() {
		t.Fatalf("reopened: applied %d pending %d", reopened.Applied(), reopened.Pending())
	}
	f2 := openFSM(t, memDB(t), 4)
	for _, l := range log() {
		f2.Apply(l)
	}
	if dump(t, f2.db, 4) != first {
		t.Fatal("two replicas diverged")
	}
	var s sink
	if _, err := f1.StreamState(&s); err != nil {
		t.Fatal(err)
	}
	g := openFSM(t, memDB(t), 4)
	if err := g.Restore(io.NopCloser(bytes.NewReader(s.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if got := dump(t, g.db, 4); got != first {
		t.Fatalf("restored state differs:\n got %s\nwant %s", got, first)
	}
	if g.Pending() != f1.Pending() {
		t.Fatalf("restored pending %d, want %d", g.Pending(), f1.Pending())
	}
}

func TestAckManyCodec(t *testing.T) {
	cases := []*AckMany{
		{Coll: "c", Now: 1, Jobs: []AckJob{{ID: "x", Version: 1, Success: true, Attempts: 1}}},
		{Coll: "c", Now: -5, Jobs: ackManyJobs},
		{Coll: "", Now: 0, Jobs: []AckJob{{}}},
		{Coll: "empty", Now: 7, Jobs: []AckJob{}},
	}
	for _, c := range cases {
		b := EncodeOne(c)
		if CmdType(b[0]) != CmdAckMany {
			t.Fatalf("encoded as %d", b[0])
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if len(got) != 1 || !reflect.DeepEqual(got[0], c) {
			t.Fatalf("round trip:\n got %#v\nwant %#v", got[0], c)
		}
	}
	good := EncodeOne(cases[1])
	bad := map[string][]byte{
		"truncated":        good[:len(good)-2],
		"trailing":         append(append([]byte{}, good...), 0),
		"huge count":       {byte(CmdAckMany), 1, 1, 'c', 2, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"count over bytes": {byte(CmdAckMany), 1, 1, 'c', 2, 10, 1, 'a', 1, 1, 2},
		"bad flags":        {byte(CmdAckMany), 1, 1, 'c', 2, 1, 1, 'a', 1, 0x84, 2},
		"no version":       {byte(CmdAckMany), 1, 1, 'c', 2, 1, 1, 'a'},
	}
	for name, b := range bad {
		if _, err := Decode(b); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

// FuzzDecodeAckMany: the decoder never panics, and what it accepts
// re-encodes to bytes that decode to the same command.
func FuzzDecodeAckMany(f *testing.F) {
	f.Add(EncodeOne(&AckMany{Coll: "c", Now: 500, Jobs: ackManyJobs}))
	f.Add(EncodeOne(&AckMany{Coll: "c", Now: 1, Jobs: []AckJob{{ID: "x"}}}))
	f.Add([]byte{byte(CmdAckMany), 1, 1, 'c', 2, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		cmds, err := Decode(b)
		if err != nil || len(cmds) != 1 {
			return
		}
		c, ok := cmds[0].(*AckMany)
		if !ok {
			return
		}
		again, err := Decode(EncodeOne(c))
		if err != nil || len(again) != 1 || !reflect.DeepEqual(again[0], c) {
			t.Fatalf("%x: re-encoded command decodes differently (%v)", b, err)
		}
	})
}

// TestAckManyAfterChangesInTheBatch: the jobs exist before the batch
// (their records are read through the batch's iterator, which sees the
// state the batch started from), and the batch changes some of them
// before their acks — a job created, one replaced, one deleted, one
// finished by an earlier AckMany of the same batch, a job named by two
// commands — so for those the iterator's view is stale and the record
// must be read from the batch (touched). The state must be byte for byte
// the one single Acks leave, and the one the same entries leave applied
// one ApplyBatch each. (It was written for a prefetch of an ApplyBatch's
// ack records in key order, which measured no gain and was taken out:
// docs/benchmarks.md, 2026-11-26.)
func TestAckManyAfterChangesInTheBatch(t *testing.T) {
	base := ackManyBase()
	batch := [][]Command{
		{
			&Create{Coll: "c", ID: "g", Spec: spec(160, 8), Now: 30},
			&Upsert{Coll: "c", ID: "b", Spec: spec(115, 9), Now: 30},
		},
		{&AckMany{Coll: "c", Now: 600, Jobs: []AckJob{
			{ID: "g", Version: 1, Success: true, Attempts: 1},
			{ID: "b", Version: 1, Success: true, Attempts: 1}, // replaced above: stale
			{ID: "a", Version: 1, Success: true, Attempts: 1},
		}}},
		{
			&AckMany{Coll: "c", Now: 610, Jobs: []AckJob{
				{ID: "nope", Version: 1, Success: true, Attempts: 1},
				{ID: "e", Version: 2, Attempts: 2, LastError: "callback answered 404"},
				{ID: "b", Version: 2, Success: true, Attempts: 1},
				{ID: "a", Version: 1, Success: false, Attempts: 5}, // finished above: stale
			}},
			&Delete{Coll: "other", ID: "a"},
		},
		{&AckMany{Coll: "other", Now: 620, Jobs: []AckJob{{ID: "a", Version: 1, Success: true, Attempts: 1}}}}, // deleted: stale
	}
	asAcks := func(groups [][]Command) [][]Command {
		var out [][]Command
		for _, g := range groups {
			var cmds []Command
			for _, c := range g {
				am, ok := c.(*AckMany)
				if !ok {
					cmds = append(cmds, c)
					continue
				}
				for _, a := range am.Jobs {
					cmds = append(cmds, &Ack{Coll: am.Coll, ID: a.ID, Version: a.Version, Success: a.Success, Attempts: a.Attempts, LastError: a.LastError, Now: am.Now})
				}
			}
			out = append(out, cmds)
		}
		return out
	}
	// apply applies base one entry per ApplyBatch (its records are in
	// storage before the batch), then the rest as given: all in one
	// ApplyBatch or one each.
	apply := func(f *SlotFSM, rest [][]Command, together bool) []interface{} {
		logs := logOf(append(append([][]Command{}, base...), rest...)...)
		for _, l := range logs[:len(base)] {
			f.ApplyBatch([]*raft.Log{l})
		}
		if together {
			return f.ApplyBatch(logs[len(base):])
		}
		var out []interface{}
		for _, l := range logs[len(base):] {
			out = append(out, f.ApplyBatch([]*raft.Log{l})...)
		}
		return out
	}
	many := openFSM(t, memDB(t), 3)
	out := apply(many, batch, true)
	var finished []int64
	for _, o := range out {
		for _, r := range results(t, o) {
			finished = append(finished, r.N)
		}
	}
	// g and a finished by the first AckMany; e (failed) and b by the second.
	if want := []int64{0, 0, 2, 2, 0, 0}; !reflect.DeepEqual(finished, want) {
		t.Fatalf("AckMany results N %v, want %v", finished, want)
	}
	one := openFSM(t, memDB(t), 3)
	apply(one, asAcks(batch), true)
	apart := openFSM(t, memDB(t), 3)
	apply(apart, batch, false)
	got := dump(t, many.db, 3)
	if want := dump(t, one.db, 3); got != want {
		t.Fatalf("AckMany and single acks diverged:\n%s\nvs\n%s", got, want)
	}
	if want := dump(t, apart.db, 3); got != want {
		t.Fatalf("one ApplyBatch and one per entry diverged:\n%s\nvs\n%s", got, want)
	}
	for _, c := range []struct {
		coll, id string
		status   model.Status
	}{{"c", "a", model.StatusSucceeded}, {"c", "b", model.StatusSucceeded}, {"c", "e", model.StatusFailed}, {"c", "g", model.StatusSucceeded}, {"c", "f", model.StatusSucceeded}} {
		j, found, err := GetJob(many.db, 3, c.coll, c.id)
		if err != nil || !found || j.Status != c.status {
			t.Fatalf("%s/%s: %+v %v %v, want status %v", c.coll, c.id, j, found, err, c.status)
		}
	}
	if _, found, _ := GetJob(many.db, 3, "other", "a"); found {
		t.Fatal("other/a was deleted, yet an ack brought it back")
	}
}
