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
// (docs/architecture.md#the-meta-state-and-deletions).
package meta
