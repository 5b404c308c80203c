// Package dht maps jobs to slots and slots to nodes. Everything in it is a
// pure function of its arguments — no I/O, no clock, no randomness — so
// every node computes the same answer, and the placement rules can be
// table-tested exhaustively.
package dht
