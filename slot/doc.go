// Package slot is one replica of one slot: its raft group (raftgroup) over
// the slot's state machine (raftfsm.SlotFSM), the leader-only scheduler
// that fires due jobs, the retry policy decision (Decide), the snapshot
// store that streams a slot's state to a new replica, the reused fire
// workers, and a Registry of the replicas open on a node.
//
// It knows no HTTP, no serf and no other slot: the node hands it the
// storage, the stream layer, a Deliverer for callbacks and the meta state
// to resolve collections and routes at fire time. The scheduler talks to
// its replica through a small interface (schedReplica) and reads an
// injected clock, so it is tested on its own. See DESIGN.md for the
// goroutines and the rules that keep a fire never early and at least once.
package slot
