package httpapi

import (
	"testing"

	"github.com/timemachine-db/timemachine/model"
)

// The spec hash is stored with every job: a change would turn every retried
// POST of a job created before an upgrade into a 409. These values were
// computed by the first release (raftfsm.HashSpec at commit cffab28).
func TestHashSpecIsFrozen(t *testing.T) {
	for _, tc := range []struct {
		spec  model.JobSpec
		given string
		want  uint64
	}{
		{model.JobSpec{}, "", 0x9439ed185e5550fa},
		{model.JobSpec{CallbackURL: "http://127.0.0.1:9000/hook"}, "1767225600000", 0x5cb08d4e0bda5f8a},
		{model.JobSpec{Route: "r", Meta: []byte(`{"user":42}`), Retry: model.RetryPolicy{MaxAttempts: 8, InitialIntervalMs: 2000,
			Multiplier: 1.5, MaxIntervalMs: 60000, MaxAgeMs: 3600000}, CallbackTimeoutMs: 5000}, "delay:90s", 0xd7a4ee2e026c33a9},
		{model.JobSpec{CallbackURL: "https://example.com/x", Meta: []byte{}}, "2026-01-01T00:00:00Z", 0x8f6a62d41b784c69},
	} {
		if got := HashSpec(&tc.spec, tc.given); got != tc.want {
			t.Errorf("HashSpec(%+v, %q) = %#x, want %#x", tc.spec, tc.given, got, tc.want)
		}
	}
}
