package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
)

// HeaderBatch carries the number of jobs of a batched delivery
// (docs/api.md#route-delivery-control).
const HeaderBatch = "X-Timemachine-Batch"

// BatchJob is one job of a batched delivery: its callback body plus the
// idempotency key a single callback carries in its header.
type BatchJob struct {
	Payload        Payload
	IdempotencyKey string // derived from Payload when empty
}

// BatchRequest is one batched delivery to a route:
//
//	POST {"jobs":[{…callback body…,"idempotency_key":"…"}, …]}
//	X-Timemachine-Batch: N
//
// signed like a single callback (the same headers, over the batch body).
type BatchRequest struct {
	URL        string
	Headers    map[string]string
	Jobs       []BatchJob
	SigningKey []byte
	Timeout    time.Duration
	Now        time.Time
}

// Job outcomes a receiver may answer per job.
const (
	OutcomeOK    = "ok"
	OutcomeRetry = "retry"
	OutcomeFail  = "fail"
)

// JobResult is the receiver's answer for one job of a batch.
type JobResult struct {
	// Answered: the answer's "results" named this job. Otherwise the
	// request's status decides (a 2xx: succeeded).
	Answered bool
	Outcome  string // OutcomeOK, OutcomeRetry or OutcomeFail
	// RescheduleAt (unix ms) or RescheduleIn: with OutcomeOK, when the
	// job is scheduled again; with OutcomeRetry, when its next attempt is
	// made (instead of the backoff).
	RescheduleAt int64
	RescheduleIn time.Duration
	// Err: the job's entry could not be used as sent (reported; an "ok"
	// counts as succeeded, a "retry" takes the backoff).
	Err error
}

// BatchResult is what happened to a batched delivery: the request's
// Result (its status decides for every job when it is not a 2xx) and, for
// a 2xx answer with "results", one JobResult per job in request order.
type BatchResult struct {
	Result
	Jobs []JobResult // nil when the answer had no usable "results"
}

// maxBatchAnswer bounds how much of a batch answer is read: a result per
// job is well under 1 KiB, and a batch is at most 1,000 jobs.
const maxBatchAnswer = 1 << 20

// batchWebhookID is the webhook-id of a batch: stable for the same jobs in
// the same order, distinct from any single callback's id.
func batchWebhookID(jobs []BatchJob) string {
	return "batch:" + strconv.Itoa(len(jobs)) + ":" + jobs[0].IdempotencyKey
}

// AppendBatchJSON appends the body of a batched delivery.
func AppendBatchJSON(dst []byte, jobs []BatchJob) []byte {
	dst = append(dst, `{"jobs":[`...)
	for i := range jobs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jobs[i].Payload.AppendJSON(dst)
		dst = dst[:len(dst)-1] // reopen the object for the key
		dst = append(dst, `,"idempotency_key":`...)
		dst = appendJSONString(dst, jobs[i].IdempotencyKey)
		dst = append(dst, '}')
	}
	return append(dst, "]}"...)
}

// DeliverBatch sends a batched delivery and reads the per-job answer. Like
// Deliver it never follows redirects and returns when ctx ends.
func (c *Client) DeliverBatch(ctx context.Context, r *BatchRequest) BatchResult {
	start := time.Now()
	if r == nil || len(r.Jobs) == 0 {
		return BatchResult{Result: Result{Err: fmt.Errorf("%w: empty batch", ErrInvalidRequest)}}
	}
	if c.closed.Load() {
		return BatchResult{Result: Result{Err: ErrClosed}}
	}
	if ctx.Err() != nil {
		return BatchResult{Result: abandoned(ctx, start)}
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	deadline := start.Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	now := r.Now
	if now.IsZero() {
		now = start
	}
	for i := range r.Jobs {
		if r.Jobs[i].IdempotencyKey == "" {
			p := &r.Jobs[i].Payload
			r.Jobs[i].IdempotencyKey = IdempotencyKey(p.Collection, p.ID, p.TriggerTime)
		}
	}
	req := fasthttp.AcquireRequest()
	if err := c.buildBatchRequest(req, r, now); err != nil {
		fasthttp.ReleaseRequest(req)
		return BatchResult{Result: Result{Err: err, Latency: time.Since(start)}}
	}
	jobs := r.Jobs
	secrets := headerSecrets(r.Headers)
	run := func() BatchResult {
		res := c.exchangeBatch(req, jobs, now, start, deadline)
		res.BodySnippet = redact(res.BodySnippet, secrets)
		return res
	}
	if ctx.Done() == nil {
		return run()
	}
	done := make(chan BatchResult, 1)
	go func() { done <- run() }()
	select {
	case res := <-done:
		return res
	case <-ctx.Done():
		return BatchResult{Result: abandoned(ctx, start)}
	}
}

func (c *Client) buildBatchRequest(req *fasthttp.Request, r *BatchRequest, now time.Time) error {
	if err := c.startRequest(req, r.URL, r.Headers, HeaderBatch); err != nil {
		return err
	}
	var num [20]byte
	req.Header.SetContentType("application/json")
	req.Header.SetBytesV(HeaderBatch, strconv.AppendInt(num[:0], int64(len(r.Jobs)), 10))
	req.Header.SetUserAgent(c.userAgent)
	body := AppendBatchJSON(req.SwapBody(nil)[:0], r.Jobs)
	if len(r.SigningKey) > 0 {
		id := batchWebhookID(r.Jobs)
		ts := now.Unix()
		var sig [64]byte
		req.Header.Set(HeaderWebhookID, id)
		req.Header.SetBytesV(HeaderWebhookTimestamp, strconv.AppendInt(num[:0], ts, 10))
		req.Header.SetBytesV(HeaderWebhookSignature, appendSignature(sig[:0], r.SigningKey, id, ts, body))
	}
	req.SwapBody(body)
	return nil
}

func (c *Client) exchangeBatch(req *fasthttp.Request, jobs []BatchJob, now, start, deadline time.Time) (res BatchResult) {
	resp := fasthttp.AcquireResponse()
	defer func() {
		fasthttp.ReleaseRequest(req)
		fasthttp.ReleaseResponse(resp)
	}()
	if err := c.hc.DoDeadline(req, resp, deadline); err != nil {
		res.Err, res.TimedOut = describeError(err, deadline.Sub(start))
		res.Latency = time.Since(start)
		return res
	}
	res.StatusCode = resp.StatusCode()
	if v := resp.Header.Peek("Retry-After"); len(v) > 0 {
		res.RetryAfter, res.HasRetryAfter = parseRetryAfter(v, now)
	}
	limit := max(c.maxBody, maxBatchAnswer)
	body, complete, readErr := readBodyLimit(resp, make([]byte, 0, 1024), limit)
	_ = resp.CloseBodyStream()
	res.Latency = time.Since(start)
	res.BodySnippet = snippet(body)
	if res.StatusCode >= 200 && res.StatusCode <= 299 {
		res.Jobs, res.RescheduleErr = parseBatchAnswer(body, complete, readErr, jobs)
	}
	return res
}

// parseBatchAnswer reads {"results":[{"id","collection","outcome",
// "reschedule_in"|"reschedule_at"}]} from a 2xx answer. An empty body, or
// one without "results", means every job succeeded (nil, nil). An answer
// that names a job twice keeps the first entry; entries for jobs that
// were not in the batch are ignored. An entry without "collection" names
// the job of that id when the batch holds only one (receivers whose jobs
// all live in one collection leave it out; matching nothing, its "fail"
// counted as a success).
func parseBatchAnswer(body []byte, complete bool, readErr error, jobs []BatchJob) ([]JobResult, error) {
	trimmed := trimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, nil
	}
	if !complete {
		if readErr != nil {
			return nil, fmt.Errorf("the batch answer could not be read to the end (%v); every job counts as delivered", readErr)
		}
		return nil, fmt.Errorf("the batch answer is larger than %d bytes; every job counts as delivered", maxBatchAnswer)
	}
	var ans struct {
		Results []struct {
			ID           string          `json:"id"`
			Collection   string          `json:"collection"`
			Outcome      string          `json:"outcome"`
			RescheduleIn json.RawMessage `json:"reschedule_in"`
			RescheduleAt json.RawMessage `json:"reschedule_at"`
		} `json:"results"`
	}
	if err := json.Unmarshal(trimmed, &ans); err != nil {
		return nil, fmt.Errorf("the batch answer is not {\"results\":[…]}: %v; every job counts as delivered", err)
	}
	if ans.Results == nil {
		return nil, nil
	}
	type jobKey struct{ coll, id string }
	at := make(map[jobKey]int, len(jobs))
	byID := make(map[string]int, len(jobs)) // -1: more than one collection has the id
	for i := range jobs {
		id := jobs[i].Payload.ID
		at[jobKey{jobs[i].Payload.Collection, id}] = i
		if _, dup := byID[id]; dup {
			byID[id] = -1
		} else {
			byID[id] = i
		}
	}
	out := make([]JobResult, len(jobs))
	for _, r := range ans.Results {
		i, ok := at[jobKey{r.Collection, r.ID}]
		if !ok && r.Collection == "" {
			i, ok = byID[r.ID]
			ok = ok && i >= 0
		}
		if !ok || out[i].Answered {
			continue
		}
		jr := JobResult{Answered: true, Outcome: r.Outcome}
		// reschedule_in / reschedule_at: with "ok" the job is scheduled
		// again (attempts reset); with "retry" they are the wait before
		// the next attempt, as a Retry-After is for a single callback.
		when := func() {
			hasIn := len(r.RescheduleIn) > 0 && string(r.RescheduleIn) != "null"
			hasAt := len(r.RescheduleAt) > 0 && string(r.RescheduleAt) != "null"
			switch {
			case hasIn && hasAt:
				jr.Err = fmt.Errorf("the result has both reschedule_at and reschedule_in; send only one")
			case hasAt:
				jr.RescheduleAt, jr.Err = parseRescheduleAt(r.RescheduleAt)
			case hasIn:
				jr.RescheduleIn, jr.Err = parseRescheduleIn(r.RescheduleIn)
			}
		}
		switch r.Outcome {
		case OutcomeOK, "":
			jr.Outcome = OutcomeOK
			when()
		case OutcomeRetry:
			when()
		case OutcomeFail:
		default:
			jr.Outcome = OutcomeRetry
			jr.Err = fmt.Errorf("%w %q (want ok, retry or fail); retried", ErrUnknownOutcome, clip([]byte(r.Outcome)))
		}
		out[i] = jr
	}
	return out, nil
}

// ErrUnknownOutcome marks a batch answer's entry whose "outcome" is none
// of ok, retry and fail: the job is retried, and its last_error says why.
var ErrUnknownOutcome = errors.New("the batch answer gave this job an unknown outcome")

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n') {
		b = b[1:]
	}
	return b
}
