// Package netfault is the nemesis's private network and its network
// faults: a hub namespace with a bridge, one network namespace per node
// (a veth into the bridge), iptables rules in each node's namespace for
// partitions and packet loss, and userspace delay proxies on the
// node-to-node raft/RPC paths.
//
// Why this shape: partitions must make real packets stop, on every port
// (bind and serf); namespaces give each node its own address and firewall
// without touching the machine's own network (every address lives in
// namespaces the harness creates and removes). `tc netem` is not available
// on the development machine, so delay is a TCP proxy the harness owns:
// node s's connections to node d's bind port are DNATed to a proxy address
// dedicated to (s, d), which dials d from that same address. Both ends can
// therefore name the link, and a cut drops the proxied legs as well as the
// direct gossip packets. Gossip (serf, UDP and TCP) is cut and loses
// packets but is not delayed.
//
// The runner process stays in the machine's namespace: Topology.DialContext
// and Topology.Listen create their sockets on a thread switched into the
// hub namespace (a socket belongs to the namespace it was created in),
// and node processes start under `ip netns exec`.
//
// Everything here needs root; Available says why it cannot be used.
package netfault
