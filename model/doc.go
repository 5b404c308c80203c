// Package model holds timemachine's domain: the types every layer talks in
// (jobs, their specs and retry policies, collections, routes, cluster
// members and slot placements, list queries, command outcomes, the cluster
// and admin answers), the validation of what users may send (ids, names,
// URLs, secrets, headers), the size limits, and the domain error.
//
// It depends on the standard library only. That is the point of it: the HTTP
// layer, the service, the state machines and the client-facing tools can
// share these types without any of them pulling in raft, bbolt or Pebble.
//
// # Limits
//
// limits.go is the one set of size limits. Validation (validate.go) refuses
// anything larger, and the command and record codec (raftfsm) bounds every
// string it decodes by MaxFieldBytes, the largest string validation can
// accept — so whatever the API accepts, and a replica writes to its raft
// log, always decodes again on every replica.
//
// # Errors
//
// Error is the domain error: a Kind (the contract's error code, such as
// not_found or unavailable), a message a person can act on and, for
// overloaded and unavailable, how long to wait before retrying. Code below
// the HTTP layer returns these and never an HTTP status; rpc/httpapi is the
// only place that maps a Kind to a status code, and rpc/peer carries the
// Kind between nodes.
package model
