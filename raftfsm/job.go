package raftfsm

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/cespare/xxhash/v2"
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

// DefaultRetryPolicy is the contract's default (API.md §3).
var DefaultRetryPolicy = RetryPolicy{
	MaxAttempts:       5,
	InitialIntervalMs: 1000,
	Multiplier:        2.0,
	MaxIntervalMs:     10 * 60 * 1000,
	MaxAgeMs:          24 * 60 * 60 * 1000,
}

// Default callback timeout and retention (API.md §3).
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

func (p RetryPolicy) append(dst []byte) []byte {
	dst = binary.AppendVarint(dst, p.MaxAttempts)
	dst = binary.AppendVarint(dst, p.InitialIntervalMs)
	dst = putF64(dst, p.Multiplier)
	dst = binary.AppendVarint(dst, p.MaxIntervalMs)
	return binary.AppendVarint(dst, p.MaxAgeMs)
}

func (r *reader) retryPolicy() RetryPolicy {
	return RetryPolicy{
		MaxAttempts:       r.varint(),
		InitialIntervalMs: r.varint(),
		Multiplier:        r.f64(),
		MaxIntervalMs:     r.varint(),
		MaxAgeMs:          r.varint(),
	}
}

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

// HashSpec computes JobSpec.Hash. triggerAsGiven is the trigger exactly as
// the user wrote it ("1767225600000", "2026-01-01T00:00:00Z" or "delay:90s").
func HashSpec(s *JobSpec, triggerAsGiven string) uint64 {
	h := xxhash.New()
	var buf []byte
	buf = putStr(buf, triggerAsGiven)
	buf = putStr(buf, s.CallbackURL)
	buf = putStr(buf, s.Route)
	buf = putBytes(buf, s.Meta)
	buf = s.Retry.append(buf)
	buf = binary.AppendVarint(buf, s.CallbackTimeoutMs)
	_, _ = h.Write(buf)
	return h.Sum64()
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
}

// recordV1 is the first (and so far only) record format.
const recordV1 = 1

// Optional-field flags of recordV1: absent fields cost nothing, which keeps
// a typical pending job near 100 bytes.
const (
	fURL = 1 << iota
	fRoute
	fMeta
	fRetry
	fTimeout
	fLastError
	fFinished
)

// AppendRecord encodes j (without collection and id) after dst.
func AppendRecord(dst []byte, j *Job) []byte {
	var flags uint64
	if j.CallbackURL != "" {
		flags |= fURL
	}
	if j.Route != "" {
		flags |= fRoute
	}
	if j.Meta != nil {
		flags |= fMeta
	}
	if !j.Retry.IsZero() {
		flags |= fRetry
	}
	if j.CallbackTimeoutMs != 0 {
		flags |= fTimeout
	}
	if j.LastError != "" {
		flags |= fLastError
	}
	if j.FinishedAt != 0 {
		flags |= fFinished
	}
	dst = append(dst, recordV1, byte(j.Status))
	dst = binary.AppendUvarint(dst, flags)
	dst = binary.AppendUvarint(dst, j.Version)
	dst = binary.AppendVarint(dst, j.TriggerTime)
	dst = binary.AppendVarint(dst, j.DueTime-j.TriggerTime)
	dst = binary.AppendVarint(dst, j.Attempts)
	dst = binary.AppendVarint(dst, j.CreatedAt)
	dst = binary.AppendVarint(dst, j.UpdatedAt-j.CreatedAt)
	dst = binary.LittleEndian.AppendUint64(dst, j.SpecHash)
	if flags&fFinished != 0 {
		dst = binary.AppendVarint(dst, j.FinishedAt-j.CreatedAt)
	}
	if flags&fURL != 0 {
		dst = putStr(dst, j.CallbackURL)
	}
	if flags&fRoute != 0 {
		dst = putStr(dst, j.Route)
	}
	if flags&fMeta != 0 {
		dst = putBytes(dst, j.Meta)
	}
	if flags&fRetry != 0 {
		dst = j.Retry.append(dst)
	}
	if flags&fTimeout != 0 {
		dst = binary.AppendVarint(dst, j.CallbackTimeoutMs)
	}
	if flags&fLastError != 0 {
		dst = putStr(dst, j.LastError)
	}
	return dst
}

// DecodeRecord decodes a record written by AppendRecord. The returned job
// does not alias b.
func DecodeRecord(b []byte, j *Job) error {
	r := reader{b: b}
	if v := r.byte(); v != recordV1 && r.err == nil {
		return fmt.Errorf("%w: record version %d (written by a newer binary?)", ErrCorrupt, v)
	}
	j.Status = Status(r.byte())
	flags := r.uvarint()
	j.Version = r.uvarint()
	j.TriggerTime = r.varint()
	j.DueTime = j.TriggerTime + r.varint()
	j.Attempts = r.varint()
	j.CreatedAt = r.varint()
	j.UpdatedAt = j.CreatedAt + r.varint()
	if r.err == nil && len(r.b) >= 8 {
		j.SpecHash = binary.LittleEndian.Uint64(r.b)
		r.b = r.b[8:]
	} else {
		r.fail("short spec hash")
	}
	j.FinishedAt, j.CallbackURL, j.Route, j.Meta, j.Retry, j.CallbackTimeoutMs, j.LastError = 0, "", "", nil, RetryPolicy{}, 0, ""
	if flags&fFinished != 0 {
		j.FinishedAt = j.CreatedAt + r.varint()
	}
	if flags&fURL != 0 {
		j.CallbackURL = r.str(maxStr)
	}
	if flags&fRoute != 0 {
		j.Route = r.str(maxStr)
	}
	if flags&fMeta != 0 {
		j.Meta = append([]byte{}, r.bytes(maxMeta)...)
	}
	if flags&fRetry != 0 {
		j.Retry = r.retryPolicy()
	}
	if flags&fTimeout != 0 {
		j.CallbackTimeoutMs = r.varint()
	}
	if flags&fLastError != 0 {
		j.LastError = r.str(maxStr)
	}
	if j.Status < StatusScheduled || j.Status > StatusFailed {
		r.fail("bad status")
	}
	return r.done()
}

// IdempotencyKey names one occurrence of a job; it is the same on every
// attempt of that occurrence (API.md §4).
func (j *Job) IdempotencyKey() string {
	return fmt.Sprintf("%s:%s:%d", j.Collection, j.ID, j.TriggerTime)
}

// Duration converts milliseconds to a time.Duration.
func Duration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
