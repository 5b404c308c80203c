package model

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// Character classes of names and ids, as the messages spell them.
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
		return Invalid("%s %q: must be 1 to %d characters from %s (got %d bytes)", what, Clip(s), max, chars, len(s))
	}
	if s == "." || s == ".." {
		return Invalid("%s %q: \".\" and \"..\" are not allowed (they cannot appear in a URL path)", what, s)
	}
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) {
			return Invalid("%s %q: must be 1 to %d characters from %s; %s at byte %d is not allowed", what, Clip(s), max, chars, QuoteByte(s, i), i)
		}
	}
	return nil
}

// QuoteByte shows byte i of s in a message: quoted when ASCII, in hex
// otherwise.
func QuoteByte(s string, i int) string {
	if s[i] < 0x80 {
		return strconv.QuoteRune(rune(s[i]))
	}
	return fmt.Sprintf("byte 0x%02x", s[i])
}

// Clip shortens a user-supplied string for an error message.
func Clip(s string) string {
	if len(s) <= 100 {
		return s
	}
	return s[:100] + "…"
}

// CheckName validates a collection or route name (what says which).
func CheckName(what, s string) *Error {
	return checkToken(what, s, MaxNameLen, isNameByte, nameChars)
}

// CheckID validates a job id.
func CheckID(s string) *Error { return checkToken("job id", s, MaxIDLen, isIDByte, idChars) }

// ValidID is CheckID as a predicate.
func ValidID(s string) bool { return CheckID(s) == nil }

// CheckURL validates a callback or webhook URL: absolute http(s) with a
// host, no fragment (it would never reach the receiver), bounded length.
// path names the field in the message.
func CheckURL(path, s string) *Error {
	if s == "" {
		return Invalid("%s: must be an absolute http or https URL, got an empty string", path)
	}
	if len(s) > MaxURLLen {
		return Invalid("%s: is %d bytes; at most %d are allowed", path, len(s), MaxURLLen)
	}
	shown := Clip(redactUserinfo(s))
	if strings.ContainsAny(s, " \t\r\n") {
		return Invalid("%s: must not contain whitespace (percent-encode it, e.g. %%20), got %q", path, shown)
	}
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return Invalid("%s: not a valid URL (%v): %q", path, err, shown)
	}
	if u.User != nil {
		// Credentials in a URL would be stored and shown with every job
		// (GET, lists, logs). Routes keep them as secrets instead.
		return Invalid("%s: must not contain a user name or password (user:pass@); use a route with an Authorization header, whose value is kept secret", path)
	}
	if sch := strings.ToLower(u.Scheme); sch != "http" && sch != "https" {
		if u.Scheme == "" {
			return Invalid("%s: must be an absolute http or https URL (like https://example.com/hook), got %q", path, shown)
		}
		return Invalid("%s: the scheme must be http or https, got %q", path, u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return Invalid("%s: must have a host (like https://example.com/hook), got %q", path, shown)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return Invalid("%s: port must be from 1 to 65535, got %q", path, p)
		}
	}
	if strings.IndexByte(s, '#') >= 0 {
		return Invalid("%s: must not have a fragment (the part after '#' is never sent to the receiver), got %q", path, shown)
	}
	return nil
}

// redactUserinfo hides a URL's user:password@ part, so that an error
// message about a bad URL never repeats a credential.
func redactUserinfo(s string) string {
	i := strings.Index(s, "://")
	if i < 0 {
		return s
	}
	rest := s[i+3:]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndexByte(rest[:end], '@')
	if at < 0 {
		return s
	}
	return s[:i+3] + "REDACTED@" + rest[at+1:]
}

// CheckSecret validates a signing secret: "whsec_" + standard base64
// (padded, canonical) of 24 to 64 bytes, as Standard Webhooks and
// rpc/webhook expect. The messages never echo the secret: they end up in
// logs.
func CheckSecret(path, s string) *Error {
	const howTo = `a signing secret is "whsec_" followed by the standard base64 of 24 to 64 random bytes (Standard Webhooks format); generate one with: echo "whsec_$(openssl rand -base64 32)"`
	if !strings.HasPrefix(s, SecretPrefix) {
		return Invalid("%s: does not start with \"whsec_\"; %s", path, howTo)
	}
	key, err := base64.StdEncoding.Strict().DecodeString(s[len(SecretPrefix):])
	if err != nil {
		return Invalid("%s: the part after \"whsec_\" is not standard base64 (A-Z a-z 0-9 + /, padded with \"=\" to a multiple of 4 characters); %s", path, howTo)
	}
	if len(key) < MinSecretBytes || len(key) > MaxSecretBytes {
		return Invalid("%s: decodes to %d bytes, but it must decode to %d to %d bytes (32 is typical); %s", path, len(key), MinSecretBytes, MaxSecretBytes, howTo)
	}
	return nil
}

// ReservedHeaders are owned by the callback protocol
// (docs/api.md#the-callback); a route may not set or override them.
var ReservedHeaders = []string{
	"Content-Type", "Content-Length", "Host", "Idempotency-Key",
	"X-Timemachine-Attempt", "webhook-id", "webhook-timestamp", "webhook-signature",
}

func isTokenByte(c byte) bool {
	if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// CheckHeaders validates a route's custom headers.
func CheckHeaders(h map[string]string) *Error {
	if len(h) > MaxRouteHeaders {
		return Invalid("headers: at most %d headers are allowed, got %d", MaxRouteHeaders, len(h))
	}
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names) // the first bad header named is the same every time
	seen := make(map[string]string, len(h))
	for _, name := range names {
		if name == "" || len(name) > MaxHeaderNameLen {
			return Invalid("headers: header names must be 1 to %d characters, got %q", MaxHeaderNameLen, Clip(name))
		}
		for i := 0; i < len(name); i++ {
			if !isTokenByte(name[i]) {
				return Invalid("headers: %q is not a valid HTTP header name (%s at byte %d is not allowed)", Clip(name), QuoteByte(name, i), i)
			}
		}
		for _, r := range ReservedHeaders {
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
		if len(v) > MaxHeaderValueLen {
			return Invalid("headers[%q]: the value is %d bytes; at most %d are allowed", name, len(v), MaxHeaderValueLen)
		}
		for i := 0; i < len(v); i++ {
			if c := v[i]; c == '\r' || c == '\n' || c == 0 || (c < 0x20 && c != '\t') || c == 0x7f {
				return Invalid("headers[%q]: the value must not contain control characters such as CR or LF (found byte 0x%02x at %d)", name, c, i)
			}
		}
		if v == Redacted && SensitiveHeader(name) {
			return Invalid("headers[%q]: %q is the placeholder GET shows instead of a sensitive value; send the real value", name, Redacted)
		}
	}
	return nil
}

// Redacted replaces sensitive header values when a route is shown.
const Redacted = "REDACTED"

// SensitiveHeader reports whether a header's value is a credential that
// must never be echoed.
func SensitiveHeader(name string) bool {
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
