// Package dht maps jobs to slots and slots to nodes. Everything in it is a
// pure function of its arguments — no I/O, no clock, no randomness — so
// every node computes the same answer, and the placement rules can be
// table-tested exhaustively.
//
// # Placement
//
// The meta-group leader computes the desired placement (slot → replicas,
// Replicas[0] the preferred leader) with Initial, Repair or Rebalance and
// commits it; slot leaders then change their raft membership one step at a
// time toward it. Since any node may become the controller, the planner
// must give identical output for identical input: node lists are sorted
// first, every tie is broken by node id or slot number, and no map is
// iterated.
//
// The planner counts two kinds of change differently:
//
//   - A move (a replica leaves one node and is built on another, see Diff)
//     copies a whole slot over the network and runs raft membership changes.
//     Repair makes only the moves a lost node or a changed replication
//     factor forces; Rebalance adds the fewest that even out replica counts.
//   - A new preferred leader (reordering Replicas) costs a raft leadership
//     transfer. It is used freely to spread leaderships — the slot leader
//     fires the slot's callbacks, so leaderships are the firing load.
//
// Initial lays slots out in rounds (slot s led by node s mod n, followers at
// offsets that shift each round), so every node's slots are followed by all
// the others evenly: when a node fails, each survivor can take an equal
// share of its leaderships. Evening out loads over items that each have a
// set of allowed nodes is a semi-matching problem; the planner improves a
// greedy choice along cost-reducing paths until none is left (see
// balance.go), which gives a spread of at most 1 whenever one exists.
//
// LeaderTargets is the short-term counterpart: while a node is down but
// still in the placement, it picks which alive replica should lead each
// slot.
package dht
