package webhook

import (
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultTolerance is how far a webhook-timestamp may be from the
// receiver's clock, either way, before a message is refused: the Standard
// Webhooks default. It bounds how long a captured request can be replayed.
const DefaultTolerance = 5 * time.Minute

// Verification errors. Every error Verify returns matches ErrVerification
// and exactly one of the others (errors.Is).
var (
	ErrVerification        = errors.New("signature verification failed")
	ErrMissingHeaders      = errors.New("missing webhook-id, webhook-timestamp or webhook-signature header")
	ErrInvalidTimestamp    = errors.New("webhook-timestamp is not an integer of unix seconds")
	ErrTimestampTooOld     = errors.New("message timestamp too old")
	ErrTimestampTooNew     = errors.New("message timestamp too new")
	ErrNoMatchingSignature = errors.New("no matching signature found")
)

func verifyErr(kind error, format string, args ...any) error {
	if format == "" {
		return fmt.Errorf("webhook: %w: %w", ErrVerification, kind)
	}
	return fmt.Errorf("webhook: %w: %w (%s)", ErrVerification, kind, fmt.Sprintf(format, args...))
}

// Verifier checks Standard Webhooks signatures. It holds one or more keys:
// during a secret rotation a receiver accepts both the old and the new
// secret until timemachine sends only the new one. A Verifier is safe for
// concurrent use once configured.
type Verifier struct {
	keys []Key
	// Tolerance is the largest accepted distance between webhook-timestamp
	// and Now, either way. Zero means DefaultTolerance; a negative value
	// disables the check (not recommended: it allows replays).
	Tolerance time.Duration
	// Now is the receiver's clock; nil means time.Now. Tests of receivers
	// set it to verify recorded messages.
	Now func() time.Time
}

// NewVerifier returns a Verifier for the given signing secrets ("whsec_…",
// see ParseSecret). At least one is required.
func NewVerifier(secrets ...string) (*Verifier, error) {
	if len(secrets) == 0 {
		return nil, errors.New("webhook: NewVerifier needs at least one signing secret")
	}
	v := &Verifier{}
	for i, s := range secrets {
		k, err := ParseSecret(s)
		if err != nil {
			return nil, fmt.Errorf("secret %d: %w", i+1, err)
		}
		v.keys = append(v.keys, k)
	}
	return v, nil
}

// NewVerifierFromKeys returns a Verifier for already decoded keys.
func NewVerifierFromKeys(keys ...Key) (*Verifier, error) {
	if len(keys) == 0 {
		return nil, errors.New("webhook: NewVerifierFromKeys needs at least one key")
	}
	for i, k := range keys {
		if len(k.b) < MinKeyBytes {
			return nil, fmt.Errorf("webhook: key %d has %d bytes; want at least %d (use ParseSecret)", i+1, len(k.b), MinKeyBytes)
		}
	}
	return &Verifier{keys: append([]Key(nil), keys...)}, nil
}

// Verify checks that body and the webhook-* headers in h were signed with
// one of the verifier's keys and that the timestamp is within the
// tolerance. body must be the raw request body, byte for byte: a body that
// was decoded and encoded again no longer matches its signature.
//
// webhook-signature may hold several space-separated signatures; the
// message is genuine if any "v1,…" one matches. Other versions (v1a, v2)
// are skipped, as the specification requires.
func (v *Verifier) Verify(body []byte, h http.Header) error {
	id := h.Get(HeaderWebhookID)
	tsText := h.Get(HeaderWebhookTimestamp)
	sigs := h.Get(HeaderWebhookSignature)
	if id == "" || tsText == "" || sigs == "" {
		return verifyErr(ErrMissingHeaders, "")
	}
	ts, err := strconv.ParseInt(strings.TrimSpace(tsText), 10, 64)
	if err != nil {
		return verifyErr(ErrInvalidTimestamp, "got %q", clip(tsText))
	}
	if tol := v.tolerance(); tol >= 0 {
		now := v.now()
		sent := time.Unix(ts, 0)
		if d := now.Sub(sent); d > tol {
			return verifyErr(ErrTimestampTooOld, "sent %s ago, tolerance %s; a replay, or the receiver's clock is wrong", d.Round(time.Second), tol)
		}
		if d := sent.Sub(now); d > tol {
			return verifyErr(ErrTimestampTooNew, "sent %s in the future, tolerance %s; the receiver's clock is wrong", d.Round(time.Second), tol)
		}
	}
	want := make([][]byte, len(v.keys))
	for i, k := range v.keys {
		mac := k.mac(id, ts, body)
		want[i] = make([]byte, base64.StdEncoding.EncodedLen(len(mac)))
		base64.StdEncoding.Encode(want[i], mac)
	}
	for _, s := range strings.Fields(sigs) {
		version, sig, ok := strings.Cut(s, ",")
		if !ok || version != "v1" {
			continue
		}
		for _, w := range want {
			if hmac.Equal([]byte(sig), w) {
				return nil
			}
		}
	}
	return verifyErr(ErrNoMatchingSignature, "")
}

func (v *Verifier) tolerance() time.Duration {
	if v.Tolerance == 0 {
		return DefaultTolerance
	}
	return v.Tolerance
}

func (v *Verifier) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

// clip shortens untrusted text for an error message.
func clip(s string) string {
	const max = 64
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}
