package raftgroup

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/internal/testutil"
)

// After a planned transfer that failed, the replica starts no other for
// failedTransferGap (a second one in the same term can wedge
// hashicorp/raft's transfer flag for good: transfer.go), while a node
// stopping still hands its leadership away.
func TestNoSecondTransferRightAfterAFailedOne(t *testing.T) {
	leader, _ := openPair(t, Timing{})
	// A voter that does not exist: raft refuses at once.
	if err := leader.TransferTo("n9", "127.0.0.1:1"); err == nil {
		t.Fatal("a transfer to a server that is not a voter succeeded")
	}
	err := leader.TransferTo("n9", "127.0.0.1:1")
	if !errors.Is(err, ErrTransferTooSoon) {
		t.Fatalf("a second transfer right after a failed one: %v, want ErrTransferTooSoon", err)
	}
	if !leader.IsLeader() {
		t.Fatal("the refused transfer moved leadership")
	}
	// LeaveLeadership is not held back.
	leader.LeaveLeadership(5 * time.Second)
	if leader.IsLeader() {
		t.Fatal("LeaveLeadership right after a failed transfer kept leadership")
	}
}

// A leadership handed away (a node stopping) is logged at INFO with the
// group and its new leader: a routine move (API.md §5), which the stop's
// log did not name before (a black-box review).
func TestLeaveLeadershipLogsTheHandOff(t *testing.T) {
	var buf testutil.SyncBuffer
	leader, _ := openPairLogged(t, Timing{}, &buf)
	leader.LeaveLeadership(5 * time.Second)
	if leader.IsLeader() {
		t.Fatal("LeaveLeadership kept leadership")
	}
	if out := buf.String(); !strings.Contains(out, `msg="handed leadership away"`) || !strings.Contains(out, "level=INFO") || !strings.Contains(out, "group="+leader.cfg.Name) {
		t.Fatalf("log: %q", out)
	}
}
