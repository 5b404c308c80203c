// Package forward sends slot and meta commands, and reads, to the leader
// that must serve them, wherever it is: the local replica when it leads,
// otherwise the node a hint, the local replica or the slot table names,
// over node-to-node RPC (rpc/peer), following "not leader" answers. A
// request that finds no leader within 5 s fails with
// raftgroup.ErrNotLeader (or ErrUnknownOutcome for a write that may have
// been received), never hangs.
//
// It owns the peer methods of that traffic — propose to a slot, propose to
// the meta group, get a job, list a slot, the meta leader's applied index —
// registering their handlers on the node's peer server (Register), and the
// error codes on the wire: model error kinds travel as themselves,
// raftgroup's errors as not_leader, unknown_outcome, closed, overloaded,
// and a stopped state machine as stopped (ToWire, FromWire).
//
// See DESIGN.md for when a write may be resent and why meta writes wait
// for the local copy.
package forward
