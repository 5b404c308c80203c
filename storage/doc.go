// Package storage owns the node's on-disk state: one Pebble database shared by
// every slot replica on the node, the key encoding that lays each slot's data
// out in its own contiguous span, bounded scans over that span, write batches,
// and the factory for each raft group's log/stable store and snapshot store.
//
// Callers above this package never see pebble types: they get Batch, Iter and
// Reader, which is all the state machines need. That keeps the storage engine
// swappable and, more importantly, keeps every scan bounded — an unbounded
// iterator over a time-ordered queue walks the tombstones of everything that
// already fired, which is the single most expensive mistake a timer store can
// make (see DESIGN.md in this directory).
package storage
