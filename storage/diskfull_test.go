package storage

import (
	"errors"
	"fmt"
	"io"
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

// A full disk under the write-ahead log stops the node with exit status
// 70 and the message that says what to do. Pebble, left to see the failed
// write, panics: in the committing goroutine (recoverable) or, when the
// commit rotates the memtable, with a lock released, which becomes an
// unrecoverable "unlock of unlocked mutex" (exit status 2 and a goroutine
// dump; one run in ten). The fail-stop filesystem under Pebble
// (failstop.go) stops at the failed write instead: the message, then
// Options.OnFatal with an error wrapping ErrFatal, on which the child exits
// 70 as cmd/timemachine does. In a child process, because the stop is an
// exit.
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
	for _, want := range []string{"no space left on device", "the node stops to protect acknowledged data", "Check the disk"} {
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
	db, err := Open("db", Options{FS: fs, CacheBytes: 1 << 20, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
		OnFatal: func(err error) {
			if errors.Is(err, ErrFatal) && strings.Contains(err.Error(), "no space left on device") {
				os.Exit(70) // what cmd/timemachine does with a storage.ErrFatal
			}
			fmt.Fprintf(os.Stderr, "OnFatal got %v, not an ErrFatal about the full disk\n", err)
			os.Exit(1)
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
		if err := b.Commit(false); err != nil {
			fmt.Fprintf(os.Stderr, "commit failed with %v before OnFatal stopped the process\n", err)
			os.Exit(1)
		}
	}
	t.Fatal("100000 commits on a full disk all succeeded")
}

// A panic out of Pebble in a committing goroutine (a WAL write it could
// not make, in a build without the fail-stop filesystem in the way) takes
// the storage-failure path, not the process: OnFatal and an ErrFatal.
func TestWritePanicIsAStorageFailure(t *testing.T) {
	got := make(chan error, 1)
	d := &DB{log: slog.New(slog.NewTextHandler(io.Discard, nil)), onFatal: func(err error) { got <- err }}
	err := d.write(func() error { panic(errors.New("pebble: error writing WAL: no space left on device")) })
	if !errors.Is(err, ErrFatal) || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("write returned %v", err)
	}
	if ferr := <-got; !errors.Is(ferr, ErrFatal) {
		t.Fatalf("OnFatal got %v", ferr)
	}
}
