package webhook

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
)

func TestParseSecret(t *testing.T) {
	b64 := func(n int) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xa5}, n)) }
	tests := []struct {
		name    string
		secret  string
		wantLen int    // when no error
		wantErr string // substring of the error
	}{
		{name: "standard webhooks example", secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", wantLen: 24},
		{name: "24 bytes", secret: "whsec_" + b64(24), wantLen: 24},
		{name: "32 bytes", secret: "whsec_" + b64(32), wantLen: 32},
		{name: "64 bytes", secret: "whsec_" + b64(64), wantLen: 64},
		{name: "missing prefix", secret: b64(32), wantErr: `does not start with "whsec_"`},
		{name: "upper-case prefix", secret: "WHSEC_" + b64(32), wantErr: `lower-case "whsec_"`},
		{name: "empty", secret: "", wantErr: `does not start with "whsec_"`},
		{name: "prefix only", secret: "whsec_", wantErr: `nothing after "whsec_"`},
		{name: "bad base64 character", secret: "whsec_MfKQ9r8GKYqrTwjU!D8ILPZIo2LaLaSw", wantErr: "not standard base64"},
		{name: "url-safe alphabet", secret: "whsec_" + strings.NewReplacer("+", "-", "/", "_").Replace(base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xfb, 0xff}, 16))), wantErr: "not standard base64"},
		{name: "missing padding", secret: "whsec_" + strings.TrimRight(b64(25), "="), wantErr: "not standard base64"},
		{name: "too short 23 bytes", secret: "whsec_" + b64(23), wantErr: "decodes to 23 bytes"},
		{name: "too long 65 bytes", secret: "whsec_" + b64(65), wantErr: "decodes to 65 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, err := ParseSecret(tt.secret)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseSecret(%q) = %d bytes, want error containing %q", tt.secret, len(key), tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %q does not contain %q", err, tt.wantErr)
				}
				// Every error must tell the reader what a good secret looks like…
				if !strings.Contains(err.Error(), "24 to 64") {
					t.Errorf("error %q does not say what is expected", err)
				}
				// …and must never echo the secret back into logs.
				if enc := strings.TrimPrefix(tt.secret, "whsec_"); len(enc) > 8 && strings.Contains(err.Error(), enc) {
					t.Errorf("error %q leaks the secret", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseSecret(%q): %v", tt.secret, err)
			}
			if len(key) != tt.wantLen {
				t.Fatalf("got %d key bytes, want %d", len(key), tt.wantLen)
			}
		})
	}
}

// The test vector published by Standard Webhooks (see the reference
// libraries' tests). Matching it byte for byte is what lets receivers use
// those libraries; it was also cross-checked with
// `openssl dgst -sha256 -mac HMAC -macopt hexkey:… | base64`.
func TestSignStandardWebhooksVector(t *testing.T) {
	key, err := ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	const (
		msgID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
		ts    = int64(1614265330)
		want  = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	)
	body := []byte(`{"test": 2432232314}`)
	if got := Sign(key, msgID, ts, body); got != want {
		t.Fatalf("Sign = %q, want %q", got, want)
	}
	if !Verify(key, msgID, ts, body, want) {
		t.Fatal("Verify rejected the reference signature")
	}
}

func TestVerify(t *testing.T) {
	key, _ := ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	otherKey, _ := ParseSecret("whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32)))
	body := []byte(`{"id":"a"}`)
	good := Sign(key, "c:a:1", 100, body)
	old := Sign(otherKey, "c:a:1", 100, body)

	tests := []struct {
		name   string
		key    []byte
		id     string
		ts     int64
		body   []byte
		header string
		want   bool
	}{
		{"valid", key, "c:a:1", 100, body, good, true},
		{"several, match last (secret rotation)", key, "c:a:1", 100, body, old + " " + good, true},
		{"several, match first", key, "c:a:1", 100, body, good + " " + old, true},
		{"extra whitespace", key, "c:a:1", 100, body, "  " + good + "  ", true},
		{"unknown versions are skipped", key, "c:a:1", 100, body, "v2,abc v1a,zzz " + good, true},
		{"wrong key", otherKey, "c:a:1", 100, body, good, false},
		{"wrong id", key, "c:a:2", 100, body, good, false},
		{"wrong timestamp", key, "c:a:1", 101, body, good, false},
		{"tampered body", key, "c:a:1", 100, []byte(`{"id":"b"}`), good, false},
		{"only other version", key, "c:a:1", 100, body, "v2," + strings.TrimPrefix(good, "v1,"), false},
		{"no version", key, "c:a:1", 100, body, strings.TrimPrefix(good, "v1,"), false},
		{"empty header", key, "c:a:1", 100, body, "", false},
		{"empty key never verifies", nil, "c:a:1", 100, body, Sign(nil, "c:a:1", 100, body), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Verify(tt.key, tt.id, tt.ts, tt.body, tt.header); got != tt.want {
				t.Fatalf("Verify = %v, want %v", got, tt.want)
			}
		})
	}
}

func BenchmarkSign(b *testing.B) {
	key, _ := ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	body := bytes.Repeat([]byte("x"), 200)
	var buf [64]byte
	b.ReportAllocs()
	for b.Loop() {
		appendSignature(buf[:0], key, "notifications:user-reminder-123:1767225600000", 1767225600, body)
	}
}
