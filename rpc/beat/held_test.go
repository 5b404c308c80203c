package beat

import (
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/timemachine-db/timemachine/internal/testutil"
	"github.com/timemachine-db/timemachine/rpc/peer"
)

// countingFollower registers group on c answering every heartbeat with
// LastLog = how many heartbeats it has handled, so an answer tells which
// heartbeat it belongs to.
func countingFollower(c *Coalescer, group uint16, hits *atomic.Uint64) {
	t := &Transport{c: c, group: group, h: c.register(group, nil)}
	t.h.fn = func(rpc raft.RPC) {
		req := rpc.Command.(*raft.AppendEntriesRequest)
		rpc.Respond(&raft.AppendEntriesResponse{Term: req.Term, LastLog: hits.Add(1), Success: true}, nil)
	}
}

// holdPair is a leader coalescer (o, flushed by hand: Flush is an hour)
// with a group-1 transport, and a follower coalescer whose group 1 counts
// heartbeats.
func holdPair(t *testing.T, o Options) (*loop, *Coalescer, *Transport, *atomic.Uint64) {
	t.Helper()
	nt, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nt.Close() })
	l := newLoop()
	o.Flush = time.Hour
	a := New(l, o)
	b := New(l, Options{})
	l.add("b:1", b)
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	hits := new(atomic.Uint64)
	countingFollower(b, 1, hits)
	tr := a.Wrap(1, nt)
	t.Cleanup(func() { _ = tr.Close() })
	return l, a, tr, hits
}

// send runs one heartbeat of term through tr; a heartbeat that waits for
// its own answer is flushed by hand.
func send(t *testing.T, a *Coalescer, tr *Transport, term uint64, waits bool) (raft.AppendEntriesResponse, error) {
	t.Helper()
	var r raft.AppendEntriesResponse
	done := make(chan error, 1)
	go func() { done <- tr.AppendEntries("b", "b:1", heartbeat(term), &r) }()
	if waits {
		flushWhenQueued(t, a, "b:1", 1)
	}
	err := returned(t, done, "the heartbeat")
	return r, err
}

// awaitHeld waits until what tr holds for b:1 satisfies cond.
func awaitHeld(t *testing.T, tr *Transport, what string, cond func(*held) bool) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, what, testutil.True(func() bool {
		tr.held.mu.Lock()
		defer tr.held.mu.Unlock()
		e := tr.held.m["b:1"]
		return e != nil && cond(e)
	}))
}

// returned waits for a call's result on done.
func returned(t *testing.T, done <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not come back", what)
		return nil
	}
}

func TestHeldAnswerAnswersTheNextHeartbeat(t *testing.T) {
	_, a, tr, hits := holdPair(t, Options{HoldAnswers: time.Hour})

	// The first heartbeat has nothing held: it waits for its own answer.
	r, err := send(t, a, tr, 3, true)
	if err != nil || r.LastLog != 1 || hits.Load() != 1 {
		t.Fatalf("first heartbeat: %v, answer %d, %d handled", err, r.LastLog, hits.Load())
	}
	// The second is answered at once with the first one's answer, and
	// goes out in the background.
	r, err = send(t, a, tr, 3, false)
	if err != nil || r.LastLog != 1 {
		t.Fatalf("second heartbeat: %v, answer %d, want the held answer 1", err, r.LastLog)
	}
	if hits.Load() != 1 {
		t.Fatal("the second heartbeat reached the follower before its batch went")
	}
	// A third, while the second still waits for its batch, is answered from
	// the same held answer and sends nothing more.
	if r, err = send(t, a, tr, 3, false); err != nil || r.LastLog != 1 {
		t.Fatalf("third heartbeat: %v, answer %d", err, r.LastLog)
	}
	flushWhenQueued(t, a, "b:1", 1)
	testutil.Eventually(t, 10*time.Second, "the background heartbeat handled", testutil.True(func() bool { return hits.Load() == 2 }))
	// Its answer is the one held now.
	testutil.Eventually(t, 10*time.Second, "the background answer held", testutil.True(func() bool {
		var r raft.AppendEntriesResponse
		ok, send := tr.held.take("b:1", 3, time.Hour, &r)
		if send { // take marked it as sending: undo, nothing will be sent
			tr.held.mu.Lock()
			tr.held.m["b:1"].sending = false
			tr.held.mu.Unlock()
		}
		return ok && r.LastLog == 2
	}))

	// A heartbeat of another term (a new leadership) waits for its own.
	if r, err = send(t, a, tr, 4, true); err != nil || r.LastLog != 3 {
		t.Fatalf("heartbeat of a newer term: %v, answer %d, want its own (3)", err, r.LastLog)
	}
}

func TestConfirmAndUrgentNeverTakeAHeldAnswer(t *testing.T) {
	_, a, tr, hits := holdPair(t, Options{HoldAnswers: time.Hour})
	if _, err := send(t, a, tr, 3, true); err != nil {
		t.Fatal(err)
	}
	// Confirm goes at once (no flush by hand) and returns its own answer.
	var r raft.AppendEntriesResponse
	if err := tr.Confirm("b", "b:1", heartbeat(3), &r); err != nil || r.LastLog != 2 || hits.Load() != 2 {
		t.Fatalf("confirm: %v, answer %d, %d handled; want its own answer (2)", err, r.LastLog, hits.Load())
	}
	// So does an ordinary heartbeat while the group is urgent (raft's own
	// VerifyLeader counts those).
	tr.Urgent(time.Minute)
	if err := tr.AppendEntries("b", "b:1", heartbeat(3), &r); err != nil || r.LastLog != 3 {
		t.Fatalf("urgent heartbeat: %v, answer %d, want its own (3)", err, r.LastLog)
	}
}

func TestHeldAnswerExpiresAndFailureDropsIt(t *testing.T) {
	l, a, tr, hits := holdPair(t, Options{HoldAnswers: time.Hour})
	if _, err := send(t, a, tr, 3, true); err != nil {
		t.Fatal(err)
	}
	// Older than HoldAnswers: the next heartbeat waits for its own answer.
	tr.held.mu.Lock()
	tr.held.m["b:1"].sent = time.Now().Add(-2 * time.Hour)
	tr.held.mu.Unlock()
	if r, err := send(t, a, tr, 3, true); err != nil || r.LastLog != 2 {
		t.Fatalf("after the held answer expired: %v, answer %d, want its own (2)", err, r.LastLog)
	}

	// The peer goes away: the next heartbeat is still answered from the
	// held answer, but its background batch fails, and then nothing is
	// held: the one after fails, as raft would have seen it.
	l.mu.Lock()
	l.fail["b:1"] = peer.ErrUnreachable
	l.mu.Unlock()
	if r, err := send(t, a, tr, 3, false); err != nil || r.LastLog != 2 {
		t.Fatalf("heartbeat answered from the held answer: %v, answer %d", err, r.LastLog)
	}
	flushWhenQueued(t, a, "b:1", 1)
	awaitHeld(t, tr, "the failed batch drops the held answer", func(e *held) bool { return !e.ok && !e.sending })
	if _, err := send(t, a, tr, 3, true); err == nil {
		t.Fatal("a heartbeat to an unreachable follower succeeded after its held answer was dropped")
	}
	if hits.Load() != 2 {
		t.Fatalf("%d heartbeats handled, want 2", hits.Load())
	}
}

// A heartbeat answered from a held answer stays in the call (Park) until
// the shared tick; Urgent hands it back at once, with what is held then.
func TestParkedHeartbeatGoesBackOnUrgent(t *testing.T) {
	l, a, tr, _ := holdPair(t, Options{HoldAnswers: time.Hour, Park: time.Hour})
	if r, err := send(t, a, tr, 3, true); err != nil || r.LastLog != 1 {
		t.Fatalf("first heartbeat: %v, %d", err, r.LastLog)
	}

	var r raft.AppendEntriesResponse
	done := make(chan error, 1)
	go func() { done <- tr.AppendEntries("b", "b:1", heartbeat(3), &r) }()
	// Its background heartbeat goes and is answered; the call stays parked.
	flushWhenQueued(t, a, "b:1", 1)
	awaitHeld(t, tr, "the background heartbeat answered", func(e *held) bool { return !e.sending })
	select {
	case err := <-done:
		t.Fatalf("the parked heartbeat returned before its tick: %v", err)
	default:
	}
	tr.Urgent(time.Millisecond)
	if err := returned(t, done, "the parked heartbeat, after Urgent,"); err != nil || r.LastLog != 2 {
		t.Fatalf("parked heartbeat: %v, answer %d, want the answer held when it left (2)", err, r.LastLog)
	}

	// Parked while its background heartbeat fails: it goes back for its
	// own answer, and raft sees the failure.
	testutil.Eventually(t, 5*time.Second, "urgency over", testutil.True(func() bool { return !tr.urgent() }))
	l.mu.Lock()
	l.fail["b:1"] = peer.ErrUnreachable
	l.mu.Unlock()
	go func() { done <- tr.AppendEntries("b", "b:1", heartbeat(3), &r) }()
	flushWhenQueued(t, a, "b:1", 1)
	awaitHeld(t, tr, "the failed batch drops the held answer", func(e *held) bool { return !e.ok })
	tr.Urgent(time.Millisecond)
	testutil.Eventually(t, 5*time.Second, "urgency over", testutil.True(func() bool { return !tr.urgent() }))
	flushWhenQueued(t, a, "b:1", 1)
	if err := returned(t, done, "the parked heartbeat"); err == nil {
		t.Fatal("a parked heartbeat whose follower went away succeeded")
	}
}

// Answers and failures may come back out of order (a background batch
// that hangs until its timeout, a waiting heartbeat answered meanwhile):
// an answer never replaces a newer one, and an answer to a heartbeat
// queued before one that failed is not held.
func TestHeldAnswersKeepTheNewestOutcome(t *testing.T) {
	var h holdTable
	t0 := time.Now()
	ok := func(last uint64) *raft.AppendEntriesResponse {
		return &raft.AppendEntriesResponse{Term: 3, LastLog: last, Success: true}
	}
	held := func() (uint64, bool) {
		var r raft.AppendEntriesResponse
		answered, _ := h.take("b:1", 3, time.Hour, &r)
		h.mu.Lock()
		h.m["b:1"].sending = false
		h.mu.Unlock()
		return r.LastLog, answered
	}
	h.record("b:1", 3, t0.Add(2*time.Second), ok(2), nil, false)
	h.record("b:1", 3, t0.Add(time.Second), ok(1), nil, true) // older, answered later
	if last, answered := held(); !answered || last != 2 {
		t.Fatalf("held %d (%t), want the newer answer 2", last, answered)
	}
	h.record("b:1", 3, t0.Add(4*time.Second), nil, peer.ErrUnreachable, false)
	h.record("b:1", 3, t0.Add(3*time.Second), ok(3), nil, true) // queued before the failure
	if last, answered := held(); answered {
		t.Fatalf("held %d after a later heartbeat failed", last)
	}
	h.record("b:1", 3, t0.Add(5*time.Second), ok(5), nil, false)
	if last, answered := held(); !answered || last != 5 {
		t.Fatalf("held %d (%t), want 5: queued after the failure", last, answered)
	}
}
