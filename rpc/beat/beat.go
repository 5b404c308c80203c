//lint:file-ignore SA1019 raft v1.7.3 still fills and reads the deprecated Leader field of a heartbeat (older peers send only it), so a coalesced heartbeat must carry it unchanged.

package beat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/timemachine-db/timemachine/rpc/peer"
)

// MethodHeartbeats is the node-to-node method that carries a batch of
// heartbeats (see the package doc for the body).
const MethodHeartbeats peer.Method = 40

// Caller sends one node-to-node call (rpc/peer's Client).
type Caller interface {
	Call(ctx context.Context, addr string, m peer.Method, body []byte) ([]byte, error)
}

// Registrar registers a node-to-node method handler (rpc/peer's Server).
type Registrar interface {
	Handle(m peer.Method, h peer.HandlerFunc)
}

// Options configures a Coalescer. Zero values take the defaults.
type Options struct {
	// Flush is how long the first heartbeat to a peer waits for others
	// before the batch goes out (default 20 ms: raft sends a heartbeat
	// every 100-200 ms and the leader lease is 500 ms).
	Flush time.Duration
	// Timeout bounds one batch's call (default 2 s); the heartbeats of a
	// batch that times out fail.
	Timeout time.Duration
	// RaftTimeout bounds one raft RPC carried on the node's connection
	// (carry.go; default 10 s, the stock transport's deadline).
	RaftTimeout time.Duration
	// HoldAnswers, when positive, lets a group's heartbeat be answered at
	// once with the answer its follower gave the previous one, if that
	// heartbeat left less than HoldAnswers ago; the heartbeat itself still
	// goes out in the next batch, in the background (held.go). Zero: every
	// heartbeat waits for its own answer.
	HoldAnswers time.Duration
	// Park, when positive (with HoldAnswers), keeps a heartbeat answered
	// from a held answer inside the call for at least Park, until the next
	// multiple of Flush: raft's heartbeat goroutine then wakes on those
	// shared ticks, many at once, and its own (random) timer runs less
	// often (held.go).
	Park time.Duration
	// WaitReachable, if set, blocks until the node at addr answers again
	// (true) or ctx ends (false). A carried append that failed because its
	// peer is unreachable is held until then, at most FailHold, and sent
	// once more if the peer came back (holdFailed).
	WaitReachable func(ctx context.Context, addr string) bool
	// FailHold bounds that hold (default 1 s).
	FailHold time.Duration
	Logger   *slog.Logger
}

const (
	defaultFlush    = 20 * time.Millisecond
	defaultTimeout  = 2 * time.Second
	defaultFailHold = time.Second
)

// ErrClosed is returned for heartbeats after Close.
var ErrClosed = errors.New("beat: coalescer closed")

// Coalescer gathers the heartbeats of every group on this node per target
// node and answers those that peers send here. One per node.
type Coalescer struct {
	call Caller
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	queues   map[string]*queue // target address → heartbeats waiting for the flush
	closed   bool
	inflight sync.WaitGroup

	hmu      sync.RWMutex
	handlers map[uint16]*handler // group → its raft's heartbeat handler
	// opened is closed (and replaced) whenever a group registers: votes
	// for a group not open yet wait on it (carry.go, awaitGroup).
	opened chan struct{}

	oldMu sync.Mutex
	old   map[string]time.Time // peers that did not know MethodRaft → when seen

	batches, answered, fellBack, carried, votesResent atomic.Uint64

	// parked: the tick → the channel closed at that tick, for heartbeats
	// parked until it (held.go).
	parkMu sync.Mutex
	parked map[int64]chan struct{}
}

// Stats counts what the Coalescer did since it started.
type Stats struct {
	Batches  uint64 // calls sent, each carrying one or more heartbeats
	Answered uint64 // heartbeats a peer's group answered through a batch
	FellBack uint64 // heartbeats sent the stock way (the peer does not know the method)
	Carried  uint64 // other raft RPCs answered through the node's connection
	// VotesResent counts vote and pre-vote requests sent again after
	// their peer was unreachable (carry.go, carryVote).
	VotesResent uint64
}

// Stats returns the counters.
func (c *Coalescer) Stats() Stats {
	return Stats{Batches: c.batches.Load(), Answered: c.answered.Load(), FellBack: c.fellBack.Load(), Carried: c.carried.Load(),
		VotesResent: c.votesResent.Load()}
}

type queue struct {
	waiting []*pending
	timer   *time.Timer // the armed flush, while waiting is not empty
}

type pending struct {
	item item
	done chan answer // buffered 1; one answer, always (nil when then is set)
	// then, if set, takes the answer instead of done, on the goroutine
	// that has it (a heartbeat sent in the background: held.go).
	then func(answer)
}

// deliver hands p its answer.
func (p *pending) deliver(a answer) {
	if p.then != nil {
		p.then(a)
		return
	}
	p.done <- a
}

type handler struct {
	mu sync.Mutex
	fn func(raft.RPC)
	// rpcs is the group's raft consumer (Transport.Consumer), which the
	// RPCs carried on the node's connection are handed to; nil until Wrap.
	rpcs   chan raft.RPC
	closed chan struct{} // closed when the group's transport closes
}

func (h *handler) get() func(raft.RPC) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fn
}

// New returns a Coalescer that sends through call.
func New(call Caller, o Options) *Coalescer {
	if o.Flush <= 0 {
		o.Flush = defaultFlush
	}
	if o.Timeout <= 0 {
		o.Timeout = defaultTimeout
	}
	if o.RaftTimeout <= 0 {
		o.RaftTimeout = defaultRaftTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Coalescer{call: call, opts: o, log: o.Logger.With("component", "beat"),
		queues: map[string]*queue{}, handlers: map[uint16]*handler{}, old: map[string]time.Time{},
		opened: make(chan struct{})}
}

// Serve registers the handlers of MethodHeartbeats and MethodRaft on srv.
func (c *Coalescer) Serve(srv Registrar) {
	srv.Handle(MethodHeartbeats, c.handle)
	srv.Handle(MethodRaft, c.handleRaft)
}

// Close fails the heartbeats waiting for a flush and every later one, and
// waits for batches in flight.
func (c *Coalescer) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	queues := c.queues
	c.queues = map[string]*queue{}
	c.mu.Unlock()
	for _, q := range queues {
		if q.timer != nil && q.timer.Stop() {
			c.inflight.Done() // its flush will not run
		}
		for _, p := range q.waiting {
			p.deliver(answer{err: ErrClosed.Error()})
		}
	}
	c.inflight.Wait()
	return nil
}

// IsHeartbeat reports whether req is a raft heartbeat: the same test the
// stock NetworkTransport uses for its fast path.
func IsHeartbeat(req *raft.AppendEntriesRequest) bool {
	leader := req.Addr
	if len(leader) == 0 {
		leader = req.Leader
	}
	return req.Term != 0 && leader != nil && req.PrevLogEntry == 0 && req.PrevLogTerm == 0 &&
		len(req.Entries) == 0 && req.LeaderCommitIndex == 0
}

// Heartbeat sends req to group on the node at target within the next
// batch and fills resp with that group's answer. Any error means the
// heartbeat may not have reached the group; the caller sends it the stock
// way.
func (c *Coalescer) Heartbeat(target raft.ServerAddress, group uint16, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	return c.heartbeat(target, group, req, resp, false)
}

// heartbeat is Heartbeat; urgent sends the batch now instead of after the
// flush delay (a leader confirming its leadership for a read waits on it).
func (c *Coalescer) heartbeat(target raft.ServerAddress, group uint16, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse, urgent bool) error {
	p := &pending{item: heartbeatItem(group, req), done: make(chan answer, 1)}
	if err := c.enqueue(string(target), p, urgent); err != nil {
		return err
	}
	a := <-p.done
	if err := a.error(group, string(target)); err != nil {
		return err
	}
	*resp = a.resp
	c.answered.Add(1)
	return nil
}

// heartbeatThen sends req to group on target within the next batch, and
// hands the answer (or the failure) to then, on the goroutine that has it.
func (c *Coalescer) heartbeatThen(target raft.ServerAddress, group uint16, req *raft.AppendEntriesRequest, then func(raft.AppendEntriesResponse, error)) error {
	addr := string(target)
	p := &pending{item: heartbeatItem(group, req), then: func(a answer) {
		err := a.error(group, addr)
		if err == nil {
			c.answered.Add(1)
		}
		then(a.resp, err)
	}}
	return c.enqueue(addr, p, false)
}

func heartbeatItem(group uint16, req *raft.AppendEntriesRequest) item {
	return item{group: group, req: raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: req.ProtocolVersion, ID: req.ID, Addr: req.Addr},
		Term:      req.Term, Leader: req.Leader,
	}}
}

// enqueue adds p to addr's next batch and arms its flush.
func (c *Coalescer) enqueue(addr string, p *pending, urgent bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	q := c.queues[addr]
	if q == nil {
		q = &queue{}
		c.queues[addr] = q
	}
	q.waiting = append(q.waiting, p)
	switch {
	case len(q.waiting) == 1:
		delay := c.opts.Flush
		if urgent {
			delay = 0
		}
		c.inflight.Add(1)
		q.timer = time.AfterFunc(delay, func() { c.flush(addr) })
	case urgent && q.timer != nil && q.timer.Stop():
		// The armed flush will not run: this one takes its place (and its
		// count in inflight) at once.
		q.timer = time.AfterFunc(0, func() { c.flush(addr) })
	}
	return nil
}

// error is a's failure as the heartbeat's error, nil if it was answered.
func (a *answer) error(group uint16, addr string) error {
	switch {
	case a.err == "":
		return nil
	case a.remote:
		return fmt.Errorf("beat: heartbeat of group %d to %s: %w: %s", group, addr, ErrRefused, a.err)
	case a.old:
		return fmt.Errorf("beat: heartbeat of group %d to %s: %w: %s", group, addr, errOldPeer, a.err)
	default:
		return fmt.Errorf("beat: heartbeat of group %d to %s: %s", group, addr, a.err)
	}
}

// ErrRefused: the peer answered that the group cannot take the heartbeat
// (not open there, or shutting down). The stock path would be refused
// too (the peer's mux serves no such group), so the Transport does not
// retry it there: a slot opening on a peer would otherwise cost a dial
// and two 256 KiB buffers per heartbeat until it is open.
var ErrRefused = errors.New("refused by the peer")

// flush sends what waits for addr as one call and hands out the answers.
func (c *Coalescer) flush(addr string) {
	defer c.inflight.Done()
	c.mu.Lock()
	q := c.queues[addr]
	var batch []*pending
	if q != nil {
		batch = q.waiting
		q.waiting = nil
	}
	c.mu.Unlock()
	if len(batch) == 0 {
		return // Close answered them
	}
	items := make([]item, len(batch))
	for i, p := range batch {
		items[i] = p.item
	}
	c.batches.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	out, err := c.call.Call(ctx, addr, MethodHeartbeats, encodeItems(nil, items))
	cancel()
	var as []answer
	if err == nil {
		as, err = decodeAnswers(out)
		if err == nil && len(as) != len(batch) {
			err = fmt.Errorf("beat: %d answers to %d heartbeats", len(as), len(batch))
		}
	}
	if err != nil {
		var re *peer.RemoteError
		old := errors.As(err, &re) && re.Code == peer.CodeUnknownMethod
		if old {
			c.markOld(addr)
		}
		msg := err.Error()
		for _, p := range batch {
			p.deliver(answer{err: msg, old: old})
		}
		return
	}
	for i, p := range batch {
		a := as[i]
		a.remote = a.err != ""
		p.deliver(a)
	}
}

// register makes group's heartbeat handler (set later) answer its
// heartbeats and rpcs (nil: none) take its carried RPCs; the returned
// handler is the registration, for unregister.
func (c *Coalescer) register(group uint16, rpcs chan raft.RPC) *handler {
	h := &handler{rpcs: rpcs, closed: make(chan struct{})}
	c.hmu.Lock()
	c.handlers[group] = h
	close(c.opened)
	c.opened = make(chan struct{})
	c.hmu.Unlock()
	return h
}

// unregister drops h if it is still group's registration (a replica of the
// same slot opened again since replaces it).
func (c *Coalescer) unregister(group uint16, h *handler) {
	c.hmu.Lock()
	if c.handlers[group] == h {
		delete(c.handlers, group)
	}
	c.hmu.Unlock()
	h.mu.Lock()
	h.fn = nil
	h.mu.Unlock()
	close(h.closed)
}

// handle answers a batch from a peer: each heartbeat goes to its group's
// raft heartbeat handler, which answers synchronously (raft's
// processHeartbeat responds before it returns, or not at all when the
// group is shutting down).
func (c *Coalescer) handle(_ context.Context, body []byte) ([]byte, error) {
	items, err := decodeItems(body)
	if err != nil {
		return nil, err
	}
	// A heartbeat normally takes microseconds, but one from a newer term
	// (or reaching a candidate) makes its group persist the term first (an
	// fsync). Run in sequence, that would hold up every later heartbeat of
	// the batch — and the leases of their leaders — so once the batch has
	// taken slowAfter the rest run in parallel (their writes then share a
	// commit of the log file). And the batch is answered after at most
	// batchBudget: a heartbeat still being handled then fails alone (its
	// leader retries it), rather than delaying the answers of all the
	// others. Forming 1,024 slots, fsyncs of hundreds of milliseconds held
	// whole batches until every leader on the node lost its lease at once.
	type done struct {
		i int
		a answer
	}
	ch := make(chan done, len(items)) // never blocks a late handler
	var next atomic.Int64             // items claimed, by the worker or spread
	run := func(i int) {
		var a answer
		c.answer(&items[i], &a)
		ch <- done{i, a}
	}
	go func() { // the worker: one item after another
		for i := int(next.Add(1) - 1); i < len(items); i = int(next.Add(1) - 1) {
			run(i)
		}
	}()
	as := make([]answer, len(items))
	have := make([]bool, len(items))
	spread := time.NewTimer(slowAfter)
	defer spread.Stop()
	budget := time.NewTimer(batchBudget)
	defer budget.Stop()
collect:
	for got := 0; got < len(items); {
		select {
		case d := <-ch:
			as[d.i], have[d.i] = d.a, true
			got++
		case <-spread.C:
			// Everything the worker has not reached yet runs now, in
			// parallel, however long the item it is on takes.
			for i := int(next.Add(1) - 1); i < len(items); i = int(next.Add(1) - 1) {
				go run(i)
			}
		case <-budget.C:
			break collect
		}
	}
	for i := range as {
		if !have[i] {
			as[i].err = fmt.Sprintf("group %d is still handling it (over %v)", items[i].group, batchBudget)
		}
	}
	return encodeAnswers(nil, as), nil
}

// batchBudget: see handle. Well under the 500 ms leader lease, well over
// a heartbeat's usual microseconds.
const batchBudget = 100 * time.Millisecond

// slowAfter: see handle.
const slowAfter = 2 * time.Millisecond

// answer hands one heartbeat to its group's raft and records the answer.
func (c *Coalescer) answer(it *item, a *answer) {
	c.hmu.RLock()
	h := c.handlers[it.group]
	c.hmu.RUnlock()
	var fn func(raft.RPC)
	if h != nil {
		fn = h.get()
	}
	if fn == nil {
		a.err = fmt.Sprintf("group %d is not open here", it.group)
		return
	}
	respCh := make(chan raft.RPCResponse, 1)
	fn(raft.RPC{Command: &it.req, RespChan: respCh})
	select {
	case r := <-respCh:
		if r.Error != nil {
			a.err = r.Error.Error()
			return
		}
		resp, ok := r.Response.(*raft.AppendEntriesResponse)
		if !ok || resp == nil {
			a.err = fmt.Sprintf("unexpected answer %T", r.Response)
			return
		}
		a.resp = *resp
	default:
		a.err = fmt.Sprintf("group %d is shutting down", it.group)
	}
}

// Transport is a group's raft transport: the stock NetworkTransport, with
// heartbeats sent through the node's Coalescer and the other small RPCs
// carried on the node's connection (carry.go); each falls back to the
// stock way where the package doc says.
type Transport struct {
	*raft.NetworkTransport
	c     *Coalescer
	group uint16
	h     *handler
	wg    sync.WaitGroup
	once  sync.Once
	// urgentUntil (unix ns): until then this group's heartbeats do not
	// wait for the flush delay (Urgent).
	urgentUntil atomic.Int64

	// behind holds the followers an append to failed in transport (their
	// group not open yet, the connection broken); nBehind counts them.
	// raft retries such a follower only with its next entry or on its
	// CommitTimeout tick (15-30 s for a slot), so the next heartbeat one
	// of them answers calls onResume (the group's catch-up): raft's own
	// ResumedHeartbeatObservation does that only for a follower whose
	// heartbeats had failed too. A new group's first append reached a
	// follower that had not opened the group yet, its heartbeats came
	// after it had: that follower stayed empty until the tick, and a
	// failover then had one follower to elect from (2.2 s in
	// TestFailoverWithinTwoSeconds).
	bmu    sync.Mutex
	behind map[raft.ServerAddress]bool
	// lag: the followers whose heartbeat answers show them short of
	// committed entries (heartbeatAnswered); nLag counts them.
	lag  map[raft.ServerAddress]lagState
	nLag atomic.Int32
	// commitSeen: the highest LeaderCommitIndex this group's appends
	// carried (sawCommit).
	commitSeen atomic.Uint64
	// alwaysOpen (WrapAlwaysOpen): every running peer has this group
	// open, so a peer that refuses it is an older binary; refused holds
	// those peers → when (carry.go, refusedGroup).
	alwaysOpen bool
	refused    map[string]time.Time
	nBehind    atomic.Int32
	onResume   atomic.Pointer[func()]
	// held: the followers' last heartbeat answers (held.go).
	held holdTable
	// woken is closed (and replaced) by Urgent: parked heartbeats go back
	// to raft at once.
	wokenMu sync.Mutex
	woken   chan struct{}
}

// OnResume sets what runs (on a goroutine of its own) when a follower an
// append failed to answers a heartbeat again.
func (t *Transport) OnResume(fn func()) { t.onResume.Store(&fn) }

// appended records the outcome of a (non-heartbeat) append to target.
func (t *Transport) appended(target raft.ServerAddress, err error) {
	if err == nil && t.nBehind.Load() == 0 {
		return
	}
	t.bmu.Lock()
	defer t.bmu.Unlock()
	switch {
	case err != nil && !t.behind[target]:
		if t.behind == nil {
			t.behind = map[raft.ServerAddress]bool{}
		}
		t.behind[target] = true
		t.nBehind.Add(1)
	case err == nil && t.behind[target]:
		delete(t.behind, target)
		t.nBehind.Add(-1)
	}
}

// heartbeatAnswered runs onResume if target was behind: an append to it
// had failed, or its answers say it is stuck short of entries this leader
// knows are committed — its last index below the highest commit index the
// group's appends carried (raft's heartbeats carry none), and no higher
// than in an answer at least lagStuckAfter older. That is a follower that
// lost its log — its node's data directory was lost and it came back
// under the same id — while raft's heartbeats to it kept succeeding, as
// when the node was down for less than a round: raft would find out only
// from its next append, up to the CommitTimeout tick (15-30 s for a slot)
// away, and until the follower has caught up its replicas do not vote
// (raftgroup votegate.go), so its groups could not lose another node. A
// follower that is merely behind under load is being sent entries: its
// last index moves, and it starts nothing. Either way a follower starts at
// most one catch-up per lagKickEvery.
func (t *Transport) heartbeatAnswered(target raft.ServerAddress, resp *raft.AppendEntriesResponse) {
	lagging := resp != nil && resp.Success && resp.LastLog < t.commitSeen.Load()
	if t.nBehind.Load() == 0 && t.nLag.Load() == 0 && !lagging {
		return
	}
	now := time.Now()
	t.bmu.Lock()
	kick := t.behind[target]
	if kick {
		delete(t.behind, target)
		t.nBehind.Add(-1)
	}
	l, tracked := t.lag[target]
	switch {
	case !lagging:
		if tracked {
			delete(t.lag, target)
			t.nLag.Add(-1)
		}
	case !tracked || l.last != resp.LastLog:
		if t.lag == nil {
			t.lag = map[raft.ServerAddress]lagState{}
		}
		if !tracked {
			t.nLag.Add(1)
		}
		t.lag[target] = lagState{last: resp.LastLog, since: now, kicked: l.kicked}
	case now.Sub(l.since) >= lagStuckAfter && now.Sub(l.kicked) >= lagKickEvery:
		kick = true
	}
	if kick && lagging {
		l := t.lag[target]
		l.kicked = now
		t.lag[target] = l
	}
	t.bmu.Unlock()
	if fn := t.onResume.Load(); kick && fn != nil {
		go (*fn)()
	}
}

// lagState is what heartbeatAnswered keeps of a follower short of
// committed entries: its last index, since when it has answered that, and
// when it last started a catch-up.
type lagState struct {
	last          uint64
	since, kicked time.Time
}

// A follower short of committed entries whose last index has not moved
// for lagStuckAfter starts a catch-up, at most one per lagKickEvery
// (heartbeatAnswered).
const (
	lagStuckAfter = time.Second
	lagKickEvery  = 2 * time.Second
)

// sawCommit raises the highest commit index an append of this group
// carried (heartbeatAnswered).
func (t *Transport) sawCommit(c uint64) {
	for {
		old := t.commitSeen.Load()
		if c <= old || t.commitSeen.CompareAndSwap(old, c) {
			return
		}
	}
}

// Urgent makes this group's heartbeats for the next d go out at once, not
// after the coalescing delay, each waiting for its own answer (none is
// answered from a held one, none parks), and hands the parked ones back to
// raft now (held.go): for raft's own VerifyLeader, whose answers count
// (waiting 20 ms for company made every GET on an idle cluster take
// ~17 ms when reads used it), and before raft's Shutdown, which waits for
// its heartbeat goroutines. Confirm is urgent by itself.
func (t *Transport) Urgent(d time.Duration) {
	t.urgentUntil.Store(time.Now().Add(d).UnixNano())
	t.wokenMu.Lock()
	if t.woken != nil {
		close(t.woken)
		t.woken = nil
	}
	t.wokenMu.Unlock()
}

// wake returns the channel Urgent closes next.
func (t *Transport) wake() <-chan struct{} {
	t.wokenMu.Lock()
	defer t.wokenMu.Unlock()
	if t.woken == nil {
		t.woken = make(chan struct{})
	}
	return t.woken
}

func (t *Transport) urgent() bool { return time.Now().UnixNano() < t.urgentUntil.Load() }

// Wrap returns group's transport over nt. Close unregisters it.
func (c *Coalescer) Wrap(group uint16, nt *raft.NetworkTransport) *Transport {
	return c.wrap(group, nt, false)
}

// WrapAlwaysOpen is Wrap for a group that every running node has open
// (the meta group, rpc/mux.MetaGroup): a peer that answers that the group
// is not open there runs a binary from before that group came onto the
// node connection, and gets its RPCs the stock way for a while (carry.go,
// refusedGroup) rather than failing them — a rolling upgrade keeps its
// meta group.
func (c *Coalescer) WrapAlwaysOpen(group uint16, nt *raft.NetworkTransport) *Transport {
	return c.wrap(group, nt, true)
}

func (c *Coalescer) wrap(group uint16, nt *raft.NetworkTransport, alwaysOpen bool) *Transport {
	t := &Transport{NetworkTransport: nt, c: c, group: group, alwaysOpen: alwaysOpen, h: c.register(group, make(chan raft.RPC))}
	t.wg.Add(1)
	go forward(nt.Consumer(), t.h.rpcs, t.h.closed, &t.wg)
	return t
}

// SetHeartbeatHandler implements raft.Transport: coalesced heartbeats and
// those that come the stock way reach the same handler.
func (t *Transport) SetHeartbeatHandler(cb func(raft.RPC)) {
	t.h.mu.Lock()
	t.h.fn = cb
	t.h.mu.Unlock()
	t.NetworkTransport.SetHeartbeatHandler(cb)
}

// Close implements raft.WithClose.
func (t *Transport) Close() error {
	var err error
	t.once.Do(func() {
		t.c.unregister(t.group, t.h)
		t.wg.Wait()
		err = t.NetworkTransport.Close()
	})
	return err
}
