// Package httpapi is timemachine's public HTTP API (docs/api.md) on
// fasthttp: the developer API (jobs, collections, routes), the cluster and
// admin API, /healthz, /readyz and /metrics. Handlers live by resource:
// jobs.go, collections.go, routes.go, admin.go (cluster and admin),
// health.go.
//
// It owns the wire format and nothing else: routing over the path, strict
// JSON decoding, every shape check the contract promises (names, ids, times,
// durations, URLs, secrets, headers, sizes), the spec hash that recognises a
// retried POST, the opaque list cursor, and rendering jobs, collections,
// routes and errors. Business decisions — whether a collection or route
// exists, which slot leader to forward to, whether an id already exists —
// belong to the service, which this package reaches only through the
// Backend interface. Keeping that line sharp is what lets the black-box
// contract be tested here against a fake backend, without raft or Pebble:
// this package imports model for the domain types, never raftfsm.
//
// Errors: the backend returns *model.Error values; errors.go is the one
// place where an error's kind becomes an HTTP status code.
//
// Why validation happens here and not in the service (the rules
// themselves are model's, with the limits): an invalid request must
// change nothing and must be answered with a message a person can act on
// ("trigger_time: must be unix milliseconds or an RFC 3339 time, got
// \"abc\""). Doing it at the edge means nothing invalid ever reaches a raft
// log, and every node gives the same answer without a network hop.
//
// Why hand-written routing and rendering: the hot path is job creation,
// where a 1000-job batch is one request. The router matches path segments
// without allocating, and jobs are rendered by appending to one buffer;
// encoding/json is used only for decoding and for the rarely called admin
// answers.
//
// fasthttp reuses request and response buffers once a handler returns, so
// everything that outlives a handler (path parameters, body bytes kept in a
// JobSpec) is copied; decoding through encoding/json copies by construction.
package httpapi
