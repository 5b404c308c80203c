package storage

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// The disk watch warns once the free space falls below a tenth of the
// disk (at most 2 GiB), again each time it has halved since, and says so
// when it is back above one and a half times the threshold.
func TestDiskWatch(t *testing.T) {
	const total = 64 << 20 // a 64 MiB disk: low below 6.4 MiB
	var buf bytes.Buffer
	avail := uint64(40 << 20)
	w := &diskWatch{dir: "/data", log: slog.New(slog.NewTextHandler(&buf, nil)),
		free: func(string) (uint64, uint64, error) { return avail, total, nil }}
	count := func() (warns, infos int) {
		return strings.Count(buf.String(), "running out of space"), strings.Count(buf.String(), "has space again")
	}
	for _, c := range []struct {
		availMiB     float64
		warns, infos int
	}{
		{40, 0, 0},
		{10, 0, 0},
		{6, 1, 0},   // below 6.4 MiB
		{5, 1, 0},   // not halved yet
		{3, 2, 0},   // halved
		{2, 2, 0},   //
		{1.4, 3, 0}, // halved again
		{8, 3, 0},   // above the threshold, not above 1.5 times it (9.6)
		{10, 3, 1},  // space again
		{6, 4, 1},   // low again
	} {
		avail = uint64(c.availMiB * (1 << 20))
		w.check()
		if warns, infos := count(); warns != c.warns || infos != c.infos {
			t.Fatalf("at %.1f MiB free: %d warnings, %d recoveries; want %d, %d\n%s", c.availMiB, warns, infos, c.warns, c.infos, buf.String())
		}
	}
	if got := lowSpace(1 << 40); got != 2<<30 {
		t.Fatalf("lowSpace of 1 TiB = %d, want 2 GiB", got)
	}
	var nilWatch *diskWatch
	nilWatch.close()
}

// The watch runs on a real directory and stops on close.
func TestDiskWatchStartsAndStops(t *testing.T) {
	if _, total, err := statfsFree(t.TempDir()); err != nil || total == 0 {
		t.Fatalf("statfs: %d %v", total, err)
	}
	w := startDiskWatch(t.TempDir(), slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)), statfsFree)
	w.close()
	w.close()
}
