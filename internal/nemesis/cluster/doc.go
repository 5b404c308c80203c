// Package cluster runs the nemesis's server processes: N real
// `timemachine server` processes (3 or 5, more when membership faults add
// nodes) with their own data directories, addresses and log files, on
// loopback or on the network namespaces of package netfault (the Net
// interface). It starts them, kills them (SIGKILL), stops them (SIGTERM),
// pauses and resumes them (SIGSTOP/SIGCONT), and reads GET /v1/cluster to
// find leaders and to decide when the cluster is healthy again.
//
// The binary runs through a symlink named tm-nemesis-server, so that a
// `pkill timemachine` aimed at someone else's servers on a shared machine
// does not stop a run in the middle.
package cluster
