package webhook

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The Standard Webhooks reference vector and the verification cases of the
// specification's own libraries:
//   - github.com/standard-webhooks/standard-webhooks, libraries/go/webhook_test.go
//     (TestWebhook, TestWebhookPrefix, TestWebhookSign)
//   - the same repository, libraries/python/tests/test_webhooks.py
//     (test_invalid_signature_raises_error, test_invalid_timestamp_raises_error,
//     test_multi_sig_payload_is_valid, test_sign_function)
const (
	vecSecret  = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vecBare    = "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // the same key without the prefix
	vecMsgID   = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vecUnix    = 1614265330
	vecPayload = `{"test": 2432232314}`
	vecSig     = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	// Signatures the libraries use as "wrong": one of another message, and
	// the reference signature with its last byte changed.
	vecWrongSig  = "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="
	vecAlmostSig = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA="
)

func TestSignReferenceVector(t *testing.T) {
	for _, secret := range []string{vecSecret, vecBare} {
		k, err := ParseSecret(secret)
		if err != nil {
			t.Fatal(err)
		}
		if got := k.Sign(vecMsgID, time.Unix(vecUnix, 0), []byte(vecPayload)); got != vecSig {
			t.Errorf("Sign with %q = %s, want %s", secret, got, vecSig)
		}
	}
}

func vecHeader(ts int64, sig string) http.Header {
	h := http.Header{}
	h.Set(HeaderWebhookID, vecMsgID)
	h.Set(HeaderWebhookTimestamp, strconv.FormatInt(ts, 10))
	h.Set(HeaderWebhookSignature, sig)
	return h
}

func TestVerifyVectors(t *testing.T) {
	at := time.Unix(vecUnix, 0)
	k, err := ParseSecret(vecSecret)
	if err != nil {
		t.Fatal(err)
	}
	// signedAt signs the reference payload at another time, as the
	// libraries' tests do for their timestamp cases.
	signedAt := func(ts time.Time) http.Header {
		return vecHeader(ts.Unix(), k.Sign(vecMsgID, ts, []byte(vecPayload)))
	}
	tests := []struct {
		name      string
		header    http.Header
		body      string
		tolerance time.Duration
		want      error // nil: valid
	}{
		{"reference vector is valid", vecHeader(vecUnix, vecSig), vecPayload, 0, nil},
		{"missing id", func() http.Header { h := vecHeader(vecUnix, vecSig); h.Del(HeaderWebhookID); return h }(), vecPayload, 0, ErrMissingHeaders},
		{"missing timestamp", func() http.Header { h := vecHeader(vecUnix, vecSig); h.Del(HeaderWebhookTimestamp); return h }(), vecPayload, 0, ErrMissingHeaders},
		{"missing signature", func() http.Header { h := vecHeader(vecUnix, vecSig); h.Del(HeaderWebhookSignature); return h }(), vecPayload, 0, ErrMissingHeaders},
		{"invalid timestamp", func() http.Header { h := vecHeader(vecUnix, vecSig); h.Set(HeaderWebhookTimestamp, "hello"); return h }(), vecPayload, 0, ErrInvalidTimestamp},
		{"signature of another message", vecHeader(vecUnix, vecWrongSig), vecPayload, 0, ErrNoMatchingSignature},
		{"signature with one byte changed", vecHeader(vecUnix, vecAlmostSig), vecPayload, 0, ErrNoMatchingSignature},
		{"body changed", vecHeader(vecUnix, vecSig), `{"test":2432232314}`, 0, ErrNoMatchingSignature},
		{"old timestamp", signedAt(at.Add(-DefaultTolerance - time.Second)), vecPayload, 0, ErrTimestampTooOld},
		{"new timestamp", signedAt(at.Add(DefaultTolerance + time.Second)), vecPayload, 0, ErrTimestampTooNew},
		{"exactly at the tolerance is valid", signedAt(at.Add(-DefaultTolerance)), vecPayload, 0, nil},
		{"multi signature with the valid one third", vecHeader(vecUnix, strings.Join([]string{vecWrongSig, "v2," + vecSig[3:], vecSig, vecWrongSig}, " ")), vecPayload, 0, nil},
		{"only another version's signature", vecHeader(vecUnix, "v2,"+vecSig[3:]), vecPayload, 0, ErrNoMatchingSignature},
		{"signature without version", vecHeader(vecUnix, vecSig[3:]), vecPayload, 0, ErrNoMatchingSignature},
		{"old timestamp passes when ignoring tolerance", signedAt(at.Add(-DefaultTolerance - time.Hour)), vecPayload, -1, nil},
		{"new timestamp passes when ignoring tolerance", signedAt(at.Add(DefaultTolerance + time.Hour)), vecPayload, -1, nil},
		{"wrong timestamp fails when ignoring tolerance", vecHeader(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), vecSig), vecPayload, -1, ErrNoMatchingSignature},
		{"custom tolerance", signedAt(at.Add(-2 * time.Second)), vecPayload, time.Second, ErrTimestampTooOld},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, secret := range []string{vecSecret, vecBare} {
				v, err := NewVerifier(secret)
				if err != nil {
					t.Fatal(err)
				}
				v.Now = func() time.Time { return at }
				v.Tolerance = tc.tolerance
				err = v.Verify([]byte(tc.body), tc.header)
				if tc.want == nil {
					if err != nil {
						t.Errorf("secret %q: Verify = %v, want valid", secret, err)
					}
					continue
				}
				if !errors.Is(err, tc.want) || !errors.Is(err, ErrVerification) {
					t.Errorf("secret %q: Verify = %v, want %v", secret, err, tc.want)
				}
			}
		})
	}
}

func TestVerifierRotation(t *testing.T) {
	oldSecret, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	oldKey, _ := ParseSecret(oldSecret)
	now := time.Now()
	body := []byte(`{"id":"a","collection":"c","trigger_time":1,"attempt":1}`)
	h := http.Header{}
	oldKey.SignHeaders(h, "c:a:1", now, body)

	single, err := NewVerifier(vecSecret)
	if err != nil {
		t.Fatal(err)
	}
	if err := single.Verify(body, h); !errors.Is(err, ErrNoMatchingSignature) {
		t.Errorf("other key: %v", err)
	}
	both, err := NewVerifier(vecSecret, oldSecret)
	if err != nil {
		t.Fatal(err)
	}
	if err := both.Verify(body, h); err != nil {
		t.Errorf("rotation: %v", err)
	}
	fromKeys, err := NewVerifierFromKeys(oldKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := fromKeys.Verify(body, h); err != nil {
		t.Errorf("from keys: %v", err)
	}
}

func TestParseSecret(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{vecSecret, true},
		{vecBare, true},
		{" " + vecSecret + "\n", true},
		{"", false},
		{"whsec_", false},
		{"whsec_not base64!", false},
		{"whsec_c2hvcnQ=", false}, // "short": 5 bytes
	} {
		_, err := ParseSecret(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("ParseSecret(%q) = %v, want ok=%v", tc.in, err, tc.ok)
		}
	}
	if _, err := NewVerifier(); err == nil {
		t.Error("NewVerifier() with no secret must fail")
	}
	if _, err := NewVerifierFromKeys(Key{}); err == nil {
		t.Error("NewVerifierFromKeys with an empty key must fail")
	}
	s, err := NewSecret()
	if err != nil || !strings.HasPrefix(s, SecretPrefix) {
		t.Fatalf("NewSecret = %q, %v", s, err)
	}
	if k, err := ParseSecret(s); err != nil || len(k.b) != 32 {
		t.Errorf("NewSecret does not parse back to 32 bytes: %v", err)
	}
}

func FuzzVerify(f *testing.F) {
	f.Add(vecMsgID, strconv.Itoa(vecUnix), vecSig, vecPayload)
	f.Add("", "", "", "")
	f.Add("x", "-1", "v1, v1,,, v2", "{}")
	v, err := NewVerifier(vecSecret)
	if err != nil {
		f.Fatal(err)
	}
	v.Now = func() time.Time { return time.Unix(vecUnix, 0) }
	k, _ := ParseSecret(vecSecret)
	f.Fuzz(func(t *testing.T, id, ts, sig, body string) {
		h := http.Header{}
		h.Set(HeaderWebhookID, id)
		h.Set(HeaderWebhookTimestamp, ts)
		h.Set(HeaderWebhookSignature, sig)
		err := v.Verify([]byte(body), h)
		if err == nil {
			// Only a signature made with the key can pass.
			n, _ := strconv.ParseInt(strings.TrimSpace(ts), 10, 64)
			if !strings.Contains(" "+sig+" ", k.Sign(id, time.Unix(n, 0), []byte(body))[3:]) {
				t.Fatalf("accepted a signature not made with the key: %q", sig)
			}
		} else if !errors.Is(err, ErrVerification) {
			t.Fatalf("error %v does not match ErrVerification", err)
		}
	})
}
