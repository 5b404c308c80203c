package slot

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/internal/testutil"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
)

func putEvery(t *testing.T, r *Replica, id string, every time.Duration, anchor, next int64) {
	t.Helper()
	spec := model.ScheduleSpec{EveryMs: every.Milliseconds(), CallbackURL: "http://127.0.0.1:1/hook", Hash: uint64(anchor)}
	res, err := r.Propose(context.Background(), &raftfsm.PutSchedule{Coll: "default", ID: id, Spec: spec, Anchor: anchor, Next: next, Now: anchor})
	if err != nil || res[0].Code != model.CodeCreated {
		t.Fatalf("put schedule %s: %v %v", id, res, err)
	}
}

func occurrences(d *fakeDeliverer, schedule string) map[string][]time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string][]time.Time{}
	for id, ts := range d.got {
		if strings.HasPrefix(id, schedule+"@") {
			out[id] = append([]time.Time(nil), ts...)
		}
	}
	return out
}

func TestScheduleFiresEachOccurrenceOnceNeverEarly(t *testing.T) {
	d := newFakeDeliverer()
	ts := openTestSlot(t, t.TempDir(), d)
	defer ts.close(t)
	anchor := time.Now().UnixMilli()
	putEvery(t, ts.r, "tick", time.Second, anchor, anchor+1000)
	testutil.Eventually(t, 10*time.Second, "three occurrences", testutil.True(func() bool { return len(occurrences(d, "tick")) >= 3 }))
	for id, got := range occurrences(d, "tick") {
		_, at, ok := model.SplitOccurrenceID(id)
		if !ok || (at-anchor)%1000 != 0 {
			t.Fatalf("occurrence id %q is not on the schedule's grid", id)
		}
		if len(got) != 1 {
			t.Fatalf("%s delivered %d times", id, len(got))
		}
		if got[0].UnixMilli() < at {
			t.Fatalf("%s fired %d ms early", id, at-got[0].UnixMilli())
		}
	}
	sc, _, ok, err := ts.r.GetSchedule("default", "tick")
	if err != nil || !ok || sc.LastFireAt == 0 || sc.NextFireAt <= sc.LastFireAt || sc.Missed != 0 {
		t.Fatalf("schedule after firing: %+v %v %v", sc, ok, err)
	}
	j, ok, err := ts.r.Get("default", model.OccurrenceID("tick", anchor+1000))
	if err != nil || !ok || j.Schedule != "tick" {
		t.Fatalf("occurrence job: %+v %v %v", j, ok, err)
	}
}

// After an outage only the latest missed occurrence fires; the others are
// counted.
func TestScheduleCatchUpFiresLatestOnly(t *testing.T) {
	d := newFakeDeliverer()
	ts := openTestSlot(t, t.TempDir(), d)
	defer ts.close(t)
	now := time.Now().UnixMilli()
	anchor := now - 10_500 // ten occurrences are in the past
	putEvery(t, ts.r, "late", time.Second, anchor, anchor+1000)
	testutil.Eventually(t, 10*time.Second, "the catch-up occurrence", testutil.True(func() bool { return len(occurrences(d, "late")) >= 1 }))
	sc, _, _, _ := ts.r.GetSchedule("default", "late")
	if sc.Missed < 9 {
		t.Fatalf("missed = %d, want >= 9", sc.Missed)
	}
	for id := range occurrences(d, "late") {
		if _, at, _ := model.SplitOccurrenceID(id); at < now-1000 {
			t.Fatalf("an old missed occurrence fired: %s (now %d)", id, now)
		}
	}
}

// The schedule loop sleeps until the next occurrence is due (less its
// lead), up to scheduleQuiet with no schedule at all: it looked every
// second before, on every slot leader.
func TestScheduleLoopSleepsUntilTheNextOccurrence(t *testing.T) {
	d := newFakeDeliverer()
	ts := openTestSlot(t, t.TempDir(), d)
	defer ts.close(t)
	ctx := context.Background()
	low := int64(math.MinInt64)
	if got := ts.r.advanceDue(ctx, &low); got != scheduleQuiet {
		t.Fatalf("with no schedule the loop sleeps %v, want %v", got, scheduleQuiet)
	}
	now := time.Now().UnixMilli()
	putEvery(t, ts.r, "later", time.Minute, now, now+10_000)
	low = math.MinInt64
	got := ts.r.advanceDue(ctx, &low)
	if lo, hi := 10*time.Second-maxScheduleLead-time.Second, 10*time.Second-scheduleLead; got < lo || got > hi {
		t.Fatalf("with the next occurrence 10 s ahead the loop sleeps %v, want %v..%v", got, lo, hi)
	}
	putEvery(t, ts.r, "much-later", time.Hour, now, now+3_600_000)
	if got := ts.r.advanceDue(ctx, &low); got > 10*time.Second {
		t.Fatalf("the nearer schedule is forgotten: sleeps %v", got)
	}
}
