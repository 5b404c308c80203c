// Package recur computes the occurrences of a recurring schedule: a fixed
// interval ("every") or a 5-field cron expression in an IANA time zone,
// bounded by start and end times.
//
// It is pure: no clock, no I/O. The slot leader calls it with its own
// clock's reading and stamps the results into raft commands, so every
// replica applies the same times whatever its zoneinfo database says.
//
// Cron expressions are parsed by github.com/robfig/cron/v3 (ParseStandard)
// and evaluated in the schedule's time zone. Daylight-saving transitions
// follow Vixie cron (dst.go), which robfig/cron alone does not: a
// fixed-time expression (minute and hour fields not beginning with "*")
// whose time falls in the spring-forward gap fires at the transition, and
// one whose time falls in a fall back's repeated span fires in the first
// pass only; wildcard expressions run on real time as robfig walks it.
//
// The table tests in recur_test.go pin these behaviours down, so a change
// of library version that alters them is noticed.
package recur
