// Package raftgroup is the raft group code shared by the slot replicas and
// the meta replica: opening a group over the node's stores and the mux's
// stream layer, the leadership watch (NotifyCh, then a barrier, then the
// leader-only work), membership steps, the proposer that coalesces writes
// into few entries, the raft timeouts, the replica status other nodes ask
// for, and the adapter from hashicorp/raft's logger to slog.
//
// It knows nothing of jobs or the cluster: a Group applies entries to the
// raft.FSM it is given and hands back the FSM's []model.Result. Errors from
// hashicorp/raft are mapped to ErrNotLeader, ErrUnknownOutcome, ErrClosed
// and ErrOverloaded, so nothing above this package needs raft's.
//
// Membership changes are split in two: NextStep is a pure function from the
// group's configuration and the wanted members to the next step, tested as
// a table of configurations; Group.Reconcile reads the configuration and
// executes the step. See DESIGN.md for the concurrency and the proposer.
package raftgroup
