package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/node"
	"github.com/timemachine-db/timemachine/storage"
)

// A storage failure while the node starts (Pebble blocked inside its
// open for good) exits 70 at once, and a signal during a start that never
// ends exits after startStopWait, or at once on a second signal: the
// process hung, ignoring SIGTERM, on a full disk or a corrupt table (a
// black-box review).
func TestStartNodeDoesNotHang(t *testing.T) {
	old := startStopWait
	startStopWait = 200 * time.Millisecond
	t.Cleanup(func() { startStopWait = old })
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	block := make(chan struct{})
	defer close(block)
	hung := func(fail bool) func(node.Config) (*node.Node, error) {
		return func(cfg node.Config) (*node.Node, error) {
			if fail {
				cfg.OnFatal(fmt.Errorf("%w: no space left on device", storage.ErrFatal))
			}
			<-block // Pebble's Fatalf never returns
			return nil, errors.New("unreachable")
		}
	}
	code := func(err error) int {
		var e *exitError
		if errors.As(err, &e) {
			return e.code
		}
		return -1
	}

	sig := make(chan os.Signal, 2)
	if _, err := startNode(hung(true), node.Config{}, sig, quiet); code(err) != exitStorageFatal {
		t.Fatalf("storage failure while starting: %v, want exit %d", err, exitStorageFatal)
	}

	sig <- syscall.SIGTERM
	start := time.Now()
	if _, err := startNode(hung(false), node.Config{}, sig, quiet); code(err) != 1 || time.Since(start) < startStopWait {
		t.Fatalf("a signal during a start that never ends: %v after %v, want exit 1 after %v", err, time.Since(start), startStopWait)
	}

	startStopWait = time.Hour
	sig <- syscall.SIGTERM
	sig <- syscall.SIGTERM
	if _, err := startNode(hung(false), node.Config{}, sig, quiet); code(err) != 1 {
		t.Fatalf("two signals during a start: %v, want exit 1 at once", err)
	}

	// A start that ends: a signal during it stops the node once started.
	ok := func(cfg node.Config) (*node.Node, error) { return nil, errors.New("bad flag") }
	sig <- syscall.SIGTERM
	if _, err := startNode(ok, node.Config{}, sig, quiet); err == nil || err.Error() != "bad flag" {
		t.Fatalf("a start that failed on its own: %v", err)
	}
}
