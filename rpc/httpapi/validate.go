package httpapi

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Limits of the contract (API.md §3) and of this API.
const (
	MaxNameLen       = 64   // collection and route names
	MaxIDLen         = 255  // job ids
	MaxURLLen        = 2048 // callback_url, webhook_url
	MaxBatch         = 1000 // jobs in one POST
	MaxListLimit     = 1000 // jobs in one list page
	DefaultListLimit = 100
	MaxRouteHeaders  = 64
	maxHeaderNameLen = 256
	maxHeaderValLen  = 8 << 10

	// maxTriggerMs is 10000-01-01T00:00:00Z: RFC 3339 has four-digit years.
	maxTriggerMs = 253402300800000

	minSecretBytes = 24
	maxSecretBytes = 64
	secretPrefix   = "whsec_"
)

// Duration bounds.
const (
	minCallbackTimeout = time.Millisecond
	maxCallbackTimeout = time.Hour
	minRetention       = time.Second
	maxRetention       = 10 * 365 * 24 * time.Hour
	minInterval        = time.Millisecond
)

const (
	nameChars = "A-Z a-z 0-9 . _ -"
	idChars   = "A-Z a-z 0-9 . _ : @ ~ = + -"
)

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

func isIDByte(c byte) bool {
	if isNameByte(c) {
		return true
	}
	switch c {
	case ':', '@', '~', '=', '+':
		return true
	}
	return false
}

// checkToken validates s against a character class and a length. "." and
// ".." are refused although their characters are allowed: HTTP clients and
// servers normalise them out of paths, so such a job or collection could be
// created but never addressed.
func checkToken(what, s string, max int, ok func(byte) bool, chars string) *Error {
	if s == "" || len(s) > max {
		return Invalid("%s %q: must be 1 to %d characters from %s (got %d bytes)", what, clip(s), max, chars, len(s))
	}
	if s == "." || s == ".." {
		return Invalid("%s %q: \".\" and \"..\" are not allowed (they cannot appear in a URL path)", what, s)
	}
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) {
			return Invalid("%s %q: must be 1 to %d characters from %s; %s at byte %d is not allowed", what, clip(s), max, chars, quoteByte(s, i), i)
		}
	}
	return nil
}

func quoteByte(s string, i int) string {
	if s[i] < 0x80 {
		return strconv.QuoteRune(rune(s[i]))
	}
	return fmt.Sprintf("byte 0x%02x", s[i])
}

// clip shortens a user-supplied string for an error message.
func clip(s string) string {
	if len(s) <= 100 {
		return s
	}
	return s[:100] + "…"
}

// checkName validates a collection or route name (what says which).
func checkName(what, s string) *Error {
	return checkToken(what, s, MaxNameLen, isNameByte, nameChars)
}

// checkID validates a job id.
func checkID(s string) *Error { return checkToken("job id", s, MaxIDLen, isIDByte, idChars) }

// validID is checkID as a predicate.
func validID(s string) bool { return checkID(s) == nil }

// checkURL validates a callback or webhook URL: absolute http(s) with a
// host, no fragment (it would never reach the receiver), bounded length.
func checkURL(path, s string) *Error {
	if s == "" {
		return Invalid("%s: must be an absolute http or https URL, got an empty string", path)
	}
	if len(s) > MaxURLLen {
		return Invalid("%s: is %d bytes; at most %d are allowed", path, len(s), MaxURLLen)
	}
	if strings.ContainsAny(s, " \t\r\n") {
		return Invalid("%s: must not contain whitespace (percent-encode it, e.g. %%20), got %q", path, clip(s))
	}
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return Invalid("%s: not a valid URL (%v): %q", path, err, clip(s))
	}
	if sch := strings.ToLower(u.Scheme); sch != "http" && sch != "https" {
		if u.Scheme == "" {
			return Invalid("%s: must be an absolute http or https URL (like https://example.com/hook), got %q", path, clip(s))
		}
		return Invalid("%s: the scheme must be http or https, got %q", path, u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return Invalid("%s: must have a host (like https://example.com/hook), got %q", path, clip(s))
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return Invalid("%s: port must be from 1 to 65535, got %q", path, p)
		}
	}
	if strings.IndexByte(s, '#') >= 0 {
		return Invalid("%s: must not have a fragment (the part after '#' is never sent to the receiver), got %q", path, clip(s))
	}
	return nil
}

// parseDurationMs parses a Go duration string within [lo, hi] and returns
// whole milliseconds (sub-millisecond parts are dropped; the API's
// resolution is the millisecond).
func parseDurationMs(path string, raw []byte, lo, hi time.Duration) (int64, *Error) {
	s, e := str(path, raw)
	if e != nil {
		return 0, Invalid("%s: must be a Go duration string such as \"10s\", \"1500ms\" or \"2h\", got %s %s", path, jsonKind(raw), shown(raw))
	}
	return durationText(path, s, lo, hi)
}

func durationText(path, s string, lo, hi time.Duration) (int64, *Error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, Invalid("%s: must be a Go duration string such as \"10s\", \"1500ms\" or \"2h\", got %q", path, clip(s))
	}
	if d < 0 {
		return 0, Invalid("%s: must not be negative, got %q", path, s)
	}
	ms := int64(d / time.Millisecond)
	if time.Duration(ms)*time.Millisecond < lo || d > hi {
		return 0, Invalid("%s: must be from %v to %v, got %q", path, lo, hi, s)
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
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, false
	}
	ms := t.UnixMilli()
	if t.After(time.UnixMilli(ms)) && ms < math.MaxInt64 {
		ms++
	}
	return ms, true
}

// checkSecret validates a signing secret: "whsec_" + standard base64 (padded,
// canonical) of 24 to 64 bytes, as Standard Webhooks and rpc/webhook expect.
// The messages never echo the secret: they end up in logs.
func checkSecret(path, s string) *Error {
	const howTo = `a signing secret is "whsec_" followed by the standard base64 of 24 to 64 random bytes (Standard Webhooks format); generate one with: echo "whsec_$(openssl rand -base64 32)"`
	if !strings.HasPrefix(s, secretPrefix) {
		return Invalid("%s: does not start with \"whsec_\"; %s", path, howTo)
	}
	key, err := base64.StdEncoding.Strict().DecodeString(s[len(secretPrefix):])
	if err != nil {
		return Invalid("%s: the part after \"whsec_\" is not standard base64 (A-Z a-z 0-9 + /, padded with \"=\" to a multiple of 4 characters); %s", path, howTo)
	}
	if len(key) < minSecretBytes || len(key) > maxSecretBytes {
		return Invalid("%s: decodes to %d bytes, but it must decode to %d to %d bytes (32 is typical); %s", path, len(key), minSecretBytes, maxSecretBytes, howTo)
	}
	return nil
}

// reservedHeaders are owned by the callback protocol (API.md §4); a route
// may not set or override them.
var reservedHeaders = []string{
	"Content-Type", "Content-Length", "Host", "Idempotency-Key",
	"X-Timemachine-Attempt", "webhook-id", "webhook-timestamp", "webhook-signature",
}

func isTokenByte(c byte) bool {
	if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// checkHeaders validates a route's custom headers.
func checkHeaders(h map[string]string) *Error {
	if len(h) > MaxRouteHeaders {
		return Invalid("headers: at most %d headers are allowed, got %d", MaxRouteHeaders, len(h))
	}
	seen := make(map[string]string, len(h))
	for _, name := range sortedKeys(h) {
		if name == "" || len(name) > maxHeaderNameLen {
			return Invalid("headers: header names must be 1 to %d characters, got %q", maxHeaderNameLen, clip(name))
		}
		for i := 0; i < len(name); i++ {
			if !isTokenByte(name[i]) {
				return Invalid("headers: %q is not a valid HTTP header name (%s at byte %d is not allowed)", clip(name), quoteByte(name, i), i)
			}
		}
		for _, r := range reservedHeaders {
			if strings.EqualFold(name, r) {
				return Invalid("headers: %q cannot be set on a route; the callback protocol sets it", name)
			}
		}
		lower := strings.ToLower(name)
		if prev, dup := seen[lower]; dup {
			return Invalid("headers: %q and %q are the same header (names are case-insensitive)", prev, name)
		}
		seen[lower] = name
		v := h[name]
		if len(v) > maxHeaderValLen {
			return Invalid("headers[%q]: the value is %d bytes; at most %d are allowed", name, len(v), maxHeaderValLen)
		}
		for i := 0; i < len(v); i++ {
			if c := v[i]; c == '\r' || c == '\n' || c == 0 || (c < 0x20 && c != '\t') || c == 0x7f {
				return Invalid("headers[%q]: the value must not contain control characters such as CR or LF (found byte 0x%02x at %d)", name, c, i)
			}
		}
		if v == redacted && sensitiveHeader(name) {
			return Invalid("headers[%q]: %q is the placeholder GET shows instead of a sensitive value; send the real value", name, redacted)
		}
	}
	return nil
}

// redacted replaces sensitive header values when a route is rendered.
const redacted = "REDACTED"

// sensitiveHeader reports whether a header's value is a credential that
// must never be echoed.
func sensitiveHeader(name string) bool {
	n := strings.ToLower(name)
	switch n {
	case "authorization", "proxy-authorization", "cookie":
		return true
	}
	for _, s := range []string{"token", "secret", "key", "auth", "password", "signature", "cookie", "credential"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}
