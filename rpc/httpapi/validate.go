package httpapi

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/timemachine-db/timemachine/model"
)

// Validation of names, ids, URLs, secrets and headers lives in model, with
// the limits; what is left here is parsing of the API's own textual forms.

// Shorthands for model's validation, as the handlers use them.
var (
	checkName    = model.CheckName
	checkID      = model.CheckID
	checkURL     = model.CheckURL
	checkSecret  = model.CheckSecret
	checkHeaders = model.CheckHeaders
	validID      = model.ValidID
	clip         = model.Clip
	quoteByte    = model.QuoteByte
)

// Duration bounds of the API's duration fields.
const (
	minCallbackTimeout = model.MinCallbackTimeout
	maxCallbackTimeout = model.MaxCallbackTimeout
	minRetention       = model.MinRetention
	maxRetention       = model.MaxRetention
	minInterval        = model.MinRetryInterval
	maxTriggerMs       = model.MaxTriggerMs
)

// parseDurationMs parses a Go duration string within [lo, hi] and returns
// whole milliseconds (sub-millisecond parts are dropped; the API's
// resolution is the millisecond).
func parseDurationMs(path string, raw []byte, lo, hi time.Duration) (int64, *model.Error) {
	s, e := str(path, raw)
	if e != nil {
		return 0, model.Invalid("%s: must be a Go duration string such as \"10s\", \"1500ms\" or \"2h\", got %s %s", path, jsonKind(raw), shown(raw))
	}
	return durationText(path, s, lo, hi)
}

func durationText(path, s string, lo, hi time.Duration) (int64, *model.Error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, model.Invalid("%s: must be a Go duration string such as \"10s\", \"1500ms\" or \"2h\", got %q", path, clip(s))
	}
	if d < 0 {
		return 0, model.Invalid("%s: must not be negative, got %q", path, s)
	}
	ms := int64(d / time.Millisecond)
	if time.Duration(ms)*time.Millisecond < lo || d > hi {
		return 0, model.Invalid("%s: must be from %v to %v, got %q", path, lo, hi, s)
	}
	return ms, nil
}

// parseTimeText parses a time as unix milliseconds ("1767225600000") or
// RFC 3339 ("2026-01-01T00:00:00Z"). Sub-millisecond RFC 3339 times round
// up, so a job never fires before the instant it was given.
func parseTimeText(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	if c := s[0]; c == '-' || c >= '0' && c <= '9' {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, true
		}
	}
	// RFC 3339 (§5.6) lets "T" and "Z" be written in lower case; Go's
	// layout wants them upper case, and nothing else in a valid time has
	// a letter.
	t, err := time.Parse(time.RFC3339Nano, strings.ToUpper(s))
	if err != nil {
		return 0, false
	}
	ms := t.UnixMilli()
	if t.After(time.UnixMilli(ms)) && ms < math.MaxInt64 {
		ms++
	}
	return ms, true
}
