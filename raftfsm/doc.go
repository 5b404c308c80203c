// Package raftfsm holds the replicated state machines of timemachine: the
// slot FSM (one per slot: job records and their indexes in Pebble) and the
// meta FSM (collections, routes and, in a cluster, the node and slot tables),
// together with the binary command codec, the job record format, the
// snapshot format and the queries over a slot's state (GetJob, GetJobs,
// ListJobs). The domain types they hold (jobs, collections, routes, nodes,
// results) are model's; this package is their replicated, durable form.
//
// Everything here is deterministic. Apply never reads the clock, draws a
// random number or depends on map iteration order: the leader stamps times
// into commands, so every replica that applies the same log reaches the same
// bytes. Commands are a type byte and a version byte followed by a compact
// body; a format, once written, is never changed — new shapes get new
// versions — because raft logs and snapshots outlive binaries.
//
// See DESIGN.md in this directory for the durability rules (applied index in
// the same batch as the data, replay after restart, snapshot and restore).
package raftfsm
