package check

import (
	"fmt"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/internal/nemesis/history"
)

// fb builds a hand-made run for the fire checker. The run starts at wall
// time 0, so a stamp's Mono equals its Wall; times are milliseconds.
type fb struct {
	h history.History
}

func newFB() *fb { return &fb{} }

func (b *fb) write(kind history.Kind, job string, call, ret int64, trig int64, status int, outcome history.Outcome) *fb {
	op := history.Op{ID: int64(len(b.h.Ops) + 1), Kind: kind, Coll: "c", JobID: job, Via: "n1", Trigger: trig,
		Spec: fmt.Sprint(trig), Call: ms(call), Ret: ms(ret), Outcome: outcome, Status: status}
	if outcome == history.Unknown {
		op.Ret = history.Never
	}
	b.h.Ops = append(b.h.Ops, op)
	return b
}

func (b *fb) create(job string, call, ret, trig int64) *fb {
	return b.write(history.Create, job, call, ret, trig, 201, history.OK)
}

func (b *fb) deliver(job string, trig int64, attempt int, recv, reply int64, answer string) *fb {
	b.h.Deliveries = append(b.h.Deliveries, history.Delivery{Seq: int64(len(b.h.Deliveries) + 1), Coll: "c", JobID: job,
		IdemKey: fmt.Sprintf("c:%s:%d", job, trig), AttemptHeader: attempt, Attempt: attempt, Trigger: trig,
		From: "n1", Recv: ms(recv), Reply: ms(reply), Answer: answer})
	return b
}

func (b *fb) fault(kind string, planned bool, start, end int64) *fb {
	b.h.Faults = append(b.h.Faults, history.Fault{ID: len(b.h.Faults) + 1, Kind: kind, Planned: planned, Start: ms(start), End: ms(end)})
	return b
}

var fireOpts = FireOptions{CallbackTimeout: 2 * time.Second, FailoverAllowance: 3 * time.Second}

func (b *fb) check() FireResult { return Fires(&b.h, fireOpts) }

func TestFiresCleanRun(t *testing.T) {
	res := newFB().
		create("a", 0, 10, 1000).deliver("a", 1000, 1, 1050, 1051, "200").
		create("b", 0, 10, 2000).deliver("b", 2000, 1, 2010, 2011, "500").deliver("b", 2000, 2, 2300, 2301, "200").
		write(history.Create, "c", 0, 0, 3000, 0, history.Unknown). // maybe created: owes nothing
		create("d", 0, 10, 3000).write(history.Delete, "d", 20, 30, 0, 204, history.OK).
		create("e", 0, 10, 500).write(history.Delete, "e", 400, 0, 0, 0, history.Unknown).
		create("f", 0, 10, 900).write(history.Delete, "f", 950, 1200, 0, 409, history.OK).deliver("f", 900, 1, 910, 1300, "slow-200").
		check()
	if n := res.Violations(); n != 0 {
		t.Fatalf("%d violations in a clean run: %+v", n, res)
	}
	if res.Owed != 3 || res.Delivered != 3 || res.Jobs != 6 {
		t.Fatalf("owed %d delivered %d jobs %d, want 3, 3, 6", res.Owed, res.Delivered, res.Jobs)
	}
	if d := res.Lateness["none"]; d.N != 3 || d.Max != 50*time.Millisecond {
		t.Fatalf("lateness %+v", res.Lateness)
	}
}

func TestFiresFindsEachViolation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		b     *fb
		count func(FireResult) int
	}{
		{"lost", newFB().create("a", 0, 10, 1000),
			func(r FireResult) int { return len(r.Lost) }},
		{"lost after its retried create", newFB().write(history.Create, "a", 0, 0, 1000, 0, history.Unknown).create("a", 20, 30, 1000),
			func(r FireResult) int { return len(r.Lost) }},
		{"early", newFB().create("a", 0, 10, 1000).deliver("a", 1000, 1, 970, 971, "200"),
			func(r FireResult) int {
				if len(r.Early) == 1 && r.Early[0].By != 30*time.Millisecond {
					return -1
				}
				return len(r.Early)
			}},
		{"delivered after the delete's 204", newFB().create("a", 0, 10, 1000).
			write(history.Delete, "a", 990, 998, 0, 204, history.OK).deliver("a", 1000, 1, 1001, 1002, "200"),
			func(r FireResult) int { return len(r.AfterDelete) }},
		{"in flight when the delete's 204 arrived", newFB().create("a", 0, 10, 1000).
			deliver("a", 1000, 1, 1001, 1900, "slow-200").write(history.Delete, "a", 1002, 1010, 0, 204, history.OK),
			func(r FireResult) int { return len(r.InFlightAtAck) }},
		{"replaced trigger delivered after the put's 200", newFB().create("a", 0, 10, 1000).
			write(history.Put, "a", 990, 995, 5000, 200, history.OK).deliver("a", 1000, 1, 1001, 1002, "200").deliver("a", 5000, 1, 5001, 5002, "200"),
			func(r FireResult) int { return len(r.AfterReplace) }},
		{"replaced and the new trigger never delivered", newFB().create("a", 0, 10, 1000).
			write(history.Put, "a", 20, 30, 5000, 200, history.OK).deliver("a", 1000, 1, 1001, 1002, "200"),
			func(r FireResult) int { return len(r.Lost) }},
		{"duplicate with no fault", newFB().create("a", 0, 10, 1000).
			deliver("a", 1000, 1, 1001, 1002, "200").deliver("a", 1000, 1, 1003, 1004, "200"),
			func(r FireResult) int { return len(r.Outside) }},
		{"re-sent at once after the receiver closed the connection", newFB().create("a", 0, 10, 1000).fault("kill", false, 500, 1500).
			deliver("a", 1000, 1, 1001, 1002, "close").deliver("a", 1000, 1, 1003, 1004, "200"),
			func(r FireResult) int { return len(r.ResentOnClose) }},
		{"duplicate during a planned move", newFB().create("a", 0, 10, 1000).fault("drain", true, 500, 1500).
			deliver("a", 1000, 1, 1001, 1002, "200").deliver("a", 1000, 1, 1200, 1201, "200"),
			func(r FireResult) int { return len(r.PlannedDups) }},
		{"job never written", newFB().create("a", 0, 10, 1000).deliver("a", 1000, 1, 1001, 1002, "200").deliver("zz", 1000, 1, 1001, 1002, "200"),
			func(r FireResult) int { return len(r.Stray) }},
		{"trigger never written", newFB().create("a", 0, 10, 1000).deliver("a", 1000, 1, 1001, 1002, "200").deliver("a", 1234, 1, 1300, 1301, "200"),
			func(r FireResult) int { return len(r.Stray) }},
		{"wrong idempotency key", func() *fb {
			b := newFB().create("a", 0, 10, 1000).deliver("a", 1000, 1, 1001, 1002, "200")
			b.h.Deliveries[0].IdemKey = "c:a:999"
			return b
		}(), func(r FireResult) int { return len(r.BadHeaders) }},
		{"attempt header differs from the body", func() *fb {
			b := newFB().create("a", 0, 10, 1000).deliver("a", 1000, 1, 1001, 1002, "200")
			b.h.Deliveries[0].AttemptHeader = 2
			return b
		}(), func(r FireResult) int { return len(r.BadHeaders) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := tc.b.check()
			if got := tc.count(res); got != 1 {
				t.Fatalf("want exactly 1 finding of this kind, got %d: %+v", got, res)
			}
			if res.Violations() < 1 {
				t.Fatalf("not counted as a violation: %+v", res)
			}
		})
	}
}

func TestFiresDuplicatesInAFaultWindowAreAllowed(t *testing.T) {
	// A kill at 1.5 s-3 s: a callback sent at 1 s (within the callback
	// timeout before the fault) may repeat.
	res := newFB().create("a", 0, 10, 1000).fault("kill", false, 1500, 3000).
		deliver("a", 1000, 1, 1001, 1002, "200").deliver("a", 1000, 1, 3500, 3501, "200").check()
	if res.Violations() != 0 || len(res.InWindow) != 1 || res.InWindowByKind["kill"] != 1 {
		t.Fatalf("%+v", res)
	}
	// Long before the fault it may not.
	res = newFB().create("a", 0, 10, 1000).fault("kill", false, 9000, 10000).
		deliver("a", 1000, 1, 1001, 1002, "200").deliver("a", 1000, 1, 9500, 9501, "200").check()
	if len(res.Outside) != 1 {
		t.Fatalf("%+v", res)
	}
}

func TestFiresLatenessByFault(t *testing.T) {
	res := newFB().fault("pause", false, 900, 5000).
		create("a", 0, 10, 1000).deliver("a", 1000, 1, 4000, 4001, "200").
		create("b", 0, 10, 20000).deliver("b", 20000, 1, 20010, 20011, "200").
		create("past", 15000, 15010, 100).deliver("past", 100, 1, 15100, 15101, "200").
		check()
	if d := res.Lateness["pause"]; d.N != 1 || d.Max != 3*time.Second {
		t.Fatalf("pause lateness %+v", res.Lateness)
	}
	// A trigger in the past is late from its create, not from the trigger.
	if d := res.Lateness["none"]; d.N != 2 || d.Max != 100*time.Millisecond {
		t.Fatalf("none lateness %+v", res.Lateness)
	}
}

func TestFiresDeadline(t *testing.T) {
	b := newFB().create("a", 0, 10, 10_000)
	opt := fireOpts
	opt.DeadlineWall = int64(9 * time.Second)
	if res := Fires(&b.h, opt); res.Owed != 0 || len(res.Lost) != 0 {
		t.Fatalf("a job due after the run stopped waiting owes nothing: %+v", res)
	}
	opt.DeadlineWall = int64(20 * time.Second)
	if res := Fires(&b.h, opt); len(res.Lost) != 1 {
		t.Fatalf("%+v", res)
	}
}

func TestFiresStaleSenderAfterItsFault(t *testing.T) {
	build := func(from1, from2 string) *fb {
		b := newFB().create("a", 0, 10, 2000).
			deliver("a", 2000, 1, 2001, 2002, "200").deliver("a", 2000, 1, 5200, 5201, "200")
		b.h.Faults = append(b.h.Faults, history.Fault{ID: 1, Kind: "pause-leader", Targets: []string{"n1"}, Isolates: true, Start: ms(1500), End: ms(5000)})
		b.h.Deliveries[0].From, b.h.Deliveries[1].From = from1, from2
		return b
	}
	// n2 (the new leader) delivered it during n1's pause; n1 again after
	// SIGCONT: a deposed leader's callback.
	if res := build("n2", "n1").check(); len(res.StaleDups) != 1 || res.Violations() != 1 {
		t.Fatalf("%+v", res)
	}
	// Senders unknown (loopback): only the window rule applies.
	if res := build("", "").check(); len(res.InWindow) != 1 || res.Violations() != 0 {
		t.Fatalf("%+v", res)
	}
	// The victim's own in-flight copy first, the new leader's after: the
	// allowed failover repeat.
	if res := build("n1", "n2").check(); len(res.InWindow) != 1 || res.Violations() != 0 {
		t.Fatalf("%+v", res)
	}
	// n2, the leader during n1's pause, is killed with the callback in
	// flight after n1 resumed; n1, elected again, sends it: not a deposed
	// node's copy, but the repeat allowed at n2's failover.
	b := newFB().create("a", 0, 10, 4000).
		deliver("a", 4000, 1, 4001, 6001, "gone").deliver("a", 4000, 1, 6500, 6501, "200")
	b.h.Deliveries[0].From, b.h.Deliveries[1].From = "n2", "n1"
	b.h.Faults = append(b.h.Faults,
		history.Fault{ID: 1, Kind: "pause-leader", Targets: []string{"n1"}, Isolates: true, Start: ms(1500), End: ms(5000)},
		history.Fault{ID: 2, Kind: "kill-one", Targets: []string{"n2"}, Isolates: true, Start: ms(5700), End: ms(8000)})
	if res := b.check(); len(res.StaleDups) != 0 || len(res.InWindow) != 1 || res.Violations() != 0 {
		t.Fatalf("%+v", res)
	}
	// A kill of every node stops n2 as well (kill-all does not isolate
	// anyone, nobody being left, but n2's outcome is lost all the same):
	// n1's copy is the allowed repeat (the short nemesis, seed 1: kill-all
	// 1.5 s after n2's attempt, which the receiver had closed).
	b.h.Faults[1] = history.Fault{ID: 2, Kind: "kill-all", Targets: []string{"n1", "n2", "n3"}, Start: ms(5700), End: ms(8000)}
	if res := b.check(); len(res.StaleDups) != 0 || len(res.InWindow) != 1 || res.Violations() != 0 {
		t.Fatalf("%+v", res)
	}
	// Without n2's kill, n1's copy is a deposed node's.
	b.h.Faults = b.h.Faults[:1]
	if res := b.check(); len(res.StaleDups) != 1 {
		t.Fatalf("%+v", res)
	}
}

// A create held by a paused node (the client timed out), retried through
// another node, deleted, and then applied when the node resumed: the job
// fires after the delete's 204, and that is not a violation (the
// indeterminate create may take effect at any time after its call).
func TestFiresIndeterminateWriteAppliedAfterTheDelete(t *testing.T) {
	b := newFB().
		write(history.Create, "a", 0, 0, 1000, 0, history.Unknown). // held by the paused node
		create("a", 500, 510, 1000).                                // the retry
		deliver("a", 1000, 1, 1001, 1002, "200").
		write(history.Delete, "a", 1005, 1010, 0, 204, history.OK).
		deliver("a", 1000, 1, 9000, 9001, "200") // the held create, applied at 8.9 s
	res := b.check()
	if len(res.AfterDelete) != 0 || len(res.InFlightAtAck) != 0 || res.Violations() != 0 || len(res.InWindow) != 1 {
		t.Fatalf("explained by the indeterminate create: %+v", res)
	}
	// Without the indeterminate create it is a violation.
	b.h.Ops = b.h.Ops[1:]
	if res := b.check(); len(res.AfterDelete) != 1 || len(res.Outside) != 1 {
		t.Fatalf("%+v", res)
	}
}

// A callback sent by a leader right before it was cut off, still in
// flight when its successor acknowledged the job's DELETE: the successor
// cannot know of it; allowed and reported as such (seen in the nemesis:
// partition-one of the leader, the callback 20 ms past the cut, the 204
// through the new leader 1 s later). The same without the fault, or from
// a node the fault did not cut off, stays a violation.
func TestFiresInFlightAtAFailover(t *testing.T) {
	build := func(from string, withFault bool) FireResult {
		b := newFB().create("a", 0, 10, 1000).
			deliver("a", 1000, 1, 1001, 3000, "slow-200").write(history.Delete, "a", 1500, 2000, 0, 204, history.OK)
		b.h.Deliveries[0].From = from
		if withFault {
			b.h.Faults = append(b.h.Faults, history.Fault{ID: 1, Kind: "partition-one", Targets: []string{"n3"}, Isolates: true, Start: ms(990), End: ms(4000)})
		}
		return b.check()
	}
	if res := build("n3", true); len(res.InFlightAtFailover) != 1 || res.Violations() != 0 {
		t.Fatalf("cut-off sender: %+v", res)
	}
	if res := build("n3", false); len(res.InFlightAtAck) != 1 {
		t.Fatalf("no fault: %+v", res)
	}
	if res := build("n2", true); len(res.InFlightAtAck) != 1 {
		t.Fatalf("a sender the fault did not cut off: %+v", res)
	}

	// Packet loss on the sender's links, the callback sent while it
	// lasted: the others may have found the sender dead and failed over
	// (seed 3945754073149428009, cycle 7). Loss on other links, or a
	// callback sent after the loss ended, stays a violation.
	lossy := func(targets []string, end int64) FireResult {
		b := newFB().create("a", 0, 10, 1000).
			deliver("a", 1000, 1, 1001, 3000, "slow-200").write(history.Delete, "a", 1500, 2000, 0, 204, history.OK)
		b.h.Deliveries[0].From = "n3"
		b.h.Faults = append(b.h.Faults, history.Fault{ID: 1, Kind: "loss", Targets: targets, Start: ms(500), End: ms(end)})
		return b.check()
	}
	if res := lossy([]string{"n1", "n2", "n3"}, 4000); len(res.InFlightAtFailover) != 1 || res.Violations() != 0 {
		t.Fatalf("loss on the sender's links: %+v", res)
	}
	if res := lossy([]string{"n1", "n2"}, 4000); len(res.InFlightAtAck) != 1 {
		t.Fatalf("loss on other links: %+v", res)
	}
	if res := lossy([]string{"n1", "n2", "n3"}, 900); len(res.InFlightAtAck) != 1 {
		t.Fatalf("a callback sent after the loss: %+v", res)
	}
}

// An attempt due during a planned move whose sender is killed by the next
// (unplanned) fault while the copy is in flight, and sent again by the
// successor, is the in-flight duplicate the contract allows — not a
// duplicate of the planned move (the full nemesis of 2026-11-26, r16:
// SIGTERM of n1, then the wipe of n2 cut n2's callback).
func TestDuplicateCutOffByTheNextFaultIsInItsWindow(t *testing.T) {
	b := newFB().create("a", 0, 10, 1000).fault("sigterm", true, 500, 1500)
	b.h.Faults = append(b.h.Faults, history.Fault{ID: 2, Kind: "wipe", Isolates: true, Targets: []string{"n2"}, Start: ms(4200), End: ms(7000)})
	b.deliver("a", 1000, 1, 3300, 4200, "gone").deliver("a", 1000, 1, 4300, 4301, "200")
	b.h.Deliveries[0].From = "n2"
	res := b.check()
	if len(res.PlannedDups) != 0 || res.InWindowByKind["wipe"] != 1 || res.Violations() != 0 {
		t.Fatalf("planned %v, in window %v, violations %d: want the duplicate in the wipe's window", res.PlannedDups, res.InWindowByKind, res.Violations())
	}
	// The same copies with no fault cutting the sender off stay a
	// duplicate of the planned move.
	b.h.Faults = b.h.Faults[:1]
	if res := b.check(); len(res.PlannedDups) != 1 {
		t.Fatalf("planned %v: want the duplicate counted against the planned move", res.PlannedDups)
	}
}
