// Package nemesis is the home of the fault-injection suite of issue 10 (see
// docs/reliability.md): real timemachine processes under a recorded
// workload and a seeded fault schedule, and checkers over the history.
//
//	history   the run's record (JSON lines) and the checker's clock
//	check     linearizability (porcupine), fires, failover
//	netfault  network namespaces, partitions, loss, delay proxies
//	cluster   the server processes and GET /v1/cluster
//	fault     the schedule drawn from a seed, partition shapes
//	workload  the clients and the webhook receiver
//	runner    one run, end to end; cmd/nemesis is its command
//
// It is black-box: nothing here imports a server package.
package nemesis
