package workload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/timemachine-db/timemachine/internal/nemesis/history"
)

// Endpoint is a node the clients may send requests to.
type Endpoint struct {
	ID       string
	HTTPAddr string
}

// Mix weighs the operations a client picks from.
type Mix struct {
	Create, Get, Put, Delete, DeleteNearDue int
}

// DefaultMix is mostly creates and reads, with replaces and deletes, and
// deletes aimed a few milliseconds before the job is due.
var DefaultMix = Mix{Create: 35, Get: 25, Put: 12, Delete: 10, DeleteNearDue: 10}

// Config shapes the workload.
type Config struct {
	Coll        string
	Clients     int
	Seed        uint64
	CallbackURL string
	// Timeout bounds one request (the server's own forward timeout is 5 s).
	Timeout time.Duration
	// CallbackTimeout is the jobs' callback_timeout.
	CallbackTimeout time.Duration
	// Triggers of new jobs: now + [TriggerMin, TriggerMax); PastFraction of
	// them are instead up to 2 s in the past.
	TriggerMin, TriggerMax time.Duration
	PastFraction           float64
	// Think is the pause between two operations of one client: [lo, hi).
	ThinkMin, ThinkMax time.Duration
	Mix                Mix
	// CreateRetries: an indeterminate create is sent again (same spec, to
	// another node) up to this many times.
	CreateRetries int
	// PipelinedRoute, when set, names a route (the receiver's URL, with
	// "pipeline": true) that half the jobs, chosen by a hash of their id,
	// name instead of a callback_url of their own: their callbacks share
	// pipelined connections, which the receiver's slow answers and closes
	// break.
	PipelinedRoute string
}

// target sets where job id's callbacks go: its own callback_url, or the
// pipelined route for half the ids.
func (w *Workload) target(body map[string]any, id string) {
	if w.cfg.PipelinedRoute != "" {
		h := fnv.New32a()
		h.Write([]byte(id))
		if h.Sum32()%2 == 0 {
			body["route"] = w.cfg.PipelinedRoute
			return
		}
	}
	body["callback_url"] = w.cfg.CallbackURL + "/cb/" + id
}

// Recorded is what the workload needs of the run's record.
type Recorded interface {
	Invoke(op history.Op) int64
	Complete(id int64, c history.Completion)
}

// Workload is the clients: each owns the jobs it creates (writes to a job
// come from its owner, one at a time) and reads any recent job.
type Workload struct {
	cfg     Config
	rec     Recorded
	http    *http.Client
	targets func() []Endpoint

	mu          sync.Mutex
	recent      []string // recent job ids of every client, for reads
	all         []string // every job id written
	lastTrigger int64
	metaN       int64
	probes      map[string]bool
}

// New prepares a workload. targets lists the nodes requests may go to
// (called before every request).
func New(cfg Config, rec Recorded, client *http.Client, targets func() []Endpoint) *Workload {
	if cfg.Timeout == 0 {
		cfg.Timeout = 6 * time.Second
	}
	if cfg.CallbackTimeout == 0 {
		cfg.CallbackTimeout = 2 * time.Second
	}
	if cfg.Mix == (Mix{}) {
		cfg.Mix = DefaultMix
	}
	return &Workload{cfg: cfg, rec: rec, http: client, targets: targets}
}

// Jobs lists every job id written so far.
func (w *Workload) Jobs() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.all...)
}

// LastTrigger is the latest trigger time written (Unix ms).
func (w *Workload) LastTrigger() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastTrigger
}

// Run runs the clients until ctx is done, then waits for their last
// operations.
func (w *Workload) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for c := 0; c < w.cfg.Clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			w.client(ctx, c)
		}(c)
	}
	wg.Wait()
}

// ownJob is a client's belief about a job it wrote.
type ownJob struct {
	id      string
	trigger int64
	n       int // writes so far
}

type client struct {
	w    *Workload
	id   int
	rng  *rand.Rand
	n    int
	mine []*ownJob
}

func (w *Workload) client(ctx context.Context, id int) {
	c := &client{w: w, id: id, rng: rand.New(rand.NewPCG(w.cfg.Seed, uint64(id)+1))}
	m := w.cfg.Mix
	total := m.Create + m.Get + m.Put + m.Delete + m.DeleteNearDue
	for ctx.Err() == nil {
		x := c.rng.IntN(total)
		switch {
		case x < m.Create:
			c.create(ctx, c.newTrigger())
		case x < m.Create+m.Get:
			c.get(ctx, c.w.anyRecent(c.rng))
		case x < m.Create+m.Get+m.Put:
			c.replace(ctx)
		case x < m.Create+m.Get+m.Put+m.Delete:
			if j := c.pick(); j != nil {
				c.delete(ctx, j.id)
			}
		default:
			c.deleteNearDue(ctx)
		}
		think := w.cfg.ThinkMin
		if span := w.cfg.ThinkMax - w.cfg.ThinkMin; span > 0 {
			think += time.Duration(c.rng.Int64N(int64(span)))
		}
		select {
		case <-ctx.Done():
		case <-time.After(think):
		}
	}
}

func (c *client) newTrigger() int64 {
	now := time.Now()
	if c.rng.Float64() < c.w.cfg.PastFraction {
		return now.Add(-time.Duration(c.rng.Int64N(int64(2 * time.Second)))).UnixMilli()
	}
	lead := c.w.cfg.TriggerMin
	if span := c.w.cfg.TriggerMax - c.w.cfg.TriggerMin; span > 0 {
		lead += time.Duration(c.rng.Int64N(int64(span)))
	}
	return now.Add(lead).UnixMilli()
}

func (c *client) endpoint() (Endpoint, bool) {
	ts := c.w.targets()
	if len(ts) == 0 {
		return Endpoint{}, false
	}
	return ts[c.rng.IntN(len(ts))], true
}

// pick chooses one of the client's recent jobs.
func (c *client) pick() *ownJob {
	if len(c.mine) == 0 {
		return nil
	}
	lo := max(0, len(c.mine)-50)
	return c.mine[lo+c.rng.IntN(len(c.mine)-lo)]
}

func (w *Workload) anyRecent(rng *rand.Rand) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.recent) == 0 {
		return ""
	}
	return w.recent[rng.IntN(len(w.recent))]
}

func (w *Workload) wrote(id string, trigger int64, isNew bool) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if isNew {
		w.all = append(w.all, id)
		w.recent = append(w.recent, id)
		if len(w.recent) > 300 {
			w.recent = w.recent[len(w.recent)-300:]
		}
	}
	w.lastTrigger = max(w.lastTrigger, trigger)
	w.metaN++
	return w.metaN
}

// spec builds a job body and its label (equal labels: equal specs).
func (c *client) spec(id string, trigger, metaN int64, withID bool) (map[string]any, string) {
	body := map[string]any{
		"trigger_time":     trigger,
		"meta":             map[string]any{"w": metaN},
		"callback_timeout": c.w.cfg.CallbackTimeout.String(),
		"retry_policy": map[string]any{"max_attempts": 4, "initial_interval": "300ms", "multiplier": 2.0,
			"max_interval": "2s", "max_age": "1h"},
	}
	c.w.target(body, id)
	if withID {
		body["id"] = id
	}
	return body, fmt.Sprintf("t%d/m%d", trigger, metaN)
}

// create creates a new job; an indeterminate answer is retried with the
// same spec through another node. It returns the job when a create was
// acknowledged.
func (c *client) create(ctx context.Context, trigger int64) *ownJob {
	c.n++
	id := fmt.Sprintf("c%d-%06d", c.id, c.n)
	metaN := c.w.wrote(id, trigger, true)
	body, label := c.spec(id, trigger, metaN, true)
	j := &ownJob{id: id, trigger: trigger, n: 1}
	c.mine = append(c.mine, j)
	for try := 0; try <= c.w.cfg.CreateRetries && ctx.Err() == nil; try++ {
		ep, ok := c.endpoint()
		if !ok {
			return nil
		}
		res := c.w.Do(ctx, c.id, history.Op{Kind: history.Create, JobID: id, Spec: label, Trigger: trigger}, ep, body)
		switch {
		case res.Outcome == history.OK && (res.Status == http.StatusCreated || res.Status == http.StatusOK):
			return j
		case res.Outcome == history.OK:
			return nil // a definite refusal
		}
	}
	return nil
}

func (c *client) get(ctx context.Context, id string) (history.Completion, bool) {
	if id == "" {
		return history.Completion{}, false
	}
	ep, ok := c.endpoint()
	if !ok {
		return history.Completion{}, false
	}
	res := c.w.Do(ctx, c.id, history.Op{Kind: history.Get, JobID: id}, ep, nil)
	return res, res.Outcome == history.OK && res.Status == http.StatusOK
}

// replace reads one of its jobs and replaces it with a new trigger time
// and meta, If-Match the version read.
func (c *client) replace(ctx context.Context) {
	j := c.pick()
	if j == nil {
		return
	}
	got, ok := c.get(ctx, j.id)
	if !ok || got.Version == 0 {
		return
	}
	trigger := c.newTrigger()
	if trigger == j.trigger {
		trigger++
	}
	metaN := c.w.wrote(j.id, trigger, false)
	body, label := c.spec(j.id, trigger, metaN, false)
	ep, ok := c.endpoint()
	if !ok {
		return
	}
	c.w.Do(ctx, c.id, history.Op{Kind: history.Put, JobID: j.id, Spec: label, Trigger: trigger, IfMatch: got.Version}, ep, body)
	j.trigger = trigger
	j.n++
}

func (c *client) delete(ctx context.Context, id string) {
	ep, ok := c.endpoint()
	if !ok {
		return
	}
	c.w.Do(ctx, c.id, history.Op{Kind: history.Delete, JobID: id}, ep, nil)
}

// deleteNearDue creates a job due in 300–900 ms and deletes it 0–5 ms
// before it is due: the delete races the fire.
func (c *client) deleteNearDue(ctx context.Context) {
	trigger := time.Now().Add(300*time.Millisecond + time.Duration(c.rng.Int64N(int64(600*time.Millisecond)))).UnixMilli()
	j := c.create(ctx, trigger)
	if j == nil {
		return
	}
	at := time.UnixMilli(trigger).Add(-time.Duration(c.rng.Int64N(int64(5*time.Millisecond) + 1)))
	select {
	case <-ctx.Done():
		return
	case <-time.After(time.Until(at)):
	}
	c.delete(ctx, j.id)
}

// jobBody is the job in an answer (the job itself, or under "job" in an
// error body).
type jobBody struct {
	Version     uint64 `json:"version"`
	Status      string `json:"status"`
	TriggerTime int64  `json:"trigger_time"`
	Attempts    int    `json:"attempts"`
	LastError   string `json:"last_error"`
}

type answerBody struct {
	jobBody
	Job   *jobBody `json:"job"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// Do sends one request for op (Kind, JobID and the write's arguments set)
// to ep, recording its invocation and completion, and returns the
// completion.
func (w *Workload) Do(ctx context.Context, clientID int, op history.Op, ep Endpoint, body any) history.Completion {
	return w.do(ctx, w.cfg.Timeout, clientID, op, ep, body)
}

// do is Do with its own request timeout. The request does not end when
// ctx is cancelled (the workload stopping must not turn answers into
// indeterminate operations): only the timeout ends it.
func (w *Workload) do(ctx context.Context, timeout time.Duration, clientID int, op history.Op, ep Endpoint, body any) history.Completion {
	op.Client, op.Coll, op.Via = clientID, w.cfg.Coll, ep.ID
	method, path := "", "/v1/collections/"+w.cfg.Coll+"/jobs"
	switch op.Kind {
	case history.Create:
		method = http.MethodPost
	case history.Get:
		method, path = http.MethodGet, path+"/"+op.JobID
	case history.Put:
		method, path = http.MethodPut, path+"/"+op.JobID
	case history.Delete:
		method, path = http.MethodDelete, path+"/"+op.JobID
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			panic(err) // our own map of plain values
		}
		rd = bytes.NewReader(b)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, method, "http://"+ep.HTTPAddr+path, rd)
	if err != nil {
		panic(err) // a malformed URL of our own making
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if op.IfMatch != 0 {
		req.Header.Set("If-Match", strconv.FormatUint(op.IfMatch, 10))
	}
	id := w.rec.Invoke(op)
	resp, err := w.http.Do(req)
	var c history.Completion
	if err != nil {
		c.Outcome, c.Err = Classify(err, 0), err.Error()
		w.rec.Complete(id, c)
		return c
	}
	b, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	c.Status = resp.StatusCode
	if rerr != nil {
		// The status came, the body did not: the status still says what
		// happened for a definite answer.
		c.Err = "reading the answer: " + rerr.Error()
	}
	c.Outcome = Classify(nil, resp.StatusCode)
	var a answerBody
	if json.Unmarshal(b, &a) == nil {
		j := a.jobBody
		if a.Job != nil {
			j = *a.Job
		}
		c.Version, c.JobStatus, c.JobTrigger = j.Version, j.Status, j.TriggerTime
		c.JobAttempts, c.JobLastError = j.Attempts, j.LastError
		if a.Error != nil {
			c.Code = a.Error.Code
			if c.Err == "" {
				c.Err = a.Error.Message
			}
		}
	}
	w.rec.Complete(id, c)
	return c
}

// Classify says what is known of a request's effect from its transport
// error (nil when an answer came) or HTTP status:
//   - the connection could not be made (refused, unreachable): nothing was
//     sent, so nothing changed: Fail;
//   - 429: the server refused it before doing anything: Fail;
//   - any other transport error (timeout, reset, EOF after sending): Unknown;
//   - 5xx: Unknown (a leader may have changed with the write in flight);
//   - any other status: a definite answer, OK.
func Classify(err error, status int) history.Outcome {
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return history.Fail
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			return history.Fail
		}
		return history.Unknown
	}
	switch {
	case status == http.StatusTooManyRequests:
		return history.Fail
	case status >= 500:
		return history.Unknown
	}
	return history.OK
}

// FinalReads GETs every job once (concurrency at a time), so the history
// ends with what the cluster holds.
func (w *Workload) FinalReads(ctx context.Context, clientID, concurrency int) {
	jobs := w.Jobs()
	next := make(chan string)
	var wg sync.WaitGroup
	for k := 0; k < concurrency; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(w.cfg.Seed, uint64(1000+k)))
			for id := range next {
				ts := w.targets()
				if len(ts) == 0 {
					continue
				}
				w.Do(ctx, clientID+k, history.Op{Kind: history.Get, JobID: id}, ts[rng.IntN(len(ts))], nil)
			}
		}(k)
	}
	for _, id := range jobs {
		if ctx.Err() != nil {
			break
		}
		next <- id
	}
	close(next)
	wg.Wait()
}

// CreateOnce sends one create of job id (a probe: the same id and trigger
// on every try, so a retry of an applied create answers 200) through ep,
// waiting at most timeout.
func (w *Workload) CreateOnce(ctx context.Context, timeout time.Duration, clientID int, id string, trigger int64, ep Endpoint) history.Completion {
	w.mu.Lock()
	if w.probes == nil {
		w.probes = map[string]bool{}
	}
	if !w.probes[id] {
		w.probes[id] = true
		w.all = append(w.all, id)
		w.lastTrigger = max(w.lastTrigger, trigger)
	}
	w.mu.Unlock()
	body := map[string]any{
		"id":               id,
		"trigger_time":     trigger,
		"meta":             map[string]any{"probe": true},
		"callback_timeout": w.cfg.CallbackTimeout.String(),
	}
	w.target(body, id)
	return w.do(ctx, timeout, clientID, history.Op{Kind: history.Create, JobID: id, Spec: fmt.Sprintf("t%d/probe", trigger), Trigger: trigger}, ep, body)
}
