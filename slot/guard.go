package slot

import (
	"sync"
	"time"

	"github.com/timemachine-db/timemachine/storage"
)

// jobGuard is the slot leader's per-job rule between a callback and a
// client's DELETE or PUT of the same job (docs/api.md#jobs): DELETE
// answers 204, and PUT 200, only when the job will not fire afterwards; a
// job whose callback has already started answers 409 conflict with status
// "firing".
//
// Raft orders the writes, but a callback is not a write: the scheduler
// reads the record, then sends. Without a guard a DELETE could commit
// between the read and the send, answer 204, and the callback of the
// deleted job would still go out (88 of 600 jobs deleted 2 ms before their
// trigger time fired in the test, 3 after the 204). So:
//
//   - the scheduler arms a fire before it reads the record (arm), and asks
//     right before the request leaves whether it may still send
//     (startSend);
//   - a DELETE or PUT on the leader begins a write (beginWrite) before it is
//     proposed and ends it when the entry has committed or failed
//     (endWrite). A write that finds the job sending is refused: 409
//     firing. Otherwise it cancels every armed fire of the job — they read
//     a record the write may change — and holds later ones off until it
//     ends;
//   - a cancelled fire does not send; the scheduler looks at the job again
//     shortly (after the write, the record says what is left to do).
//
// The guard lives only in memory, one per replica, and only the leader
// uses it: another node that takes over starts with no fire in flight (a
// callback the deposed leader had sent is the contract's allowed repeat).
// This replica leading again in a later term still finds the attempts it
// abandoned when its last term ended, until their deadlines (disarmAfter).
// It is keyed by collection and id; an entry exists only while something
// is armed, sending (or abandoned and not yet past its deadline) or being
// written.
type jobGuard struct {
	mu   sync.Mutex
	jobs map[string]*guardEntry
}

type guardEntry struct {
	armed   int    // fires that read (or are about to read) the record
	sending int    // fires whose request has started
	writes  int    // DELETE/PUT proposals in flight
	gen     uint64 // bumped by every write that begins: cancels armed fires
}

func newJobGuard() *jobGuard { return &jobGuard{jobs: map[string]*guardEntry{}} }

func guardKey(coll, id string) string { return coll + "\x00" + id }

// fireToken is what arm hands a fire: the write generation it saw, and
// whether a write was in flight then (the record it reads may be from
// before that write: such a fire never sends).
type fireToken struct {
	key   string
	gen   uint64
	stale bool
}

// arm registers a fire about to read the job's record.
func (g *jobGuard) arm(coll, id string) fireToken {
	k := guardKey(coll, id)
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.entry(k)
	e.armed++
	return fireToken{key: k, gen: e.gen, stale: e.writes > 0}
}

// armRound arms the fires of a dispatch round, one lock for all:
// tokens[i] is refs[i]'s.
func (g *jobGuard) armRound(refs []storage.DueEntry, tokens []fireToken) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, e := range refs {
		k := guardKey(e.Coll, e.ID)
		ge := g.entry(k)
		ge.armed++
		tokens[i] = fireToken{key: k, gen: ge.gen, stale: ge.writes > 0}
	}
}

// startSend reports whether the armed fire may send now: no write of the
// job was in flight when it was armed or began since, and none is in
// flight now. On true the job
// counts as sending until disarm.
func (g *jobGuard) startSend(t fireToken) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.jobs[t.key]
	if e == nil || t.stale || e.writes > 0 || e.gen != t.gen {
		return false
	}
	e.sending++
	return true
}

// disarm ends an armed fire; sent says whether startSend let it send.
func (g *jobGuard) disarm(t fireToken, sent bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.jobs[t.key]
	if e == nil {
		return
	}
	e.armed--
	if sent {
		e.sending--
	}
	g.gc(t.key, e)
}

// disarmAfter ends a fire that sent but whose answer nobody waits for any
// more (its term ended mid-flight): the request itself goes on, with the
// receiver, until its deadline, and a write of the job on this replica —
// leading again in a later term — must still find it firing until then,
// or a PUT would answer 200 while the receiver works on the old attempt
// (nemesis, 2026-11-26: deposed during packet loss, re-elected 1.6 s later,
// a PUT acknowledged 0.4 s before the abandoned attempt's deadline).
func (g *jobGuard) disarmAfter(t fireToken, until time.Time) {
	g.mu.Lock()
	e := g.jobs[t.key]
	if e == nil {
		g.mu.Unlock()
		return
	}
	e.armed--
	g.mu.Unlock()
	time.AfterFunc(time.Until(until), func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		e.sending--
		if g.jobs[t.key] == e {
			g.gc(t.key, e)
		}
	})
}

// beginWrite starts a DELETE or PUT of the job. It returns false, and the
// write must be answered 409 firing, when a callback of the job has
// started; otherwise endWrite must follow.
func (g *jobGuard) beginWrite(coll, id string) bool {
	k := guardKey(coll, id)
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.entry(k)
	if e.sending > 0 {
		g.gc(k, e)
		return false
	}
	e.writes++
	e.gen++
	return true
}

// endWrite ends a write begun with beginWrite, whatever its outcome.
func (g *jobGuard) endWrite(coll, id string) {
	k := guardKey(coll, id)
	g.mu.Lock()
	defer g.mu.Unlock()
	if e := g.jobs[k]; e != nil {
		e.writes--
		g.gc(k, e)
	}
}

// firing reports whether a callback of the job has started (GET shows it
// as "firing").
func (g *jobGuard) firing(coll, id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.jobs[guardKey(coll, id)]
	return e != nil && e.sending > 0
}

func (g *jobGuard) entry(k string) *guardEntry {
	e := g.jobs[k]
	if e == nil {
		e = &guardEntry{}
		g.jobs[k] = e
	}
	return e
}

func (g *jobGuard) gc(k string, e *guardEntry) {
	if e.armed == 0 && e.sending == 0 && e.writes == 0 {
		delete(g.jobs, k)
	}
}
