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
