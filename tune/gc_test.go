package tune

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/internal/testutil"
)

func TestPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		live, floor uint64
		want        int
	}{
		{4 * mib, 64 * mib, 1500},            // goal 4 × 16 = 64 MiB
		{16 * mib, 64 * mib, 300},            // goal 64 MiB
		{21 * mib, 64 * mib, 204},            // just under: goal ~64 MiB
		{22 * mib, 64 * mib, 200},            // 22 × 3 = 66 ≥ 64: the base
		{500 * mib, 64 * mib, 200},           // a large heap: the base
		{0, 64 * mib, 200},                   // before the first cycle: the base
		{100 * 1024, 64 * mib, maxGCPercent}, // a tiny heap: capped
	} {
		if got := percentFor(tc.live, tc.floor, 200); got != tc.want {
			t.Errorf("percentFor(%d MiB, %d MiB) = %d, want %d", tc.live/mib, tc.floor/mib, got, tc.want)
		}
	}
}

// TestGCFloorFollowsCollections checks that the floor is re-computed
// after collections (the sentinel's cleanup re-arms itself) and keeps GOGC
// where percentFor puts it.
func TestGCFloorFollowsCollections(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	f := &gcFloor{floor: 1 << 40, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}} // a floor no test heap reaches
	f.arm()
	testutil.Eventually(t, 10*time.Second, "three adjustments after collections", func() error {
		runtime.GC()
		if n := f.runs.Load(); n < 3 {
			return fmt.Errorf("%d adjustments", n)
		}
		return nil
	})
	if got := debug.SetGCPercent(GCPercent); got != maxGCPercent {
		t.Fatalf("GOGC after collections = %d, want %d (a heap far under the floor)", got, maxGCPercent)
	}
}
