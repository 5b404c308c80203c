// Package inflight holds a route's max_in_flight cluster-wide when the cap
// is smaller than the number of nodes that can deliver to it
// (docs/api.md#route-delivery-control).
//
// A node's lanes (package slot) enforce a share of a route's limits, the
// part of the slots the node leads. That cannot split a cap of 1 over
// three nodes: each would need a third of a request. For such a route
// every request takes a place (a lease) from one node, the Owner, which is
// the meta group's leader: it grants at most cap leases of a route at
// once, to the waiting requests in trigger order across nodes. A Holder on
// every node asks for leases, gives them back when the request ends, and
// renews the ones it keeps for longer than a few seconds.
//
// Leases expire unless renewed (Hold), so a holder that died or was cut
// off gives its places back within Hold. A new owner (a meta leadership
// change) first asks every node which leases it holds (the census) and
// grants nothing before the answers are in; a node that cannot be asked
// makes it wait one Hold, long enough for any lease granted before to
// have expired or been renewed, which a renewal to the new owner adopts.
// DESIGN.md says where the cap can still be exceeded.
package inflight
