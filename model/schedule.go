package model

import (
	"strconv"
	"strings"
)

// MaxScheduleIDLen bounds a schedule id so that its occurrence ids
// ("{id}@{ms}", ms up to 15 digits) are still valid job ids.
const MaxScheduleIDLen = MaxIDLen - 16

// ScheduleSpec is what a user specifies for a recurring schedule: exactly
// one of Cron and EveryMs, a time zone for Cron, the job template of its
// occurrences, and bounds. Hash identifies the spec as given, so a PUT of
// the same spec again changes nothing (and keeps next_fire_at).
type ScheduleSpec struct {
	Cron              string
	EveryMs           int64
	Timezone          string // IANA name; "" is UTC
	CallbackURL       string
	Route             string
	Meta              []byte
	Retry             RetryPolicy
	CallbackTimeoutMs int64
	StartAt           int64 // ms, 0: none
	EndAt             int64 // ms, 0: none
	Paused            bool
	Hash              uint64
}

// Schedule is the stored state of one schedule. Collection and ID live in
// the key. NextFireAt is 0 while the schedule is paused or has ended.
type Schedule struct {
	Collection string
	ID         string
	Spec       ScheduleSpec

	Version    uint64 // bumped by each PUT that changes the spec
	Anchor     int64  // an "every" schedule's occurrences count from here
	NextFireAt int64
	LastFireAt int64
	Missed     int64 // occurrences skipped by the catch-up rule, in total
	CreatedAt  int64
	UpdatedAt  int64
}

// OccurrenceID is the job id of a schedule's occurrence at ms.
func OccurrenceID(schedule string, ms int64) string {
	return schedule + "@" + strconv.FormatInt(ms, 10)
}

// SplitOccurrenceID returns the schedule id and occurrence time of an id
// shaped like an occurrence's ("{schedule}@{ms}").
func SplitOccurrenceID(id string) (schedule string, ms int64, ok bool) {
	i := strings.LastIndexByte(id, '@')
	if i <= 0 || i == len(id)-1 || len(id)-i-1 > 15 {
		return "", 0, false
	}
	n, err := strconv.ParseInt(id[i+1:], 10, 64)
	if err != nil || n < 0 || id[i+1] == '+' {
		return "", 0, false
	}
	return id[:i], n, true
}

// CheckScheduleID validates a schedule id: a job id short enough for its
// occurrence ids.
func CheckScheduleID(s string) *Error {
	return checkToken("schedule id", s, MaxScheduleIDLen, isIDByte, idChars)
}

// Occurrence is the job spec of the schedule's occurrence at ms.
func (s *Schedule) Occurrence(ms int64) JobSpec {
	return JobSpec{
		TriggerTime:       ms,
		CallbackURL:       s.Spec.CallbackURL,
		Route:             s.Spec.Route,
		Meta:              s.Spec.Meta,
		Retry:             s.Spec.Retry,
		CallbackTimeoutMs: s.Spec.CallbackTimeoutMs,
		Hash:              s.Spec.Hash ^ uint64(ms),
	}
}

// ScheduleListPage is one slot's page of a collection's schedules, in id
// order.
type ScheduleListPage struct {
	Schedules []*Schedule
	More      bool
}

// ScheduleView is a schedule as the API shows it: the stored state and the
// status of its latest occurrence ("" when none is left).
type ScheduleView struct {
	*Schedule
	LastStatus string
}
