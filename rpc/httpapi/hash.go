package httpapi

import (
	"encoding/binary"
	"math"

	"github.com/cespare/xxhash/v2"

	"github.com/timemachine-db/timemachine/model"
)

// HashSpec computes JobSpec.Hash: what identifies a job's spec as the user
// gave it, so that a retried POST is recognised (200, same job) and a
// different one is not (409). triggerAsGiven is the trigger as the user
// gave it: an absolute time as its unix milliseconds in decimal
// ("1767225600000", whether it came as a number or as RFC 3339 text), a
// relative one as written ("delay:90s"), so a retried POST with a relative
// delay hashes the same. (Before 2026-11-27 an RFC 3339 time was hashed as
// its text: a retry straddling that upgrade answers 409.)
//
// The hash is stored with every job (SpecHash), so its input encoding is
// frozen: length-prefixed strings and bytes, varints, the multiplier as
// big-endian float bits — exactly as the first release computed it.
func HashSpec(s *model.JobSpec, triggerAsGiven string) uint64 {
	buf := make([]byte, 0, 64+len(triggerAsGiven)+len(s.CallbackURL)+len(s.Route)+len(s.Meta))
	buf = hashStr(buf, triggerAsGiven)
	buf = hashStr(buf, s.CallbackURL)
	buf = hashStr(buf, s.Route)
	buf = binary.AppendUvarint(buf, uint64(len(s.Meta)))
	buf = append(buf, s.Meta...)
	buf = binary.AppendVarint(buf, s.Retry.MaxAttempts)
	buf = binary.AppendVarint(buf, s.Retry.InitialIntervalMs)
	buf = binary.BigEndian.AppendUint64(buf, math.Float64bits(s.Retry.Multiplier))
	buf = binary.AppendVarint(buf, s.Retry.MaxIntervalMs)
	buf = binary.AppendVarint(buf, s.Retry.MaxAgeMs)
	buf = binary.AppendVarint(buf, s.CallbackTimeoutMs)
	return xxhash.Sum64(buf)
}

func hashStr(dst []byte, v string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	return append(dst, v...)
}
