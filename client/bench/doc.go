// Package bench is the load generator behind `timemachine bench`: it drives a
// running cluster through its public HTTP API and measures what a user of a
// timer database cares about — how fast jobs can be created, how fast they
// fire, how late (or, wrongly, how early) they fire, and whether any were
// lost or delivered twice.
//
// It owns three pieces:
//
//   - the creator: Concurrency workers POSTing jobs, one per request or in
//     arrays of Batch, to every given address in turn. Job bodies are built
//     by hand (ids "<prefix>-<n>", exact trigger_time in Unix ms) so the
//     generator's own JSON encoding does not limit the create rate it
//     reports;
//   - the receiver: a fasthttp server on loopback that is the callback_url of
//     every job. Per delivery it parses only the job number and trigger_time
//     from the payload and records the wall-clock receive time in
//     preallocated per-job slots with atomics, so it sustains far more
//     deliveries per second than the cluster can produce and never becomes
//     the bottleneck it is measuring;
//   - the report: every number is computed from recorded times (create
//     acknowledgements, receive times, the schedule), never estimated.
//     Lateness is measured only over jobs whose create was acknowledged
//     before their trigger time; jobs created late fire "at once" by contract
//     and are counted separately, because including them would measure the
//     creator, not the scheduler.
//
// Every phase is bounded in time: the run ends WaitTimeout after the last
// trigger (or the last create, if that is later) even if jobs are missing,
// and a cancelled context stops it at once with a partial report.
//
// Lateness and earliness compare the receiver's wall clock with the server's
// notion of trigger_time, so they are only meaningful when both run on the
// same host or on well-synchronised clocks.
package bench
