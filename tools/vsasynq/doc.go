// Command vsasynq runs the workloads of issue 13's comparison table against
// asynq (github.com/hibiken/asynq) backed by a Redis server, and prints one
// table next to the matching `timemachine bench --json` reports.
//
// It is a module of its own so that the product module does not depend on
// asynq or a Redis client. scripts/vs-asynq.sh starts Redis and a fresh
// timemachine server and drives both sides; this command only measures asynq
// and renders the table:
//
//	vsasynq create --redis 127.0.0.1:6390 --jobs 100000 --concurrency 64 --json
//	vsasynq timers --redis 127.0.0.1:6390 --jobs 100000 --window 10s --json
//	vsasynq table row.json...
//
// The asynq workloads measure what `timemachine bench` measures, with the same
// definitions (docs/benchmarks.md, "How timemachine bench measures"): the
// create rate is tasks acknowledged by Redis ÷ wall time from the first
// request to the last acknowledgement; for timers, every task's handler POSTs
// a callback to a local HTTP receiver (as timemachine's webhooks do), and
// lateness is first receive time − the task's due time, early counts
// deliveries before the due time, the fire rate is fired ÷ (last first
// delivery − first due time).
package main
