// Package node is the composition root of a timemachine server. It owns
// the data directory (its lock and node.json, the node's identity), opens
// storage (Pebble and the shared raft log file), the internal port and its
// mux, the peer RPC server and client, and the meta replica, then wires the
// parts that do the work — slot replicas (through a factory the cluster
// calls), forward, cluster, service, the HTTP API, metrics and the webhook
// deliverer — and starts and stops them in order. Storage failures reach
// Fatal; only package main decides to exit.
//
// It holds no logic of its own: requests are the service's, the control
// plane is the cluster's, replication the slots'. See DESIGN.md for the
// start and stop order.
package node
