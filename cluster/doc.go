// Package cluster is a node's part in the cluster's control plane: serf
// gossip membership (members, the --join loop, tags), forming the meta
// group when --bootstrap-expect nodes have met, the controller that runs
// on the meta leader (node table, meta membership, slot placement through
// dht, leadership balance), the reconciler that makes this node's slot
// replicas match the slot table (open, retire, one membership step for the
// slots it leads), the view of what every node reports, readiness, and
// the admin operations (cluster info, rebalance, drain, transfer, remove,
// compaction on every node).
//
// It is reached through one type, Cluster, with the methods the node and
// the service need. It does not depend on the node: the node supplies a
// factory for slot replicas and the few other things that are its own
// (Config). Everything is level-triggered — each pass derives what to do
// from the committed meta state and the replicas' raft configurations — so
// a crash or a leader change midway needs no recovery code; see DESIGN.md.
package cluster
