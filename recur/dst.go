package recur

import (
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Daylight saving time, as cron does it (API.md §3: "DST handled as cron
// does"). robfig/cron walks real time and matches wall-clock fields, so
// on its own a daily "30 2 * * *" in Europe/Berlin skips the day whose
// 02:30 does not exist and fires twice on the day whose 02:30 happens
// twice. Vixie cron (and cronie, and the cron of Debian and Red Hat)
// treats a job that runs at a fixed time — neither its minute nor its
// hour field begins with "*" — differently:
//   - spring forward: a fixed time inside the skipped wall-clock span runs
//     right after the change, at the transition instant (02:30 → 03:00
//     CEST that day);
//   - fall back: a fixed time inside the repeated span runs once, in the
//     first pass.
//
// A wildcard job ("*/15 * * * *", "30 * * * *", @hourly) runs on the new
// time as it comes, which is what robfig does already: every 15 minutes
// of real time goes from 01:45 to 03:00 in spring and through both passes
// of the repeated hour in autumn.

// fixedTime reports whether a cron expression runs at a fixed time of day
// by cron's definition: its minute and hour fields do not begin with "*"
// (or "?"). The descriptors are their expansions: @hourly is "0 * * * *",
// the others run at midnight.
func fixedTime(expr string) bool {
	e := strings.TrimSpace(expr)
	if strings.HasPrefix(e, "@") {
		return !strings.EqualFold(e, "@hourly")
	}
	f := strings.Fields(e)
	if len(f) < 2 {
		return false
	}
	wild := func(field string) bool { return strings.HasPrefix(field, "*") || strings.HasPrefix(field, "?") }
	return !wild(f[0]) && !wild(f[1])
}

// maxDSTSteps bounds the transitions cronNext looks at for one occurrence
// (two a year in zones with DST; robfig looks five years ahead).
const maxDSTSteps = 16

// cronNext is the first occurrence strictly after t, with cron's
// daylight-saving rules for fixed-time expressions (zero: none).
func (s *Spec) cronNext(t time.Time) time.Time {
	if !s.fixed {
		return s.cron.Next(t)
	}
	for i := 0; i < maxDSTSteps; i++ {
		n := s.cron.Next(t)
		if n.IsZero() {
			return n
		}
		if at, ok := s.skippedMatch(t, n); ok {
			return at
		}
		end, repeated := repeatedSpan(n)
		if !repeated {
			return n
		}
		// n is in the second pass of a repeated span, whose first pass
		// already matched at the same wall time: go on after the span.
		t = end.Add(-time.Nanosecond)
	}
	return time.Time{}
}

// skippedMatch finds the first spring-forward transition in (t, n] whose
// skipped wall-clock span has a time the expression matches: the job runs
// at the transition instant.
func (s *Spec) skippedMatch(t, n time.Time) (time.Time, bool) {
	cur := t.In(s.loc)
	for i := 0; i < maxDSTSteps; i++ {
		_, end := cur.ZoneBounds()
		if end.IsZero() || end.After(n) {
			return time.Time{}, false
		}
		_, before := cur.Zone()
		_, after := end.Zone()
		if after > before {
			// Wall times [end in the old offset, + (after-before)) do not
			// exist. Their fields, read in a fixed zone, are what the
			// expression would have matched.
			gapStart := end.In(time.FixedZone("", before))
			for m := 0; m < (after-before)/60; m++ {
				w := gapStart.Add(time.Duration(m) * time.Minute)
				if matches(s.cron, w) {
					return end, true
				}
			}
		}
		cur = end
	}
	return time.Time{}, false
}

// repeatedSpan reports whether n is in the second pass of a fall-back
// transition's repeated wall-clock span, and where that span ends.
func repeatedSpan(n time.Time) (time.Time, bool) {
	start, _ := n.ZoneBounds()
	if start.IsZero() {
		return time.Time{}, false
	}
	_, now := n.Zone()
	_, before := start.Add(-time.Nanosecond).Zone()
	if before <= now {
		return time.Time{}, false
	}
	end := start.Add(time.Duration(before-now) * time.Second)
	return end, n.Before(end)
}

// matches reports whether the wall-clock minute of w (its fields as they
// read in w's zone) matches the expression, with cron's day rule: when
// both day fields are restricted, either may match.
func matches(c *cron.SpecSchedule, w time.Time) bool {
	const starBit = 1 << 63 // robfig's mark of a "*" day field
	if 1<<uint(w.Minute())&c.Minute == 0 || 1<<uint(w.Hour())&c.Hour == 0 || 1<<uint(w.Month())&c.Month == 0 {
		return false
	}
	dom := 1<<uint(w.Day())&c.Dom > 0
	dow := 1<<uint(w.Weekday())&c.Dow > 0
	if c.Dom&starBit > 0 || c.Dow&starBit > 0 {
		return dom && dow
	}
	return dom || dow
}
