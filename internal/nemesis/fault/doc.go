// Package fault draws the nemesis's fault schedule from a seed (math/rand/v2
// PCG: the same seed and options give the same schedule, printed at the
// start of every run) and computes the partitions' cut links. It is pure:
// the runner applies the steps to the processes and the network.
package fault
