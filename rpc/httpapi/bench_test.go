package httpapi

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/timemachine-db/timemachine/model"
	"github.com/valyala/fasthttp"
)

// nopBackend creates every job instantly, so the benchmarks measure the
// API layer alone: routing, decoding, validation, hashing, rendering.
type nopBackend struct{ *fakeBackend }

func (nopBackend) CreateJobs(_ context.Context, coll string, in []model.JobInput) ([]model.JobResult, error) {
	out := make([]model.JobResult, len(in))
	for i, x := range in {
		if x.Err != nil {
			out[i] = model.JobResult{ID: x.ID, Err: x.Err}
			continue
		}
		out[i] = model.JobResult{ID: x.ID, Code: model.CodeCreated, Job: storedJob(coll, x.ID, x.Spec)}
	}
	return out, nil
}

func benchJob(i int) string {
	return fmt.Sprintf(`{"id":"job-%07d","trigger_time":1767225600000,"callback_url":"https://example.com/hooks/reminder","meta":{"user":"u-%d","kind":"reminder","n":%d}}`, i, i, i)
}

func benchPost(b *testing.B, body string, jobs int) {
	s := newTestServer(&fakeBackend{})
	s.b = nopBackend{&fakeBackend{}}
	h := s.Handler()
	var req fasthttp.Request
	req.Header.SetMethod("POST")
	req.SetRequestURI(jobsURI)
	req.SetBodyString(body)
	var ctx fasthttp.RequestCtx
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		ctx.Init(&req, nil, nil)
		h(&ctx)
		if c := ctx.Response.StatusCode(); c != 201 && c != 200 {
			b.Fatalf("status %d: %s", c, ctx.Response.Body())
		}
	}
	b.ReportMetric(float64(b.N*jobs)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkPostJob is one POST of one job through Handler().
func BenchmarkPostJob(b *testing.B) { benchPost(b, benchJob(1), 1) }

// BenchmarkPostBatch1000 is one POST of a 1000-job batch through Handler().
func BenchmarkPostBatch1000(b *testing.B) {
	items := make([]string, 1000)
	for i := range items {
		items[i] = benchJob(i)
	}
	benchPost(b, "["+strings.Join(items, ",")+"]", 1000)
}
