package dht

import (
	"fmt"
	"testing"

	"github.com/cespare/xxhash/v2"
)

func TestSlotOfMatchesContract(t *testing.T) {
	cases := []struct{ coll, id string }{
		{"default", "a"}, {"notifications", "user-reminder-123"}, {"c", "x:y@z"}, {"default", ""},
	}
	for _, c := range cases {
		for _, n := range []int{1, 3, 12, 4096} {
			want := int(xxhash.Sum64String(c.coll+"/"+c.id) % uint64(n))
			if got := SlotOf(c.coll, c.id, n); got != want {
				t.Errorf("SlotOf(%q,%q,%d) = %d, want %d", c.coll, c.id, n, got, want)
			}
		}
	}
}

func TestSlotOfSpreads(t *testing.T) {
	const n = 12
	counts := make([]int, n)
	for i := 0; i < 120000; i++ {
		counts[SlotOf("default", fmt.Sprintf("job-%d", i), n)]++
	}
	for s, c := range counts {
		if c < 9000 || c > 11000 {
			t.Errorf("slot %d got %d of 120000 ids; want about 10000", s, c)
		}
	}
}

func FuzzSlotOfInRange(f *testing.F) {
	f.Add("default", "a", 12)
	f.Fuzz(func(t *testing.T, coll, id string, n int) {
		if n <= 0 || n > 1<<16 {
			return
		}
		if s := SlotOf(coll, id, n); s < 0 || s >= n {
			t.Fatalf("slot %d out of [0,%d)", s, n)
		}
	})
}
