package model

import "testing"

// A finished job is gone from reads by the same bound the slot leader's
// removal uses (finished strictly before now - retention); a job that is
// not finished never is.
func TestCollectionExpired(t *testing.T) {
	const now = int64(1_000_000_000)
	hour := &Collection{Name: "c", RetentionMs: 3_600_000}
	for _, c := range []struct {
		name string
		job  Job
		coll *Collection
		want bool
	}{
		{"scheduled, however old", Job{Status: StatusScheduled, TriggerTime: 1}, hour, false},
		{"succeeded within retention", Job{Status: StatusSucceeded, FinishedAt: now - 60_000}, hour, false},
		{"succeeded exactly at the bound", Job{Status: StatusSucceeded, FinishedAt: now - 3_600_000}, hour, false},
		{"succeeded a millisecond past it", Job{Status: StatusSucceeded, FinishedAt: now - 3_600_001}, hour, true},
		{"a dead letter past it", Job{Status: StatusFailed, FinishedAt: now - 7_200_000}, hour, true},
		{"the default retention (24h)", Job{Status: StatusSucceeded, FinishedAt: now - 7_200_000}, &Collection{Name: "d"}, false},
		{"finished without a time (never expires here)", Job{Status: StatusSucceeded}, hour, false},
	} {
		if got := c.coll.Expired(&c.job, now); got != c.want {
			t.Errorf("%s: expired = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestRoutePaced: pipelining is how a callback is sent, not pacing, so it
// alone keeps a route off the node's per-route lanes; any delivery
// control puts it on them, with or without pipelining.
func TestRoutePaced(t *testing.T) {
	for _, c := range []struct {
		name string
		r    Route
		want bool
	}{
		{"plain", Route{}, false},
		{"pipeline only", Route{Pipeline: true}, false},
		{"rate limit", Route{RateLimit: RateLimit{PerSecond: 1}}, true},
		{"in-flight cap and pipeline", Route{MaxInFlight: 2, Pipeline: true}, true},
		{"batch", Route{Batch: BatchPolicy{MaxJobs: 10}}, true},
	} {
		if got := c.r.Paced(); got != c.want {
			t.Errorf("%s: Paced = %v, want %v", c.name, got, c.want)
		}
	}
}
