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
// follow that library's rules, which are those of Vixie cron for
// wall-clock times:
//   - spring forward (a local time that does not exist that day, such as
//     02:30 in Europe/Berlin on the last Sunday of March): an expression
//     that names a time inside the gap does not fire in it; robfig moves
//     to the next matching instant that does exist, so "30 2 * * *" skips
//     that day and "*/15 * * * *" goes from 01:45 straight to 03:00.
//   - fall back (a local time that happens twice): robfig walks real
//     time, so a time inside the repeated hour matches in both passes
//     and fires twice ("30 2 * * *" fires at 02:30 CEST and at 02:30 CET).
//
// The table tests in recur_test.go pin these behaviours down, so a change
// of library version that alters them is noticed.
package recur
