package model

// DefaultCollection always exists: jobs can be created in it without
// configuring anything, and it cannot be deleted.
const DefaultCollection = "default"

// Collection is a namespace of jobs with defaults. Zero fields are unset and
// take the built-in defaults.
type Collection struct {
	Name              string      `json:"name"`
	Retry             RetryPolicy `json:"retry"`
	CallbackTimeoutMs int64       `json:"callback_timeout_ms"`
	RetentionMs       int64       `json:"retention_ms"`
	SigningSecret     string      `json:"signing_secret"`
	Deleting          bool        `json:"deleting"`
	CreatedAt         int64       `json:"created_at"`
	UpdatedAt         int64       `json:"updated_at"`
	// Incarnation tells this collection from an earlier one of the same
	// name: the meta log index of the entry that created it (0 for a
	// collection created before 2026-11-28). Every write that may make a
	// job or a schedule carries it, and a slot whose purge of a deleted
	// collection fenced off its incarnation refuses such writes from a
	// node that had not yet heard of the deletion (raftfsm/DESIGN.md,
	// "Collection fences").
	Incarnation uint64 `json:"incarnation,omitempty"`
}

// EffectiveRetry is the collection's policy with defaults filled in.
func (c *Collection) EffectiveRetry() RetryPolicy { return c.Retry.Or(DefaultRetryPolicy) }

// EffectiveTimeoutMs is the callback timeout with the default filled in.
func (c *Collection) EffectiveTimeoutMs() int64 {
	if c.CallbackTimeoutMs > 0 {
		return c.CallbackTimeoutMs
	}
	return DefaultCallbackTimeoutMs
}

// EffectiveRetentionMs is the retention with the default filled in.
func (c *Collection) EffectiveRetentionMs() int64 {
	if c.RetentionMs > 0 {
		return c.RetentionMs
	}
	return DefaultRetentionMs
}

// RetainedFrom is the bound of the collection's retention at now (ms): a
// finished job that finished before it is past its retention.
func (c *Collection) RetainedFrom(now int64) int64 { return now - c.EffectiveRetentionMs() }

// Expired reports whether j, a job of this collection, is finished and
// past the retention at now. API.md §3: such a job has disappeared. The
// slot leader's upkeep removes it on a pass (every 30 s by default), no
// sooner than 2 minutes after it finished (slot removeExpired: a re-send
// of its create must still find it); until then reads answer as if it
// were gone and writes remove it first, at this same bound.
func (c *Collection) Expired(j *Job, now int64) bool {
	return j.Status.Finished() && j.FinishedAt > 0 && j.FinishedAt < c.RetainedFrom(now)
}

// Route is a named webhook target, resolved at fire time.
type Route struct {
	Name          string            `json:"name"`
	WebhookURL    string            `json:"webhook_url"`
	Headers       map[string]string `json:"headers"`
	SigningSecret string            `json:"signing_secret"`
	TimeoutMs     int64             `json:"timeout_ms"`
	CreatedAt     int64             `json:"created_at"`
	UpdatedAt     int64             `json:"updated_at"`

	// Delivery control (docs/api.md#route-delivery-control), all optional:
	// the zero value of each is "unset".
	RateLimit   RateLimit   `json:"rate_limit,omitzero"`
	MaxInFlight int64       `json:"max_in_flight,omitempty"`
	Batch       BatchPolicy `json:"batch,omitzero"`

	// Pipeline sends the route's single callbacks HTTP/1.1-pipelined:
	// several requests written on one keep-alive connection before their
	// answers arrive, many per write, which cuts the syscalls per callback
	// on both ends for a fast receiver (docs/api.md#route-delivery-control).
	// The receiver must answer pipelined requests in order, as RFC 9112
	// §9.3.2 requires of servers; a slow answer holds the requests queued
	// behind it on its connection. It is how a request is sent, not
	// pacing: Paced ignores it, so pipelining alone does not put a route
	// through the lanes.
	Pipeline bool `json:"pipeline,omitempty"`
}

// RateLimit caps deliveries to a route, cluster-wide: PerSecond on
// average, bursts of up to Burst. PerSecond 0 is unset.
type RateLimit struct {
	PerSecond float64 `json:"per_second,omitempty"`
	Burst     int64   `json:"burst,omitempty"`
}

// Set reports whether a rate limit is configured.
func (r RateLimit) Set() bool { return r.PerSecond > 0 }

// EffectiveBurst is the burst with its default filled in: a tenth of a
// second's worth, at least 1.
func (r RateLimit) EffectiveBurst() int64 {
	if r.Burst > 0 {
		return r.Burst
	}
	return max(1, int64(r.PerSecond/10))
}

// BatchPolicy makes a route receive its due jobs together: up to MaxJobs
// per POST, waiting at most MaxWaitMs for a batch to fill. MaxJobs 0 is
// unset.
type BatchPolicy struct {
	MaxJobs   int64 `json:"max_jobs,omitempty"`
	MaxWaitMs int64 `json:"max_wait_ms,omitempty"`
}

// Set reports whether batching is configured.
func (b BatchPolicy) Set() bool { return b.MaxJobs > 0 }

// Paced reports whether the route has any delivery control: its jobs then
// go through the node's per-route lanes rather than straight to the pool.
func (r *Route) Paced() bool { return r.RateLimit.Set() || r.MaxInFlight > 0 || r.Batch.Set() }
