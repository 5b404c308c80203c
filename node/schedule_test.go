package node

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/dht"
	"github.com/timemachine-db/timemachine/internal/testutil"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/service"
)

// occurrencesOf returns, per occurrence time, the deliveries of a
// schedule's occurrences the receiver saw (Idempotency-Key
// "{coll}:{schedule}@{ms}:{ms}").
func (r *receiver) occurrencesOf(coll, schedule string) map[int64][]time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[int64][]time.Time{}
	prefix := coll + ":" + schedule + "@"
	for key, ts := range r.got {
		if !strings.HasPrefix(key, prefix) {
			continue
		}
		i := strings.LastIndexByte(key, ':')
		at, err := strconv.ParseInt(key[i+1:], 10, 64)
		if err != nil {
			continue
		}
		out[at] = append(out[at], ts...)
	}
	return out
}

// An "every: 1s" schedule on a 3-node cluster fires once per occurrence,
// never early; killing its slot's leader at an occurrence fires that
// occurrence once more at most (the in-flight allowance of the contract),
// and the schedule goes on from the new leader; a DELETE stops it.
func TestClusterScheduleSurvivesLeaderLoss(t *testing.T) {
	tc := startCluster(t, 3, nil)
	rcv := newReceiver(t)
	ctx := context.Background()
	spec := model.ScheduleSpec{EveryMs: 1000, CallbackURL: rcv.url, Hash: 42}
	v, created, err := tc.nodes[1].svc.PutSchedule(ctx, "default", "tick", spec, 0)
	if err != nil || !created || v.NextFireAt == 0 {
		t.Fatalf("put schedule: %+v %v %v", v, created, err)
	}
	anchor := v.Anchor
	testutil.Eventually(t, 20*time.Second, "two occurrences", func() error {
		if n := len(rcv.occurrencesOf("default", "tick")); n < 2 {
			return fmt.Errorf("%d occurrences", n)
		}
		return nil
	})

	// Kill the schedule's slot leader right at an occurrence.
	survivor := tc.nodes[0]
	sl := dht.SlotOf("default", "tick", survivor.cluster.SlotCount())
	leader := survivor.cluster.RefreshView(ctx).LeaderOf(sl)
	vi := tc.index(leader)
	if vi < 0 {
		t.Fatalf("slot %d has no leader", sl)
	}
	if vi == 0 {
		survivor = tc.nodes[1]
	}
	cur, err := survivor.svc.GetSchedule(ctx, "default", "tick")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(time.UnixMilli(cur.NextFireAt))) // the timing of the fault, not a wait for state
	killedAt := time.Now().UnixMilli()
	tc.kill(vi)
	t.Logf("killed %s, leader of slot %d, at the occurrence %d", leader, sl, cur.NextFireAt)

	testutil.Eventually(t, 30*time.Second, "occurrences from the new leader", func() error {
		for at := range rcv.occurrencesOf("default", "tick") {
			if at > killedAt+3000 {
				return nil
			}
		}
		return fmt.Errorf("no occurrence after %d yet", killedAt+3000)
	})
	got := rcv.occurrencesOf("default", "tick")
	dups := 0
	for at, ds := range got {
		if (at-anchor)%1000 != 0 {
			t.Errorf("occurrence %d is not on the schedule's grid (anchor %d)", at, anchor)
		}
		for _, d := range ds {
			if d.UnixMilli() < at {
				t.Errorf("occurrence %d fired %d ms early", at, at-d.UnixMilli())
			}
		}
		if len(ds) > 1 {
			dups++
			if at < cur.NextFireAt-1000 || at > cur.NextFireAt+1000 {
				t.Errorf("occurrence %d delivered %d times, far from the failover", at, len(ds))
			}
		}
	}
	if dups > 1 {
		t.Errorf("%d occurrences delivered twice; at most the one in flight at the kill may repeat", dups)
	}
	after, err := survivor.svc.GetSchedule(ctx, "default", "tick")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d occurrences, %d repeated, %d missed during the failover", len(got), dups, after.Missed)

	// Occurrences are jobs of the schedule's slot, listed by schedule.
	jobs, _, err := survivor.svc.ListJobs(ctx, model.ListQuery{Coll: "default", Schedule: "tick", From: 0, To: model.MaxTriggerMs, Limit: 1000})
	if err != nil || len(jobs) < len(got) {
		t.Fatalf("jobs?schedule=tick: %d jobs (%v), %d occurrences delivered", len(jobs), err, len(got))
	}
	if j, err := survivor.svc.GetJob(ctx, "default", jobs[0].ID); err != nil || j.Schedule != "tick" {
		t.Fatalf("get occurrence %s: %+v %v", jobs[0].ID, j, err)
	}

	// DELETE stops it: at most an occurrence already created fires after.
	if err := survivor.svc.DeleteSchedule(ctx, "default", "tick"); err != nil {
		t.Fatal(err)
	}
	n := len(rcv.occurrencesOf("default", "tick"))
	time.Sleep(2500 * time.Millisecond) // two intervals in which nothing may happen
	if m := len(rcv.occurrencesOf("default", "tick")); m > n+1 {
		t.Fatalf("%d occurrences fired after the DELETE", m-n)
	}
}

// If-Match on a schedule PUT, through the service: a stale version or a
// schedule that does not exist is precondition_failed and changes
// nothing; the current version replaces it.
func TestScheduleIfMatch(t *testing.T) {
	tc := startCluster(t, 1, nil)
	svc := tc.nodes[0].svc
	ctx := context.Background()
	spec := func(h uint64) model.ScheduleSpec {
		return model.ScheduleSpec{EveryMs: 3_600_000, CallbackURL: "http://127.0.0.1:1/x", Hash: h}
	}
	if _, _, err := svc.PutSchedule(ctx, "default", "s", spec(1), 1); !isKind(err, model.KindPreconditionFailed) {
		t.Fatalf("If-Match on a schedule that does not exist: %v", err)
	}
	if _, err := svc.GetSchedule(ctx, "default", "s"); !isKind(err, model.KindNotFound) {
		t.Fatalf("the refused PUT created it: %v", err)
	}
	if _, created, err := svc.PutSchedule(ctx, "default", "s", spec(1), 0); err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	if _, _, err := svc.PutSchedule(ctx, "default", "s", spec(2), 2); !isKind(err, model.KindPreconditionFailed) {
		t.Fatalf("stale If-Match: %v", err)
	}
	v, created, err := svc.PutSchedule(ctx, "default", "s", spec(2), 1)
	if err != nil || created || v.Version != 2 || v.Spec.Hash != 2 {
		t.Fatalf("If-Match at the current version: %+v %v %v", v, created, err)
	}
}

// createdAhead waits up to 5 s for schedule id (collection "default") to
// have an occurrence created ahead of its time with at least 100 ms to
// spare, and returns its time; 0 if none came (the caller tries again).
func createdAhead(t *testing.T, svc *service.Service, id string) int64 {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		v, err := svc.GetSchedule(context.Background(), "default", id)
		if err != nil {
			t.Fatal(err)
		}
		if v.LastFireAt > time.Now().Add(100*time.Millisecond).UnixMilli() {
			return v.LastFireAt
		}
		time.Sleep(5 * time.Millisecond) // polling the schedule, not waiting for a state
	}
	return 0
}

// TestScheduleStopDropsPendingOccurrence: the slot leader creates an
// occurrence ahead of its time (up to 750 ms); a DELETE of the schedule,
// or a PUT that pauses it, answered before that time removes it, so the
// stopped schedule fires no more (API.md §3: DELETE "stops it"). Before,
// that occurrence was a job of its own and fired after the 204.
func TestScheduleStopDropsPendingOccurrence(t *testing.T) {
	tc := startCluster(t, 1, nil)
	svc := tc.nodes[0].svc
	rcv := newReceiver(t)
	ctx := context.Background()
	for _, stop := range []string{"delete", "pause"} {
		t.Run(stop, func(t *testing.T) {
			for attempt := 0; ; attempt++ {
				if attempt == 10 {
					t.Fatal("no attempt stopped the schedule while an occurrence waited for its time")
				}
				id := fmt.Sprintf("%s-%d", stop, attempt)
				spec := model.ScheduleSpec{EveryMs: 1000, CallbackURL: rcv.url, Hash: uint64(100 + attempt)}
				if _, _, err := svc.PutSchedule(ctx, "default", id, spec, 0); err != nil {
					t.Fatal(err)
				}
				at := createdAhead(t, svc, id)
				if at == 0 {
					continue
				}
				switch stop {
				case "delete":
					if err := svc.DeleteSchedule(ctx, "default", id); err != nil {
						t.Fatal(err)
					}
				case "pause":
					spec.Paused, spec.Hash = true, spec.Hash+1000
					if _, _, err := svc.PutSchedule(ctx, "default", id, spec, 0); err != nil {
						t.Fatal(err)
					}
				}
				if time.Now().UnixMilli() >= at-20 {
					continue // too late to tell: the occurrence may have been due
				}
				occ := model.OccurrenceID(id, at)
				if _, err := svc.GetJob(ctx, "default", occ); !isKind(err, model.KindNotFound) {
					t.Fatalf("occurrence %s after the %s: %v", occ, stop, err)
				}
				time.Sleep(time.Until(time.UnixMilli(at + 1500)))
				if got := rcv.occurrencesOf("default", id)[at]; len(got) != 0 {
					t.Fatalf("occurrence %s delivered %d times after the %s", occ, len(got), stop)
				}
				return
			}
		})
	}
}

// TestScheduleReplaceKeepsOccurrenceOfTheSameTime: a replacing PUT whose
// new version fires at the very time of the occurrence the leader created
// ahead keeps that occurrence (service dropPending): it is the new
// version's occurrence too, and the schedule loop, finding its id taken,
// goes past it. It fires once, and the schedule goes on from there.
// Dropping it would lose that occurrence; creating it again would fire it
// twice.
func TestScheduleReplaceKeepsOccurrenceOfTheSameTime(t *testing.T) {
	tc := startCluster(t, 1, nil)
	svc := tc.nodes[0].svc
	rcv := newReceiver(t)
	ctx := context.Background()
	for attempt := 0; ; attempt++ {
		if attempt == 10 {
			t.Fatal("no attempt replaced the schedule while an occurrence waited for its time")
		}
		id := fmt.Sprintf("replace-%d", attempt)
		start := time.Now().Add(time.Second).UnixMilli()
		spec := model.ScheduleSpec{EveryMs: 1000, StartAt: start, CallbackURL: rcv.url, Meta: []byte(`{"v":1}`), Hash: uint64(200 + attempt)}
		if _, _, err := svc.PutSchedule(ctx, "default", id, spec, 0); err != nil {
			t.Fatal(err)
		}
		at := createdAhead(t, svc, id)
		if at == 0 {
			continue
		}
		// The same grid (start_at, every), another spec: its next
		// occurrence is at, the one already created.
		spec.Meta, spec.Hash = []byte(`{"v":2}`), spec.Hash+1000
		v, created, err := svc.PutSchedule(ctx, "default", id, spec, 0)
		if err != nil || created || v.Version != 2 {
			t.Fatalf("replace: %+v created=%v err=%v", v, created, err)
		}
		if time.Now().UnixMilli() >= at-20 {
			continue // too late to tell: the occurrence may have been due
		}
		if v.NextFireAt != at {
			t.Fatalf("the replacing version's next occurrence is %d, want %d (the one created ahead)", v.NextFireAt, at)
		}
		occ := model.OccurrenceID(id, at)
		if _, err := svc.GetJob(ctx, "default", occ); err != nil {
			t.Fatalf("occurrence %s after the replacing PUT: %v", occ, err)
		}
		next := at + 1000
		testutil.Eventually(t, 10*time.Second, fmt.Sprintf("occurrences %d and %d delivered", at, next), testutil.True(func() bool {
			got := rcv.occurrencesOf("default", id)
			return len(got[at]) > 0 && len(got[next]) > 0
		}))
		// A second delivery of either would come within a dispatch round.
		time.Sleep(300 * time.Millisecond)
		got := rcv.occurrencesOf("default", id)
		for _, o := range []int64{at, next} {
			if len(got[o]) != 1 {
				t.Fatalf("occurrence %d delivered %d times, want once", o, len(got[o]))
			}
			if got[o][0].UnixMilli() < o {
				t.Fatalf("occurrence %d delivered early, at %d", o, got[o][0].UnixMilli())
			}
		}
		if err := svc.DeleteSchedule(ctx, "default", id); err != nil {
			t.Fatal(err)
		}
		return
	}
}

// A job id shaped like an occurrence ("{schedule}@{ms}") names one job in
// its collection, whoever makes it first: a user's job made before the
// occurrence is due takes its place (the schedule goes past it), and a
// user's create after the occurrence was made meets it (409 for another
// spec). Before, the user's job went to the slot its id hashes to and the
// occurrence to its schedule's slot: both were made, and both fired with
// the same Idempotency-Key (found by a black-box review).
func TestOccurrenceIDNamesOneJob(t *testing.T) {
	tc := startCluster(t, 1, nil)
	svc := tc.nodes[0].svc
	rcv := newReceiver(t)
	ctx := context.Background()
	slots := tc.nodes[0].cluster.SlotCount()
	// apart returns a schedule id whose occurrence at ms hashes to
	// another slot than the schedule: the case that made two jobs.
	apart := func(prefix string, ms int64) string {
		for k := 0; ; k++ {
			id := fmt.Sprintf("%s-%d", prefix, k)
			if dht.SlotOf("default", id, slots) != dht.SlotOf("default", model.OccurrenceID(id, ms), slots) {
				return id
			}
		}
	}
	t.Run("user job first", func(t *testing.T) {
		at := time.Now().Add(3 * time.Second).Truncate(time.Second).UnixMilli()
		id := apart("mine", at)
		occ := model.OccurrenceID(id, at)
		res, err := svc.CreateJobs(ctx, "default", []model.JobInput{{ID: occ, Spec: model.JobSpec{TriggerTime: at, CallbackURL: rcv.url, Meta: []byte(`{"from":"user"}`), Hash: 7}}})
		if err != nil || res[0].Err != nil || res[0].Code != model.CodeCreated {
			t.Fatalf("the user's create: %+v %v", res, err)
		}
		spec := model.ScheduleSpec{EveryMs: 3_600_000, StartAt: at, CallbackURL: rcv.url, Hash: 8}
		if _, _, err := svc.PutSchedule(ctx, "default", id, spec, 0); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 10*time.Second, occ+" delivered", testutil.True(func() bool {
			return len(rcv.occurrencesOf("default", id)[at]) > 0
		}))
		// A second job of the id would fire within a dispatch round of the
		// first.
		time.Sleep(500 * time.Millisecond)
		if n := len(rcv.occurrencesOf("default", id)[at]); n != 1 {
			t.Fatalf("%s delivered %d times, want once", occ, n)
		}
		j, err := svc.GetJob(ctx, "default", occ)
		if err != nil || j.Schedule != "" || string(j.Meta) != `{"from":"user"}` {
			t.Fatalf("GET %s: %+v %v, want the user's job", occ, j, err)
		}
	})
	t.Run("made where its id hashes, by an earlier version", func(t *testing.T) {
		at := time.Now().Add(time.Hour).UnixMilli()
		id := apart("old", at)
		occ := model.OccurrenceID(id, at)
		spec := model.JobSpec{TriggerTime: at, CallbackURL: rcv.url, Hash: 10}
		own := dht.SlotOf("default", occ, slots)
		if _, err := tc.nodes[0].fwd.ProposeSlot(ctx, own, &raftfsm.Create{Coll: "default", ID: occ, Spec: spec, Now: time.Now().UnixMilli()}); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			hash uint64
			want model.Code
		}{{10, model.CodeExists}, {11, model.CodeConflict}} {
			spec.Hash = c.hash
			res, err := svc.CreateJobs(ctx, "default", []model.JobInput{{ID: occ, Spec: spec}})
			if err != nil || res[0].Err != nil || res[0].Code != c.want {
				t.Fatalf("creating %s again (spec hash %d): %+v %v, want code %v", occ, c.hash, res, err, c.want)
			}
		}
		if _, err := svc.UpsertJob(ctx, "default", occ, spec, 1); err != nil {
			t.Fatalf("PUT of %s at version 1: %v", occ, err)
		}
		if err := svc.DeleteJob(ctx, "default", occ); err != nil {
			t.Fatalf("DELETE %s: %v", occ, err)
		}
		if _, err := svc.GetJob(ctx, "default", occ); !isKind(err, model.KindNotFound) {
			t.Fatalf("GET %s after its DELETE: %v", occ, err)
		}
	})
	t.Run("occurrence first", func(t *testing.T) {
		for attempt := 0; ; attempt++ {
			if attempt == 10 {
				t.Fatal("no attempt created on an occurrence made ahead of its time")
			}
			start := time.Now().Add(2 * time.Second).Truncate(time.Second).UnixMilli()
			id := apart(fmt.Sprintf("theirs%d", attempt), start)
			spec := model.ScheduleSpec{EveryMs: 3_600_000, StartAt: start, CallbackURL: rcv.url, Hash: uint64(300 + attempt)}
			if _, _, err := svc.PutSchedule(ctx, "default", id, spec, 0); err != nil {
				t.Fatal(err)
			}
			if createdAhead(t, svc, id) != start {
				continue
			}
			occ := model.OccurrenceID(id, start)
			res, err := svc.CreateJobs(ctx, "default", []model.JobInput{{ID: occ, Spec: model.JobSpec{TriggerTime: start + 60_000, CallbackURL: rcv.url, Hash: 9}}})
			if err != nil || res[0].Err != nil {
				t.Fatalf("the user's create: %+v %v", res, err)
			}
			if res[0].Code != model.CodeConflict {
				t.Fatalf("creating %s, made by its schedule: code %v, want conflict", occ, res[0].Code)
			}
			j, err := svc.GetJob(ctx, "default", occ)
			if err != nil || j.Schedule != id {
				t.Fatalf("GET %s: %+v %v, want the occurrence", occ, j, err)
			}
			return
		}
	})
}
