package httpapi

import (
	"testing"
	"time"
)

// POST /v1/debug/clock exists only with --debug-faults (Options.DebugClock):
// it shifts the process's clock (204); without the flag it is a 404 like
// any unknown path.
func TestDebugClockOnlyWithTheFlag(t *testing.T) {
	if r := do(newTestServer(&fakeBackend{}).Handler(), "POST", "/v1/debug/clock", `{"offset":"2s"}`); r.status != 404 {
		t.Fatalf("without the flag: %d", r.status)
	}
	var got time.Duration
	h := newTestServer(&fakeBackend{}, func(o *Options) {
		o.DebugClock = func(d time.Duration) error { got = d; return nil }
	}).Handler()
	if r := do(h, "POST", "/v1/debug/clock", `{"offset":"-2s"}`); r.status != 204 || got != -2*time.Second {
		t.Fatalf("with the flag: %d, offset %v", r.status, got)
	}
	for _, body := range []string{`{"offset":"soon"}`, `{}`, `{"offset":"1s","x":1}`, `not json`} {
		if r := do(h, "POST", "/v1/debug/clock", body); r.status != 400 {
			t.Errorf("%s: %d, want 400", body, r.status)
		}
	}
	if r := do(h, "GET", "/v1/debug/clock", ""); r.status != 405 {
		t.Errorf("GET: %d, want 405", r.status)
	}
}
