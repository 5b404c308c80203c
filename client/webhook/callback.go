package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultMaxBodyBytes bounds a callback body read by Read and Handler: a
// single callback is at most a little over its meta (64 KiB by default), and
// a batch of 100 such jobs fits. Raise it for routes that batch more.
const DefaultMaxBodyBytes = 8 << 20

// Errors of Read other than verification (see ErrVerification).
var (
	// ErrBodyTooLarge: the body is over the limit; nothing was parsed.
	ErrBodyTooLarge = errors.New("webhook: request body too large")
	// ErrMalformed: the body is not a timemachine callback.
	ErrMalformed = errors.New("webhook: malformed callback body")
)

// Callback is one job's callback (docs/api.md#the-callback): the JSON body
//
//	{"id":…,"collection":…,"trigger_time":…,"attempt":1,"meta":{…}}
//
// plus "schedule" for an occurrence of a schedule, and in a batched
// delivery "idempotency_key" per job.
type Callback struct {
	ID         string `json:"id"`
	Collection string `json:"collection"`
	// TriggerTime is the job's trigger time in Unix milliseconds; the
	// callback is never sent before it.
	TriggerTime int64 `json:"trigger_time"`
	// Attempt is 1 on the first delivery and counts up on retries.
	Attempt int  `json:"attempt"`
	Meta    Meta `json:"meta,omitempty"`
	// Schedule is the id of the schedule this job is an occurrence of
	// (the job id is then "{schedule}@{occurrence ms}"); empty otherwise.
	Schedule string `json:"schedule,omitempty"`
	// IdempotencyKey is "{collection}:{id}:{trigger_time}", the same on
	// every attempt: deduplicate on it, since delivery is at-least-once.
	// It comes from the Idempotency-Key header of a single callback and
	// from the body of each job of a batch.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// Time returns TriggerTime as a time.Time.
func (c *Callback) Time() time.Time { return time.UnixMilli(c.TriggerTime) }

// Delivery is one POST from timemachine: a single callback, or a batch of
// them for a route with "batch" set.
type Delivery struct {
	// Callbacks holds the jobs in the order they were sent: one for a single
	// callback.
	Callbacks []Callback
	// Batch is true for a batched delivery ({"jobs":[…]}, header
	// X-Timemachine-Batch), which is answered per job.
	Batch bool
	// WebhookID and Timestamp are the verified webhook-id and
	// webhook-timestamp (empty and zero when the delivery was not verified).
	WebhookID string
	Timestamp time.Time
}

// Read reads, verifies and parses a callback request. v checks the
// signature; nil skips the check (only for collections without a signing
// secret, on a private network). The body is read up to maxBytes
// (DefaultMaxBodyBytes when ≤ 0).
//
// Errors match ErrBodyTooLarge, ErrVerification (and a specific reason, see
// Verify) or ErrMalformed.
func Read(r *http.Request, v *Verifier, maxBytes int64) (*Delivery, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBodyBytes
	}
	if r.ContentLength > maxBytes {
		return nil, fmt.Errorf("%w: Content-Length %d is over the %d-byte limit", ErrBodyTooLarge, r.ContentLength, maxBytes)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("webhook: read body: %w", err)
	}
	if int64(len(body)) > maxBytes {
		return nil, fmt.Errorf("%w: over the %d-byte limit", ErrBodyTooLarge, maxBytes)
	}
	d := &Delivery{}
	if v != nil {
		if err := v.Verify(body, r.Header); err != nil {
			return nil, err
		}
		d.WebhookID = r.Header.Get(HeaderWebhookID)
		ts, _ := strconv.ParseInt(strings.TrimSpace(r.Header.Get(HeaderWebhookTimestamp)), 10, 64)
		d.Timestamp = time.Unix(ts, 0)
	}
	if err := d.parse(body, r.Header); err != nil {
		return nil, err
	}
	return d, nil
}

// Parse parses a callback body that was already read (and verified) by
// other means. h supplies Idempotency-Key, X-Timemachine-Attempt and
// X-Timemachine-Batch; it may be nil.
func Parse(body []byte, h http.Header) (*Delivery, error) {
	d := &Delivery{}
	if err := d.parse(body, h); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *Delivery) parse(body []byte, h http.Header) error {
	if h == nil {
		h = http.Header{}
	}
	var probe struct {
		ID   *string         `json:"id"`
		Jobs json.RawMessage `json:"jobs"`
	}
	if err := json.Unmarshal(body, &probe); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	// The header says batch; a body with "jobs" and no "id" is one too, so
	// a proxy that drops unknown headers does not turn a batch into garbage.
	if h.Get(HeaderBatch) != "" || (probe.ID == nil && probe.Jobs != nil) {
		var b struct {
			Jobs []Callback `json:"jobs"`
		}
		if err := json.Unmarshal(body, &b); err != nil {
			return fmt.Errorf("%w: batch: %v", ErrMalformed, err)
		}
		if len(b.Jobs) == 0 {
			return fmt.Errorf(`%w: a batched delivery with no "jobs"`, ErrMalformed)
		}
		for i := range b.Jobs {
			if err := b.Jobs[i].check(); err != nil {
				return fmt.Errorf("%w: jobs[%d]: %v", ErrMalformed, i, err)
			}
		}
		d.Batch, d.Callbacks = true, b.Jobs
		return nil
	}
	var c Callback
	if err := json.Unmarshal(body, &c); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if k := h.Get(HeaderIdempotencyKey); k != "" {
		c.IdempotencyKey = k
	}
	if c.Attempt == 0 {
		c.Attempt, _ = strconv.Atoi(h.Get(HeaderAttempt))
	}
	if err := c.check(); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	d.Callbacks = []Callback{c}
	return nil
}

// check refuses a body that is JSON but not a callback, and fills the
// idempotency key when the sender left it out.
func (c *Callback) check() error {
	if c.ID == "" || c.Collection == "" {
		return errors.New(`"id" and "collection" are required`)
	}
	if c.IdempotencyKey == "" {
		c.IdempotencyKey = c.Collection + ":" + c.ID + ":" + strconv.FormatInt(c.TriggerTime, 10)
	}
	return nil
}
