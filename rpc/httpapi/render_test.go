package httpapi

import (
	"testing"
	"time"
)

// Durations are rendered in the short form API.md writes, and read back to
// the same value.
func TestDurationString(t *testing.T) {
	for _, c := range []struct {
		ms   int64
		want string
	}{
		{0, "0s"},
		{1, "1ms"},
		{500, "500ms"},
		{1000, "1s"},
		{1500, "1.5s"},
		{60_000, "1m"},
		{90_000, "1m30s"},
		{600_000, "10m"},
		{3_600_000, "1h"},
		{5_400_000, "1h30m"},
		{3_600_500, "1h0m0.5s"},
		{3_630_000, "1h0m30s"},
		{86_400_000, "24h"},
		{10 * 365 * 86_400_000, "87600h"},
	} {
		got := durationString(c.ms)
		if got != c.want {
			t.Errorf("durationString(%d) = %q, want %q", c.ms, got, c.want)
		}
		if d, err := time.ParseDuration(got); err != nil || d != time.Duration(c.ms)*time.Millisecond {
			t.Errorf("%q reads back as %v, %v; want %d ms", got, d, err, c.ms)
		}
	}
}
