package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/rpc/webhook"
	"github.com/timemachine-db/timemachine/secrets"
	"github.com/timemachine-db/timemachine/slot"
)

// deliverer adapts the webhook client to the slot's Deliverer: it turns a
// resolved delivery into the wire request, opens secrets sealed at rest
// (--secrets-key-file) and decodes signing secrets once.
type deliverer struct {
	c       *webhook.Client
	box     *secrets.Box // nil: secrets are stored as given
	mu      sync.RWMutex
	secrets map[string][]byte
}

func newDeliverer(c *webhook.Client, box *secrets.Box) *deliverer {
	return &deliverer{c: c, box: box, secrets: map[string][]byte{}}
}

func (d *deliverer) key(secret string) ([]byte, error) {
	if secret == "" {
		return nil, nil
	}
	d.mu.RLock()
	k, ok := d.secrets[secret]
	d.mu.RUnlock()
	if ok {
		return k, nil
	}
	plain, err := d.box.Open(secret)
	if err != nil {
		return nil, fmt.Errorf("the signing secret cannot be decrypted: %w", err)
	}
	k, err = webhook.ParseSecret(plain)
	if err != nil {
		return nil, nil // validated on the way in; cannot happen for stored secrets
	}
	d.mu.Lock()
	if len(d.secrets) > 10000 {
		d.secrets = map[string][]byte{}
	}
	d.secrets[secret] = k
	d.mu.Unlock()
	return k, nil
}

// headers opens the sealed values of a route's headers (only sensitive
// ones are ever sealed); the map is copied only when one is.
func (d *deliverer) headers(h map[string]string) (map[string]string, error) {
	var out map[string]string
	for k, v := range h {
		if !secrets.Sealed(v) {
			continue
		}
		plain, err := d.box.Open(v)
		if err != nil {
			return nil, fmt.Errorf("route header %s cannot be decrypted: %w", k, err)
		}
		if out == nil {
			out = make(map[string]string, len(h))
			for kk, vv := range h {
				out[kk] = vv
			}
		}
		out[k] = plain
	}
	if out == nil {
		return h, nil
	}
	return out, nil
}

// payloadOf is the callback body of job j's attempt, the same for a
// single callback and for each job of a batch (API.md §3: an occurrence
// carries "schedule" either way; a batch once left it out).
func payloadOf(j *model.Job, attempt int64) webhook.Payload {
	return webhook.Payload{ID: j.ID, Collection: j.Collection, TriggerTime: j.TriggerTime, Attempt: int(attempt), Meta: j.Meta, Schedule: j.Schedule}
}

func (d *deliverer) Deliver(ctx context.Context, x *slot.Delivery) slot.DeliveryResult {
	j := x.Job
	// A secret this node cannot open (its key file lacks the key) is a
	// configuration problem an operator can fix: retried, not failed.
	key, err := d.key(x.SigningSecret)
	if err != nil {
		return slot.DeliveryResult{Err: err}
	}
	hdrs, err := d.headers(x.Headers)
	if err != nil {
		return slot.DeliveryResult{Err: err}
	}
	res := d.c.Deliver(ctx, &webhook.Request{
		URL:            x.URL,
		Headers:        hdrs,
		Payload:        payloadOf(j, x.Attempt),
		IdempotencyKey: webhook.IdempotencyKey(j.Collection, j.ID, j.TriggerTime),
		SigningKey:     key,
		Timeout:        x.Timeout,
		Now:            x.Now,
		Pipeline:       x.Pipeline,
	})
	return slot.DeliveryResult{
		StatusCode:    res.StatusCode,
		Err:           res.Err,
		TimedOut:      res.TimedOut,
		RetryAfter:    res.RetryAfter,
		HasRetryAfter: res.HasRetryAfter,
		RescheduleAt:  res.RescheduleAt,
		RescheduleIn:  res.RescheduleIn,
		RescheduleErr: res.RescheduleErr,
		BodySnippet:   excerpt(res.BodySnippet),
		Permanent:     errors.Is(res.Err, webhook.ErrRefused),
	}
}

// DeliverBatch sends a batched delivery to a route and translates the
// answer into one result per job: a non-2xx answer (or none) is every
// job's result; a 2xx answer decides per job from its "results" (a job it
// does not name succeeded).
func (d *deliverer) DeliverBatch(ctx context.Context, x *slot.BatchDelivery) []slot.DeliveryResult {
	out := make([]slot.DeliveryResult, len(x.Jobs))
	fail := func(err error) []slot.DeliveryResult {
		for i := range out {
			out[i] = slot.DeliveryResult{Err: err}
		}
		return out
	}
	key, err := d.key(x.SigningSecret)
	if err != nil {
		return fail(err)
	}
	hdrs, err := d.headers(x.Headers)
	if err != nil {
		return fail(err)
	}
	jobs := make([]webhook.BatchJob, len(x.Jobs))
	for i, j := range x.Jobs {
		jobs[i] = webhook.BatchJob{
			Payload:        payloadOf(j, x.Attempts[i]),
			IdempotencyKey: webhook.IdempotencyKey(j.Collection, j.ID, j.TriggerTime),
		}
	}
	res := d.c.DeliverBatch(ctx, &webhook.BatchRequest{URL: x.URL, Headers: hdrs, Jobs: jobs, SigningKey: key, Timeout: x.Timeout, Now: x.Now})
	whole := slot.DeliveryResult{
		StatusCode:    res.StatusCode,
		Err:           res.Err,
		TimedOut:      res.TimedOut,
		RetryAfter:    res.RetryAfter,
		HasRetryAfter: res.HasRetryAfter,
		RescheduleErr: res.RescheduleErr,
		BodySnippet:   excerpt(res.BodySnippet),
		Permanent:     errors.Is(res.Err, webhook.ErrRefused),
	}
	for i := range out {
		out[i] = whole
		if res.Jobs == nil || !res.Jobs[i].Answered {
			continue
		}
		jr := res.Jobs[i]
		switch jr.Outcome {
		case webhook.OutcomeRetry:
			out[i] = slot.DeliveryResult{StatusCode: 0, Err: errBatchRetry}
			switch {
			case errors.Is(jr.Err, webhook.ErrUnknownOutcome):
				out[i].Err = jr.Err // not the receiver's "retry"
			case jr.Err != nil:
				out[i].Err = fmt.Errorf("%w (its wait was ignored: %v)", errBatchRetry, jr.Err)
			case jr.RescheduleIn > 0:
				out[i].RetryAfter, out[i].HasRetryAfter = jr.RescheduleIn, true
			case jr.RescheduleAt != 0:
				// The wait from the request's start, as a Retry-After
				// date is read (a time already past: at once).
				out[i].RetryAfter, out[i].HasRetryAfter = max(0, time.UnixMilli(jr.RescheduleAt).Sub(x.Now)), true
			}
		case webhook.OutcomeFail:
			out[i] = slot.DeliveryResult{Err: errBatchFail, Permanent: true}
		default:
			out[i] = slot.DeliveryResult{StatusCode: res.StatusCode, RescheduleAt: jr.RescheduleAt, RescheduleIn: jr.RescheduleIn, RescheduleErr: jr.Err}
		}
	}
	return out
}

// The per-job answers of a batch, as last_error shows them.
var (
	errBatchRetry = errors.New(`the batch answer said "retry" for this job`)
	errBatchFail  = errors.New(`the batch answer said "fail" for this job`)
)

// excerptMax bounds the part of a receiver's answer kept in last_error.
const excerptMax = 128

// excerpt is the short, sanitised start of a receiver's answer that
// last_error keeps: control characters and runs of white space become one
// space, at most excerptMax bytes of valid UTF-8. Only receivers the
// egress policy allowed were ever contacted, so this never carries the
// answer of a refused (internal) target.
func excerpt(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.IsSpace(r) {
			if !space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = true
			continue
		}
		if b.Len()+utf8.RuneLen(r) > excerptMax {
			break
		}
		b.WriteRune(r)
		space = false
	}
	return strings.TrimSpace(b.String())
}
