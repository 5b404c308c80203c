package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names of a callback (docs/api.md#the-callback). The webhook-* names are the
// Standard Webhooks ones.
const (
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"
	HeaderIdempotencyKey   = "Idempotency-Key"
	HeaderAttempt          = "X-Timemachine-Attempt"
	// HeaderBatch carries the number of jobs of a batched delivery.
	HeaderBatch = "X-Timemachine-Batch"
)

// SecretPrefix starts every signing secret as Standard Webhooks serialises
// it: "whsec_" followed by the base64 of the HMAC key.
const SecretPrefix = "whsec_"

// MinKeyBytes is the shortest HMAC key accepted: 24 bytes (192 bits), the
// Standard Webhooks minimum and the shortest secret timemachine accepts.
// A shorter key is almost always a secret pasted wrongly.
const MinKeyBytes = 24

// Key is a decoded signing secret: the HMAC-SHA256 key.
type Key struct {
	b []byte
}

// ParseSecret decodes a signing secret, "whsec_" + standard base64 of the
// key. The prefix is optional, as in the Standard Webhooks libraries, so a
// bare base64 key also works.
func ParseSecret(secret string) (Key, error) {
	s := strings.TrimSpace(secret)
	s = strings.TrimPrefix(s, SecretPrefix)
	if s == "" {
		return Key{}, errors.New("webhook: empty signing secret; want whsec_ followed by the base64 of 24 to 64 bytes")
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return Key{}, fmt.Errorf("webhook: signing secret is not whsec_ followed by standard base64: %w", err)
	}
	if len(b) < MinKeyBytes {
		return Key{}, fmt.Errorf("webhook: signing secret decodes to %d bytes; want at least %d", len(b), MinKeyBytes)
	}
	return Key{b: b}, nil
}

// NewSecret returns a new random signing secret (32 bytes of key) in the
// form a collection or route takes it, "whsec_…".
func NewSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("webhook: new secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// Sign returns the signature header value for one message:
// "v1," + base64(HMAC-SHA256(key, "<id>.<unix seconds>.<body>")).
// Receivers do not need it; it is for tests of receivers and for senders.
func (k Key) Sign(id string, ts time.Time, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(k.mac(id, ts.Unix(), body))
}

// SignHeaders sets webhook-id, webhook-timestamp and webhook-signature on h
// as timemachine does for a callback with this key.
func (k Key) SignHeaders(h http.Header, id string, ts time.Time, body []byte) {
	h.Set(HeaderWebhookID, id)
	h.Set(HeaderWebhookTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderWebhookSignature, k.Sign(id, ts, body))
}

func (k Key) mac(id string, unix int64, body []byte) []byte {
	m := hmac.New(sha256.New, k.b)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write(strconv.AppendInt(nil, unix, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}
