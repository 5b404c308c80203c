package webhook

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"7", 7 * time.Second, true},
		{" 120 ", 2 * time.Minute, true},
		{"0", 0, true},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(90 * time.Second).Format(time.RFC850), 90 * time.Second, true},
		{now.Add(90 * time.Second).Format(time.ANSIC), 90 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true}, // in the past: retry now
		{"99999999999999999999999", time.Duration(1<<63-1) / time.Second * time.Second, true},
		{"", 0, false},
		{"-5", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
		{"2026-03-01T12:01:30Z", 0, false}, // RFC 3339 is not an HTTP-date
	}
	for _, tt := range tests {
		got, ok := parseRetryAfter([]byte(tt.in), now)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestParseReschedule(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		at      int64
		in      time.Duration
		wantErr string
	}{
		{name: "empty body", body: ``},
		{name: "plain text", body: `OK`},
		{name: "unrelated object", body: `{"ok":true}`},
		{name: "html mentioning the word", body: `<p>"reschedule_at" is documented here</p>`},
		{name: "array", body: `[{"reschedule_in":"30s"}]`},
		{name: "nested only", body: `{"data":{"reschedule_in":"30s"}}`},
		{name: "at ms", body: `{"reschedule_at":1767225600000}`, at: 1767225600000},
		{name: "at with other fields", body: ` {"status":"later","reschedule_at":1767225600000} `, at: 1767225600000},
		{name: "at RFC 3339", body: `{"reschedule_at":"2026-01-01T00:00:00Z"}`, at: 1767225600000},
		{name: "at RFC 3339 offset and fraction", body: `{"reschedule_at":"2026-01-01T01:00:00.250+01:00"}`, at: 1767225600250},
		{name: "in", body: `{"reschedule_in":"30s"}`, in: 30 * time.Second},
		{name: "in compound", body: `{"reschedule_in":"1h30m"}`, in: 90 * time.Minute},
		{name: "null at is absent", body: `{"reschedule_at":null,"reschedule_in":"5s"}`, in: 5 * time.Second},
		{name: "both null", body: `{"reschedule_at":null,"reschedule_in":null}`},
		{name: "in banana", body: `{"reschedule_in":"banana"}`, wantErr: `positive Go duration`},
		{name: "in negative", body: `{"reschedule_in":"-5s"}`, wantErr: `positive Go duration`},
		{name: "in zero", body: `{"reschedule_in":"0s"}`, wantErr: `positive Go duration`},
		{name: "in number", body: `{"reschedule_in":30}`, wantErr: `positive Go duration`},
		{name: "at float", body: `{"reschedule_at":1767225600000.5}`, wantErr: `integer of unix milliseconds`},
		{name: "at exponent", body: `{"reschedule_at":1.7e12}`, wantErr: `integer of unix milliseconds`},
		{name: "at seconds by mistake", body: `{"reschedule_at":1767225600}`, wantErr: `looks like seconds`},
		{name: "at negative", body: `{"reschedule_at":-1}`, wantErr: `before the year 2000`},
		{name: "at bad string", body: `{"reschedule_at":"tomorrow"}`, wantErr: `RFC 3339`},
		{name: "at bool", body: `{"reschedule_at":true}`, wantErr: `integer of unix milliseconds or an RFC 3339`},
		{name: "both", body: `{"reschedule_at":1767225600000,"reschedule_in":"30s"}`, wantErr: `send only one`},
		{name: "broken JSON", body: `{"reschedule_in":"30s"`, wantErr: `not a valid JSON object`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at, in, err := parseReschedule([]byte(tt.body), true, nil, 1<<16)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				if at != 0 || in != 0 {
					t.Fatalf("got at=%d in=%v together with an error", at, in)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if at != tt.at || in != tt.in {
				t.Fatalf("got at=%d in=%v, want at=%d in=%v", at, in, tt.at, tt.in)
			}
		})
	}

	t.Run("incomplete body with reschedule", func(t *testing.T) {
		_, _, err := parseReschedule([]byte(`{"reschedule_in":"30s","pad":"xxxx`), false, nil, 1<<16)
		if err == nil || !strings.Contains(err.Error(), "larger than 65536 bytes") {
			t.Fatalf("err = %v", err)
		}
		_, _, err = parseReschedule([]byte(`{"reschedule_in":"30s"`), false, errors.New("connection reset"), 1<<16)
		if err == nil || !strings.Contains(err.Error(), "connection reset") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("incomplete body without reschedule is fine", func(t *testing.T) {
		if _, _, err := parseReschedule([]byte(`{"ok":true,"pad":"xxx`), false, nil, 1<<16); err != nil {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestSnippet(t *testing.T) {
	long := strings.Repeat("a", 300)
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"short", "boom", "boom"},
		{"exact", long[:256], long[:256]},
		{"long", long, long[:256]},
		{"invalid utf8 replaced", "a\xffb", "a\uFFFDb"},
		{"rune cut at the limit is dropped", long[:255] + "é", long[:255]},
		{"replacement does not overflow", long[:254] + "\xff", long[:254]},
	}
	for _, tt := range tests {
		got := snippet([]byte(tt.in))
		if got != tt.want {
			t.Errorf("%s: snippet = %q, want %q", tt.name, got, tt.want)
		}
		if len(got) > SnippetMax || !utf8.ValidString(got) {
			t.Errorf("%s: snippet of %d bytes, valid=%v", tt.name, len(got), utf8.ValidString(got))
		}
	}
}

func TestCheckRouteHeader(t *testing.T) {
	tests := []struct {
		name, value string
		wantErr     string
	}{
		{"Authorization", "Bearer abc", ""},
		{"X-Custom", "tab\tis fine", ""},
		{"X-Custom", "", ""},
		{"", "v", "empty"},
		{"Bad Header", "v", `contains ' '`},
		{"X-Évil", "v", "contains byte 0xc3"},
		{"X-Inject", "a\r\nX-Evil: 1", "control characters"},
		{"Idempotency-Key", "forged", "cannot be set by a route"},
		{"webhook-signature", "v1,forged", "cannot be set by a route"},
		{"content-length", "0", "cannot be set by a route"},
		{"HOST", "elsewhere", "cannot be set by a route"},
	}
	for _, tt := range tests {
		err := CheckRouteHeader(tt.name, tt.value)
		if tt.wantErr == "" {
			if err != nil {
				t.Errorf("CheckRouteHeader(%q, %q) = %v", tt.name, tt.value, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("CheckRouteHeader(%q, %q) = %v, want error containing %q", tt.name, tt.value, err, tt.wantErr)
		}
	}
}
