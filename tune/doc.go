// Package tune sets the Go runtime for a server process: the number of
// processors while the node is idle (Governor), and the garbage
// collector's pace while the heap is small (GC).
//
// # One processor while idle (Governor)
//
// An idle node does almost no work; its CPU is the runtime's cost per
// wake-up. Every timer or network wake-up that finds another processor
// (P) idle makes the scheduler wake a second thread to spin for more work
// (findRunnable, then park), and sysmon polls after each one: more than
// half of an idle node's CPU in the profiles of docs/scaling.md. With one
// P there is no idle P to spin for (docs/scaling.md, eighth pass, has the
// measurements).
//
// A busy node needs every core, so the governor samples the process's CPU
// time (getrusage) every Interval and goes back to the default
// (runtime.SetDefaultGOMAXPROCS, which also restores the runtime's own
// tracking of the CPU limit) after the first interval that used more than
// Busy of a core, and down to one only after Quiet of intervals that each
// used less than Idle. The gap between the two thresholds keeps it from
// flapping. A burst due after a long quiet would spend its first Interval
// on one processor, so a slot's scheduler that finds many due jobs at once
// calls Wake, which switches back at once. It stays off when GOMAXPROCS is set in the environment (the
// operator chose) or the default is already one.
//
// # A heap floor for the collector (GC)
//
// The server's live heap is small — a few MiB on a node with 12 slots,
// the jobs live in Pebble — so at a GOGC of 200 a node firing 2,000
// callbacks a second collected ~4 times a second (150–160 collections in
// the 40 s lateness benchmark; 16–26 with the floor, docs/benchmarks.md
// 2026-11-27). Each cycle costs CPU and takes a processor for a few
// milliseconds of marking; the floor cut the collections, but the
// benchmark's p99 lateness did not measurably change with it. GC keeps
// GOGC at 200 while the heap is large and raises it while the heap is
// small, so that a cycle starts no earlier than at Floor bytes; it
// re-computes after every cycle. The price is RSS: a busy small node
// holds ~50 MB more. GOGC in the environment turns it off.
package tune
