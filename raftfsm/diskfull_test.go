package raftfsm

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/hashicorp/raft"
	"github.com/timemachine-db/timemachine/storage"
)

// A full disk stops the node with exit status 70 and a message that says
// what to do, before anything written to the full disk can be taken for
// durable: state-machine writes are unsynced and the raft log (a separate,
// synced file) still holds them, and the first sync that fails — at the
// latest the one a snapshot makes before raft may truncate its log — is
// fatal. Storage reports it (the message, then Options.OnFatal with an
// error wrapping storage.ErrFatal) and never returns into Pebble; the child
// exits as cmd/timemachine does for storage.ErrFatal (status 70). The
// scenario runs in a child process because the stop is an exit.
func TestFullDiskStopsTheNode(t *testing.T) {
	if os.Getenv("TIMEMACHINE_FULLDISK_CHILD") == "1" {
		fullDiskScenario(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFullDiskStopsTheNode$", "-test.count=1")
	cmd.Env = append(os.Environ(), "TIMEMACHINE_FULLDISK_CHILD=1")
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
}

func fullDiskScenario(t *testing.T) {
	var full atomic.Bool
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if full.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			return syscall.ENOSPC
		}
		return nil
	}))
	db, err := storage.Open("db", storage.Options{FS: fs, CacheBytes: 1 << 20, OnFatal: func(err error) {
		if errors.Is(err, storage.ErrFatal) && strings.Contains(err.Error(), "no space left on device") {
			os.Exit(70) // what cmd/timemachine does with a storage.ErrFatal from Node.Fatal
		}
		fmt.Fprintf(os.Stderr, "OnFatal got %v, not a storage.ErrFatal about the full disk\n", err)
		os.Exit(1)
	}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := OpenSlotFSM(db, 3, quiet, func(err error) { t.Logf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	entry := func(idx uint64) *raft.Log {
		return &raft.Log{Index: idx, Type: raft.LogCommand, Data: Encode(&Create{Coll: "c", ID: "j", Spec: spec(int64(idx), idx), Now: 1})}
	}
	f.ApplyBatch([]*raft.Log{entry(1)})
	full.Store(true)
	f.ApplyBatch([]*raft.Log{entry(2)})
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var s sink
	err = snap.Persist(&s)
	t.Fatalf("still running after a snapshot on a full disk (persist: %v)", err)
}
