// Package history is the record of one nemesis run: every client operation
// (an invoke event, then a complete event), every callback the receiver got,
// every fault window and every failover measurement, each stamped with the
// checker's own clock.
//
// The clock is the runner's: a monotonic offset from the start of the run
// (for ordering operations against deliveries and faults) and the wall time
// derived from it (start wall time + monotonic offset), so that a wall-clock
// step on the machine during a run cannot reorder events. Trigger times are
// compared with that derived wall time.
//
// A run is persisted as JSON lines (history.jsonl: meta, invoke, complete,
// fault, failover and cycle records; deliveries.jsonl: the receiver's log)
// and loaded back with Load, so a run can be re-checked offline
// (nemesis -check-only DIR). An invoke without a complete (the runner died
// mid-request) loads as an indeterminate operation.
package history
