package httpapi

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/timemachine-db/timemachine/model"
)

// Rendering appends JSON to a byte slice by hand: a 1000-job batch or page
// is rendered in one buffer without reflection, and the field order is the
// contract's.

// appendString appends s as a JSON string, escaping like encoding/json
// (invalid UTF-8 becomes U+FFFD; U+2028 and U+2029 are escaped so the
// output is also valid JavaScript).
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendKey appends ,"key": (or "key": after '{').
// appendMeta appends the "meta" field: the stored JSON as it is, or {} for
// an object written without meta, so that "meta" is always there as the
// contract's job object and callback body show it (API.md §3, §4).
func appendMeta(b []byte, meta []byte) []byte {
	b = appendKey(b, "meta")
	if len(meta) == 0 {
		return append(b, '{', '}')
	}
	return append(b, meta...)
}

func appendKey(b []byte, key string) []byte {
	if n := len(b); n > 0 && b[n-1] != '{' && b[n-1] != '[' {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, key...)
	return append(b, '"', ':')
}

func appendStrField(b []byte, key, v string) []byte {
	return appendString(appendKey(b, key), v)
}

func appendIntField(b []byte, key string, v int64) []byte {
	return strconv.AppendInt(appendKey(b, key), v, 10)
}

func appendBoolField(b []byte, key string, v bool) []byte {
	return strconv.AppendBool(appendKey(b, key), v)
}

// durationString renders milliseconds as a Go duration in its short form,
// the one API.md writes ("10m", "24h", "1h30m", "1m30s", "1.5s"): Go's
// String() with the trailing zero units dropped ("10m0s" → "10m"), which
// time.ParseDuration reads back to the same value.
func durationString(ms int64) string {
	if ms > math.MaxInt64/int64(time.Millisecond) {
		ms = math.MaxInt64 / int64(time.Millisecond)
	}
	s := model.Duration(ms).String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, '0')
	}
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		return strconv.AppendFloat(b, f, 'e', -1, 64)
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64)
}

// appendRetry renders a retry policy (callers pass the effective one).
func appendRetry(b []byte, p model.RetryPolicy) []byte {
	b = append(b, '{')
	b = appendIntField(b, "max_attempts", p.MaxAttempts)
	b = appendStrField(b, "initial_interval", durationString(p.InitialIntervalMs))
	b = appendFloat(appendKey(b, "multiplier"), p.Multiplier)
	b = appendStrField(b, "max_interval", durationString(p.MaxIntervalMs))
	b = appendStrField(b, "max_age", durationString(p.MaxAgeMs))
	return append(b, '}')
}

// effective computes a job's effective retry policy and callback timeout
// as the slot leader delivers it: the job's own fields, else (the timeout)
// its route's, else its collection's, else the defaults. rt is the job's
// route (nil: none or unknown).
func effective(j *model.Job, c *model.Collection, rt *model.Route) (model.RetryPolicy, int64) {
	p := j.Retry
	timeout := j.CallbackTimeoutMs
	if timeout <= 0 && rt != nil {
		timeout = rt.TimeoutMs
	}
	if c != nil {
		p = p.Or(c.Retry)
		if timeout <= 0 {
			timeout = c.CallbackTimeoutMs
		}
	}
	if timeout <= 0 {
		timeout = model.DefaultCallbackTimeoutMs
	}
	return p.Or(model.DefaultRetryPolicy), timeout
}

// appendJob renders a job. c is its collection (nil: defaults), rt its
// route (nil: none or unknown).
func appendJob(b []byte, j *model.Job, c *model.Collection, rt *model.Route) []byte {
	var pc policyCache
	return pc.appendJob(b, j, c, rt)
}

// policyCache remembers the rendering of the last effective retry policy
// and timeout: the jobs of a page or batch nearly always share them, and
// formatting five durations per job was a tenth of a batch's cost.
type policyCache struct {
	policy  model.RetryPolicy
	timeout int64
	text    []byte // `"retry_policy":{…},"callback_timeout":"…"`
}

func (pc *policyCache) appendJob(b []byte, j *model.Job, c *model.Collection, rt *model.Route) []byte {
	b = append(b, '{')
	b = appendStrField(b, "id", j.ID)
	b = appendStrField(b, "collection", j.Collection)
	b = appendIntField(b, "trigger_time", j.TriggerTime)
	if j.CallbackURL != "" {
		b = appendStrField(b, "callback_url", j.CallbackURL)
	}
	if j.Route != "" {
		b = appendStrField(b, "route", j.Route)
	}
	b = appendMeta(b, j.Meta)
	if j.Schedule != "" {
		b = appendStrField(b, "schedule", j.Schedule)
	}
	retry, timeout := effective(j, c, rt)
	if pc.text == nil || pc.policy != retry || pc.timeout != timeout {
		t := appendRetry(appendKey(pc.text[:0], "retry_policy"), retry)
		pc.policy, pc.timeout, pc.text = retry, timeout, appendStrField(t, "callback_timeout", durationString(timeout))
	}
	b = append(b, ',')
	b = append(b, pc.text...)
	b = appendStrField(b, "status", statusString(j.Status))
	b = appendIntField(b, "attempts", j.Attempts)
	b = appendStrField(b, "last_error", j.LastError)
	b = strconv.AppendUint(appendKey(b, "version"), j.Version, 10)
	b = appendIntField(b, "created_at", j.CreatedAt)
	b = appendIntField(b, "updated_at", j.UpdatedAt)
	b = appendIntField(b, "finished_at", j.FinishedAt)
	if j.Status == model.StatusScheduled {
		b = appendIntField(b, "next_attempt_at", j.DueTime)
	}
	return append(b, '}')
}

func statusString(s model.Status) string {
	if s == 0 {
		return model.StatusScheduled.String()
	}
	return s.String()
}

// jobRenderer renders jobs of one collection, looking the collection up
// once rather than once per job.
type jobRenderer struct {
	s      *Server
	coll   string
	c      *model.Collection
	looked bool
	pc     policyCache
}

func (r *jobRenderer) append(b []byte, j *model.Job) []byte {
	if !r.looked || j.Collection != r.coll {
		r.coll, r.c, r.looked = j.Collection, r.s.collection(j.Collection), true
	}
	var rt *model.Route
	if j.Route != "" && r.s.o.LookupRoute != nil {
		rt = r.s.o.LookupRoute(j.Route)
	}
	return r.pc.appendJob(b, j, r.c, rt)
}

// appendCollection renders a collection with its effective settings; the
// signing secret is never rendered, only whether one is set.
func appendCollection(b []byte, c *model.Collection) []byte {
	b = append(b, '{')
	b = appendStrField(b, "name", c.Name)
	b = appendRetry(appendKey(b, "retry_policy"), c.EffectiveRetry())
	b = appendStrField(b, "callback_timeout", durationString(c.EffectiveTimeoutMs()))
	b = appendStrField(b, "retention", durationString(c.EffectiveRetentionMs()))
	b = appendBoolField(b, "signing_secret_set", c.SigningSecret != "")
	status := "active"
	if c.Deleting {
		status = "deleting"
	}
	b = appendStrField(b, "status", status)
	b = appendIntField(b, "created_at", c.CreatedAt)
	b = appendIntField(b, "updated_at", c.UpdatedAt)
	return append(b, '}')
}

// appendRoute renders a route. Sensitive header values are model.Redacted and the
// signing secret is never rendered.
func appendRoute(b []byte, r *model.Route) []byte {
	b = append(b, '{')
	b = appendStrField(b, "name", r.Name)
	b = appendStrField(b, "webhook_url", r.WebhookURL)
	b = append(appendKey(b, "headers"), '{')
	for i, k := range sortedKeys(r.Headers) {
		v := r.Headers[k]
		if model.SensitiveHeader(k) {
			v = model.Redacted
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(appendString(b, k), ':')
		b = appendString(b, v)
	}
	b = append(b, '}')
	if r.TimeoutMs > 0 {
		b = appendStrField(b, "timeout", durationString(r.TimeoutMs))
	}
	if r.RateLimit.Set() {
		b = append(appendKey(b, "rate_limit"), '{')
		b = appendFloat(append(b, `"per_second":`...), r.RateLimit.PerSecond)
		b = appendIntField(b, "burst", r.RateLimit.EffectiveBurst())
		b = append(b, '}')
	}
	if r.MaxInFlight > 0 {
		b = appendIntField(b, "max_in_flight", r.MaxInFlight)
	}
	if r.Batch.Set() {
		b = append(appendKey(b, "batch"), '{')
		b = append(b, `"max_jobs":`...)
		b = strconv.AppendInt(b, r.Batch.MaxJobs, 10)
		b = appendStrField(b, "max_wait", durationString(r.Batch.MaxWaitMs))
		b = append(b, '}')
	}
	if r.Pipeline {
		b = appendBoolField(b, "pipeline", true)
	}
	b = appendBoolField(b, "signing_secret_set", r.SigningSecret != "")
	b = appendIntField(b, "created_at", r.CreatedAt)
	b = appendIntField(b, "updated_at", r.UpdatedAt)
	return append(b, '}')
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// appendErrorObject renders {"code":…,"message":…}.
func appendErrorObject(b []byte, e *model.Error) []byte {
	b = append(b, '{')
	b = appendStrField(b, "code", string(e.Kind))
	b = appendStrField(b, "message", e.Message)
	return append(b, '}')
}

// appendErrorBody renders the contract's error body.
func appendErrorBody(b []byte, e *model.Error) []byte {
	b = append(b, `{"error":`...)
	b = appendErrorObject(b, e)
	return append(b, '}')
}
