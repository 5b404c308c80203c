package raftfsm

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/storage"
)

// firedPair is a state machine with the fired-record cache on and one
// without, fed the same log: the second is what the first must equal.
type firedPair struct {
	t          *testing.T
	db, refDB  *storage.DB
	f, ref     *SlotFSM
	idx        uint64
	lastResult []model.Result
}

func newFiredPair(t *testing.T) *firedPair {
	p := &firedPair{t: t, db: memDB(t), refDB: memDB(t)}
	p.f, p.ref = openFSM(t, p.db, 4), openFSM(t, p.refDB, 4)
	p.f.CacheFired(true)
	return p
}

// apply applies cmds as one entry to both and checks they answered alike.
func (p *firedPair) apply(cmds ...Command) []model.Result {
	p.t.Helper()
	p.idx++
	l := []*raft.Log{{Index: p.idx, Term: 1, Type: raft.LogCommand, Data: Encode(cmds...)}}
	got, want := results(p.t, p.f.ApplyBatch(l)[0]), results(p.t, p.ref.ApplyBatch(l)[0])
	if fmt.Sprint(codes(got)) != fmt.Sprint(codes(want)) {
		p.t.Fatalf("entry %d: cached %v, reference %v", p.idx, codes(got), codes(want))
	}
	p.lastResult = got
	return got
}

func (p *firedPair) same() {
	p.t.Helper()
	if a, b := dump(p.t, p.db, 4), dump(p.t, p.refDB, 4); a != b {
		p.t.Fatalf("the state with the cache differs from the reference:\n%s\n---\n%s", a, b)
	}
}

func codes(rs []model.Result) []model.Code {
	out := make([]model.Code, len(rs))
	for i, r := range rs {
		out[i] = r.Code
	}
	return out
}

func refsOf(ids ...string) []storage.DueEntry {
	out := make([]storage.DueEntry, len(ids))
	for i, id := range ids {
		out[i] = storage.DueEntry{Coll: "c", ID: id}
	}
	return out
}

// TestFiredRecordsServeTheirOutcomes: records the leader read to fire are
// what the outcomes' apply reads, and the state is the one without.
func TestFiredRecordsServeTheirOutcomes(t *testing.T) {
	p := newFiredPair(t)
	p.apply(&Create{Coll: "c", ID: "a", Spec: spec(100, 1), Now: 10}, &Create{Coll: "c", ID: "b", Spec: spec(100, 2), Now: 10},
		&Create{Coll: "c", ID: "d", Spec: spec(100, 3), Now: 10})
	jobs, err := p.f.ReadJobsToFire(refsOf("a", "b", "d", "missing"))
	if err != nil || jobs[0] == nil || jobs[3] != nil {
		t.Fatalf("read %v, %v", jobs, err)
	}
	p.apply(&AckMany{Coll: "c", Now: 105, Jobs: []AckJob{{ID: "a", Version: 1, Success: true, Attempts: 1}, {ID: "b", Version: 1, Attempts: 3, LastError: "503"}}})
	p.apply(&Retry{Coll: "c", ID: "d", Version: 1, NextDue: 200, Attempts: 1, LastError: "timeout", Now: 106})
	if h := p.f.fired.hits.Load(); h != 3 {
		t.Errorf("outcomes served from the cache: %d, want 3", h)
	}
	p.same()
	if len(p.f.fired.m) != 0 || p.f.fired.bytes != 0 {
		t.Errorf("the cache still holds %d records (%d bytes) after their outcomes", len(p.f.fired.m), p.f.fired.bytes)
	}
}

// TestFiredRecordChangedMeanwhileIsNotServed: a record rewritten (PUT,
// DELETE) after the leader took its generation, before or after it read,
// is never offered, so a stale outcome stays stale.
func TestFiredRecordChangedMeanwhileIsNotServed(t *testing.T) {
	p := newFiredPair(t)
	p.apply(&Create{Coll: "c", ID: "a", Spec: spec(100, 1), Now: 10}, &Create{Coll: "c", ID: "b", Spec: spec(100, 2), Now: 10})
	key := storage.RecordKey(nil, 4, "c", "a")
	old, _, _ := p.db.Get(key)
	g, on := p.f.fired.beginRead()
	if !on {
		t.Fatal("cache off")
	}
	// Read before the PUT applied, offered after it: refused.
	p.apply(&Upsert{Coll: "c", ID: "a", Spec: spec(300, 9), Now: 20})
	p.f.fired.offer(g, []firedRead{{key, old}})
	if _, ok := p.f.fired.m[string(key)]; ok {
		t.Fatal("a record rewritten since the read's generation was cached")
	}
	// The same for a delete.
	g, _ = p.f.fired.beginRead()
	keyB := storage.RecordKey(nil, 4, "c", "b")
	oldB, _, _ := p.db.Get(keyB)
	p.apply(&Delete{Coll: "c", ID: "b"})
	p.f.fired.offer(g, []firedRead{{keyB, oldB}})
	if _, ok := p.f.fired.m[string(keyB)]; ok {
		t.Fatal("a record deleted since the read's generation was cached")
	}
	// A record cached and then rewritten is forgotten at the commit.
	if _, err := p.f.ReadJobsToFire(refsOf("a")); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.f.fired.m[string(key)]; !ok {
		t.Fatal("a fresh read was not cached")
	}
	p.apply(&Upsert{Coll: "c", ID: "a", Spec: spec(400, 10), Now: 30})
	if _, ok := p.f.fired.m[string(key)]; ok {
		t.Fatal("a record rewritten after it was cached is still cached")
	}
	// The fired version's outcome is stale on both.
	if r := p.apply(&Ack{Coll: "c", ID: "a", Version: 2, Success: true, Now: 40}); r[0].Code != model.CodeStale {
		t.Fatalf("ack of a replaced version: %v", r[0].Code)
	}
	// Reads older than the window are refused.
	g, _ = p.f.fired.beginRead()
	for i := 0; i < firedWindow; i++ {
		p.apply(&Create{Coll: "c", ID: fmt.Sprint("w", i), Spec: spec(500, uint64(i)), Now: 50})
	}
	cur, _, _ := p.db.Get(key)
	p.f.fired.offer(g, []firedRead{{key, cur}})
	if _, ok := p.f.fired.m[string(key)]; ok {
		t.Fatal("a read older than the window was cached")
	}
	p.same()
}

// TestFiredCacheOffAndRestore: nothing is cached while off or during a
// restore, and a restore forgets what was cached before it.
func TestFiredCacheOffAndRestore(t *testing.T) {
	p := newFiredPair(t)
	p.apply(&Create{Coll: "c", ID: "a", Spec: spec(100, 1), Now: 10})
	if _, err := p.f.ReadJobsToFire(refsOf("a")); err != nil || len(p.f.fired.m) != 1 {
		t.Fatalf("read: %v, cached %d", err, len(p.f.fired.m))
	}
	// A full snapshot of another state restored over it.
	other := openFSM(t, memDB(t), 4)
	other.ApplyBatch(logOf([]Command{&Create{Coll: "c", ID: "a", Spec: spec(700, 7), Now: 70}}))
	var snap bytes.Buffer
	if _, err := other.StreamState(&snap); err != nil {
		t.Fatal(err)
	}
	g, _ := p.f.fired.beginRead()
	if err := p.f.Restore(io.NopCloser(&snap)); err != nil {
		t.Fatal(err)
	}
	if len(p.f.fired.m) != 0 {
		t.Fatal("a record cached before a restore survived it")
	}
	cur, _, _ := p.db.Get(storage.RecordKey(nil, 4, "c", "a"))
	p.f.fired.offer(g, []firedRead{{storage.RecordKey(nil, 4, "c", "a"), cur}})
	if len(p.f.fired.m) != 0 {
		t.Fatal("a read from before the restore was cached")
	}
	p.f.CacheFired(false)
	if _, err := p.f.ReadJobsToFire(refsOf("a")); err != nil || len(p.f.fired.m) != 0 {
		t.Fatalf("cached while off: %v, %d", err, len(p.f.fired.m))
	}
}

// TestFiredCacheUnderConcurrentReads: a reader fires (reads and offers)
// random jobs while the state machine applies random creates, PUTs,
// deletes, acks and retries of the same few ids. Every cache hit is
// checked against a real read (verifyFired), and the end state must be
// the reference's. Run it with -race.
func TestFiredCacheUnderConcurrentReads(t *testing.T) {
	if !verifyFired {
		t.Skip("needs the test binary's hit checks")
	}
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			p := newFiredPair(t)
			rng := rand.New(rand.NewPCG(seed, 7))
			ids := make([]string, 16)
			for i := range ids {
				ids[i] = fmt.Sprint("j", i)
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var once sync.Once
			halt := func() { once.Do(func() { close(stop) }); wg.Wait() }
			t.Cleanup(halt) // before the stores close, also when the test fails
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(seed, 8))
				for {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := p.f.ReadJobsToFire(refsOf(ids[r.IntN(len(ids))], ids[r.IntN(len(ids))])); err != nil {
						t.Error(err)
						return
					}
				}
			}()
			now := int64(100)
			for step := 0; step < 1500; step++ {
				now++
				id := ids[rng.IntN(len(ids))]
				j, found, err := GetJob(p.refDB, 4, "c", id)
				if err != nil {
					t.Fatal(err)
				}
				v := uint64(1)
				if found {
					v = j.Version
				}
				var c Command
				switch rng.IntN(6) {
				case 0:
					c = &Create{Coll: "c", ID: id, Spec: spec(now, rng.Uint64()), Now: now}
				case 1:
					c = &Upsert{Coll: "c", ID: id, Spec: spec(now+5, rng.Uint64()), Now: now}
				case 2:
					c = &Delete{Coll: "c", ID: id}
				case 3:
					c = &AckMany{Coll: "c", Now: now, Jobs: []AckJob{{ID: id, Version: v, Success: true, Attempts: 1}}}
				case 4:
					c = &Ack{Coll: "c", ID: id, Version: v, Attempts: 2, LastError: "500", Now: now}
				case 5:
					c = &Retry{Coll: "c", ID: id, Version: v, NextDue: now + 3, Attempts: 1, LastError: "503", Now: now}
				}
				p.apply(c)
			}
			halt()
			p.same()
			if p.f.fired.hits.Load() == 0 {
				t.Error("no outcome was served from the cache: the test proves nothing")
			}
		})
	}
}

// A schedule's occurrence is cached on every replica, leader or not, when
// its advance commits ("born"), so its outcome's apply does not read it
// back; any later write of the record drops it. verifyFired checks every
// hit against storage.
func TestBornOccurrencesServeTheirOutcome(t *testing.T) {
	const t0 = int64(1_795_000_000_000)
	db := memDB(t)
	f := openFSM(t, db, 6) // a follower: CacheFired stays off
	adv := func(at int64) Command {
		return &ScheduleAdvance{Coll: "c", ID: "s", Version: 1, Expected: at, Occurrence: at, Next: at + 1000, Now: at - 500}
	}
	ack := func(at int64) Command {
		return &Ack{Coll: "c", ID: model.OccurrenceID("s", at), Version: 1, Success: true, Attempts: 1, Now: at + 5}
	}
	var index uint64
	apply := func(cmds ...Command) []model.Result {
		index++
		return results(t, f.ApplyBatch([]*raft.Log{{Index: index, Term: 1, Type: raft.LogCommand, Data: Encode(cmds...)}})[0])
	}
	apply(&PutSchedule{Coll: "c", ID: "s", Spec: schedSpec(1), Anchor: t0, Next: t0 + 1000, Now: t0})
	apply(adv(t0 + 1000))
	if !f.fired.mayHold() {
		t.Fatal("the occurrence was not cached when its advance committed")
	}
	if r := apply(ack(t0 + 1000)); r[0].Code != model.CodeOK || f.fired.hits.Load() != 1 || f.fired.mayHold() {
		t.Fatalf("ack: %+v, hits %d, held %d", r, f.fired.hits.Load(), f.fired.held.Load())
	}
	// Replaced in the batch that made it: the cached value is the
	// replacement (a mismatch would panic under verifyFired).
	apply(adv(t0+2000), &Upsert{Coll: "c", ID: model.OccurrenceID("s", t0+2000), Spec: spec(t0+2500, 9), Now: t0 + 1600})
	if r := apply(&Ack{Coll: "c", ID: model.OccurrenceID("s", t0+2000), Version: 2, Success: true, Attempts: 1, Now: t0 + 2505}); r[0].Code != model.CodeOK || f.fired.hits.Load() != 2 {
		t.Fatalf("ack of the replaced occurrence: %+v, hits %d", r, f.fired.hits.Load())
	}
	// Deleted in a later batch: dropped, and nothing is left.
	apply(adv(t0 + 3000))
	apply(&Delete{Coll: "c", ID: model.OccurrenceID("s", t0+3000)})
	if f.fired.mayHold() {
		t.Fatalf("a deleted occurrence is still cached (%d held)", f.fired.held.Load())
	}
	j, ok, err := GetJob(db, 6, "c", model.OccurrenceID("s", t0+1000))
	if err != nil || !ok || j.Status != model.StatusSucceeded {
		t.Fatalf("the first occurrence: %+v %v %v", j, ok, err)
	}
}
