package tune

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// GCPercent is the server's GOGC while the heap is above the floor: it
// trades some heap for CPU, since the server allocates mostly short-lived
// request and batch garbage (at 200 a 1000-job batch create costs ~12 %
// less CPU than at 100; docs/benchmarks.md).
const GCPercent = 200

// DefaultHeapFloor is the heap size below which no collection starts.
const DefaultHeapFloor = 64 << 20

// maxGCPercent bounds what percentFor returns (the runtime keeps GOGC in
// an int32): a heap under 1/100 of the floor gets a goal under the floor.
const maxGCPercent = 10000

// percentFor is the GOGC that puts the next cycle's goal at
// max(live × (1 + base/100), floor). Before the first cycle (live 0) it is
// the base: the runtime's first goal is 4 MiB × GOGC/100, and a large
// GOGC would let start-up garbage grow to hundreds of MiB.
func percentFor(live, floor uint64, base int) int {
	if live == 0 || live*uint64(100+base)/100 >= floor {
		return base
	}
	return int(min(floor*100/live-100, maxGCPercent))
}

var gcOnce sync.Once

// GC sets GOGC to GCPercent with a heap floor of floor bytes (0: the
// default) for the rest of the process, unless GOGC is set in the
// environment. It is called once, by the server command.
func GC(floor uint64) {
	if os.Getenv("GOGC") != "" {
		return
	}
	if floor == 0 {
		floor = DefaultHeapFloor
	}
	gcOnce.Do(func() {
		f := &gcFloor{floor: floor, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
		f.adjust()
		f.arm()
	})
}

// gcFloor re-computes GOGC after every collection: a sentinel object's
// cleanup runs once the cycle that found it unreachable has finished,
// and arms the next sentinel.
type gcFloor struct {
	floor  uint64
	sample []metrics.Sample
	last   int
	runs   atomic.Int64 // adjustments made (tests)
}

type sentinel struct{ _ [32]byte } // above the tiny allocator's 16 bytes: its own object

func (f *gcFloor) arm() {
	runtime.AddCleanup(new(sentinel), func(f *gcFloor) {
		f.adjust()
		f.arm()
	}, f)
}

func (f *gcFloor) adjust() {
	f.runs.Add(1)
	metrics.Read(f.sample)
	var live uint64
	if f.sample[0].Value.Kind() == metrics.KindUint64 {
		live = f.sample[0].Value.Uint64()
	}
	if p := percentFor(live, f.floor, GCPercent); p != f.last {
		f.last = p
		debug.SetGCPercent(p)
	}
}
