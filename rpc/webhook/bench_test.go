package webhook

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// benchTarget is a minimal receiver on loopback, so the benchmark measures
// the client (encode, sign, pool, parse) plus one local round trip.
func benchTarget(b *testing.B) string {
	addr := serveFastHTTP(b, &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			ctx.SetContentType("application/json")
			ctx.SetBodyString(`{"ok":true}`)
		},
	})
	return "http://" + addr + "/hook"
}

func BenchmarkDeliver(b *testing.B) {
	url := benchTarget(b)
	key, _ := ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	for _, bc := range []struct {
		name  string
		ctx   context.Context
		key   []byte
		stale time.Duration // Options.StaleCheckAfter
	}{
		{"plain", context.Background(), nil, 0},
		// The stale-connection peek before every request, as before
		// DefaultStaleCheckAfter: one more syscall per delivery.
		{"plain-peek-always", context.Background(), nil, -1},
		{"signed", context.Background(), key, 0},
		{"signed-cancellable-ctx", cancellable(b), key, 0},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := New(Options{StaleCheckAfter: bc.stale})
			defer c.Close()
			r := testRequest(url)
			r.SigningKey = bc.key
			b.ReportAllocs()
			for b.Loop() {
				if res := c.Deliver(bc.ctx, r); res.StatusCode != 200 {
					b.Fatalf("Deliver = %+v", res)
				}
			}
		})
	}
}

// BenchmarkDeliverParallel: 256 callbacks in flight to one receiver (a
// burst's per-target share), each on a connection of its own or
// pipelined. ns/op is wall time per callback over the benchmark's cores,
// receiver included (it runs in this process).
func BenchmarkDeliverParallel(b *testing.B) {
	url := benchTarget(b)
	key, _ := ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	for _, pipeline := range []bool{false, true} {
		name := "connections"
		if pipeline {
			name = "pipelined"
		}
		b.Run(name, func(b *testing.B) {
			c := New(Options{})
			defer c.Close()
			b.ReportAllocs()
			b.SetParallelism(max(1, 256/runtime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				r := testRequest(url)
				r.SigningKey = key
				r.Pipeline = pipeline
				for pb.Next() {
					if res := c.Deliver(context.Background(), r); res.StatusCode != 200 {
						b.Errorf("Deliver = %+v", res)
						return
					}
				}
			})
		})
	}
}

func cancellable(b *testing.B) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	return ctx
}
