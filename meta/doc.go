// Package meta is this node's replica of the meta group: the raft group
// (every node holds a copy, 3 of them vote) whose state machine,
// raftfsm.MetaFSM, holds the cluster's configuration — collections, routes,
// the node table and the slot table.
//
// Reads are local and lock-free (State returns an immutable snapshot);
// writes go through the meta leader (Propose, or forward.ProposeMeta from
// another node). The leader runs the cluster controller (Config.OnLeader).
// CaughtUp and WaitCaughtUp tell whether the local copy is current, which
// decides whether a missing collection may be reported as missing
// (docs/architecture.md#the-meta-state-and-deletions). WaitReplayed tells
// whether it was current once since the process started: a slot leader
// waits for that, not for a meta leader, before it fires.
//
// The group runs on the node's connections as the slots do (rpc/beat
// WrapAlwaysOpen: coalesced heartbeats, carried votes) and with their long
// raft timeouts (MetaHeartbeatTimeout): a dead meta leader is replaced
// through the liveness check and a TimeoutNow (Campaign), in the time a
// slot's is. A peer that refuses the meta group on its node connection
// runs an older binary and gets the group's RPCs the stock way, over the
// mux stream the group still listens on.
package meta
