// Package faultnet cuts links between the nodes of an in-process test
// cluster.
//
// Every connection in the cluster is dialed through some node's dial hook
// (mux.StreamLayer.Dialer for raft, peer.ClientOptions.Dial for RPC), and a
// TCP connection carries both directions, so controlling the dial side is
// enough: a cut link refuses new dials from either end, and closing the
// dialer's end of an existing connection makes the accepting end read EOF
// too. Connections are identified by (dialing node, target node).
//
// What it does not model: one-way loss (a connection carries both
// directions), delay, or a silent black hole — a cut is as abrupt as a
// refused or reset connection.
//
// Test-only: it lives under internal/ and only tests import it.
package faultnet
