// Package rpc is the home of everything that speaks a wire protocol; the
// code lives in its sub-packages, each owning one protocol:
//
//   - rpc/mux: the node's single internal TCP port (--bind-addr), shared by
//     every raft group and the node-to-node RPC through a connection header.
//   - rpc/peer: node-to-node calls (framing, a handler registry).
//   - rpc/beat: the slots' raft heartbeats, coalesced per peer node.
//   - rpc/httpapi: the public HTTP API (developer and admin) on fasthttp.
//   - rpc/webhook: the outbound callback client and Standard Webhooks signing.
//
// None of them makes business decisions: they call interfaces that the node
// package satisfies.
package rpc
