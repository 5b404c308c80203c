package httpapi

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/timemachine-db/timemachine/model"
)

// jobFields are the writable members of a job object; jobReadOnly are the
// members the API renders and accepts back but ignores, so a client can PUT
// what it got from a GET.
var jobFields = newFieldSet(
	[]string{"id", "trigger_time", "delay", "callback_url", "route", "meta", "retry_policy", "callback_timeout"},
	[]string{"collection", "status", "attempts", "last_error", "version", "created_at", "updated_at", "finished_at", "next_attempt_at", "schedule"},
)

var retryFields = newFieldSet(
	[]string{"max_attempts", "initial_interval", "multiplier", "max_interval", "max_age"},
	nil,
)

// jobParser turns job objects into JobSpecs. now is read once per request,
// so every "delay" of a batch is relative to the same instant.
type jobParser struct {
	coll         string
	maxMetaBytes int
	now          time.Time
	lastURL      string // the last callback_url that passed checkURL
	// target vets a callback_url against the egress policy (nil: none).
	target func(field, rawURL string) *model.Error
}

// parse validates one job object. pathID is the id from a PUT path ("" for
// POST). It returns the id as given (possibly "", and possibly invalid,
// for echoing in a batch result) and the spec, or an error.
func (p *jobParser) parse(o object, pathID string) (id string, spec model.JobSpec, e *model.Error) {
	// The id first, so that a batch result can name the item whatever else
	// is wrong with it.
	idRaw, hasID := o.field("id")
	if hasID {
		if id, e = str("id", idRaw); e != nil {
			return "", spec, e
		}
	}
	if e := jobFields.check("", o); e != nil {
		return id, spec, e
	}
	if hasID {
		if pathID != "" && id != pathID {
			return id, spec, model.Invalid("id: the body says %q but the path says %q; leave it out or make them match", clip(id), pathID)
		}
		if e := checkID(id); e != nil {
			if id == "" {
				return id, spec, model.Invalid("id: must not be empty; leave it out to have one generated")
			}
			return id, spec, e
		}
	} else {
		id = pathID
	}
	if raw, ok := o.field("collection"); ok {
		c, e := str("collection", raw)
		if e != nil {
			return id, spec, e
		}
		if c != p.coll {
			return id, spec, model.Invalid("collection: the body says %q but the path says %q; the path decides, so leave it out or make them match", clip(c), p.coll)
		}
	}

	// Trigger: exactly one of trigger_time and delay.
	tRaw, hasT := o.field("trigger_time")
	dRaw, hasD := o.field("delay")
	var given string
	switch {
	case hasT && hasD:
		return id, spec, model.Invalid("trigger_time and delay are conflicting: give exactly one (trigger_time is absolute, delay is relative to receipt)")
	case !hasT && !hasD:
		return id, spec, model.Invalid("trigger_time is missing: give trigger_time (unix milliseconds or an RFC 3339 time) or delay (a Go duration such as \"90s\")")
	case hasT:
		spec.TriggerTime, given, e = triggerTime(tRaw)
	default:
		spec.TriggerTime, given, e = p.delay(dRaw)
	}
	if e != nil {
		return id, spec, e
	}

	// Target: exactly one of callback_url and route.
	uRaw, hasU := o.field("callback_url")
	rRaw, hasR := o.field("route")
	switch {
	case hasU && hasR:
		return id, spec, model.Invalid("callback_url and route are conflicting: give exactly one")
	case !hasU && !hasR:
		return id, spec, model.Invalid("callback_url is missing: give callback_url (an absolute http or https URL) or route (the name of a route)")
	case hasU:
		if spec.CallbackURL, e = str("callback_url", uRaw); e != nil {
			return id, spec, e
		}
		// The jobs of a batch usually share a URL: validate it once.
		if p.lastURL == "" || spec.CallbackURL != p.lastURL {
			if e := checkURL("callback_url", spec.CallbackURL); e != nil {
				return id, spec, e
			}
			if p.target != nil {
				if e := p.target("callback_url", spec.CallbackURL); e != nil {
					return id, spec, e
				}
			}
			p.lastURL = spec.CallbackURL
		}
	default:
		if spec.Route, e = str("route", rRaw); e != nil {
			return id, spec, e
		}
		if e := checkName("route name", spec.Route); e != nil {
			return id, spec, e
		}
	}

	if raw, ok := o.field("retry_policy"); ok {
		if spec.Retry, e = retryPolicy("retry_policy", raw); e != nil {
			return id, spec, e
		}
	}
	if raw, ok := o.field("callback_timeout"); ok {
		if spec.CallbackTimeoutMs, e = parseDurationMs("callback_timeout", raw, minCallbackTimeout, maxCallbackTimeout); e != nil {
			return id, spec, e
		}
	}
	// meta last: it is the one check that answers 413 rather than 400, and
	// a request with both kinds of problem should hear about the 400 first.
	if raw, ok := o.field("meta"); ok {
		if len(raw) > p.maxMetaBytes {
			// Compaction can only shrink, so measure the compact form
			// before refusing.
			var buf bytes.Buffer
			buf.Grow(len(raw))
			if err := json.Compact(&buf, raw); err == nil && buf.Len() <= p.maxMetaBytes {
				spec.Meta = buf.Bytes()
			} else {
				return id, spec, model.TooLarge("meta: is %d bytes (compacted); at most %d bytes are allowed", buf.Len(), p.maxMetaBytes)
			}
		} else {
			spec.Meta = compact(raw)
		}
	}
	spec.Hash = HashSpec(&spec, given)
	return id, spec, nil
}

// compact returns raw compacted into a fresh slice (never aliasing raw).
func compact(raw []byte) []byte {
	needs := false
	inStr := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if inStr {
			if c == '\\' {
				i++
			} else if c == '"' {
				inStr = false
			}
			continue
		}
		if c == '"' {
			inStr = true
		} else if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			needs = true
			break
		}
	}
	if !needs {
		return append([]byte(nil), raw...)
	}
	var buf bytes.Buffer
	buf.Grow(len(raw))
	if err := json.Compact(&buf, raw); err != nil {
		return append([]byte(nil), raw...) // raw came from a successful decode; cannot happen
	}
	return buf.Bytes()
}

const triggerHelp = "must be unix milliseconds or an RFC 3339 time"

// triggerTime parses trigger_time: a JSON integer of unix milliseconds or a
// string (RFC 3339, or the milliseconds as text). It also returns the text
// as given, for the spec hash.
func triggerTime(raw []byte) (int64, string, *model.Error) {
	var ms int64
	var given string
	if raw[0] == '"' {
		s, e := str("trigger_time", raw)
		if e != nil {
			return 0, "", e
		}
		t, ok := parseTimeText(s)
		if !ok {
			return 0, "", model.Invalid("trigger_time: %s (like 1767225600000 or \"2026-01-01T00:00:00Z\"), got %q", triggerHelp, clip(s))
		}
		// Hashed as the instant, not the text: the same time written
		// another way (ms, "Z" or an offset) is the same spec, so a
		// retry that re-encodes its body is still recognised.
		ms, given = t, strconv.FormatInt(t, 10)
	} else {
		n, e := integer("trigger_time", raw, math.MinInt64, math.MaxInt64)
		if e != nil {
			return 0, "", model.Invalid("trigger_time: %s (like 1767225600000 or \"2026-01-01T00:00:00Z\"), got %s", triggerHelp, shown(raw))
		}
		// Hashed as the number, not its spelling (1893456000000.0 is
		// 1893456000000); an integer literal is its own decimal.
		ms, given = n, strconv.FormatInt(n, 10)
	}
	if ms < 0 {
		return 0, "", model.Invalid("trigger_time: must not be before 1970-01-01T00:00:00Z, got %s", shown(raw))
	}
	if ms >= maxTriggerMs {
		return 0, "", model.Invalid("trigger_time: must be before the year 10000 (less than %d ms), got %s", int64(maxTriggerMs), shown(raw))
	}
	return ms, given, nil
}

// delay parses delay, a Go duration relative to receipt.
func (p *jobParser) delay(raw []byte) (int64, string, *model.Error) {
	s, e := str("delay", raw)
	if e != nil {
		return 0, "", model.Invalid("delay: must be a Go duration string such as \"90s\" or \"2h\", got %s %s", jsonKind(raw), shown(raw))
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, "", model.Invalid("delay: must be a Go duration string such as \"90s\" or \"2h\", got %q", clip(s))
	}
	if d < 0 {
		return 0, "", model.Invalid("delay: must not be negative, got %q", s)
	}
	now := max(p.now.UnixMilli(), 0)
	// Round a sub-millisecond remainder up: never fire early.
	dms := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		dms++
	}
	if dms >= maxTriggerMs-now {
		return 0, "", model.Invalid("delay: %q puts the trigger time past the year 10000", s)
	}
	return now + dms, "delay:" + s, nil
}

// retryPolicy parses a retry_policy object; absent members stay 0 (unset).
func retryPolicy(path string, raw []byte) (model.RetryPolicy, *model.Error) {
	var rp model.RetryPolicy
	o, e := decodeObject(path, raw)
	if e != nil {
		return rp, e
	}
	if e := retryFields.check(path+".", o); e != nil {
		return rp, e
	}
	if v, ok := o.field("max_attempts"); ok {
		if rp.MaxAttempts, e = integer(path+".max_attempts", v, 1, 1000); e != nil {
			return rp, e
		}
	}
	durations := []struct {
		name string
		dst  *int64
	}{
		{"initial_interval", &rp.InitialIntervalMs},
		{"max_interval", &rp.MaxIntervalMs},
		{"max_age", &rp.MaxAgeMs},
	}
	for _, d := range durations {
		if v, ok := o.field(d.name); ok {
			if *d.dst, e = parseDurationMs(path+"."+d.name, v, minInterval, math.MaxInt64); e != nil {
				return rp, e
			}
		}
	}
	if v, ok := o.field("multiplier"); ok {
		if rp.Multiplier, e = number(path+".multiplier", v, 1, 100); e != nil {
			return rp, e
		}
	}
	return rp, nil
}
