// Package client is the Go client for the timemachine HTTP API: the developer
// API (jobs, collections, routes; API.md §3) and the cluster and admin API
// (§5).
//
// It owns three things a user should not have to write twice:
//
//   - the wire types (Job, Collection, Route, ClusterInfo, BatchResult), kept
//     as close to the contract as Go allows: times are int64 Unix milliseconds
//     and durations are the strings that travel on the wire, so nothing is
//     lost or reinterpreted on a round trip;
//   - the error model: every non-2xx answer becomes an *APIError carrying the
//     contract's error code, so callers branch on IsNotFound, IsConflict, ...
//     instead of on status numbers or message text;
//   - the retry and failover policy. Any node accepts any request and forwards
//     it to the slot-leader, so the client spreads requests round-robin over
//     the addresses it was given and, when a node cannot be reached or answers
//     503 unavailable / 429 overloaded (both of which change nothing, per the
//     contract), tries the next one, honouring Retry-After up to a cap. A
//     request is resent after an ambiguous failure (the connection broke after
//     the request was written) only when resending cannot do harm twice: GET,
//     PUT and DELETE, and POSTs of jobs that all carry an id (the contract
//     answers a repeated create of the same spec with 200).
//
// The transport is fasthttp (one HostClient per address) because the client
// also drives the built-in load generator (package bench), where per-request
// allocation matters. Response bodies are copied before fasthttp's buffers are
// released, so nothing returned aliases a pooled buffer.
package client
