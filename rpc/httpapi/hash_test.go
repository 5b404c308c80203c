package httpapi

import (
	"bytes"
	"encoding/json"
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

// specHashOf is the spec hash of a POST body as the API parses it.
func specHashOf(t *testing.T, s *Server, body string) uint64 {
	t.Helper()
	o, jerr := parseObject([]byte(body))
	if jerr != nil {
		t.Fatalf("%s: %v", body, jerr)
	}
	_, spec, e := s.parser("c").parse(o, "")
	if e != nil {
		t.Fatalf("%s: %v", body, e)
	}
	return spec.Hash
}

// A retried POST may re-encode its body: the same instant written as
// milliseconds or as RFC 3339 with any offset is the same spec (API.md §3:
// "the same spec again answers 200"); another instant, or a delay, is not.
func TestSpecHashOfTheSameInstant(t *testing.T) {
	s := newTestServer(&fakeBackend{})
	hash := func(trigger string) uint64 {
		t.Helper()
		return specHashOf(t, s, `{"id":"j","callback_url":"http://127.0.0.1:9/","`+trigger+`}`)
	}
	base := hash(`trigger_time":1893456000000`)
	for _, same := range []string{
		`trigger_time":"2030-01-01T00:00:00Z"`,
		`trigger_time":"2030-01-01T01:00:00+01:00"`,
		`trigger_time":"2030-01-01T00:00:00.000Z"`,
		`trigger_time":"2030-01-01t00:00:00z"`,
		`trigger_time":1893456000000.0`,
		`trigger_time":1.893456e12`,
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

// The same meta written another way is the same spec (API.md §3: "the
// same spec again answers 200"): keys in another order, a number written
// with a fraction or an exponent, an escaped letter, {} for no meta.
// Another value is another spec.
func TestSpecHashOfTheSameMeta(t *testing.T) {
	s := newTestServer(&fakeBackend{})
	hash := func(meta string) uint64 {
		t.Helper()
		body := `{"id":"j","callback_url":"http://127.0.0.1:9/","trigger_time":1893456000000`
		if meta != "" {
			body += `,"meta":` + meta
		}
		return specHashOf(t, s, body+`}`)
	}
	for _, group := range [][]string{
		{``, `{}`, `{ }`},
		{`{"a":1,"b":2}`, `{"b":2,"a":1}`, `{"a":1.0,"b":2}`, `{"\u0061":1,"b":2e0}`, `{"a":10E-1,"b":2}`, `{ "b" : 2 , "a" : 1 }`},
		{`{"x":[1,{"z":0.50,"y":-0}],"s":"é<"}`, `{"s":"\u00e9\u003c","x":[1,{"y":0,"z":0.5}]}`},
		{`12345678901234567890123`, `1.2345678901234567890123e22`},
	} {
		want := hash(group[0])
		for _, m := range group[1:] {
			if h := hash(m); h != want {
				t.Errorf("meta %s hashes %#x, %s %#x", m, h, group[0], want)
			}
		}
	}
	for _, pair := range [][2]string{
		{`{"a":1}`, `{"a":2}`},
		{`{"a":1}`, `{"a":"1"}`},
		{`{"a":[1,2]}`, `{"a":[2,1]}`},
		{`12345678901234567890123`, `12345678901234567890124`},
		{`0.1`, `0.10000000000000001`},
		{`{}`, `[]`},
		{`1e500`, `1e501`},
	} {
		if hash(pair[0]) == hash(pair[1]) {
			t.Errorf("metas %s and %s hash the same", pair[0], pair[1])
		}
	}
}

func TestCanonicalNumber(t *testing.T) {
	for in, want := range map[string]string{
		"0": "0", "-0": "0", "12": "12", "-12": "-12", "1.0": "1", "1.50": "1.5", "0.125": "0.125",
		"1e3": "1000", "1E+3": "1000", "25e-2": "0.25", "-2.5e-1": "-0.25", "1e401": "1e401", "3e-7": "0.0000003",
	} {
		if got := canonicalNumber(json.Number(in)); string(got) != want {
			t.Errorf("canonicalNumber(%s) = %s, want %s", in, got, want)
		}
	}
}

// isCanonical says yes only where decoding and encoding would give the
// same bytes back, and says it for the shapes metas usually have.
func TestIsCanonical(t *testing.T) {
	for b, want := range map[string]bool{
		`{"a":1}`: true,
		`{"a":1,"b":"x","c":[1,2,{"d":null}],"e":true,"f":false}`: true,
		`{"order":"o-1","user":42}`:                               true,
		`"text"`:                                                  true,
		`[]`:                                                      true,
		`0`:                                                       true,
		`-12`:                                                     true,
		`{"b":1,"a":2}`:                                           false, // keys out of order
		`{"a":1,"a":2}`:                                           false, // a key twice
		`{"a": 1}`:                                                false, // whitespace
		`{"a":1.0}`:                                               false,
		`{"a":1e3}`:                                               false,
		`{"a":-0}`:                                                false,
		`{"a":01}`:                                                false,
		`{"a":"\u0062"}`:                                          false,
		`{"a":"é"}`:                                               false,
		`{"a":1}x`:                                                false,
		`{"a":1`:                                                  false,
		`{"a":}`:                                                  false,
		`tru`:                                                     false,
	} {
		if got := isCanonical([]byte(b)); got != want {
			t.Errorf("isCanonical(%s) = %v, want %v", b, got, want)
		}
		if want && string(canonicalSlow([]byte(b))) != b {
			t.Errorf("%s is canonical by the fast check but decodes and encodes to %s", b, canonicalSlow([]byte(b)))
		}
	}
}

func FuzzIsCanonical(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":[1,{"b":"c"}],"d":null}`, `[1,2]`, `{"a":1.5}`, `"x"`, `{"b":1,"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !isCanonical(b) {
			return
		}
		if !json.Valid(b) {
			t.Fatalf("isCanonical(%q) but it is not JSON", b)
		}
		if got := canonicalSlow(b); !bytes.Equal(got, b) {
			t.Fatalf("isCanonical(%q) but decoding and encoding give %q", b, got)
		}
	})
}

// BenchmarkCanonicalMeta: a typical meta through the fast check
// (canonicalMeta) and through decoding and encoding (canonicalSlow).
func BenchmarkCanonicalMeta(b *testing.B) {
	meta := []byte(`{"order":"o-123456","tenant":"acme","user":42}`)
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			canonicalMeta(meta)
		}
	})
	b.Run("slow", func(b *testing.B) {
		for b.Loop() {
			canonicalSlow(meta)
		}
	})
}
