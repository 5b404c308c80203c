package client

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// BenchmarkDoLoopback is the client's own request rate against a trivial
// fasthttp server on loopback (client and server share the cores): the
// ceiling the client puts on a load generator. "cancellable" uses a context
// with a Done channel, which runs each attempt on its own goroutine.
//
//	go test -run '^$' -bench DoLoopback -benchtime 3s ./client/
func BenchmarkDoLoopback(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		ctx.SetStatusCode(201)
		ctx.SetBodyString(`{"id":"x"}`)
	}}
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Shutdown() }()
	c, err := New([]string{ln.Addr().String()}, WithTimeout(5*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	body := []byte(`{"id":"bench-1","trigger_time":1767225600000,"callback_url":"http://127.0.0.1:1/hook","meta":{"p":"xxxxxxxxxxxxxxxx"}}`)
	for _, bc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
	}{
		{"background", func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }},
		{"cancellable", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx, cancel := bc.ctx()
			defer cancel()
			b.SetParallelism(32)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, _, err := c.Do(ctx, RawRequest{Method: "POST", Path: "/v1/collections/bench/jobs", Body: body, Idempotent: true}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
	}
}
