package testutil

import (
	"errors"
	"testing"
	"time"
)

func TestPoll(t *testing.T) {
	calls := 0
	err := Poll(time.Second, func() error {
		calls++
		if calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("Poll = %v after %d calls, want nil after 3", err, calls)
	}

	start := time.Now()
	want := errors.New("never")
	if err := Poll(30*time.Millisecond, func() error { return want }); !errors.Is(err, want) {
		t.Fatalf("Poll on timeout = %v, want the condition's last error", err)
	}
	if d := time.Since(start); d < 30*time.Millisecond || d > time.Second {
		t.Fatalf("Poll with a 30ms timeout returned after %v", d)
	}
}

func TestTrue(t *testing.T) {
	if err := True(func() bool { return true })(); err != nil {
		t.Fatal(err)
	}
	if err := True(func() bool { return false })(); err == nil {
		t.Fatal("a false condition reported nil")
	}
}

// fakeT records Fatalf instead of stopping the test.
type fakeT struct {
	testing.TB
	failed string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = format
}

func TestEventuallyFailsWithWhat(t *testing.T) {
	ft := &fakeT{TB: t}
	Eventually(ft, 10*time.Millisecond, "the impossible", func() error { return errors.New("no") })
	if ft.failed == "" {
		t.Fatal("Eventually did not fail on timeout")
	}
	ok := &fakeT{TB: t}
	Eventually(ok, time.Second, "the obvious", func() error { return nil })
	if ok.failed != "" {
		t.Fatal("Eventually failed on a condition that held")
	}
}
