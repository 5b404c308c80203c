//lint:file-ignore SA1019 raft v1.7.3 still fills and reads the deprecated Leader field of a heartbeat (older peers send only it), so a coalesced heartbeat must carry it unchanged.

package beat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/timemachine-db/timemachine/internal/testutil"
	"github.com/timemachine-db/timemachine/rpc/peer"
)

// loop is a Caller that hands each call to the coalescer registered for
// the target address, counting the calls per target.
type loop struct {
	mu    sync.Mutex
	nodes map[string]map[peer.Method]peer.HandlerFunc
	calls map[string]int
	fail  map[string]error
}

func newLoop() *loop {
	return &loop{nodes: map[string]map[peer.Method]peer.HandlerFunc{}, calls: map[string]int{}, fail: map[string]error{}}
}

func (l *loop) add(addr string, c *Coalescer) {
	c.Serve(registrar(func(m peer.Method, h peer.HandlerFunc) {
		l.mu.Lock()
		if l.nodes[addr] == nil {
			l.nodes[addr] = map[peer.Method]peer.HandlerFunc{}
		}
		l.nodes[addr][m] = h
		l.mu.Unlock()
	}))
}

type registrar func(m peer.Method, h peer.HandlerFunc)

func (r registrar) Handle(m peer.Method, h peer.HandlerFunc) { r(m, h) }

func (l *loop) Call(ctx context.Context, addr string, m peer.Method, body []byte) ([]byte, error) {
	l.mu.Lock()
	l.calls[addr]++
	h, err := l.nodes[addr][m], l.fail[addr]
	l.mu.Unlock()
	if m != MethodHeartbeats && m != MethodRaft {
		return nil, fmt.Errorf("unexpected method %d", m)
	}
	if err != nil {
		return nil, err
	}
	if h == nil {
		return nil, &peer.RemoteError{Code: peer.CodeUnknownMethod}
	}
	return h(ctx, body)
}

func (l *loop) count(addr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls[addr]
}

// follower registers a heartbeat handler for group on c that answers the
// way raft does, with LastLog = group so answers can be told apart.
func follower(c *Coalescer, group uint16, hits *atomic.Int64) *Transport {
	t := &Transport{c: c, group: group, h: c.register(group, nil)}
	t.h.fn = func(rpc raft.RPC) {
		req := rpc.Command.(*raft.AppendEntriesRequest)
		if hits != nil {
			hits.Add(1)
		}
		rpc.Respond(&raft.AppendEntriesResponse{RPCHeader: raft.RPCHeader{ID: []byte("b"), Addr: []byte("b:1")},
			Term: req.Term, LastLog: uint64(group), Success: true}, nil)
	}
	return t
}

// flushWhenQueued waits until n heartbeats wait for addr, then runs the
// flush its timer would have run (the tests set an hour-long Flush so the
// batch is exactly what they queued, however slow the machine).
func flushWhenQueued(t *testing.T, c *Coalescer, addr string, n int) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, fmt.Sprintf("%d heartbeats queued for %s", n, addr), testutil.True(func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		q := c.queues[addr]
		return q != nil && len(q.waiting) == n
	}))
	c.mu.Lock()
	stopped := c.queues[addr].timer.Stop()
	c.mu.Unlock()
	if !stopped {
		t.Fatal("the flush timer already ran")
	}
	c.flush(addr)
}

func heartbeat(term uint64) *raft.AppendEntriesRequest {
	return &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("a"), Addr: []byte("a:1")},
		Term: term, Leader: []byte("a:1")}
}

func TestManyGroupsOneCallPerPeerPerFlush(t *testing.T) {
	l := newLoop()
	a := New(l, Options{Flush: time.Hour})
	b := New(l, Options{})
	l.add("b:1", b)
	defer a.Close()
	defer b.Close()
	const groups = 200
	var hits atomic.Int64
	for g := uint16(0); g < groups; g++ {
		follower(b, g, &hits)
	}
	var wg sync.WaitGroup
	errs := make([]error, groups)
	resps := make([]raft.AppendEntriesResponse, groups)
	for g := 0; g < groups; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[g] = a.Heartbeat("b:1", uint16(g), heartbeat(7), &resps[g])
		}()
	}
	flushWhenQueued(t, a, "b:1", groups)
	wg.Wait()
	for g := 0; g < groups; g++ {
		if errs[g] != nil {
			t.Fatalf("group %d: %v", g, errs[g])
		}
		if r := resps[g]; !r.Success || r.Term != 7 || r.LastLog != uint64(g) || string(r.Addr) != "b:1" {
			t.Fatalf("group %d got the answer %+v", g, r)
		}
	}
	if n := l.count("b:1"); n != 1 {
		t.Fatalf("%d heartbeats went out in %d calls, want 1", groups, n)
	}
	if st := a.Stats(); st.Batches != 1 || st.Answered != groups {
		t.Fatalf("stats: %+v", st)
	}
	if hits.Load() != groups {
		t.Fatalf("the follower's raft saw %d heartbeats, want %d", hits.Load(), groups)
	}
}

func TestSeparateCallsPerPeer(t *testing.T) {
	l := newLoop()
	a := New(l, Options{Flush: time.Hour})
	b, c := New(l, Options{}), New(l, Options{})
	l.add("b:1", b)
	l.add("c:1", c)
	defer a.Close()
	for g := uint16(0); g < 10; g++ {
		follower(b, g, nil)
		follower(c, g, nil)
	}
	var wg sync.WaitGroup
	for g := uint16(0); g < 10; g++ {
		for _, to := range []raft.ServerAddress{"b:1", "c:1"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var r raft.AppendEntriesResponse
				if err := a.Heartbeat(to, g, heartbeat(3), &r); err != nil || r.LastLog != uint64(g) {
					t.Errorf("group %d to %s: %v %+v", g, to, err, r)
				}
			}()
		}
	}
	flushWhenQueued(t, a, "b:1", 10)
	flushWhenQueued(t, a, "c:1", 10)
	wg.Wait()
	if l.count("b:1") != 1 || l.count("c:1") != 1 {
		t.Fatalf("calls: b %d, c %d; want one each", l.count("b:1"), l.count("c:1"))
	}
}

// A group that closed on the follower (or is shutting down: raft's
// handler then answers nothing) fails alone; the others in the batch
// still get their group's answer.
func TestClosedGroupFailsAlone(t *testing.T) {
	l := newLoop()
	a := New(l, Options{Flush: 200 * time.Millisecond})
	b := New(l, Options{})
	l.add("b:1", b)
	defer a.Close()
	follower(b, 1, nil)
	gone := follower(b, 2, nil)
	silent := follower(b, 3, nil)
	silent.h.fn = func(raft.RPC) {} // raft after Shutdown: no answer
	b.unregister(2, gone.h)
	var wg sync.WaitGroup
	errs := map[uint16]error{}
	var mu sync.Mutex
	for _, g := range []uint16{1, 2, 3, 4} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r raft.AppendEntriesResponse
			err := a.Heartbeat("b:1", g, heartbeat(1), &r)
			mu.Lock()
			errs[g] = err
			mu.Unlock()
		}()
	}
	wg.Wait()
	if errs[1] != nil {
		t.Fatalf("group 1: %v", errs[1])
	}
	for _, g := range []uint16{2, 3, 4} {
		if !errors.Is(errs[g], ErrRefused) {
			t.Fatalf("group %d: %v, want ErrRefused", g, errs[g])
		}
	}
}

// The Transport sends a heartbeat the stock way only to a peer that does
// not know the method (an older binary). A group's refusal is final (the
// stock path would be refused by the peer's mux as well), and so is a
// batch that could not be delivered (the stock path goes to the same
// port; retrying there would dial a connection per group).
func TestTransportFallsBackOnlyForAnOldPeer(t *testing.T) {
	nt, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer nt.Close()
	// A port nothing listens on: the stock path fails with a dial error.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := raft.ServerAddress(ln.Addr().String())
	_ = ln.Close()

	l := newLoop()
	a := New(l, Options{})
	b := New(l, Options{})
	defer a.Close()
	l.add(string(dead), b) // b answers for that address, but has no group 5
	tr := a.Wrap(5, nt)
	var r raft.AppendEntriesResponse
	if err := tr.AppendEntries("b", dead, heartbeat(1), &r); !errors.Is(err, ErrRefused) {
		t.Fatalf("refused heartbeat: %v, want ErrRefused", err)
	}
	if st := a.Stats(); st.FellBack != 0 || st.Batches != 1 {
		t.Fatalf("stats after a refusal: %+v", st)
	}
	for _, fail := range []error{peer.ErrUnreachable, fmt.Errorf("%w: %w", peer.ErrUnreachable, peer.ErrDropped)} {
		l.mu.Lock()
		l.fail[string(dead)] = fail
		l.mu.Unlock()
		if err := tr.AppendEntries("b", dead, heartbeat(1), &r); err == nil || !errors.Is(err, fail) && !strings.Contains(err.Error(), fail.Error()) {
			t.Fatalf("heartbeat after a failed batch (%v): %v", fail, err)
		}
		if st := a.Stats(); st.FellBack != 0 {
			t.Fatalf("stats after a failed batch: %+v", st)
		}
	}
	// An old peer: the heartbeat goes the stock way (here: a dial error).
	l.mu.Lock()
	l.fail[string(dead)] = &peer.RemoteError{Code: peer.CodeUnknownMethod}
	l.mu.Unlock()
	err = tr.AppendEntries("b", dead, heartbeat(1), &r)
	if err == nil || errors.Is(err, ErrRefused) {
		t.Fatalf("heartbeat to an old peer: %v, want the stock path's dial error", err)
	}
	if st := a.Stats(); st.FellBack != 1 || !a.isOld(string(dead)) {
		t.Fatalf("stats after an old peer: %+v", st)
	}
	_ = tr.Close()
}

func TestPeerDownFailsTheBatch(t *testing.T) {
	l := newLoop()
	l.fail["b:1"] = peer.ErrUnreachable
	a := New(l, Options{})
	defer a.Close()
	var r raft.AppendEntriesResponse
	if err := a.Heartbeat("b:1", 1, heartbeat(1), &r); err == nil {
		t.Fatal("a heartbeat to an unreachable peer succeeded")
	}
	// A peer without the method (an older binary) fails the same way.
	if err := a.Heartbeat("c:1", 1, heartbeat(1), &r); err == nil {
		t.Fatal("a heartbeat to a peer without the method succeeded")
	}
}

func TestCloseAnswersWaitingHeartbeats(t *testing.T) {
	l := newLoop()
	a := New(l, Options{Flush: time.Hour})
	done := make(chan error, 1)
	go func() {
		var r raft.AppendEntriesResponse
		done <- a.Heartbeat("b:1", 1, heartbeat(1), &r)
	}()
	testutil.Eventually(t, 5*time.Second, "the heartbeat is queued", testutil.True(func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		q := a.queues["b:1"]
		return q != nil && len(q.waiting) == 1
	}))
	closed := make(chan struct{})
	go func() { _ = a.Close(); close(closed) }()
	if err := <-done; err == nil || !strings.Contains(err.Error(), ErrClosed.Error()) {
		t.Fatalf("waiting heartbeat got %v, want the closed error", err)
	}
	var r raft.AppendEntriesResponse
	if err := a.Heartbeat("b:1", 1, heartbeat(1), &r); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited for an hour-long flush timer")
	}
}

func TestIsHeartbeat(t *testing.T) {
	hb := heartbeat(2)
	if !IsHeartbeat(hb) {
		t.Fatal("raft's heartbeat not recognised")
	}
	for name, mut := range map[string]func(*raft.AppendEntriesRequest){
		"entries":   func(r *raft.AppendEntriesRequest) { r.Entries = []*raft.Log{{Index: 1}} },
		"prev":      func(r *raft.AppendEntriesRequest) { r.PrevLogEntry = 4 },
		"prevTerm":  func(r *raft.AppendEntriesRequest) { r.PrevLogTerm = 1 },
		"commit":    func(r *raft.AppendEntriesRequest) { r.LeaderCommitIndex = 9 },
		"no term":   func(r *raft.AppendEntriesRequest) { r.Term = 0 },
		"no leader": func(r *raft.AppendEntriesRequest) { r.Addr, r.Leader = nil, nil },
	} {
		r := heartbeat(2)
		mut(r)
		if IsHeartbeat(r) {
			t.Errorf("%s: taken for a heartbeat", name)
		}
	}
}

func TestWireRoundTrip(t *testing.T) {
	items := []item{{group: 0, req: *heartbeat(1)}, {group: 65535, req: raft.AppendEntriesRequest{Term: 1 << 40}}}
	got, err := decodeItems(encodeItems(nil, items))
	if err != nil || len(got) != 2 || got[1].group != 65535 || got[1].req.Term != 1<<40 || string(got[0].req.Addr) != "a:1" || string(got[0].req.Leader) != "a:1" {
		t.Fatalf("items: %v %+v", err, got)
	}
	as := []answer{{resp: raft.AppendEntriesResponse{Term: 5, LastLog: 6, Success: true, NoRetryBackoff: true, RPCHeader: raft.RPCHeader{ID: []byte("x")}}}, {err: "nope"}}
	ga, err := decodeAnswers(encodeAnswers(nil, as))
	if err != nil || len(ga) != 2 || !ga[0].resp.Success || !ga[0].resp.NoRetryBackoff || ga[0].resp.LastLog != 6 || string(ga[0].resp.ID) != "x" || ga[1].err != "nope" {
		t.Fatalf("answers: %v %+v", err, ga)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(encodeItems(nil, []item{{group: 3, req: *heartbeat(1)}}))
	f.Add(encodeAnswers(nil, []answer{{err: "x"}, {}}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		if items, err := decodeItems(b); err == nil {
			if _, err := decodeItems(encodeItems(nil, items)); err != nil {
				t.Fatalf("re-encoded items do not decode: %v", err)
			}
		}
		if as, err := decodeAnswers(b); err == nil {
			if _, err := decodeAnswers(encodeAnswers(nil, as)); err != nil {
				t.Fatalf("re-encoded answers do not decode: %v", err)
			}
		}
	})
}

// Heartbeats that make their group persist a new term (slow: an fsync)
// do not hold up one another, nor the rest of the batch, in sequence.
func TestSlowHeartbeatsRunInParallel(t *testing.T) {
	l := newLoop()
	a := New(l, Options{Flush: time.Hour})
	b := New(l, Options{})
	l.add("b:1", b)
	defer a.Close()
	const groups, slow = 40, 30 * time.Millisecond // each under batchBudget
	for g := uint16(0); g < groups; g++ {
		f := follower(b, g, nil)
		fast := f.h.fn
		f.h.fn = func(rpc raft.RPC) { time.Sleep(slow); fast(rpc) }
	}
	var wg sync.WaitGroup
	for g := uint16(0); g < groups; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r raft.AppendEntriesResponse
			if err := a.Heartbeat("b:1", g, heartbeat(2), &r); err != nil || r.LastLog != uint64(g) {
				t.Errorf("group %d: %v %+v", g, err, r)
			}
		}()
	}
	start := time.Now()
	flushWhenQueued(t, a, "b:1", groups)
	wg.Wait()
	if took := time.Since(start); took > groups*slow/4 {
		t.Fatalf("a batch of %d heartbeats taking %v each took %v", groups, slow, took)
	}
}

// A heartbeat its group takes too long to answer (an fsync under load)
// fails alone after batchBudget; the rest of the batch is answered on time.
func TestStuckHeartbeatFailsAlone(t *testing.T) {
	l := newLoop()
	a := New(l, Options{Flush: time.Hour})
	b := New(l, Options{})
	l.add("b:1", b)
	defer a.Close()
	const groups = 10
	release := make(chan struct{})
	defer close(release)
	for g := uint16(0); g < groups; g++ {
		f := follower(b, g, nil)
		if g == 0 {
			fast := f.h.fn
			f.h.fn = func(rpc raft.RPC) { <-release; fast(rpc) }
		}
	}
	errs := make([]error, groups)
	var wg sync.WaitGroup
	for g := uint16(0); g < groups; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r raft.AppendEntriesResponse
			errs[g] = a.Heartbeat("b:1", g, heartbeat(2), &r)
			if errs[g] == nil && r.LastLog != uint64(g) {
				t.Errorf("group %d: answer %+v", g, r)
			}
		}()
	}
	start := time.Now()
	flushWhenQueued(t, a, "b:1", groups)
	wg.Wait()
	if took := time.Since(start); took > 5*batchBudget {
		t.Fatalf("a batch with one stuck heartbeat took %v", took)
	}
	if !errors.Is(errs[0], ErrRefused) {
		t.Fatalf("the stuck heartbeat: %v, want ErrRefused", errs[0])
	}
	for g := 1; g < groups; g++ {
		if errs[g] != nil {
			t.Fatalf("group %d: %v", g, errs[g])
		}
	}
}

// A group marked urgent (a read confirming its leader) sends its
// heartbeat at once, and takes the heartbeats already waiting along;
// without it they wait for the flush delay (here an hour: the test would
// time out).
func TestUrgentHeartbeatDoesNotWaitForTheFlush(t *testing.T) {
	nt, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer nt.Close()
	l := newLoop()
	a := New(l, Options{Flush: time.Hour})
	b := New(l, Options{})
	l.add("b:1", b)
	defer a.Close()
	defer b.Close()
	var hits atomic.Int64
	follower(b, 1, &hits)
	follower(b, 2, &hits)

	// Group 2's heartbeat waits for the (hour-long) flush...
	waiting := make(chan error, 1)
	var r2 raft.AppendEntriesResponse
	go func() { waiting <- a.Heartbeat("b:1", 2, heartbeat(3), &r2) }()
	testutil.Eventually(t, 5*time.Second, "the first heartbeat queued", testutil.True(func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		q := a.queues["b:1"]
		return q != nil && len(q.waiting) == 1
	}))
	// ... until group 1, urgent, sends the batch at once.
	tr := a.Wrap(1, nt)
	defer tr.Close()
	tr.Urgent(time.Minute)
	var r1 raft.AppendEntriesResponse
	if err := tr.AppendEntries("b", "b:1", heartbeat(3), &r1); err != nil || !r1.Success {
		t.Fatalf("urgent heartbeat: %v, %+v", err, r1)
	}
	if err := <-waiting; err != nil || !r2.Success {
		t.Fatalf("the heartbeat that was waiting: %v, %+v", err, r2)
	}
	if n := l.count("b:1"); n != 1 {
		t.Fatalf("%d calls, want both heartbeats in 1", n)
	}
}
