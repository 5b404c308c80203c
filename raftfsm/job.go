package raftfsm

import (
	"encoding/binary"
	"fmt"

	"github.com/timemachine-db/timemachine/model"
)

// The record format: how a job is stored in its slot's key span (the key
// holds collection and id, the value everything else).

func appendRetry(dst []byte, p model.RetryPolicy) []byte {
	dst = binary.AppendVarint(dst, p.MaxAttempts)
	dst = binary.AppendVarint(dst, p.InitialIntervalMs)
	dst = putF64(dst, p.Multiplier)
	dst = binary.AppendVarint(dst, p.MaxIntervalMs)
	return binary.AppendVarint(dst, p.MaxAgeMs)
}

func (r *reader) retryPolicy() model.RetryPolicy {
	return model.RetryPolicy{
		MaxAttempts:       r.varint(),
		InitialIntervalMs: r.varint(),
		Multiplier:        r.f64(),
		MaxIntervalMs:     r.varint(),
		MaxAgeMs:          r.varint(),
	}
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
	fSchedule // the job is an occurrence of a schedule (its id follows)
)

// AppendRecord encodes j (without collection and id) after dst.
func AppendRecord(dst []byte, j *model.Job) []byte {
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
	if j.Schedule != "" {
		flags |= fSchedule
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
		dst = appendRetry(dst, j.Retry)
	}
	if flags&fTimeout != 0 {
		dst = binary.AppendVarint(dst, j.CallbackTimeoutMs)
	}
	if flags&fLastError != 0 {
		dst = putStr(dst, j.LastError)
	}
	if flags&fSchedule != 0 {
		dst = putStr(dst, j.Schedule)
	}
	return dst
}

// DecodeRecord decodes a record written by AppendRecord. The returned job
// does not alias b.
func DecodeRecord(b []byte, j *model.Job) error {
	r := reader{b: b}
	if v := r.byte(); v != recordV1 && r.err == nil {
		return fmt.Errorf("%w: record version %d (written by a newer binary?)", ErrCorrupt, v)
	}
	j.Status = model.Status(r.byte())
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
	j.FinishedAt, j.CallbackURL, j.Route, j.Meta, j.Retry, j.CallbackTimeoutMs, j.LastError, j.Schedule = 0, "", "", nil, model.RetryPolicy{}, 0, "", ""
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
	if flags&fSchedule != 0 {
		j.Schedule = r.str(maxStr)
	}
	if j.Status < model.StatusScheduled || j.Status > model.StatusFailed {
		r.fail("bad status")
	}
	return r.done()
}
