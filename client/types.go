package client

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/timemachine-db/timemachine/client/webhook"
)

// Meta is a job's or schedule's meta: any JSON value, echoed in the
// callback (at most 64 KiB by default). It is webhook.Meta, so the meta of
// a received callback can go into a new job as it is. Build one with
// NewMeta (or Meta(`{"raw":"json"}`)), read one with its Decode method.
type Meta = webhook.Meta

// NewMeta encodes v (anything encoding/json encodes) as a Meta.
func NewMeta(v any) (Meta, error) { return webhook.NewMeta(v) }

// MustMeta is NewMeta for values that always encode; it panics otherwise.
func MustMeta(v any) Meta { return webhook.MustMeta(v) }

// Job statuses as the server reports them. StatusFiring appears on the job
// carried by a conflict error: its callback has started, so it can no
// longer be deleted or replaced.
const (
	StatusScheduled = "scheduled"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusFiring    = "firing"
)

// MaxBatch is the largest number of jobs one batch create may carry (docs/api.md#create-post-v1collectionscjobs).
const MaxBatch = 1000

// RetryPolicy is a job's, schedule's or collection's callback retry policy.
// Every field is optional: an unset field (nil or "") is left out of the
// request, so the server takes the collection's value, then the built-in
// default (5 attempts, 1s initial interval, multiplier 2, 10m max
// interval, 24h max age). Durations are Go duration strings exactly as on
// the wire ("1s", "10m"); time.Duration's String method writes them.
type RetryPolicy struct {
	MaxAttempts     *int     `json:"max_attempts,omitempty"`
	InitialInterval string   `json:"initial_interval,omitempty"`
	Multiplier      *float64 `json:"multiplier,omitempty"`
	MaxInterval     string   `json:"max_interval,omitempty"`
	MaxAge          string   `json:"max_age,omitempty"`
}

// Job is a one-shot timer (docs/api.md#jobs). The first group of fields is what a
// caller sets; the second is filled in by the server and never sent, so a
// job read with GetJob can be edited and PUT back as it is.
type Job struct {
	// ID is 1–255 bytes of [A-Za-z0-9._:@~=+-]; the server generates one when
	// a POST leaves it empty (but see CreateJob on retries).
	ID string `json:"id,omitempty"`
	// TriggerTime is Unix epoch milliseconds (time.Time.UnixMilli). Zero
	// means unset when creating: use Delay. A past time fires at once.
	// (Encoded even when zero: the server always sends it, and a job may
	// really be due at 0; what a create sends is jobSpec.)
	TriggerTime int64 `json:"trigger_time"`
	// Delay is relative to receipt ("90s"); an alternative to TriggerTime.
	// The server answers with the resolved TriggerTime, not the Delay.
	Delay string `json:"delay,omitempty"`
	// Exactly one of CallbackURL and Route is set.
	CallbackURL string `json:"callback_url,omitempty"`
	Route       string `json:"route,omitempty"`
	// Meta is any JSON value, echoed in the callback.
	Meta            Meta         `json:"meta,omitempty"`
	RetryPolicy     *RetryPolicy `json:"retry_policy,omitempty"`
	CallbackTimeout string       `json:"callback_timeout,omitempty"`

	// Read-only, set by the server. The fields the server always sends
	// are encoded even when zero, as it sends them (the CLI's -o json
	// prints these types).
	Collection string `json:"collection"`
	Status     string `json:"status"` // StatusScheduled, StatusSucceeded, StatusFailed
	Attempts   int    `json:"attempts"`
	LastError  string `json:"last_error"`
	Version    int64  `json:"version"`
	CreatedAt  int64  `json:"created_at"`
	UpdatedAt  int64  `json:"updated_at"`
	FinishedAt int64  `json:"finished_at"`
	// Schedule is the schedule this job is an occurrence of, when the
	// server reports it (the id then is OccurrenceID(Schedule, time)).
	Schedule string `json:"schedule,omitempty"`
	// NextAttemptAt is when a scheduled job is due next (its trigger time,
	// or the time of its next retry), when the server reports it.
	NextAttemptAt int64 `json:"next_attempt_at,omitempty"`
}

// jobSpec is the writable part of a Job: what the client sends. Sending the
// read-only fields would at best be ignored and at worst be rejected.
type jobSpec struct {
	ID              string       `json:"id,omitempty"`
	TriggerTime     int64        `json:"trigger_time,omitempty"`
	Delay           string       `json:"delay,omitempty"`
	CallbackURL     string       `json:"callback_url,omitempty"`
	Route           string       `json:"route,omitempty"`
	Meta            Meta         `json:"meta,omitempty"`
	RetryPolicy     *RetryPolicy `json:"retry_policy,omitempty"`
	CallbackTimeout string       `json:"callback_timeout,omitempty"`
}

func specOf(j *Job) jobSpec {
	return jobSpec{
		ID:              j.ID,
		TriggerTime:     j.TriggerTime,
		Delay:           j.Delay,
		CallbackURL:     j.CallbackURL,
		Route:           j.Route,
		Meta:            j.Meta,
		RetryPolicy:     j.RetryPolicy,
		CallbackTimeout: j.CallbackTimeout,
	}
}

// BatchResult is the outcome of one job of a batch create, in input order.
// Status is the HTTP status that job alone would have got: 201 created, 200
// already existed with the same spec, 409 conflict, 400 invalid, ... Job is
// set on success (and on a conflict that carries the existing job), Error
// otherwise.
type BatchResult struct {
	ID     string `json:"id"`
	Status int    `json:"status"`
	Job    *Job   `json:"job,omitempty"`
	Error  *Error `json:"error,omitempty"`
}

// Created reports whether the job was created by this request (201).
func (r *BatchResult) Created() bool { return r.Status == 201 }

// Err returns the item's error as an error (nil on success), for
// errors.Is and the Is* helpers.
func (r *BatchResult) Err() error {
	if r.Error == nil {
		return nil
	}
	return r.Error
}

// UnmarshalJSON decodes one entry of a batch answer. The per-item error has
// the contract's {"code","message"} shape; its HTTPStatus is the item's
// status, so errors.Is and the Is* helpers work on it as on any other error.
func (r *BatchResult) UnmarshalJSON(b []byte) error {
	var w struct {
		ID     string `json:"id"`
		Status int    `json:"status"`
		Job    *Job   `json:"job"`
		Error  *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*r = BatchResult{ID: w.ID, Status: w.Status, Job: w.Job}
	if w.Error != nil {
		r.Error = &Error{HTTPStatus: w.Status, Code: w.Error.Code, Message: w.Error.Message}
		if w.Error.Code == CodeConflict {
			r.Error.Job = w.Job
		}
	}
	return nil
}

// ListOptions filters and pages ListJobs and Jobs. Zero values are left out
// of the query, so the server's defaults apply.
type ListOptions struct {
	Status string // StatusScheduled, StatusSucceeded or StatusFailed (the dead letters)
	From   *int64 // trigger_time lower bound, Unix ms, inclusive
	To     *int64 // trigger_time upper bound, Unix ms, exclusive
	// Schedule lists the occurrences of one schedule.
	Schedule string
	// Limit is the page size (the server's default when 0); Jobs pages
	// with it until the end.
	Limit  int
	Cursor string // NextCursor of the previous page
}

// JobPage is one page of ListJobs. NextCursor is empty on the last page.
type JobPage struct {
	Jobs       []Job  `json:"jobs"`
	NextCursor string `json:"next_cursor"`
}

// RedriveRequest selects the dead letters (failed jobs) of a collection to
// send again: either IDs, or a trigger-time range From–To (Unix ms).
type RedriveRequest struct {
	IDs  []string `json:"ids,omitempty"`
	From *int64   `json:"from,omitempty"`
	To   *int64   `json:"to,omitempty"`
}

// RedriveResult is the answer of Redrive: how many dead letters were
// scheduled again (now, with attempts reset).
type RedriveResult struct {
	Redriven int `json:"redriven"`
}

// Schedule is a recurring job (docs/api.md#schedules): exactly one of Cron
// and Every, and exactly one of CallbackURL and Route. Each occurrence is
// delivered like a job with the id OccurrenceID(schedule id, occurrence
// time) and "schedule" in the callback body.
type Schedule struct {
	// ID is taken from the request path; it is not sent in the body.
	ID string `json:"id,omitempty"`
	// Cron is a 5-field cron expression ("*/5 * * * *").
	Cron string `json:"cron,omitempty"`
	// Every is a fixed interval as a Go duration ("30s").
	Every string `json:"every,omitempty"`
	// Timezone is an IANA name for Cron (default UTC); DST as cron does.
	Timezone        string       `json:"timezone"`
	CallbackURL     string       `json:"callback_url,omitempty"`
	Route           string       `json:"route,omitempty"`
	Meta            Meta         `json:"meta,omitempty"`
	RetryPolicy     *RetryPolicy `json:"retry_policy,omitempty"`
	CallbackTimeout string       `json:"callback_timeout,omitempty"`
	// StartAt and EndAt bound the occurrences (Unix ms; 0: unbounded).
	StartAt int64 `json:"start_at,omitempty"`
	EndAt   int64 `json:"end_at,omitempty"`
	Paused  bool  `json:"paused"`

	// Read-only, set by the server (encoded even when zero, as for Job).
	Collection string `json:"collection"`
	NextFireAt int64  `json:"next_fire_at"`
	LastFireAt int64  `json:"last_fire_at"`
	LastStatus string `json:"last_status"`
	// Missed counts occurrences skipped because no node could fire them in
	// time (only the most recent missed one fires).
	Missed    int64 `json:"missed"`
	Version   int64 `json:"version"`
	CreatedAt int64 `json:"created_at"`
	UpdatedAt int64 `json:"updated_at"`
}

type scheduleSpec struct {
	Cron            string       `json:"cron,omitempty"`
	Every           string       `json:"every,omitempty"`
	Timezone        string       `json:"timezone,omitempty"`
	CallbackURL     string       `json:"callback_url,omitempty"`
	Route           string       `json:"route,omitempty"`
	Meta            Meta         `json:"meta,omitempty"`
	RetryPolicy     *RetryPolicy `json:"retry_policy,omitempty"`
	CallbackTimeout string       `json:"callback_timeout,omitempty"`
	StartAt         int64        `json:"start_at,omitempty"`
	EndAt           int64        `json:"end_at,omitempty"`
	Paused          bool         `json:"paused,omitempty"`
}

// ListSchedulesOptions pages ListSchedules and Schedules.
type ListSchedulesOptions struct {
	Limit  int
	Cursor string
}

// SchedulePage is one page of ListSchedules. NextCursor is empty on the
// last page.
type SchedulePage struct {
	Schedules  []Schedule `json:"schedules"`
	NextCursor string     `json:"next_cursor"`
}

// OccurrenceID is the job id of a schedule's occurrence at unix ms at:
// "{schedule id}@{at}".
func OccurrenceID(scheduleID string, at int64) string {
	return scheduleID + "@" + strconv.FormatInt(at, 10)
}

// ParseOccurrenceID splits an occurrence's job id into the schedule id and
// the occurrence time (Unix ms). ok is false for an id of another form. A
// schedule id may itself contain '@': the split is at the last one.
func ParseOccurrenceID(id string) (scheduleID string, at int64, ok bool) {
	i := strings.LastIndexByte(id, '@')
	if i <= 0 || i == len(id)-1 {
		return "", 0, false
	}
	ms, err := strconv.ParseInt(id[i+1:], 10, 64)
	if err != nil || id[i+1] == '+' || id[i+1] == '-' {
		return "", 0, false
	}
	return id[:i], ms, true
}

// Collection is a namespace of jobs and its defaults (docs/api.md#collections). The
// signing secret is write-only: the server never echoes it, and reports
// SigningSecretSet instead.
type Collection struct {
	// Name is taken from the request path; it is not sent in the body.
	Name            string       `json:"name,omitempty"`
	RetryPolicy     *RetryPolicy `json:"retry_policy,omitempty"`
	CallbackTimeout string       `json:"callback_timeout,omitempty"`
	// Retention is how long finished jobs stay readable (default 24h).
	Retention string `json:"retention,omitempty"`
	// SigningSecret is "whsec_" + base64 of 24–64 bytes (webhook.NewSecret
	// makes one); callbacks are then signed (Standard Webhooks).
	SigningSecret string `json:"signing_secret,omitempty"`

	// Read-only, set by the server (encoded even when zero, as for Job).
	SigningSecretSet bool   `json:"signing_secret_set"`
	Status           string `json:"status"` // "active", or "deleting"
	CreatedAt        int64  `json:"created_at"`
	UpdatedAt        int64  `json:"updated_at"`
}

type collectionSpec struct {
	RetryPolicy     *RetryPolicy `json:"retry_policy,omitempty"`
	CallbackTimeout string       `json:"callback_timeout,omitempty"`
	Retention       string       `json:"retention,omitempty"`
	SigningSecret   string       `json:"signing_secret,omitempty"`
}

// RateLimit keeps a route's deliveries, cluster-wide, within PerSecond
// with bursts up to Burst.
type RateLimit struct {
	PerSecond float64 `json:"per_second"`
	Burst     int     `json:"burst,omitempty"`
}

// RouteBatch sends a route's due jobs together: up to MaxJobs per POST,
// waiting at most MaxWait (a Go duration) to fill a batch, never sending a
// job before its trigger time. Receivers answer per job (webhook.WriteBatch).
type RouteBatch struct {
	MaxJobs int    `json:"max_jobs"`
	MaxWait string `json:"max_wait,omitempty"`
}

// Route is a named webhook target (docs/api.md#routes). Jobs naming a route are
// delivered to the route's URL as it is at fire time. The signing secret is
// write-only, and header values that look like credentials come back
// redacted.
type Route struct {
	// Name is taken from the request path; it is not sent in the body.
	Name       string            `json:"name,omitempty"`
	WebhookURL string            `json:"webhook_url"`
	Headers    map[string]string `json:"headers"`
	// SigningSecret wins over the collection's.
	SigningSecret string `json:"signing_secret,omitempty"`
	Timeout       string `json:"timeout,omitempty"`
	// Delivery control, all optional.
	RateLimit   *RateLimit  `json:"rate_limit,omitempty"`
	MaxInFlight int         `json:"max_in_flight,omitempty"`
	Batch       *RouteBatch `json:"batch,omitempty"`
	// Pipeline sends the route's callbacks HTTP/1.1-pipelined, several
	// on one connection before their answers arrive: less work per
	// callback on both ends for a fast receiver, which must answer
	// pipelined requests in order (docs/api.md#route-delivery-control).
	Pipeline bool `json:"pipeline,omitempty"`

	// Read-only, set by the server (encoded even when zero, as for Job).
	SigningSecretSet bool  `json:"signing_secret_set"`
	CreatedAt        int64 `json:"created_at"`
	UpdatedAt        int64 `json:"updated_at"`
}

type routeSpec struct {
	WebhookURL    string            `json:"webhook_url"`
	Headers       map[string]string `json:"headers,omitempty"`
	SigningSecret string            `json:"signing_secret,omitempty"`
	Timeout       string            `json:"timeout,omitempty"`
	RateLimit     *RateLimit        `json:"rate_limit,omitempty"`
	MaxInFlight   int               `json:"max_in_flight,omitempty"`
	Batch         *RouteBatch       `json:"batch,omitempty"`
	Pipeline      bool              `json:"pipeline,omitempty"`
}

// Slot states in ClusterInfo.
const (
	SlotHealthy  = "healthy"   // a leader, every replica caught up
	SlotMoving   = "moving"    // membership is changing toward Target
	SlotDegraded = "degraded"  // a replica is down or behind
	SlotNoLeader = "no_leader" // no leader: writes to it answer unavailable
)

// Node statuses in ClusterInfo.
const (
	NodeAlive       = "alive"
	NodeDraining    = "draining"
	NodeFailed      = "failed"
	NodeLeft        = "left"
	NodeUnreachable = "unreachable"
)

// ClusterInfo is GET /v1/cluster (docs/api.md#cluster-and-admin).
type ClusterInfo struct {
	SlotCount         int        `json:"slot_count"`
	ReplicationFactor int        `json:"replication_factor"`
	Nodes             []NodeInfo `json:"nodes"`
	Slots             []SlotInfo `json:"slots"`
	// Beyond the contract, filled when the server reports them: the
	// answering node's id and the meta group's leader.
	Self       string `json:"self,omitempty"`
	MetaLeader string `json:"meta_leader,omitempty"`
	// Moves is the meta leader's record of slot moves (nil when none was
	// reported).
	Moves *MoveProgress `json:"moves,omitempty"`
}

// MoveProgress counts slot moves (a slot moves while its raft
// configuration differs from its target). A round starts when a slot
// starts moving with none moving before.
type MoveProgress struct {
	Pending    int   `json:"pending"` // slots still moving
	Active     int   `json:"active"`  // of those, being worked on now
	Done       int   `json:"done"`    // slots that reached their target this round
	Total      int   `json:"total"`   // Done + Pending
	StartedAt  int64 `json:"started_at,omitempty"`
	FinishedAt int64 `json:"finished_at,omitempty"`
}

// TransferResult is the answer of TransferSlot.
type TransferResult struct {
	Slot int    `json:"slot"`
	From string `json:"from"` // who led when the request arrived
	To   string `json:"to"`
	// Leader is who led when the answer was sent: To once the transfer
	// happened, From (or "") while it is still under way.
	Leader          string `json:"leader"`
	PreferredLeader string `json:"preferred_leader"`
}

// DrainResult is the answer of Drain: what the node holds and leads now.
type DrainResult struct {
	Node     string `json:"node"`
	Status   string `json:"status"`
	Replicas int    `json:"replicas"`
	SlotsLed int    `json:"slots_led"`
}

// NotHealthy returns the slots whose state is not SlotHealthy.
func (ci *ClusterInfo) NotHealthy() []SlotInfo {
	var out []SlotInfo
	for _, s := range ci.Slots {
		if s.State != SlotHealthy {
			out = append(out, s)
		}
	}
	return out
}

// Node returns the node with the id, if the cluster has it.
func (ci *ClusterInfo) Node(id string) (NodeInfo, bool) {
	for _, n := range ci.Nodes {
		if n.ID == id {
			return n, true
		}
	}
	return NodeInfo{}, false
}

// NodeInfo is one member of the cluster as GET /v1/cluster reports it.
type NodeInfo struct {
	ID       string `json:"id"`
	HTTPAddr string `json:"http_addr"`
	BindAddr string `json:"bind_addr,omitempty"` // beyond the contract; may be empty
	Status   string `json:"status"`              // NodeAlive, NodeDraining, ...
	SlotsLed int    `json:"slots_led"`
	// Replicas is the number of slot replicas the node holds.
	Replicas int `json:"replicas"`
}

// SlotInfo is one hash slot. Leader and Replicas are what is (the raft
// configuration), not a target; Leader is empty when the slot has none.
type SlotInfo struct {
	Slot     int      `json:"slot"`
	Leader   string   `json:"leader"`
	Replicas []string `json:"replicas"`
	// Nonvoters are replicas being filled (beyond the contract).
	Nonvoters []string `json:"nonvoters,omitempty"`
	State     string   `json:"state"` // SlotHealthy, SlotMoving, ...
	// Target is the replica set a moving slot is heading for.
	Target []string `json:"target,omitempty"`
	// PreferredLeader is the node an operator asked to lead the slot
	// (TransferSlot), when there is one (beyond the contract).
	PreferredLeader string `json:"preferred_leader,omitempty"`
	// Pending is the slot's scheduled job count when the server reports it
	// (beyond the contract).
	Pending int64 `json:"pending,omitempty"`
}

// Move is one step of a rebalance plan: a replica (Kind "replica") or the
// leadership (Kind "leader") of Slot goes From one node To another.
type Move struct {
	Slot int    `json:"slot"`
	From string `json:"from"`
	To   string `json:"to"`
	Kind string `json:"kind,omitempty"`
}

// RebalanceResult is the answer of Rebalance: the moves planned (DryRun) or
// started.
type RebalanceResult struct {
	Moves  []Move `json:"moves"`
	DryRun bool   `json:"dry_run"`
}

// CompactResult is the answer of Compact: one entry per node.
type CompactResult struct {
	Results []NodeCompaction `json:"results"`
}

// NodeCompaction is one node's compaction.
type NodeCompaction struct {
	Node  string `json:"node"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	// TookMs is how long it took, in milliseconds.
	TookMs int64 `json:"took_ms"`
	// SlotsSnapshotted counts the slots whose raft log was truncated.
	SlotsSnapshotted int `json:"slots_snapshotted"`
}
