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
// ceiling the client puts on a load generator, per transport. "cancellable"
// uses a context with a Done channel, which the fasthttp transport serves
// by running each attempt on its own goroutine.
//
//	go test -run '^$' -bench DoLoopback -benchtime 3s ./client/
func BenchmarkDoLoopback(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		ctx.SetStatusCode(201)
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"id":"x"}`)
	}}
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Shutdown() }()
	body := []byte(`{"id":"bench-1","trigger_time":1767225600000,"callback_url":"http://127.0.0.1:1/hook","meta":{"p":"xxxxxxxxxxxxxxxx"}}`)
	for _, tr := range []struct {
		name string
		opts []Option
	}{
		{"nethttp", nil},
		{"fasthttp", []Option{WithFastHTTP()}},
	} {
		c, err := New([]string{ln.Addr().String()}, append(tr.opts, WithTimeout(5*time.Second), WithMaxConns(64))...)
		if err != nil {
			b.Fatal(err)
		}
		for _, bc := range []struct {
			name string
			ctx  func() (context.Context, context.CancelFunc)
		}{
			{"background", func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }},
			{"cancellable", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }},
		} {
			b.Run(tr.name+"/"+bc.name, func(b *testing.B) {
				ctx, cancel := bc.ctx()
				defer cancel()
				b.SetParallelism(16)
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
		c.Close()
	}
}
