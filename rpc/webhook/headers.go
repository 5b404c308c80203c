package webhook

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Header names the client sets itself. They are spelled as in docs/api.md#the-callback and
// sent with exactly this case: HTTP says header names are case-insensitive,
// but Standard Webhooks documents lower-case webhook-* names and some
// receivers look them up verbatim.
const (
	HeaderIdempotencyKey   = "Idempotency-Key"
	HeaderAttempt          = "X-Timemachine-Attempt"
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"
)

// reservedHeaders may not come from a route. The protocol headers are here so
// that a route cannot forge an idempotency key, an attempt number or a
// signature; the framing headers are here because fasthttp interprets them
// (Content-Length, Connection, Host…) and a wrong value would corrupt the
// request on the wire or send it somewhere else.
var reservedHeaders = [...]string{
	HeaderIdempotencyKey,
	HeaderAttempt,
	HeaderWebhookID,
	HeaderWebhookTimestamp,
	HeaderWebhookSignature,
	"Content-Type",
	"Content-Length",
	"Content-Encoding",
	"User-Agent",
	"Host",
	"Connection",
	"Keep-Alive",
	"Proxy-Connection",
	"Transfer-Encoding",
	"Te",
	"Trailer",
	"Upgrade",
	"Expect",
}

func isReservedHeader(name string) bool {
	for _, r := range reservedHeaders {
		if strings.EqualFold(name, r) {
			return true
		}
	}
	return false
}

// CheckRouteHeader reports whether a route may send the header name: value
// with every callback. The developer API should call it when a route is
// written, so that a bad header is a 400 for the person configuring the route
// rather than a failing callback hours later. Deliver applies the same rules:
// a malformed header fails the delivery with ErrInvalidRequest, and a reserved
// one is dropped because the protocol's own value must win.
func CheckRouteHeader(name, value string) error {
	if err := checkHeaderName(name); err != nil {
		return err
	}
	if isReservedHeader(name) {
		return fmt.Errorf("header %q is set by timemachine on every callback and cannot be set by a route", name)
	}
	return checkHeaderValue(name, value)
}

func checkHeaderName(name string) error {
	if name == "" {
		return errors.New("header name is empty")
	}
	for i := 0; i < len(name); i++ {
		if !isTokenChar(name[i]) {
			return fmt.Errorf("header name %q contains %s at byte %d; names may use only letters, digits and !#$%%&'*+-.^_`|~",
				name, describeByte(name[i]), i)
		}
	}
	return nil
}

func checkHeaderValue(name, value string) error {
	for i := 0; i < len(value); i++ {
		c := value[i]
		if (c < 0x20 && c != '\t') || c == 0x7f {
			return fmt.Errorf("value of header %q contains %s at byte %d; header values cannot contain control characters or line breaks",
				name, describeByte(c), i)
		}
	}
	return nil
}

// isTokenChar reports whether c may appear in an HTTP field name (RFC 9110 token).
func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func describeByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}
