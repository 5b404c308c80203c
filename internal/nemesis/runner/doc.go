// Package runner carries out one nemesis run: it builds the network
// (package netfault, or loopback), starts the cluster (package cluster),
// the receiver and the clients (package workload), applies the seeded
// schedule (package fault) cycle by cycle, records everything (package
// history), waits until what is owed has been delivered, reads every job
// back, and hands the record to the checkers (package check).
//
// One cycle: read GET /v1/cluster, resolve the step's target by role (the
// leader of most slots, the node leading fewest, a seeded pick), apply the
// fault and open its window in the history, measure failover with probe
// creates in every slot the victim led (through the other nodes, a try
// every 50 ms) when the victim led slots, hold the fault for its duration,
// heal it and close the window, then wait until the cluster is healthy
// (every member ready, every slot led with its replicas, every member
// alive). A membership step runs another fault in the background and,
// meanwhile, adds a node, rebalances, drains an old member, stops and
// removes it; each of those is a planned window.
//
// Waiting on conditions: the health and membership waits poll the cluster
// until their condition holds or a bound passes; the only fixed waits are
// a fault's own duration and the short pauses between cycles.
package runner
