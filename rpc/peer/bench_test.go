package peer

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
)

// Run with:
//   go test -run '^$' -bench . -benchtime 2s ./rpc/peer/

var benchBodies = []struct {
	name string
	size int
}{{"body=100B", 100}, {"body=64KiB", 64 << 10}}

func benchEcho(_ context.Context, _ Method, b []byte) ([]byte, error) { return b, nil }

// BenchmarkRoundTrip is one caller, one call at a time: the latency of a
// call on a warm connection over loopback (ns/op).
func BenchmarkRoundTrip(b *testing.B) {
	for _, bb := range benchBodies {
		b.Run(bb.name, func(b *testing.B) {
			ts := startServer(b, "127.0.0.1:0", benchEcho)
			c := newClient(b, ClientOptions{})
			body := make([]byte, bb.size)
			ctx := context.Background()
			if _, err := c.Call(ctx, ts.addr, 1, body); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(2 * bb.size))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := c.Call(ctx, ts.addr, 1, body); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
		})
	}
}

// BenchmarkThroughput64 is 64 concurrent callers on the default 2
// connections per peer (calls/s).
func BenchmarkThroughput64(b *testing.B) {
	const callers = 64
	for _, bb := range benchBodies {
		b.Run(bb.name, func(b *testing.B) {
			ts := startServer(b, "127.0.0.1:0", benchEcho)
			c := newClient(b, ClientOptions{})
			ctx := context.Background()
			if _, err := c.Call(ctx, ts.addr, 1, make([]byte, bb.size)); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(2 * bb.size))
			b.ReportAllocs()
			var left atomic.Int64
			left.Store(int64(b.N))
			var wg sync.WaitGroup
			b.ResetTimer()
			for range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					body := make([]byte, bb.size)
					for left.Add(-1) >= 0 {
						if _, err := c.Call(ctx, ts.addr, 1, body); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
		})
	}
}
