package client

import (
	"encoding/json"
)

// Job statuses as the server reports them.
const (
	StatusScheduled = "scheduled"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
)

// MaxBatch is the largest number of jobs one batch create may carry (API.md §3).
const MaxBatch = 1000

// RetryPolicy is a job's or a collection's retry policy. Every field is
// optional: an unset field (nil or "") is left out of the request, so the
// server takes the collection's value, then the built-in default. Durations
// are Go duration strings exactly as on the wire ("1s", "10m").
type RetryPolicy struct {
	MaxAttempts     *int     `json:"max_attempts,omitempty"`
	InitialInterval string   `json:"initial_interval,omitempty"`
	Multiplier      *float64 `json:"multiplier,omitempty"`
	MaxInterval     string   `json:"max_interval,omitempty"`
	MaxAge          string   `json:"max_age,omitempty"`
}

// Job is a one-shot timer. The first group of fields is what a caller sets;
// the second is filled in by the server and ignored on input (the client
// never sends it, so a job read with GetJob can be edited and PUT back).
type Job struct {
	// ID is 1–255 bytes of [A-Za-z0-9._:@~=+-]; the server generates one when
	// a POST leaves it empty.
	ID string `json:"id,omitempty"`
	// TriggerTime is Unix epoch milliseconds. Zero means unset (use Delay).
	TriggerTime int64 `json:"trigger_time,omitempty"`
	// Delay is relative to receipt ("90s"); an alternative to TriggerTime.
	// The server answers with the resolved TriggerTime, not the Delay.
	Delay string `json:"delay,omitempty"`
	// Exactly one of CallbackURL and Route is set.
	CallbackURL string `json:"callback_url,omitempty"`
	Route       string `json:"route,omitempty"`
	// Meta is any JSON value, echoed in the callback.
	Meta            json.RawMessage `json:"meta,omitempty"`
	RetryPolicy     *RetryPolicy    `json:"retry_policy,omitempty"`
	CallbackTimeout string          `json:"callback_timeout,omitempty"`

	// Read-only, set by the server.
	Collection string `json:"collection,omitempty"`
	Status     string `json:"status,omitempty"`
	Attempts   int    `json:"attempts,omitempty"`
	LastError  string `json:"last_error,omitempty"`
	Version    int64  `json:"version,omitempty"`
	CreatedAt  int64  `json:"created_at,omitempty"`
	UpdatedAt  int64  `json:"updated_at,omitempty"`
	FinishedAt int64  `json:"finished_at,omitempty"`
}

// jobSpec is the writable part of a Job: what the client sends. Sending the
// read-only fields would at best be ignored and at worst be rejected, and a
// caller who GETs a job, edits it and PUTs it back should not have to clear
// them by hand.
type jobSpec struct {
	ID              string          `json:"id,omitempty"`
	TriggerTime     int64           `json:"trigger_time,omitempty"`
	Delay           string          `json:"delay,omitempty"`
	CallbackURL     string          `json:"callback_url,omitempty"`
	Route           string          `json:"route,omitempty"`
	Meta            json.RawMessage `json:"meta,omitempty"`
	RetryPolicy     *RetryPolicy    `json:"retry_policy,omitempty"`
	CallbackTimeout string          `json:"callback_timeout,omitempty"`
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

// Collection is a namespace of jobs and its defaults. The signing secret is
// write-only: the server never echoes it.
type Collection struct {
	// Name is taken from the request path; it is not sent in the body.
	Name            string       `json:"name,omitempty"`
	RetryPolicy     *RetryPolicy `json:"retry_policy,omitempty"`
	CallbackTimeout string       `json:"callback_timeout,omitempty"`
	Retention       string       `json:"retention,omitempty"`
	SigningSecret   string       `json:"signing_secret,omitempty"`
}

type collectionSpec struct {
	RetryPolicy     *RetryPolicy `json:"retry_policy,omitempty"`
	CallbackTimeout string       `json:"callback_timeout,omitempty"`
	Retention       string       `json:"retention,omitempty"`
	SigningSecret   string       `json:"signing_secret,omitempty"`
}

// Route is a named webhook target. Jobs naming a route are delivered to the
// route's URL as it is at fire time. The signing secret is write-only.
type Route struct {
	// Name is taken from the request path; it is not sent in the body.
	Name          string            `json:"name,omitempty"`
	WebhookURL    string            `json:"webhook_url"`
	Headers       map[string]string `json:"headers,omitempty"`
	SigningSecret string            `json:"signing_secret,omitempty"`
	Timeout       string            `json:"timeout,omitempty"`
}

type routeSpec struct {
	WebhookURL    string            `json:"webhook_url"`
	Headers       map[string]string `json:"headers,omitempty"`
	SigningSecret string            `json:"signing_secret,omitempty"`
	Timeout       string            `json:"timeout,omitempty"`
}

// ClusterInfo is GET /v1/cluster.
type ClusterInfo struct {
	SlotCount         int        `json:"slot_count"`
	ReplicationFactor int        `json:"replication_factor"`
	Nodes             []NodeInfo `json:"nodes"`
	Slots             []SlotInfo `json:"slots"`
	// Beyond the contract, filled when the server reports them: the
	// answering node's id and the meta group's leader.
	Self       string `json:"self,omitempty"`
	MetaLeader string `json:"meta_leader,omitempty"`
}

// NodeInfo is one member of the cluster as GET /v1/cluster reports it.
type NodeInfo struct {
	ID       string `json:"id"`
	HTTPAddr string `json:"http_addr"`
	BindAddr string `json:"bind_addr,omitempty"` // beyond the contract; may be empty
	Status   string `json:"status"`
	SlotsLed int    `json:"slots_led"`
	// Replicas is the number of slot replicas the node holds.
	Replicas int `json:"replicas"`
}

// SlotInfo is one hash slot: its leader (empty when it has none), its
// replica set (node ids) and its state.
type SlotInfo struct {
	Slot     int      `json:"slot"`
	Leader   string   `json:"leader"`
	Replicas []string `json:"replicas"`
	State    string   `json:"state"`
	// Pending is the slot's scheduled job count when the server reports it
	// (beyond the contract).
	Pending int64 `json:"pending,omitempty"`
}

// BatchResult is the outcome of one job of a batch create, in input order.
// Status is the HTTP status that job alone would have got (201 created, 200
// already existed with the same spec, 409, 400, ...). Job is set on success,
// Error otherwise.
type BatchResult struct {
	ID     string    `json:"id"`
	Status int       `json:"status"`
	Job    *Job      `json:"job,omitempty"`
	Error  *APIError `json:"error,omitempty"`
}

// UnmarshalJSON decodes one entry of a batch answer. The per-item error has
// the contract's {"code","message"} shape; its HTTPStatus is the item's
// status, so errors.As and the Is* helpers work on it as on any other error.
func (r *BatchResult) UnmarshalJSON(b []byte) error {
	var w struct {
		ID     string     `json:"id"`
		Status int        `json:"status"`
		Job    *Job       `json:"job"`
		Error  *errorBody `json:"error"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*r = BatchResult{ID: w.ID, Status: w.Status, Job: w.Job}
	if w.Error != nil {
		r.Error = &APIError{HTTPStatus: w.Status, Code: w.Error.Code, Message: w.Error.Message}
	}
	return nil
}

// ListOptions filters and pages ListJobs. Zero values are left out of the
// query, so the server's defaults apply.
type ListOptions struct {
	Status string // scheduled, succeeded or failed
	From   *int64 // trigger_time lower bound, Unix ms
	To     *int64 // trigger_time upper bound, Unix ms
	Limit  int
	Cursor string // next_cursor of the previous page
}
