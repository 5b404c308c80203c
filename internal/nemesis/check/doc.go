// Package check holds the nemesis checkers. They are pure functions of a
// recorded run (package history), so a run can be re-checked offline, and
// each is tested with hand-made histories that it must reject.
//
//   - Linearizability: job CRUD (create, get, put with If-Match, delete)
//     per job key against a model of one job (model.go) with porcupine.
//     The server may fire, retry and finish a job between any two client
//     operations (each bumps the version); writes with no definite answer
//     (timeouts, transport errors after sending, 5xx) may take effect at
//     any point after their call (return time infinity, as etcd's robustness
//     tests model failed requests). A second pass treats 5xx as "changed
//     nothing", as the contract says; a key that only the lenient pass
//     explains is reported as "5xx that took effect".
//   - Fires: over the receiver's log: every acknowledged, undeleted job
//     delivered at least once; none before its trigger_time by the
//     checker's clock; nothing delivered after a DELETE 204 (or a
//     replacing PUT 200) reached the client, and no callback still in
//     flight then; duplicates (same Idempotency-Key and attempt) classed
//     as within an unplanned fault's in-flight window (allowed), during a
//     planned move or outside any fault (violations); lateness per fault
//     kind.
//   - Failovers: fault → every slot the victim led writable, against the
//     target.
package check
