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

// A retried POST may re-encode its body: the same instant written as
// milliseconds or as RFC 3339 with any offset is the same spec (API.md §3:
// "the same spec again answers 200"); another instant, or a delay, is not.
func TestSpecHashOfTheSameInstant(t *testing.T) {
	s := newTestServer(&fakeBackend{})
	hash := func(trigger string) uint64 {
		t.Helper()
		o, jerr := parseObject([]byte(`{"id":"j","callback_url":"http://127.0.0.1:9/","` + trigger + `}`))
		if jerr != nil {
			t.Fatalf("%s: %v", trigger, jerr)
		}
		_, spec, e := s.parser("c").parse(o, "")
		if e != nil {
			t.Fatalf("%s: %v", trigger, e)
		}
		return spec.Hash
	}
	base := hash(`trigger_time":1893456000000`)
	for _, same := range []string{
		`trigger_time":"2030-01-01T00:00:00Z"`,
		`trigger_time":"2030-01-01T01:00:00+01:00"`,
		`trigger_time":"2030-01-01T00:00:00.000Z"`,
	} {
		if h := hash(same); h != base {
			t.Errorf("%s hashes %#x, %#x as milliseconds", same, h, base)
		}
	}
	for _, other := range []string{
		`trigger_time":1893456000001`,
		`trigger_time":"2030-01-01T00:00:00.001Z"`,
		`delay":"1h"`,
	} {
		if h := hash(other); h == base {
			t.Errorf("%s hashes as 1893456000000 does", other)
		}
	}
}
