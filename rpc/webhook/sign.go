package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// SecretPrefix starts every signing secret. Standard Webhooks uses it so that
// a secret pasted into the wrong field (or leaked into a log) is recognisable.
const SecretPrefix = "whsec_"

// Bounds on the decoded key length. 24 bytes (192 bits) is the least the
// contract accepts as a real secret; 64 bytes is SHA-256's block size, beyond
// which HMAC would hash the key down anyway, so longer keys add nothing.
const (
	MinSecretBytes = 24
	MaxSecretBytes = 64
)

const secretHowTo = `a signing secret is "whsec_" followed by the standard base64 of 24 to 64 random bytes (Standard Webhooks format); generate one with: echo "whsec_$(openssl rand -base64 32)"`

// ParseSecret decodes a "whsec_…" signing secret into the HMAC key.
//
// The error messages never echo the secret itself (they end up in API
// responses and logs) but say exactly what is wrong and what is expected,
// because the person reading them is usually pasting a secret by hand.
func ParseSecret(s string) ([]byte, error) {
	if !strings.HasPrefix(s, SecretPrefix) {
		if strings.HasPrefix(strings.ToLower(s), SecretPrefix) {
			return nil, errors.New(`signing secret must start with lower-case "whsec_"; ` + secretHowTo)
		}
		return nil, errors.New(`signing secret does not start with "whsec_"; ` + secretHowTo)
	}
	enc := s[len(SecretPrefix):]
	if enc == "" {
		return nil, errors.New(`signing secret has nothing after "whsec_"; ` + secretHowTo)
	}
	// Strict: reject non-canonical encodings (stray bits in the last
	// character), so one key has exactly one spelling.
	key, err := base64.StdEncoding.Strict().DecodeString(enc)
	if err != nil {
		var ce base64.CorruptInputError
		if errors.As(err, &ce) {
			return nil, fmt.Errorf(`signing secret: the part after "whsec_" is not standard base64 (alphabet A-Z a-z 0-9 + /, padded with "=" to a multiple of 4 characters); first bad character at position %d after the prefix; %s`, int64(ce), secretHowTo)
		}
		return nil, fmt.Errorf(`signing secret: the part after "whsec_" is not standard base64: %v; %s`, err, secretHowTo)
	}
	if len(key) < MinSecretBytes || len(key) > MaxSecretBytes {
		return nil, fmt.Errorf("signing secret decodes to %d bytes, but it must decode to %d to %d bytes (32 is typical); %s",
			len(key), MinSecretBytes, MaxSecretBytes, secretHowTo)
	}
	return key, nil
}

// Sign returns the Standard Webhooks signature "v1,<base64>" of
// HMAC-SHA256(key, "<msgID>.<timestampSec>.<body>").
func Sign(key []byte, msgID string, timestampSec int64, body []byte) string {
	var buf [64]byte
	return string(appendSignature(buf[:0], key, msgID, timestampSec, body))
}

// appendSignature is Sign without the final string allocation, so Deliver can
// put the signature straight into a header.
func appendSignature(dst, key []byte, msgID string, timestampSec int64, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	// One Write for "<msgID>.<ts>." keeps the HMAC's internal buffering simple;
	// ids are short, so the scratch array stays on the stack.
	var scratch [128]byte
	prefix := append(scratch[:0], msgID...)
	prefix = append(prefix, '.')
	prefix = strconv.AppendInt(prefix, timestampSec, 10)
	prefix = append(prefix, '.')
	m.Write(prefix)
	m.Write(body)
	var sum [sha256.Size]byte
	dst = append(dst, "v1,"...)
	return base64.StdEncoding.AppendEncode(dst, m.Sum(sum[:0]))
}

// Verify reports whether signatureHeader carries a valid v1 signature of body.
//
// The header may hold several space-separated signatures because Standard
// Webhooks lets a sender sign with an old and a new secret during rotation;
// one match is enough, and signatures of other versions are skipped rather
// than failing the whole header. Comparison is constant-time so that response
// timing does not reveal how much of a forged signature was right.
//
// Verify checks only the signature. A receiver should also reject timestamps
// far from its own clock (the spec suggests five minutes) to stop replays.
func Verify(key []byte, msgID string, timestampSec int64, body []byte, signatureHeader string) bool {
	if len(key) == 0 {
		return false
	}
	var buf [64]byte
	want := appendSignature(buf[:0], key, msgID, timestampSec, body)[len("v1,"):]
	ok := false
	for _, f := range strings.Fields(signatureHeader) {
		version, sig, found := strings.Cut(f, ",")
		if !found || version != "v1" {
			continue
		}
		if subtle.ConstantTimeCompare([]byte(sig), want) == 1 {
			ok = true
		}
	}
	return ok
}
