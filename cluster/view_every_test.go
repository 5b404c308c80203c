package cluster

import (
	"testing"
	"time"
)

func TestViewEveryGrowsWithSlots(t *testing.T) {
	for _, c := range []struct {
		slots int
		want  time.Duration
	}{{0, time.Second}, {12, time.Second}, {256, time.Second}, {257, 2 * time.Second}, {1024, 4 * time.Second}, {4096, 16 * time.Second}} {
		if got := viewEvery(c.slots); got != c.want {
			t.Errorf("viewEvery(%d) = %v, want %v", c.slots, got, c.want)
		}
	}
}
