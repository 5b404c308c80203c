package webhook

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Pipelined delivery (Request.Pipeline, a route's "pipeline": docs/api.md)
// writes a receiver's callbacks onto a connection that may still owe
// answers to earlier ones (HTTP/1.1 pipelining, RFC 9112 §9.3.2), so that
// the callbacks ready at one moment leave in one write, and a receiver
// that reads them in one read answers them in one write. On loopback a
// callback's exchange is mostly the kernel's work for its syscalls on both
// ends; sharing them is what pipelining buys (docs/benchmarks.md). The
// rules (rpc/webhook/DESIGN.md "Pipelining"):
//
//   - One writer and one reader goroutine per connection. The writer takes
//     every request queued for the connection, encodes them into one
//     buffer and writes it with one syscall; only then are they "sent",
//     in order, and the reader matches the answers to them in that order.
//   - A request is never written twice unless the receiver cannot have
//     seen it: a write that fails before a byte leaves (a stale connection,
//     staleCheckConn), or requests written after an answer that said
//     "Connection: close" (RFC 9112 §9.6: the server must not process
//     them). Those are queued again on another connection, not counted as
//     an attempt. Any other break fails the sent requests that have no
//     answer, as a connection error: the receiver may have seen them, so
//     they are retried like any callback whose connection broke.
//   - A failed write ends the connection's writing, not its reading: the
//     answers owed are still read, so a request the receiver answered
//     before it closed is never failed as unanswered (writeFailed).
//   - Requests go to the oldest connection that has room and is not
//     stalled; a new connection is opened (up to MaxConnsPerHost) when
//     every one is full (pipeDepth) or has had answers owed for pipeStall
//     without one arriving, so a slow answer holds at most what was queued
//     behind it before the stall showed.

const (
	// pipeDepth is the most requests outstanding on one connection.
	pipeDepth = 128
	// pipeStall: a connection owing answers that has not given one for
	// this long takes no new request while another can be opened
	// (Client.pipeStall; tests change it).
	pipeStall = 5 * time.Millisecond
	// pipeWriteMax bounds the bytes of requests encoded into one write.
	pipeWriteMax = 256 << 10
	// pipeDemoteBelow, pipeDemoteFor: a connection closed by the receiver
	// with requests owed after fewer answers than this demotes its
	// receiver to one request per connection for pipeDemoteFor.
	pipeDemoteBelow = 4
	pipeDemoteFor   = time.Minute
	// pipeGather: with fewer requests queued than this, the writer yields
	// the processor once before it takes them.
	pipeGather = 16
)

var (
	// errPipeBroken fails the requests sent on a pipelined connection
	// that broke before their answers came.
	errPipeBroken = errors.New("webhook: the pipelined connection broke before the receiver answered")
	// errPipeQueued: a request's deadline passed before it could be
	// written (the connections ahead of it were full or stalled).
	errPipeQueued = errors.New("webhook: the deadline passed while the request waited for a pipelined connection")
	// errPipeBehind: the deadline passed while answers to earlier
	// requests on the connection were still owed.
	errPipeBehind = errors.New("webhook: still behind earlier callbacks on its pipelined connection")
)

// PipelineStats counts what pipelined delivery did since the client
// started (Client.PipelineStats; the node's timemachine_callback_pipeline_*
// metrics).
type PipelineStats struct {
	Connections uint64 // open now
	Opened      uint64 // connections opened
	Writes      uint64 // writes (each one or more requests)
	Requests    uint64 // requests written
	Resent      uint64 // requests sent again because the receiver cannot have seen them (no attempt counted)
	Broken      uint64 // requests failed because their connection broke before their answer
}

// pipeCounters are the counters behind PipelineStats.
type pipeCounters struct {
	open, opened, writes, requests, resent, broken atomic.Uint64
}

// PipelineStats reports the pipelined connections' counters.
func (c *Client) PipelineStats() PipelineStats {
	p := &c.pipeStats
	return PipelineStats{Connections: p.open.Load(), Opened: p.opened.Load(), Writes: p.writes.Load(),
		Requests: p.requests.Load(), Resent: p.resent.Load(), Broken: p.broken.Load()}
}

// pipeWork is one request's passage through a pipelined connection. It is
// owned by exactly one party at a time (the submitter, a connection's
// queue, its writer, its sent list, its reader) and finished once.
type pipeWork struct {
	req                  *fasthttp.Request
	now, start, deadline time.Time
	res                  Result
	done                 chan struct{}
	// state: 0 under way, 1 finished, 2 given up by its caller at its
	// deadline (then whoever finishes it releases req).
	state atomic.Int32
	// phase is where the request is, for the error its caller gets when
	// its deadline passes first (timeoutErr).
	phase atomic.Int32
}

// A pipeWork's phases.
const (
	phaseQueued  int32 = iota // waiting to be written
	phaseWritten              // in a write or written, behind answers owed to earlier requests (or a receiver that stopped reading)
	phaseHead                 // its own answer is the one being read
)

// timeoutErr is the error of a request whose deadline passed before its
// answer came: a request whose own answer was being read timed out as
// any callback does; one still queued, or behind earlier requests'
// answers, says so.
func (w *pipeWork) timeoutErr() error {
	budget := w.deadline.Sub(w.start).Round(time.Millisecond)
	switch w.phase.Load() {
	case phaseQueued:
		return fmt.Errorf("webhook: no response within %v: %w", budget, errPipeQueued)
	case phaseWritten:
		return fmt.Errorf("webhook: no response within %v: %w", budget, errPipeBehind)
	}
	return fmt.Errorf("webhook: no response within %v: %w", budget, fasthttp.ErrTimeout)
}

func (w *pipeWork) finish(res Result) {
	w.res = res
	if !w.state.CompareAndSwap(0, 1) {
		fasthttp.ReleaseRequest(w.req)
		return
	}
	close(w.done)
}

func (w *pipeWork) fail(err error, timedOut bool) {
	w.finish(Result{Err: err, TimedOut: timedOut, Latency: time.Since(w.start)})
}

// pipelined is exchange for a pipelined request. It returns by the
// request's deadline even when the request waits behind an answer owed
// to an earlier one with a later deadline (a job's own callback_timeout
// can be shorter than its neighbours'); the request is then left to
// finish in the background, like a Deliver whose context ended.
func (c *Client) pipelined(req *fasthttp.Request, now, start, deadline time.Time) Result {
	h, err := c.pipeHostFor(req)
	if err != nil {
		fasthttp.ReleaseRequest(req)
		return Result{Err: err, Latency: time.Since(start)}
	}
	if h.demotedUntil.Load() > monoNow() {
		return c.exchange(req, now, start, deadline)
	}
	w := &pipeWork{req: req, now: now, start: start, deadline: deadline, done: make(chan struct{})}
	h.submit(w)
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-w.done:
	case <-t.C:
		if w.state.CompareAndSwap(0, 2) {
			return Result{Err: w.timeoutErr(), TimedOut: true, Latency: time.Since(start)}
		}
		<-w.done
	}
	fasthttp.ReleaseRequest(req)
	return w.res
}

// pipeHost is one receiver's pipelined connections, oldest first.
type pipeHost struct {
	c    *Client
	addr string // host:port
	tls  bool

	mu    sync.Mutex
	conns []*pipeConn
	// demotedUntil (monoNow's clock): until then the receiver gets one
	// request per connection, without pipelining (read, closing).
	demotedUntil atomic.Int64
}

// pipeHostFor returns the pipelined connections to req's receiver.
func (c *Client) pipeHostFor(req *fasthttp.Request) (*pipeHost, error) {
	u := req.URI()
	tls := string(u.Scheme()) == "https"
	addr := string(u.Host())
	if _, _, err := net.SplitHostPort(addr); err != nil {
		port := "80"
		if tls {
			port = "443"
		}
		addr = net.JoinHostPort(strings.Trim(addr, "[]"), port)
	}
	key := string(u.Scheme()) + "://" + addr
	if v, ok := c.pipes.Load(key); ok {
		return v.(*pipeHost), nil
	}
	if c.closed.Load() {
		return nil, ErrClosed
	}
	v, _ := c.pipes.LoadOrStore(key, &pipeHost{c: c, addr: addr, tls: tls})
	return v.(*pipeHost), nil
}

// closeIdlePipes closes the pipelined connections that owe no answer
// (Client.Close); busy ones close once idle.
func (c *Client) closeIdlePipes() {
	c.pipes.Range(func(_, v any) bool {
		h := v.(*pipeHost)
		h.mu.Lock()
		conns := append([]*pipeConn(nil), h.conns...)
		h.mu.Unlock()
		for _, pc := range conns {
			pc.idleClose()
		}
		return true
	})
}

// submit queues w on a connection with room, opening one when needed;
// to a demoted receiver it sends w on a connection of its own.
func (h *pipeHost) submit(w *pipeWork) {
	if h.demotedUntil.Load() > monoNow() {
		w.phase.Store(phaseHead) // one request per connection
		go func() { w.finish(h.c.exchangeKeep(w.req, w.now, w.start, w.deadline)) }()
		return
	}
	w.phase.Store(phaseQueued)
	for {
		pc := h.pick()
		if pc.enqueue(w) {
			return
		}
		// pc closed between pick and enqueue: pick again.
	}
}

func (h *pipeHost) pick() *pipeConn {
	now := monoNow()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, pc := range h.conns {
		n := pc.pending.Load()
		if n < pipeDepth && (n == 0 || now-pc.progress.Load() < int64(h.c.pipeStall)) {
			pc.taken(n, now)
			return pc
		}
	}
	if len(h.conns) < h.c.maxConns || len(h.conns) == 0 {
		pc := newPipeConn(h)
		h.conns = append(h.conns, pc)
		pc.taken(0, now)
		return pc
	}
	// At the connection cap: the least loaded one.
	best := h.conns[0]
	for _, pc := range h.conns[1:] {
		if pc.pending.Load() < best.pending.Load() {
			best = pc
		}
	}
	best.taken(best.pending.Load(), now)
	return best
}

// remove forgets pc; it reports whether pc was still listed.
func (h *pipeHost) remove(pc *pipeConn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, x := range h.conns {
		if x == pc {
			h.conns = append(h.conns[:i], h.conns[i+1:]...)
			return true
		}
	}
	return false
}

// pipeConn is one pipelined connection and its writer and reader.
type pipeConn struct {
	h *pipeHost
	// pending counts requests queued or sent without an answer; it is
	// raised under h.mu (pick) so that the idle close cannot race a pick.
	pending atomic.Int32
	// progress is when an answer last arrived, or when the connection got
	// its first request after owing none (monoNow's clock).
	progress atomic.Int64

	wakeW, wakeR chan struct{} // capacity 1

	mu     sync.Mutex
	queue  []*pipeWork // to be written
	sent   []*pipeWork // written, answers owed, in order
	closed bool
	// resend: shut after a "Connection: close" answer, so what is
	// written after it was not processed.
	resend bool
	// writeDone: a write failed; the reader drains what is owed, then
	// shuts the connection.
	writeDone bool
	answered  int      // answers read (reader only)
	conn      net.Conn // nil until the writer has dialled
}

func newPipeConn(h *pipeHost) *pipeConn {
	pc := &pipeConn{h: h, wakeW: make(chan struct{}, 1), wakeR: make(chan struct{}, 1)}
	go pc.write()
	return pc
}

// taken notes a pick (under h.mu): n requests were pending before it.
func (pc *pipeConn) taken(n int32, now int64) {
	if n == 0 {
		pc.progress.Store(now)
	}
	pc.pending.Add(1)
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// enqueue hands w to the writer; false if the connection has closed.
func (pc *pipeConn) enqueue(w *pipeWork) bool {
	pc.mu.Lock()
	if pc.closed {
		pc.mu.Unlock()
		return false
	}
	pc.queue = append(pc.queue, w)
	pc.mu.Unlock()
	signal(pc.wakeW)
	return true
}

// shut closes the connection once: queued requests (never written) go to
// another connection; sent ones without an answer are failed with err, or
// queued again when resend (the receiver cannot have processed them).
func (pc *pipeConn) shut(err error, resend bool) {
	pc.h.remove(pc)
	pc.mu.Lock()
	if pc.closed {
		pc.mu.Unlock()
		return
	}
	pc.closed = true
	pc.resend = resend
	queue, sent := pc.queue, pc.sent
	pc.queue, pc.sent = nil, nil
	conn := pc.conn
	pc.mu.Unlock()
	if conn != nil {
		conn.Close()
		pc.h.c.pipeStats.open.Add(^uint64(0))
	}
	signal(pc.wakeW)
	signal(pc.wakeR)
	closed := pc.h.c.closed.Load()
	for _, w := range queue {
		if closed {
			w.fail(ErrClosed, false)
			continue
		}
		pc.h.submit(w)
	}
	for _, w := range sent {
		if resend && !closed {
			pc.h.c.pipeStats.resent.Add(1)
			pc.h.submit(w)
			continue
		}
		pc.h.c.pipeStats.broken.Add(1)
		w.fail(fmt.Errorf("%w: %w", errPipeBroken, err), false)
	}
}

// write is the connection's writer: it dials, then writes whatever is
// queued, one write per round, until the connection closes or has owed
// nothing for MaxIdleConnDuration since its last answer.
func (pc *pipeConn) write() {
	h := pc.h
	var buf bytes.Buffer
	bw := bufio.NewWriterSize(&buf, 4096)
	idle := time.NewTimer(h.c.idleConn)
	defer idle.Stop()
	for {
		pc.mu.Lock()
		for !pc.closed && len(pc.queue) == 0 {
			pc.mu.Unlock()
			select {
			case <-pc.wakeW:
			case <-idle.C:
				// Idle counts from the last answer (progress), not the
				// last write: a slow answer must not leave the
				// connection to be closed the moment it arrives.
				if d := time.Duration(monoNow() - pc.progress.Load()); d < h.c.idleConn {
					idle.Reset(h.c.idleConn - d)
					break
				}
				if pc.idleClose() {
					return
				}
				idle.Reset(h.c.idleConn)
			}
			pc.mu.Lock()
		}
		if pc.closed {
			pc.mu.Unlock()
			return
		}
		if len(pc.queue) < pipeGather {
			// Let the goroutines that are about to queue a request run
			// first: woken by the first request of a burst, the writer
			// would otherwise write each request alone (measured: 1.05
			// requests per write in a 100,000-job burst, and more than
			// 20 with this). When nothing else is runnable it costs no
			// wait.
			pc.mu.Unlock()
			runtime.Gosched()
			pc.mu.Lock()
			if pc.closed {
				pc.mu.Unlock()
				return
			}
		}
		batch := pc.queue
		pc.queue = nil
		conn := pc.conn
		pc.mu.Unlock()

		if conn == nil {
			var err error
			if conn, err = pc.dial(batch); err != nil {
				pc.shut(err, false)
				// The batch was never written, and its requests
				// cannot reach this receiver now: each fails with the
				// dial's error, as it would without pipelining.
				for _, w := range batch {
					e, to := describeError(err, w.deadline.Sub(w.start))
					w.fail(e, to || isTimeout(err))
				}
				return
			}
			pc.mu.Lock()
			if pc.closed {
				pc.mu.Unlock()
				conn.Close()
				for _, w := range batch {
					pc.h.submit(w)
				}
				return
			}
			h.c.pipeStats.opened.Add(1)
			h.c.pipeStats.open.Add(1) // before shut can see conn and count it closed
			pc.conn = conn
			pc.mu.Unlock()
			go pc.read(conn)
		}
		if !pc.writeBatch(conn, batch, &buf, bw) {
			return
		}
		if !idle.Stop() {
			select {
			case <-idle.C:
			default:
			}
		}
		idle.Reset(h.c.idleConn)
	}
}

// idleClose closes the connection if it owes nothing and has nothing
// queued; h.mu held first, so no pick can choose it meanwhile.
func (pc *pipeConn) idleClose() bool {
	pc.h.mu.Lock()
	if pc.pending.Load() != 0 {
		pc.h.mu.Unlock()
		return false
	}
	for i, x := range pc.h.conns {
		if x == pc {
			pc.h.conns = append(pc.h.conns[:i], pc.h.conns[i+1:]...)
			break
		}
	}
	pc.h.mu.Unlock()
	pc.shut(nil, false)
	return true
}

// dial connects within the latest deadline of batch (and DialTimeout): a
// request whose own deadline comes first returns then (pipelined), and
// the others are not cut short by it.
func (pc *pipeConn) dial(batch []*pipeWork) (net.Conn, error) {
	h := pc.h
	deadline := batch[0].deadline
	for _, w := range batch[1:] {
		if w.deadline.After(deadline) {
			deadline = w.deadline
		}
	}
	d := h.c.clampDial(time.Until(deadline))
	if h.tls {
		return h.c.dialTLS(h.addr, h.c.tlsConfigFor(h.addr), d)
	}
	return h.c.dialTCP(h.addr, d)
}

// writeBatch encodes batch's live requests into buf and writes them in
// one write; false when the connection is done for.
func (pc *pipeConn) writeBatch(conn net.Conn, batch []*pipeWork, buf *bytes.Buffer, bw *bufio.Writer) bool {
	for len(batch) > 0 {
		buf.Reset()
		out := make([]*pipeWork, 0, len(batch))
		now := time.Now()
		latest := time.Time{}
		i := 0
		for ; i < len(batch) && buf.Len() < pipeWriteMax; i++ {
			w := batch[i]
			if !now.Before(w.deadline) {
				pc.pending.Add(-1)
				w.fail(errPipeQueued, true)
				continue
			}
			mark := buf.Len()
			err := w.req.Write(bw)
			if err == nil {
				err = bw.Flush() // into buf: it cannot fail
			}
			if err != nil {
				bw.Reset(buf)
				buf.Truncate(mark)
				pc.pending.Add(-1)
				w.fail(fmt.Errorf("%w: %w", ErrInvalidRequest, err), false)
				continue
			}
			w.phase.Store(phaseWritten)
			out = append(out, w)
			// The write may take until the latest deadline: a request
			// whose own deadline comes first returns then (pipelined).
			if w.deadline.After(latest) {
				latest = w.deadline
			}
		}
		batch = batch[i:]
		if len(out) == 0 {
			continue
		}
		_ = conn.SetWriteDeadline(latest)
		n, err := conn.Write(buf.Bytes())
		if err != nil {
			pc.writeFailed(out, batch, n, err)
			return false
		}
		pc.h.c.pipeStats.writes.Add(1)
		pc.h.c.pipeStats.requests.Add(uint64(len(out)))
		pc.mu.Lock()
		if pc.closed {
			// The reader shut the connection while this write went
			// out. After a "Connection: close" answer the receiver
			// processes nothing more (resend); otherwise it may have
			// these, and they fail.
			resend := pc.resend
			pc.mu.Unlock()
			for _, w := range out {
				pc.pending.Add(-1)
				if resend {
					pc.h.c.pipeStats.resent.Add(1)
					pc.h.submit(w)
					continue
				}
				pc.h.c.pipeStats.broken.Add(1)
				w.fail(errPipeBroken, false)
			}
			pc.undo(nil, batch)
			return false
		}
		pc.sent = append(pc.sent, out...)
		pc.mu.Unlock()
		signal(pc.wakeR)
	}
	return true
}

// writeFailed ends the connection's writing after a failed write of out
// (n bytes of it left; rest was not encoded yet). The connection takes
// no new request. What was sent before keeps waiting for its answers,
// which the reader still reads: a receiver that answered and then closed
// (or reset) the connection leaves its answers readable, and a request
// it answered must not be failed as unanswered. out joins them when some
// of it may have left (n > 0, or a timeout); when nothing left it goes to
// another connection, as do rest and what is queued. The reader shuts
// the connection once nothing is owed.
func (pc *pipeConn) writeFailed(out, rest []*pipeWork, n int, err error) {
	pc.h.remove(pc)
	// n == 0: not a byte of out left (a timeout included: the socket
	// took none of it; over TLS at most part of a record, which the
	// receiver cannot decrypt).
	unsent := n == 0
	pc.mu.Lock()
	queue := pc.queue
	pc.queue = nil
	pc.writeDone = true
	closed, resend := pc.closed, pc.resend
	if !closed && !unsent {
		pc.sent = append(pc.sent, out...)
	}
	pc.mu.Unlock()
	signal(pc.wakeR)
	if closed && !unsent && !resend {
		pc.h.c.pipeStats.broken.Add(uint64(len(out)))
		for _, w := range out {
			pc.pending.Add(-1)
			e, to := describeError(err, w.deadline.Sub(w.start))
			w.fail(fmt.Errorf("%w: %w", errPipeBroken, e), to)
		}
	} else if unsent || closed {
		pc.h.c.pipeStats.resent.Add(uint64(len(out)))
		pc.undo(out, nil)
	}
	pc.undo(queue, rest)
}

// undo takes requests that were never written off this connection and
// submits them anew.
func (pc *pipeConn) undo(a, b []*pipeWork) {
	for _, ws := range [][]*pipeWork{a, b} {
		for _, w := range ws {
			pc.pending.Add(-1)
			pc.h.submit(w)
		}
	}
}

// read is the connection's reader: it matches answers to sent requests
// in order, and closes the connection when one cannot be read or says
// the connection ends.
func (pc *pipeConn) read(conn net.Conn) {
	c := pc.h.c
	br := bufio.NewReaderSize(conn, readBufferSize)
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	for {
		pc.mu.Lock()
		for !pc.closed && len(pc.sent) == 0 {
			if pc.writeDone {
				pc.mu.Unlock()
				pc.shut(nil, false)
				return
			}
			pc.mu.Unlock()
			<-pc.wakeR
			pc.mu.Lock()
		}
		if pc.closed {
			pc.mu.Unlock()
			return
		}
		w := pc.sent[0]
		pc.mu.Unlock()

		w.phase.Store(phaseHead)
		_ = conn.SetReadDeadline(w.deadline)
		resp.Reset()
		err := readHeader(resp, br)
		if err != nil {
			// No answer for w: it fails as the exchange would have; the
			// ones sent after it cannot be matched any more. The
			// connection is unlisted before popHead lowers pending:
			// w's caller may have given up at its deadline already,
			// and its next request must not be picked for a
			// connection that owes nothing only until shut.
			pc.h.remove(pc)
			if !pc.popHead(w) {
				return
			}
			if c.popped != nil {
				c.popped()
			}
			// Shut before w learns of it, so that no request its
			// caller sends next lands on this connection.
			e, to := describeError(err, w.deadline.Sub(w.start))
			pc.shut(fmt.Errorf("the answer to a callback before it failed: %w", e), false)
			w.fail(e, to)
			return
		}
		// The status line arrived: the answer stands whatever happens
		// to its body, as without pipelining (a body cut short or too
		// long is not read for a reschedule, and ends the connection).
		bodyErr := readBody(resp, br, c.maxBody)
		complete := bodyErr == nil
		var readErr error
		if !complete && !errors.Is(bodyErr, fasthttp.ErrBodyTooLarge) {
			readErr = bodyErr
		}
		res := c.answer(resp, resp.Body(), complete, readErr, w.now, w.start)
		closing := resp.ConnectionClose()
		if !complete || closing {
			pc.h.remove(pc) // before popHead, as for a failed read
		}
		if !pc.popHead(w) {
			return
		}
		pc.answered++
		// A connection that ends with this answer is shut before w
		// learns of it, so that no request its caller sends next lands
		// on this connection.
		switch {
		case !complete:
			// The rest of the body is still on the wire, or the
			// connection broke in it.
			pc.shut(fmt.Errorf("an answer before it could not be read to its end: %w", bodyErr), false)
			w.finish(res)
			return
		case closing:
			// RFC 9112 §9.6: what was sent after this answer will not
			// be processed, so it goes again on a new connection.
			pc.mu.Lock()
			owed := len(pc.sent)
			pc.mu.Unlock()
			if owed > 0 && pc.answered < pipeDemoteBelow {
				// A receiver that closes a connection after an answer
				// or two while more are owed (one request per
				// connection) would have each pipelined request
				// written again and again: it gets one request per
				// connection for a while instead.
				pc.h.demotedUntil.Store(monoNow() + int64(pipeDemoteFor))
			}
			pc.shut(errors.New("the receiver closed the connection"), true)
			w.finish(res)
			return
		}
		pc.progress.Store(monoNow())
		w.finish(res)
	}
}

// readHeader reads an answer's status line and headers, past any
// interim (1xx) answers.
func readHeader(resp *fasthttp.Response, br *bufio.Reader) error {
	for range 10 {
		if err := resp.Header.Read(br); err != nil {
			return err
		}
		sc := resp.Header.StatusCode()
		if sc < 100 || sc > 199 || sc == fasthttp.StatusSwitchingProtocols {
			return nil
		}
	}
	return errors.New("too many interim (1xx) answers")
}

// readBody reads the body of the answer whose header resp holds, at most
// max bytes (fasthttp.ErrBodyTooLarge past that), and a chunked body's
// trailer.
func readBody(resp *fasthttp.Response, br *bufio.Reader, max int) error {
	if sc := resp.StatusCode(); sc == fasthttp.StatusNoContent || sc == fasthttp.StatusNotModified || sc < 200 {
		return nil
	}
	if err := resp.ReadBody(br, max); err != nil {
		return err
	}
	if resp.Header.ContentLength() == -1 {
		return resp.Header.ReadTrailer(br)
	}
	return nil
}

// popHead removes w, the head of sent, and its pending count; false when
// the connection was shut meanwhile (shut has finished w).
func (pc *pipeConn) popHead(w *pipeWork) bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.closed || len(pc.sent) == 0 || pc.sent[0] != w {
		return false
	}
	pc.sent[0] = nil
	pc.sent = pc.sent[1:]
	pc.pending.Add(-1)
	return true
}
