package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

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

// A node whose slot raft log is damaged refuses to start with exit 70
// (restarting cannot help; systemd does not restart after 70) and a
// message naming the file and what to do.
func TestServerRefusesADamagedRaftLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "raft", "slots.db")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := storage.OpenRaftLogDB(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := db.Group("slot-0")
	if err != nil {
		t.Fatal(err)
	}
	if err := g.StoreLogs([]*raft.Log{{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte("entry-to-damage")}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(raw, []byte("entry-to-damage"))
	if at < 0 {
		t.Fatal("entry not found")
	}
	raw[at] ^= 0x20
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	_, errs, code := runCLI(t, "server", "--node-id", "x1", "--data-dir", dir, "--http-addr", "127.0.0.1:0", "--bind-addr", "127.0.0.1:0", "--serf-addr", "127.0.0.1:0")
	if code != exitStorageFatal || !strings.Contains(errs, path) || !strings.Contains(errs, "checksum mismatch") {
		t.Fatalf("exit %d, stderr %s", code, errs)
	}
}
