package storage

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// A write-ahead-log write that fails (a full disk) makes Pebble panic in
// the goroutine that commits the batch. Unrecovered, that ended the node
// with exit status 2 and a goroutine dump; storage turns it into the
// storage-failure path: the actionable message, Options.OnFatal with an
// error wrapping ErrFatal (the node exits 70, as the child does here), and
// a commit error wrapping ErrFatal for the writer. In a child process,
// because the stop is an exit.
func TestFullDiskWALWriteStopsTheNode(t *testing.T) {
	if os.Getenv("TIMEMACHINE_WALFULL_CHILD") == "1" {
		walFullScenario(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFullDiskWALWriteStopsTheNode$", "-test.count=1")
	cmd.Env = append(os.Environ(), "TIMEMACHINE_WALFULL_CHILD=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 70 {
		t.Fatalf("child ended with %v, want exit status 70; output:\n%s", err, out)
	}
	for _, want := range []string{"no space left on device", "the node stops to protect acknowledged data", "Check the disk", "commit error wraps ErrFatal"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "goroutine ") {
		t.Errorf("the child died with a goroutine dump:\n%s", out)
	}
}

func walFullScenario(t *testing.T) {
	var full atomic.Bool
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if full.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			return syscall.ENOSPC
		}
		return nil
	}))
	fatal := make(chan error, 1)
	db, err := Open("db", Options{FS: fs, CacheBytes: 1 << 20, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
		OnFatal: func(err error) {
			select {
			case fatal <- err:
			default:
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	full.Store(true)
	val := []byte(strings.Repeat("v", 4096))
	for i := 0; i < 100000; i++ {
		b := db.NewBatch()
		if err := b.Set([]byte(fmt.Sprintf("k%08d", i)), val); err != nil {
			t.Fatal(err)
		}
		err := b.Commit(false)
		if err == nil {
			continue
		}
		if !errors.Is(err, ErrFatal) {
			fmt.Fprintf(os.Stderr, "commit failed with %v, not an ErrFatal\n", err)
			os.Exit(1)
		}
		fmt.Fprintln(os.Stderr, "commit error wraps ErrFatal")
		select {
		case ferr := <-fatal:
			if errors.Is(ferr, ErrFatal) && strings.Contains(ferr.Error(), "no space left on device") {
				os.Exit(70) // what cmd/timemachine does with a storage.ErrFatal
			}
			fmt.Fprintf(os.Stderr, "OnFatal got %v\n", ferr)
		default:
			fmt.Fprintln(os.Stderr, "OnFatal was not called")
		}
		os.Exit(1)
	}
	t.Fatal("100000 commits on a full disk all succeeded")
}
