package bench

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// receiver is the webhook endpoint of a run. Its hot path (handle) takes no
// lock and allocates nothing: it parses the job number out of the payload and
// updates that job's slots with atomics. Everything else is derived after the
// run from those slots.
type receiver struct {
	prefix []byte // "<IDPrefix>-"
	status int
	sched  atomic.Pointer[schedule] // nil until the create phase starts

	first []atomic.Int64  // wall-clock Unix ns of the first delivery, 0 = none
	count []atomic.Uint32 // deliveries per job

	distinct     atomic.Int64 // jobs with at least one delivery
	foreign      atomic.Int64 // deliveries that are not this run's jobs
	early        atomic.Int64 // deliveries received before their trigger_time
	worstEarlyNs atomic.Int64
	mismatch     atomic.Int64 // payload trigger_time differs from the schedule
	batches      atomic.Int64 // batched deliveries (X-Timemachine-Batch)

	ln   net.Listener
	srv  *fasthttp.Server
	done chan error
}

func newReceiver(prefix string, jobs, status int) *receiver {
	return &receiver{
		prefix: []byte(prefix + "-"),
		status: status,
		first:  make([]atomic.Int64, jobs),
		count:  make([]atomic.Uint32, jobs),
	}
}

// start listens on addr and serves until close.
func (r *receiver) start(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("bench: receiver listen %s: %w", addr, err)
	}
	r.ln = ln
	r.srv = &fasthttp.Server{
		Handler:                       r.handle,
		Name:                          "timemachine-bench",
		NoDefaultServerHeader:         true,
		NoDefaultDate:                 true,
		NoDefaultContentType:          true,
		DisableHeaderNamesNormalizing: true,
		// Bounded: an idle keep-alive connection from the cluster is closed
		// after a minute, and Shutdown does not wait on it longer than close
		// allows.
		IdleTimeout:  time.Minute,
		ReadTimeout:  time.Minute,
		WriteTimeout: 10 * time.Second,
		// Meta is at most 64 KiB by default; leave room, refuse nonsense.
		MaxRequestBodySize: 4 << 20,
		CloseOnShutdown:    true,
	}
	r.done = make(chan error, 1)
	go func() { r.done <- r.srv.Serve(ln) }()
	return nil
}

func (r *receiver) addr() string { return r.ln.Addr().String() }

// close stops accepting deliveries, waiting at most timeout for open ones.
func (r *receiver) close(timeout time.Duration) {
	if r.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_ = r.srv.ShutdownWithContext(ctx)
	_ = r.ln.Close()
	<-r.done
	r.srv = nil
}

// handle records one delivery (or each job of a batched one) and answers
// at once.
func (r *receiver) handle(ctx *fasthttp.RequestCtx) {
	now := time.Now().UnixNano()
	ctx.SetStatusCode(r.status)
	body := ctx.PostBody()
	if len(ctx.Request.Header.Peek("X-Timemachine-Batch")) == 0 {
		r.record(body, now)
		return
	}
	r.batches.Add(1)
	// {"jobs":[{…,"idempotency_key":"…"},…]}: the server writes the key
	// last in each job, so a job ends at the `"}` after it (a meta with
	// an "id" of its own does not split a job).
	body = bytes.TrimPrefix(body, batchOpen)
	for len(body) > 0 {
		k := bytes.Index(body, keyIdem)
		if k < 0 {
			return
		}
		end := bytes.Index(body[k+len(keyIdem):], jobClose)
		if end < 0 {
			return
		}
		end += k + len(keyIdem) + len(jobClose)
		r.record(body[:end], now)
		body = bytes.TrimPrefix(body[end:], []byte{','})
	}
}

var (
	batchOpen = []byte(`{"jobs":[`)
	keyIdem   = []byte(`,"idempotency_key":"`)
	jobClose  = []byte(`"}`)
)

// record counts one job's delivery.
func (r *receiver) record(body []byte, now int64) {
	idx, trig, ok := parsePayload(body, r.prefix, len(r.first))
	sched := r.sched.Load()
	if !ok || sched == nil {
		r.foreign.Add(1)
		return
	}
	if r.first[idx].CompareAndSwap(0, now) {
		r.distinct.Add(1)
	}
	r.count[idx].Add(1)
	want := sched.at(idx)
	if trig != want {
		r.mismatch.Add(1)
	}
	if by := want*int64(time.Millisecond) - now; by > 0 {
		r.early.Add(1)
		for {
			w := r.worstEarlyNs.Load()
			if by <= w || r.worstEarlyNs.CompareAndSwap(w, by) {
				break
			}
		}
	}
}

var (
	keyID   = []byte(`"id"`)
	keyTrig = []byte(`"trigger_time"`)
)

// parsePayload extracts the job number and trigger_time from a callback
// payload ({"id":"<prefix><n>","collection":…,"trigger_time":…,…}) without a
// JSON decoder. ok is false for anything that is not one of this run's jobs
// (wrong prefix, number out of range, no id); a missing or malformed
// trigger_time yields trig = -1, which shows up as a mismatch.
func parsePayload(body, prefix []byte, n int) (idx int, trig int64, ok bool) {
	v := valueOf(body, keyID)
	if len(v) < 2 || v[0] != '"' {
		return 0, 0, false
	}
	v = v[1:]
	if !bytes.HasPrefix(v, prefix) {
		return 0, 0, false
	}
	v = v[len(prefix):]
	digits := 0
	for digits < len(v) && v[digits] >= '0' && v[digits] <= '9' {
		idx = idx*10 + int(v[digits]-'0')
		digits++
		if idx >= n {
			return 0, 0, false
		}
	}
	if digits == 0 || digits == len(v) || v[digits] != '"' {
		return 0, 0, false
	}
	trig = -1
	if t := valueOf(body, keyTrig); len(t) > 0 {
		var x int64
		i := 0
		for ; i < len(t) && t[i] >= '0' && t[i] <= '9' && i < 19; i++ {
			x = x*10 + int64(t[i]-'0')
		}
		if i > 0 {
			trig = x
		}
	}
	return idx, trig, true
}

// valueOf returns the bytes after `key:` (whitespace skipped) for the first
// occurrence of key used as an object key, i.e. followed by a colon. An
// occurrence followed by anything else (a string value equal to the key, as
// in "collection":"id") is skipped.
func valueOf(body, key []byte) []byte {
	for {
		i := bytes.Index(body, key)
		if i < 0 {
			return nil
		}
		body = body[i+len(key):]
		j := skipSpace(body, 0)
		if j < len(body) && body[j] == ':' {
			return body[skipSpace(body, j+1):]
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
