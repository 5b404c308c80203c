package raftgroup

import (
	"errors"
	"testing"
	"time"
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
