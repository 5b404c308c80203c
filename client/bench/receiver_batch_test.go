package bench

import (
	"testing"

	"github.com/valyala/fasthttp"
)

// TestReceiverBatch: a batched delivery counts each of its jobs, and an
// "id" inside a job's meta is not taken for a job.
func TestReceiverBatch(t *testing.T) {
	r := newReceiver("run1", 10, 200)
	r.sched.Store(&schedule{firstMs: 1000, n: 10})
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.Set("X-Timemachine-Batch", "3")
	ctx.Request.SetBodyRaw([]byte(`{"jobs":[` +
		`{"id":"run1-0","collection":"bench","trigger_time":1000,"attempt":1,"meta":{"id":"run1-9"},"idempotency_key":"bench:run1-0:1000"},` +
		`{"id":"run1-4","collection":"bench","trigger_time":1000,"attempt":1,"idempotency_key":"bench:run1-4:1000"},` +
		`{"id":"run1-7","collection":"bench","trigger_time":1000,"attempt":1,"idempotency_key":"bench:run1-7:1000"}]}`))
	r.handle(&ctx)
	if d, b := r.distinct.Load(), r.batches.Load(); d != 3 || b != 1 {
		t.Fatalf("distinct %d, batches %d", d, b)
	}
	for _, i := range []int{0, 4, 7} {
		if r.count[i].Load() != 1 {
			t.Fatalf("job %d counted %d times", i, r.count[i].Load())
		}
	}
	if r.count[9].Load() != 0 || r.mismatch.Load() != 0 || r.foreign.Load() != 0 {
		t.Fatalf("meta id counted: %d, mismatch %d, foreign %d", r.count[9].Load(), r.mismatch.Load(), r.foreign.Load())
	}
}
