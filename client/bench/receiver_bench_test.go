package bench

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

const benchJobs = 1 << 20

func benchPayload(i int, trig int64) []byte {
	return []byte(`{"id":"bench1-` + strconv.Itoa(i) + `","collection":"bench","trigger_time":` +
		strconv.FormatInt(trig, 10) + `,"attempt":1,"meta":{"p":"xxxxxxxxxxxxxxxx"}}`)
}

// BenchmarkReceiverHandle is the receiver's per-delivery CPU cost without
// the network: parse, atomics, answer.
//
//	go test -run '^$' -bench ReceiverHandle ./client/bench/
func BenchmarkReceiverHandle(b *testing.B) {
	r := newReceiver("bench1", benchJobs, 200)
	r.sched.Store(&schedule{firstMs: 1, n: benchJobs})
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var ctx fasthttp.RequestCtx
		bodies := make([][]byte, 64)
		base := int(next.Add(1)) * 64
		for i := range bodies {
			bodies[i] = benchPayload((base+i)%benchJobs, 1)
		}
		i := 0
		for pb.Next() {
			ctx.Request.SetBodyRaw(bodies[i%len(bodies)])
			r.handle(&ctx)
			i++
		}
	})
}

// BenchmarkReceiverLoopback is the receiver's capacity over loopback HTTP
// with keep-alive connections, the way the cluster delivers. Client and
// receiver share the machine's cores, so this is a lower bound.
//
//	go test -run '^$' -bench ReceiverLoopback -benchtime 5s ./client/bench/
func BenchmarkReceiverLoopback(b *testing.B) {
	r := newReceiver("bench1", benchJobs, 200)
	if err := r.start("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	defer r.close(time.Second)
	r.sched.Store(&schedule{firstMs: 1, n: benchJobs})
	hc := &fasthttp.HostClient{Addr: r.addr(), MaxConns: 512, MaxConnWaitTimeout: 5 * time.Second}
	uri := "http://" + r.addr() + "/hook"
	var next atomic.Int64
	b.SetParallelism(32) // 32 × GOMAXPROCS concurrent deliveries
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI(uri)
		req.Header.SetMethod(fasthttp.MethodPost)
		req.Header.SetContentType("application/json")
		for pb.Next() {
			i := int(next.Add(1)) % benchJobs
			req.SetBodyRaw(benchPayload(i, 1))
			if err := hc.DoTimeout(req, resp, 5*time.Second); err != nil {
				b.Error(err)
				return
			}
			if resp.StatusCode() != 200 {
				b.Errorf("status %d", resp.StatusCode())
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	if got := r.distinct.Load(); got == 0 {
		b.Error("receiver recorded nothing")
	}
}
