package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// SnippetMax is the most of a response body kept in Result.BodySnippet: enough
// to show a receiver's error message in last_error, small enough that a job's
// record stays small however chatty the receiver is.
const SnippetMax = 256

// parseRetryAfter reads a Retry-After value (RFC 9110 §10.2.3): either
// delta-seconds or an HTTP-date. A date is turned into a wait relative to the
// Now the request was stamped with, so the result does not depend on how long
// the exchange took. A date in the past means "now" (0), not an error, since
// the receiver clearly meant "you may retry". Values that are neither form are
// ignored, the same as a missing header.
func parseRetryAfter(v []byte, now time.Time) (time.Duration, bool) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return 0, false
	}
	if isDigits(v) {
		const maxSecs = int64(math.MaxInt64 / int64(time.Second))
		secs, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil || secs > maxSecs { // only overflow can fail here
			secs = maxSecs
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(string(v))
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

func isDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}

// minRescheduleAt is 2000-01-01T00:00:00Z in unix ms. Anything earlier is far
// more likely a unix-seconds value sent by mistake than a real date, and
// honouring it would make the job fire again at once, possibly forever.
const minRescheduleAt = 946684800000

var rescheduleMarker = []byte(`"reschedule_`)

// parseReschedule looks for reschedule_at / reschedule_in in a 2xx body.
//
// A body that does not mention them, or is not a JSON object at all ("OK",
// HTML, an array), is simply not a reschedule: receivers answer with all
// sorts of bodies and none of them should turn a success into an error. Only
// when the receiver evidently tried to reschedule and we cannot honour it
// exactly is an error returned, so the caller can surface it instead of
// silently marking the job done.
func parseReschedule(body []byte, complete bool, readErr error, limit int) (at int64, in time.Duration, err error) {
	if !bytes.Contains(body, rescheduleMarker) {
		return 0, 0, nil
	}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return 0, 0, nil
	}
	if !complete {
		if readErr != nil {
			return 0, 0, fmt.Errorf("the response body could not be read to the end (%v), so its reschedule_at/reschedule_in could not be used", readErr)
		}
		return 0, 0, fmt.Errorf("the response body is larger than %d bytes, so its reschedule_at/reschedule_in was not read; keep rescheduling answers small", limit)
	}
	var fields map[string]json.RawMessage
	if e := json.Unmarshal(body, &fields); e != nil {
		return 0, 0, fmt.Errorf("the response body mentions reschedule_ but is not a valid JSON object: %v", e)
	}
	rawAt, hasAt := fields["reschedule_at"]
	hasAt = hasAt && string(rawAt) != "null"
	rawIn, hasIn := fields["reschedule_in"]
	hasIn = hasIn && string(rawIn) != "null"
	switch {
	case hasAt && hasIn:
		return 0, 0, fmt.Errorf("the response body has both reschedule_at and reschedule_in; send only one")
	case hasAt:
		at, err = parseRescheduleAt(rawAt)
		return at, 0, err
	case hasIn:
		in, err = parseRescheduleIn(rawIn)
		return 0, in, err
	}
	return 0, 0, nil
}

func parseRescheduleAt(raw json.RawMessage) (int64, error) {
	var ms int64
	switch c := raw[0]; {
	case c == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, fmt.Errorf("reschedule_at %s is not a valid JSON string: %v", clip(raw), err)
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return 0, fmt.Errorf(`reschedule_at %s is not an RFC 3339 time like "2026-01-01T09:30:00Z"; send that or an integer of unix milliseconds`, clip(raw))
		}
		ms = t.UnixMilli()
	case c == '-' || ('0' <= c && c <= '9'):
		v, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("reschedule_at %s is not an integer of unix milliseconds (no fraction or exponent), or is out of range", clip(raw))
		}
		ms = v
	default:
		return 0, fmt.Errorf(`reschedule_at must be an integer of unix milliseconds or an RFC 3339 string, got %s`, clip(raw))
	}
	if ms < minRescheduleAt {
		if ms > 0 && ms < 1e11 {
			return 0, fmt.Errorf("reschedule_at %d is before the year 2000; it must be in unix MILLISECONDS (this looks like seconds: use %d000)", ms, ms)
		}
		return 0, fmt.Errorf("reschedule_at %d is before the year 2000; it must be a unix time in milliseconds", ms)
	}
	return ms, nil
}

func parseRescheduleIn(raw json.RawMessage) (time.Duration, error) {
	const want = `reschedule_in must be a positive Go duration string like "30s" or "1h30m"`
	if raw[0] != '"' {
		return 0, fmt.Errorf("%s, got %s", want, clip(raw))
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf("%s, got %s", want, clip(raw))
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s, got %s", want, clip(raw))
	}
	return d, nil
}

// clip keeps error messages about a receiver's values short: they end up in
// last_error, and a receiver can put anything in its body.
func clip(raw []byte) string {
	const n = 64
	if len(raw) <= n {
		return snippet(raw)
	}
	return snippet(raw[:n]) + "…"
}

// snippet returns at most SnippetMax bytes of b as valid UTF-8. Invalid bytes
// become U+FFFD and a rune cut by the limit is dropped, because the snippet is
// stored in a job and served as JSON, where invalid UTF-8 would be mangled or
// rejected.
func snippet(b []byte) string {
	if len(b) <= SnippetMax && utf8.Valid(b) {
		return string(b)
	}
	out := make([]byte, 0, SnippetMax)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			if len(out)+3 > SnippetMax {
				break
			}
			out = append(out, "\uFFFD"...)
		} else {
			if len(out)+size > SnippetMax {
				break
			}
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	return string(out)
}

// headerSecrets lists what a receiver's answer must not carry back into
// last_error from a route's headers: each header value, and each of its
// words of 8 bytes or more (the token of "Bearer <token>"). A receiver or
// proxy whose error page repeats the request's headers (a black-box
// review: "auth=Bearer …" in a 400's body) otherwise hands any reader of
// the job a secret the API never echoes. nil without headers.
func headerSecrets(h map[string]string) []string {
	var out []string
	for _, v := range h {
		if len(v) >= 4 {
			out = append(out, v)
		}
		for _, w := range strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ',' || r == ';' || r == '=' }) {
			if len(w) >= 8 && w != v {
				out = append(out, w)
			}
		}
	}
	// Longest first: a value is replaced whole before its words are.
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// redact replaces every secret in s by "REDACTED", and a tail of s that
// begins a secret (the snippet was cut inside it) by "REDACTED…".
func redact(s string, secrets []string) string {
	for _, x := range secrets {
		if strings.Contains(s, x) {
			s = strings.ReplaceAll(s, x, "REDACTED")
		}
	}
	for _, x := range secrets {
		for n := min(len(x)-1, len(s)); n >= 4; n-- {
			if strings.HasSuffix(s, x[:n]) {
				return s[:len(s)-n] + "REDACTED…"
			}
		}
	}
	return s
}
