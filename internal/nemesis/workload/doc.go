// Package workload is the nemesis's load: client goroutines doing creates
// (ids unique per run, trigger times from a fraction of a second to a few
// seconds ahead, some in the past), reads, replaces with If-Match, deletes
// and deletes aimed a few milliseconds before the job is due, all through
// random nodes, every request recorded as an invoke and a complete event;
// and the webhook receiver that records every callback with the checker's
// clock and answers 200, 500, slowly, or not at all (closing the
// connection), by a seeded policy.
//
// Each job's writes come from the client that created it, one at a time;
// reads go to any recent job from any client, so reads run concurrently
// with writes to the same job.
package workload
