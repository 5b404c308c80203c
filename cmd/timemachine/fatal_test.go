package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/storage"
)

// The exit statuses of a storage failure, as docs/operations.md lists them:
// 70 for Pebble failing (exit at once, storage untouched), 1 for a slot
// whose state write failed (after a clean close).
func TestFatalExit(t *testing.T) {
	for _, tc := range []struct {
		err        error
		code       int
		closeFirst bool
	}{
		{fmt.Errorf("%w: pebble: error writing WAL: no space left on device", storage.ErrFatal), 70, false},
		{fmt.Errorf("slot 3: %w", fmt.Errorf("%w: corruption", storage.ErrFatal)), 70, false},
		{fmt.Errorf("slot 3: %w", raftfsm.ErrStopped), 1, true},
		{errors.New("commit storage batch: input/output error"), 1, true},
	} {
		code, closeFirst := fatalExit(tc.err)
		if code != tc.code || closeFirst != tc.closeFirst {
			t.Errorf("%v: exit %d (close first %v), want %d (%v)", tc.err, code, closeFirst, tc.code, tc.closeFirst)
		}
	}
}
