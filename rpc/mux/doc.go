// Package mux shares one TCP listener (the node's --bind-addr) between every
// raft group on the node and the node-to-node RPC.
//
// Each connection starts with a 4-byte header — protocol, version, group —
// and the mux hands the rest of the connection to whoever registered that
// (protocol, group). Raft groups use the stock raft.NetworkTransport over a
// StreamLayer from this package; closing a StreamLayer unregisters it and
// never closes the shared listener, so slots can come and go while the node
// runs.
package mux
