// Command nemesis runs a cluster of real timemachine processes under a
// create/read/replace/delete/fire workload and a fault schedule drawn from
// a seed, then checks the recorded history (linearizability of job CRUD,
// deliveries, failover). It exits 1 on any violation, 2 when the run
// itself could not be carried out.
//
//	go run ./internal/nemesis/cmd/nemesis -nodes 3 -cycles 20 -out /tmp/nem
//	go run ./internal/nemesis/cmd/nemesis -seed 1234 ...      # replay a seed's schedule
//	go run ./internal/nemesis/cmd/nemesis -check-only /tmp/nem  # re-check a run offline
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/timemachine-db/timemachine/internal/nemesis/fault"
	"github.com/timemachine-db/timemachine/internal/nemesis/runner"
	"github.com/timemachine-db/timemachine/internal/nemesis/workload"
)

func main() {
	os.Exit(run())
}

func run() int {
	var (
		bin        = flag.String("bin", envOr("TIMEMACHINE_BIN", "bin/timemachine"), "the timemachine binary")
		nodes      = flag.Int("nodes", 3, "cluster size: 3 or 5")
		cycles     = flag.Int("cycles", 20, "fault cycles")
		seed       = flag.Uint64("seed", 0, "the schedule's seed (0: from the clock; always printed)")
		out        = flag.String("out", "", "the run's directory (default: a new one under $TMPDIR)")
		faults     = flag.String("faults", "all", "comma-separated faults ("+fault.Names(fault.All)+"), all, or none (quiet cycles: the baseline)")
		maxHold    = flag.Duration("max-hold", 0, "cap every fault's duration (0: none)")
		clients    = flag.Int("clients", 4, "client goroutines")
		network    = flag.String("network", "auto", "auto (namespaces when root), netns or loopback")
		target     = flag.Duration("failover-target", 2*time.Second, "kill/pause → every slot of the victim writable")
		partTarget = flag.Duration("partition-target", 5*time.Second, "one-node cut → every slot it led writable through the majority")
		settle     = flag.Duration("settle", 60*time.Second, "bound on the wait for a healthy cluster after each cycle")
		rcvFaults  = flag.Bool("receiver-faults", true, "the receiver sometimes answers 500, slowly, or closes without answering")
		keep       = flag.Bool("keep-data", false, "keep the nodes' data directories")
		checkOnly  = flag.String("check-only", "", "re-check the run recorded in this directory and exit")
		raftLog    = flag.String("raft-log-level", "", "every server's --raft-log-level (default: the server's own, warn; info shows elections)")
	)
	flag.Parse()

	if *checkOnly != "" {
		rep, err := runner.Check(*checkOnly)
		if err != nil {
			fmt.Fprintln(os.Stderr, "nemesis:", err)
			return 2
		}
		rep.Write(os.Stdout, 0)
		if rep.Violations() > 0 {
			return 1
		}
		return 0
	}

	if *nodes != 3 && *nodes != 5 {
		fmt.Fprintln(os.Stderr, "nemesis: -nodes must be 3 or 5")
		return 2
	}
	switch *raftLog {
	case "", "trace", "debug", "info", "warn", "error":
	default:
		fmt.Fprintf(os.Stderr, "nemesis: -raft-log-level %q: want trace, debug, info, warn or error\n", *raftLog)
		return 2
	}
	kinds, err := fault.Parse(*faults)
	if err != nil {
		fmt.Fprintln(os.Stderr, "nemesis:", err)
		return 2
	}
	if *seed == 0 {
		*seed = rand.Uint64()
	}
	if *out == "" {
		*out = filepath.Join(os.TempDir(), fmt.Sprintf("nemesis-%d-%s", *seed, time.Now().Format("20060102-150405")))
	}
	policy := workload.DefaultPolicy
	if !*rcvFaults {
		policy = workload.Policy{}
	}
	cmd := fmt.Sprintf("go run ./internal/nemesis/cmd/nemesis -seed %d -nodes %d -cycles %d -faults %s", *seed, *nodes, *cycles, fault.Names(kinds))
	if *maxHold > 0 {
		cmd += " -max-hold " + maxHold.String()
	}
	if *network != "auto" {
		cmd += " -network " + *network
	}
	if !*rcvFaults {
		cmd += " -receiver-faults=false"
	}
	if *raftLog != "" {
		cmd += " -raft-log-level " + *raftLog
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := runner.Run(ctx, runner.Config{Bin: *bin, Out: *out, Seed: *seed, Nodes: *nodes, Cycles: *cycles,
		Kinds: kinds, MaxHold: *maxHold, Clients: *clients, Network: *network, FailoverTarget: *target,
		PartitionTarget: *partTarget, SettleTimeout: *settle, Policy: policy, Progress: os.Stdout,
		Command: cmd, KeepData: *keep, RaftLogLevel: *raftLog})
	if err != nil {
		fmt.Fprintln(os.Stderr, "nemesis:", err)
		fmt.Fprintf(os.Stderr, "nemesis: the run's files are in %s (replay: %s)\n", *out, cmd)
		return 2
	}
	if n := rep.Violations(); n > 0 {
		fmt.Printf("nemesis: %d violations (seed %d); replay: %s; re-check: go run ./internal/nemesis/cmd/nemesis -check-only %s\n",
			n, *seed, cmd, *out)
		return 1
	}
	fmt.Printf("nemesis: no violations (seed %d)\n", *seed)
	return 0
}

func envOr(name, def string) string {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return v
	}
	return def
}
