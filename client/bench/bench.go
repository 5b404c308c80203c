package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/timemachine-db/timemachine/client"
)

// Per-job create outcome, written once by the worker that owns the job and
// read after all workers have finished.
const (
	notCreated  uint8 = iota
	createdOK         // acknowledged before its trigger_time
	createdLate       // acknowledged at or after its trigger_time
)

// progressEvery is the interval of the progress lines written to out.
const progressEvery = time.Second

// Run creates cfg.Jobs jobs against the cluster at cfg.Addrs, receives their
// callbacks, and reports. Progress lines go to out (nil discards them); the
// report is returned, not printed. If ctx ends first, Run returns the partial
// report with Interrupted set and an error wrapping ctx.Err().
func Run(ctx context.Context, cfg Config, out io.Writer) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = io.Discard
	}
	opts := []client.Option{
		client.WithTimeout(cfg.RequestTimeout),
		client.WithMaxConns(max(cfg.Concurrency, 16)),
		client.WithUserAgent("timemachine-bench"),
		// The generator shares cores with the server it measures:
		// fasthttp gives 2–3× net/http's request rate (BenchmarkDoLoopback).
		client.WithFastHTTP(),
	}
	if cfg.Token != "" {
		opts = append(opts, client.WithToken(cfg.Token))
	}
	if cfg.CAFile != "" {
		opts = append(opts, client.WithCAFile(cfg.CAFile))
	}
	c, err := client.New(cfg.Addrs, opts...)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer c.Close()

	rep := &Report{
		Mode:          "window",
		JobsRequested: cfg.Jobs,
		Batch:         cfg.Batch,
		Concurrency:   cfg.Concurrency,
		WindowSeconds: cfg.Window.Seconds(),
		LeadSeconds:   cfg.Lead.Seconds(),
		MetaBytes:     max(cfg.MetaBytes, 0),
		Collection:    cfg.Collection,
		IDPrefix:      cfg.IDPrefix,
	}
	switch {
	case cfg.CreateOnly:
		rep.Mode = "create_only"
	case cfg.AtOnce:
		rep.Mode = "at_once"
	}

	var rcv *receiver
	cbAddr := cfg.CallbackAddr
	if !cfg.CreateOnly {
		rcv = newReceiver(cfg.IDPrefix, cfg.Jobs, cfg.ReceiverStatus)
		if err := rcv.start(cfg.ReceiverAddr); err != nil {
			return nil, err
		}
		defer rcv.close(time.Second)
		rep.ReceiverAddr = rcv.addr()
		if cbAddr == "" {
			cbAddr = rcv.addr()
		}
	} else if cbAddr == "" {
		// Far-future jobs of a load run: nothing listens for them. Port 9
		// is the discard service, which is normally closed.
		cbAddr = "127.0.0.1:9"
	}

	if _, _, err := c.PutCollection(ctx, cfg.Collection, client.Collection{Retention: CollectionRetention}); err != nil {
		return nil, fmt.Errorf("bench: create collection %q: %w", cfg.Collection, err)
	}

	start := time.Now()
	first := start.Add(cfg.Lead)
	if cfg.CreateOnly {
		first = first.Add(cfg.FarFuture)
	}
	sched := &schedule{firstMs: first.UnixMilli(), windowMs: cfg.Window.Milliseconds(), n: int64(cfg.Jobs)}
	if rcv != nil {
		rcv.sched.Store(sched)
	}

	target := "http://" + cbAddr + "/hook"
	route := ""
	if cfg.routed() {
		route = "bench-" + cfg.IDPrefix
		rt := client.Route{WebhookURL: target, MaxInFlight: cfg.MaxInFlight, Pipeline: cfg.Pipeline}
		if cfg.RateLimit > 0 {
			rt.RateLimit = &client.RateLimit{PerSecond: cfg.RateLimit, Burst: cfg.Burst}
		}
		if cfg.BatchJobs > 0 {
			rt.Batch = &client.RouteBatch{MaxJobs: cfg.BatchJobs, MaxWait: cfg.BatchWait.String()}
		}
		if _, _, err := c.PutRoute(ctx, route, rt); err != nil {
			return nil, fmt.Errorf("bench: create route %q: %w", route, err)
		}
		defer func() {
			dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = c.DeleteRoute(dctx, route)
		}()
		rep.Route = route
	}
	cr, err := newCreator(c, &cfg, sched, target, route)
	if err != nil {
		return nil, err
	}
	stopProgress := startProgress(out, start, cr, rcv, cfg.Jobs)
	defer stopProgress()

	createEnd := cr.run(ctx)
	cr.fill(rep, start, createEnd)

	if cfg.CreateOnly {
		return finish(ctx, rep)
	}
	if ctx.Err() == nil {
		rep.TimedOut = waitDeliveries(ctx, rcv, cr.state, sched, createEnd, &cfg)
	}
	stopProgress()
	rcv.close(time.Second)
	fillFire(rep, rcv, cr.state, sched, cfg.AtOnce)
	return finish(ctx, rep)
}

func finish(ctx context.Context, rep *Report) (*Report, error) {
	if err := ctx.Err(); err != nil {
		rep.Interrupted = true
		return rep, fmt.Errorf("bench: interrupted: %w", err)
	}
	return rep, nil
}

// creator runs the create phase.
type creator struct {
	c     *client.Client
	cfg   *Config
	sched *schedule
	path  string
	tail  []byte // `,"callback_url":"…","meta":{"p":"…"}}`

	state []uint8 // per job: notCreated, createdOK, createdLate

	next    atomic.Int64 // next job (single) or batch (batch) to create
	created atomic.Int64 // progress only
	failed  atomic.Int64 // progress only

	mu      sync.Mutex // guards the merged figures below, once per worker
	errs    map[string]int
	samples map[string]string
	lastAck time.Time
	first   time.Time
}

func newCreator(c *client.Client, cfg *Config, sched *schedule, callbackURL, route string) (*creator, error) {
	cb, err := json.Marshal(callbackURL)
	if err != nil {
		return nil, fmt.Errorf("bench: callback url: %w", err)
	}
	tail := append([]byte(`,"callback_url":`), cb...)
	if route != "" {
		rb, _ := json.Marshal(route)
		tail = append([]byte(`,"route":`), rb...)
	}
	if cfg.MetaBytes > 0 {
		tail = append(tail, `,"meta":{"p":"`...)
		tail = append(tail, strings.Repeat("x", cfg.MetaBytes)...)
		tail = append(tail, `"}`...)
	}
	tail = append(tail, '}')
	return &creator{
		c:       c,
		cfg:     cfg,
		sched:   sched,
		path:    "/v1/collections/" + url.PathEscape(cfg.Collection) + "/jobs",
		tail:    tail,
		state:   make([]uint8, cfg.Jobs),
		errs:    map[string]int{},
		samples: map[string]string{},
	}, nil
}

// appendJob appends job i's JSON to b.
func (cr *creator) appendJob(b []byte, i int) []byte {
	b = append(b, `{"id":"`...)
	b = append(b, cr.cfg.IDPrefix...)
	b = append(b, '-')
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, `","trigger_time":`...)
	b = strconv.AppendInt(b, cr.sched.at(i), 10)
	return append(b, cr.tail...)
}

// run creates every job with cfg.Concurrency workers and returns the time of
// the last acknowledgement.
func (cr *creator) run(ctx context.Context) time.Time {
	cr.first = time.Now()
	var wg sync.WaitGroup
	for range cr.cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := worker{cr: cr, errs: map[string]int{}, samples: map[string]string{}}
			if cr.cfg.Batch > 1 {
				w.batches(ctx)
			} else {
				w.singles(ctx)
			}
			w.merge()
		}()
	}
	wg.Wait()
	if cr.lastAck.IsZero() {
		return time.Now()
	}
	return cr.lastAck
}

// fill writes the create figures into rep.
func (cr *creator) fill(rep *Report, start, createEnd time.Time) {
	for _, s := range cr.state {
		switch s {
		case createdOK:
			rep.JobsCreated++
		case createdLate:
			rep.JobsCreated++
			rep.CreatedLate++
		}
	}
	if len(cr.errs) > 0 {
		rep.CreateErrors = cr.errs
		rep.CreateErrorSamples = cr.samples
	}
	if d := createEnd.Sub(cr.first); d > 0 {
		rep.CreateSeconds = d.Seconds()
		rep.CreateRate = float64(rep.JobsCreated) / d.Seconds()
	}
}

// worker holds one create goroutine's buffer and tallies, merged at the end
// so the hot loop shares nothing but two progress counters.
type worker struct {
	cr      *creator
	buf     []byte
	errs    map[string]int
	samples map[string]string
	lastAck time.Time
}

func (w *worker) singles(ctx context.Context) {
	cr := w.cr
	n := int64(len(cr.state))
	rctx := requestContext(ctx)
	for ctx.Err() == nil {
		i := cr.next.Add(1) - 1
		if i >= n {
			return
		}
		w.buf = cr.appendJob(w.buf[:0], int(i))
		_, _, err := cr.c.Do(rctx, client.RawRequest{
			Method: fasthttp.MethodPost, Path: cr.path, Body: w.buf,
			// Every job has an id: a resent create answers 200.
			Idempotent: true,
		})
		ack := time.Now()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			w.fail(err, 1)
			continue
		}
		w.lastAck = ack
		w.mark(int(i), ack)
		cr.created.Add(1)
	}
}

// requestContext is the context of the create requests: ctx without its
// cancellation. The client runs a request with a cancellable context on a
// goroutine of its own (fasthttp has no context support), a goroutine start
// and two hand-offs per create that the load generator would take from the
// cores it shares with the server it measures. A cancelled run still stops:
// the loops check ctx before each request, and a request in flight ends by
// the client's timeout.
func requestContext(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// batchAnswer is the part of a batch answer the bench needs; decoding only
// it keeps the generator's CPU out of the create rate it measures.
type batchAnswer struct {
	Results []struct {
		Status int `json:"status"`
		Error  *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	} `json:"results"`
}

func (w *worker) batches(ctx context.Context) {
	cr := w.cr
	n := int64(len(cr.state))
	size := int64(cr.cfg.Batch)
	nb := (n + size - 1) / size
	rctx := requestContext(ctx)
	for ctx.Err() == nil {
		k := cr.next.Add(1) - 1
		if k >= nb {
			return
		}
		lo, hi := int(k*size), int(min((k+1)*size, n))
		w.buf = append(w.buf[:0], '[')
		for i := lo; i < hi; i++ {
			if i > lo {
				w.buf = append(w.buf, ',')
			}
			w.buf = cr.appendJob(w.buf, i)
		}
		w.buf = append(w.buf, ']')
		_, body, err := cr.c.Do(rctx, client.RawRequest{
			Method: fasthttp.MethodPost, Path: cr.path, Body: w.buf, Idempotent: true,
		})
		ack := time.Now()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			w.fail(err, hi-lo)
			continue
		}
		w.lastAck = ack
		var ans batchAnswer
		if err := json.Unmarshal(body, &ans); err != nil {
			w.failCode("bad_answer", "decode batch answer: "+err.Error(), hi-lo)
			continue
		}
		ok := 0
		for j := 0; j < hi-lo; j++ {
			if j >= len(ans.Results) {
				w.failCode("bad_answer", fmt.Sprintf("batch of %d answered with %d results", hi-lo, len(ans.Results)), hi-lo-j)
				break
			}
			res := ans.Results[j]
			switch {
			case res.Status == fasthttp.StatusCreated || res.Status == fasthttp.StatusOK:
				w.mark(lo+j, ack)
				ok++
			case res.Error != nil && res.Error.Code != "":
				w.failCode(res.Error.Code, res.Error.Message, 1)
			default:
				w.failCode("status_"+strconv.Itoa(res.Status), "no error object", 1)
			}
		}
		cr.created.Add(int64(ok))
	}
}

// mark records that job i was acknowledged at ack.
func (w *worker) mark(i int, ack time.Time) {
	if ack.UnixNano() >= w.cr.sched.at(i)*int64(time.Millisecond) {
		w.cr.state[i] = createdLate
	} else {
		w.cr.state[i] = createdOK
	}
}

func (w *worker) fail(err error, jobs int) {
	var apiErr *client.Error
	switch {
	case errors.As(err, &apiErr):
		w.failCode(apiErr.Code, apiErr.Message, jobs)
	case errors.Is(err, client.ErrNotTimemachine):
		w.failCode("not_timemachine", err.Error(), jobs)
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		w.failCode("timeout", err.Error(), jobs)
	default:
		w.failCode("transport", err.Error(), jobs)
	}
}

func (w *worker) failCode(code, msg string, jobs int) {
	w.errs[code] += jobs
	if _, ok := w.samples[code]; !ok {
		w.samples[code] = msg
	}
	w.cr.failed.Add(int64(jobs))
}

func (w *worker) merge() {
	cr := w.cr
	cr.mu.Lock()
	defer cr.mu.Unlock()
	for k, v := range w.errs {
		cr.errs[k] += v
	}
	for k, v := range w.samples {
		if _, ok := cr.samples[k]; !ok {
			cr.samples[k] = v
		}
	}
	if w.lastAck.After(cr.lastAck) {
		cr.lastAck = w.lastAck
	}
}

// waitDeliveries waits until every created job has been delivered (then
// Settle longer, to catch late duplicates), until WaitTimeout after the last
// trigger or the last create, whichever is later, or until ctx ends. It
// reports whether the timeout ended the wait.
func waitDeliveries(ctx context.Context, rcv *receiver, state []uint8, sched *schedule, createEnd time.Time, cfg *Config) bool {
	var created int64
	for _, s := range state {
		if s != notCreated {
			created++
		}
	}
	deadline := time.UnixMilli(sched.last())
	if createEnd.After(deadline) {
		deadline = createEnd
	}
	deadline = deadline.Add(cfg.WaitTimeout)

	allDelivered := func() bool {
		for i, s := range state {
			if s != notCreated && rcv.first[i].Load() == 0 {
				return false
			}
		}
		return true
	}
	// Poll a counter (cheap) and scan the table (O(jobs)) only when the
	// counter says every created job may have arrived and has moved since
	// the last scan.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	scanned := int64(-1)
	for {
		if d := rcv.distinct.Load(); d >= created && d != scanned {
			scanned = d
			if allDelivered() {
				break
			}
		}
		if !time.Now().Before(deadline) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
	settle := time.NewTimer(cfg.Settle)
	defer settle.Stop()
	select {
	case <-ctx.Done():
	case <-settle.C:
	}
	return false
}

// fillFire derives the fire figures from the receiver's per-job slots.
func fillFire(rep *Report, rcv *receiver, state []uint8, sched *schedule, atOnce bool) {
	lateness := make([]int64, 0, len(state))
	var dueAt []int64 // due time (ms) of each lateness sample
	var lastNs int64
	for i := range state {
		cnt := int(rcv.count[i].Load())
		f := rcv.first[i].Load()
		rep.Deliveries += cnt
		if f == 0 {
			if state[i] != notCreated {
				rep.Missing++
			}
			continue
		}
		rep.Fired++
		lastNs = max(lastNs, f)
		if state[i] == createdOK {
			lateness = append(lateness, f-sched.at(i)*int64(time.Millisecond))
			dueAt = append(dueAt, sched.at(i))
		}
	}
	rep.Duplicates = rep.Deliveries - rep.Fired
	rep.Early = int(rcv.early.Load())
	rep.WorstEarlyMs = float64(rcv.worstEarlyNs.Load()) / float64(time.Millisecond)
	rep.TriggerMismatch = int(rcv.mismatch.Load())
	rep.Foreign = int(rcv.foreign.Load())
	rep.Batches = int(rcv.batches.Load())
	if !atOnce && sched.windowMs > 0 {
		rep.PerSecond = perSecond(sched.firstMs, sched.firstMs+sched.windowMs, dueAt, lateness)
	}
	rep.Lateness = summarize(lateness) // sorts lateness: after perSecond
	if rep.Fired > 0 {
		span := time.Duration(lastNs - sched.firstMs*int64(time.Millisecond))
		if span > 0 {
			rep.FireSpanSeconds = span.Seconds()
			rep.FireRate = float64(rep.Fired) / span.Seconds()
		}
		if atOnce {
			rep.DrainSeconds = max(span, 0).Seconds()
		}
	}
}

// startProgress writes a progress line to out every second until the
// returned stop is called (stop is idempotent).
func startProgress(out io.Writer, start time.Time, cr *creator, rcv *receiver, jobs int) (stop func()) {
	if out == io.Discard {
		return func() {}
	}
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				line := fmt.Sprintf("bench: %6.1fs  created %d/%d  errors %d",
					now.Sub(start).Seconds(), cr.created.Load(), jobs, cr.failed.Load())
				if rcv != nil {
					line += fmt.Sprintf("  fired %d", rcv.distinct.Load())
				}
				_, _ = fmt.Fprintln(out, line)
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			<-exited
		})
	}
}
