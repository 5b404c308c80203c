package storage

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/internal/testutil"
)

// Pebble's fatal errors reach the node as an error wrapping ErrFatal,
// after the message that tells an operator what to do; storage itself
// never exits, and never returns into Pebble.
func TestFatalfReportsAndNeverReturns(t *testing.T) {
	var log testutil.SyncBuffer
	got := make(chan error, 1)
	p := pebbleLogger{l: slog.New(slog.NewTextHandler(&log, nil)), onFatal: func(err error) { got <- err }}
	returned := make(chan struct{})
	go func() {
		p.Fatalf("pebble: error writing WAL: %s", "no space left on device")
		close(returned)
	}()
	var err error
	select {
	case err = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("OnFatal was not called")
	}
	if !errors.Is(err, ErrFatal) || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("OnFatal got %v; want an ErrFatal naming the cause", err)
	}
	for _, want := range []string{"the node stops to protect acknowledged data", "Check the disk", "no space left on device"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, log.String())
		}
	}
	select {
	case <-returned:
		t.Fatal("Fatalf returned into Pebble")
	default:
	}
}
