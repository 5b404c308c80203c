package model

import (
	"fmt"
	"time"
)

// Status is a job's lifecycle state.
type Status uint8

// The states of a job. A scheduled job has an entry in its slot's due index;
// a finished one (succeeded or failed) has an entry in the finished index
// until its collection's retention removes it.
const (
	StatusScheduled Status = 1
	StatusSucceeded Status = 2
	StatusFailed    Status = 3
	// StatusFiring is never stored: the slot leader shows a scheduled job
	// whose callback is in flight with it (docs/api.md#jobs).
	StatusFiring Status = 4
)

// String is the API spelling of the status.
func (s Status) String() string {
	switch s {
	case StatusScheduled:
		return "scheduled"
	case StatusSucceeded:
		return "succeeded"
	case StatusFailed:
		return "failed"
	case StatusFiring:
		return "firing"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// ParseStatus is the inverse of String.
func ParseStatus(s string) (Status, bool) {
	switch s {
	case "scheduled":
		return StatusScheduled, true
	case "succeeded":
		return StatusSucceeded, true
	case "failed":
		return StatusFailed, true
	}
	return 0, false
}

// Finished reports whether the job will not fire again.
func (s Status) Finished() bool { return s == StatusSucceeded || s == StatusFailed }

// RetryPolicy is the retry schedule of a job or a collection. A zero field is
// unset and takes the next level's value (job → collection → defaults).
// Durations are milliseconds.
type RetryPolicy struct {
	MaxAttempts       int64
	InitialIntervalMs int64
	Multiplier        float64
	MaxIntervalMs     int64
	MaxAgeMs          int64
}

// DefaultRetryPolicy is the contract's default (docs/api.md#jobs: the
// create example spells it out).
var DefaultRetryPolicy = RetryPolicy{
	MaxAttempts:       5,
	InitialIntervalMs: 1000,
	Multiplier:        2.0,
	MaxIntervalMs:     10 * 60 * 1000,
	MaxAgeMs:          24 * 60 * 60 * 1000,
}

// Default callback timeout and retention (docs/api.md#collections).
const (
	DefaultCallbackTimeoutMs = 10_000
	DefaultRetentionMs       = 24 * 60 * 60 * 1000
)

// Or fills the unset fields of p from q.
func (p RetryPolicy) Or(q RetryPolicy) RetryPolicy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = q.MaxAttempts
	}
	if p.InitialIntervalMs == 0 {
		p.InitialIntervalMs = q.InitialIntervalMs
	}
	if p.Multiplier == 0 {
		p.Multiplier = q.Multiplier
	}
	if p.MaxIntervalMs == 0 {
		p.MaxIntervalMs = q.MaxIntervalMs
	}
	if p.MaxAgeMs == 0 {
		p.MaxAgeMs = q.MaxAgeMs
	}
	return p
}

// IsZero reports whether no field is set.
func (p RetryPolicy) IsZero() bool { return p == RetryPolicy{} }

// JobSpec is what a user specifies for a job: everything a create or an
// upsert carries. Hash identifies the spec as the user gave it, so a client
// that retries a POST (even one with a relative "delay") is recognised.
type JobSpec struct {
	TriggerTime       int64
	CallbackURL       string
	Route             string
	Meta              []byte // compact JSON, nil when absent
	Retry             RetryPolicy
	CallbackTimeoutMs int64
	Hash              uint64
}

// Job is the stored state of one job. Collection and ID live in the key and
// are filled in on decode.
type Job struct {
	Collection string
	ID         string

	Version           uint64
	Status            Status
	TriggerTime       int64 // ms; the occurrence the Idempotency-Key names
	DueTime           int64 // ms; next attempt (== TriggerTime until a retry)
	Attempts          int64
	CreatedAt         int64
	UpdatedAt         int64
	FinishedAt        int64
	CallbackURL       string
	Route             string
	Meta              []byte
	Retry             RetryPolicy
	CallbackTimeoutMs int64
	LastError         string
	SpecHash          uint64
	// Schedule names the schedule whose occurrence this job is ("" for a
	// job created on its own).
	Schedule string
}

// IdempotencyKey names one occurrence of a job; it is the same on every
// attempt of that occurrence (docs/api.md#the-callback).
func (j *Job) IdempotencyKey() string {
	return fmt.Sprintf("%s:%s:%d", j.Collection, j.ID, j.TriggerTime)
}

// Duration converts milliseconds to a time.Duration.
func Duration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// JobInput is one validated job of a create request.
type JobInput struct {
	ID   string
	Spec JobSpec
	// Err, when set, is the validation error of this batch item.
	Err *Error
}

// JobResult is the outcome of one create. Code is Created, Exists or
// Conflict; Err is set instead for any other failure.
type JobResult struct {
	ID   string
	Code Code
	Job  *Job
	Err  *Error
}
