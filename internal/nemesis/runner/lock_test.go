package runner

import (
	"strings"
	"testing"
)

// One run per directory: a second run in it is refused with a message
// that says why, until the first lets go.
func TestLockOutIsExclusive(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lockOut(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockOut(dir); err == nil || !strings.Contains(err.Error(), "another nemesis run is using") {
		t.Fatalf("second lock: %v", err)
	}
	unlock()
	again, err := lockOut(dir)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	again()
}
