// Package node is the composition root of a timemachine server: it owns the
// data directory, the Pebble database, the internal port and its mux, the
// meta group replica, the slot replicas hosted here, the HTTP API, metrics
// and the order in which all of them start and stop. It also implements the
// API's Backend: it checks requests against the meta state, stamps times,
// hashes jobs to slots and sends each write to the slot's leader.
//
// It knows no raft internals and no key encodings; those live in slot,
// raftfsm and storage.
package node
