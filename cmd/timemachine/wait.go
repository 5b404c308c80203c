package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/timemachine-db/timemachine/client"
)

// defaultWaitTimeout is how long --wait waits when --timeout is not given
// (the 30 s of a single request is too short for moving slots).
const defaultWaitTimeout = 10 * time.Minute

// waitPoll is how often --wait reads the cluster.
var waitPoll = time.Second

// waitFor polls /v1/cluster until goal holds and the cluster is healthy
// again (no slot moving, degraded or without a leader; no move pending),
// printing a progress line whenever the progress changes (to stdout for
// tables, to stderr with -o json so stdout stays JSON). It gives up with
// exit code 3 when --timeout (defaultWaitTimeout unless given) passes.
// goal reports whether the command's own aim is reached, and what is
// missing or done, for the progress line.
func (c *clientFlags) waitFor(cmd *cobra.Command, cl *client.Client, what string, goal func(*client.ClusterInfo) progress) error {
	timeout := defaultWaitTimeout
	if f := cmd.Flags().Lookup("timeout"); f != nil && f.Changed {
		timeout = c.timeout
	}
	out := cmd.OutOrStdout()
	if c.output == outputJSON {
		out = cmd.ErrOrStderr()
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
	defer cancel()
	var last, reason string
	for {
		pctx, pcancel := context.WithTimeout(ctx, min(c.timeout, 10*time.Second))
		ci, err := cl.Cluster(pctx)
		pcancel()
		var line string
		switch {
		case err != nil && ctx.Err() != nil:
			line = last // the wait is over, not the cluster's fault
		case err != nil:
			line = fmt.Sprintf("cannot read the cluster: %v", err)
			reason = line
		default:
			g := goal(&ci)
			line = progressLine(&ci, g, start)
			reason = line
			if b := blockedBy(&ci); b != "" {
				reason += "; " + b
			}
			if g.reached && healthy(&ci) {
				fmt.Fprintf(out, "[%5.1fs] %s\n", time.Since(start).Seconds(), line)
				fmt.Fprintf(out, "done: %s finished and the cluster is healthy after %.1fs\n", what, time.Since(start).Seconds())
				return nil
			}
		}
		if line != last {
			fmt.Fprintf(out, "[%5.1fs] %s\n", time.Since(start).Seconds(), line)
			last = line
		}
		select {
		case <-ctx.Done():
			if cmd.Context().Err() != nil {
				return cmd.Context().Err()
			}
			return &exitError{code: exitTimeout, err: fmt.Errorf("timed out after %s waiting for %s: %s", timeout, what, reason)}
		case <-time.After(waitPoll):
		}
	}
}

// blockedBy names the nodes that are down (failed or left) and are
// members or targets of a slot that is not healthy: what the wait is
// waiting on, for the timeout's reason — the progress counts alone said
// "3 moving" while the moves waited for a node that was down (a
// black-box review). "" when there is none.
func blockedBy(ci *client.ClusterInfo) string {
	down := map[string]string{}
	for _, n := range ci.Nodes {
		if n.Status == client.NodeFailed || n.Status == client.NodeLeft {
			down[n.ID] = n.Status
		}
	}
	slots := map[string]int{}
	for _, s := range ci.Slots {
		if s.State == client.SlotHealthy {
			continue
		}
		seen := map[string]bool{}
		for _, id := range append(append([]string(nil), s.Replicas...), s.Target...) {
			if _, ok := down[id]; ok && !seen[id] {
				seen[id] = true
				slots[id]++
			}
		}
	}
	if len(slots) == 0 {
		return ""
	}
	ids := make([]string, 0, len(slots))
	for id := range slots {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var parts []string
	for _, id := range ids {
		parts = append(parts, fmt.Sprintf("%s is %s (a member or target of %d of those slots)", id, down[id], slots[id]))
	}
	return "waiting on nodes that are down: " + strings.Join(parts, ", ") + "; the moves finish once they are back, or after `admin remove --force` of a node that will not return"
}

// healthy: every slot healthy and no move pending.
func healthy(ci *client.ClusterInfo) bool {
	if len(ci.NotHealthy()) > 0 {
		return false
	}
	return ci.Moves == nil || ci.Moves.Pending == 0
}

// progress is how far a command's own aim is: whether it is reached, how
// many of the slots it moves are done (total 0: not counted by the
// command), and what is missing or done, for the progress line.
type progress struct {
	reached     bool
	done, total int
	detail      string
}

// progressLine says how far the moves are: "moved 7/9 slots, 2 moving
// (1 being worked on), 0 degraded, 0 without a leader; <detail>". The
// count is the cluster's round of replica moves, else the command's own
// (leaderships, which move without a round). A round of moves that
// finished before the command started (since) is not this command's and
// is left out.
func progressLine(ci *client.ClusterInfo, g progress, since time.Time) string {
	counts := map[string]int{}
	for _, s := range ci.Slots {
		counts[s.State]++
	}
	var b strings.Builder
	m := ci.Moves
	if m != nil && m.Pending == 0 && m.FinishedAt != 0 && m.FinishedAt < since.UnixMilli() {
		m = nil
	}
	if m != nil && m.Total > 0 {
		fmt.Fprintf(&b, "moved %d/%d slots", m.Done, m.Total)
		if m.Pending > 0 {
			fmt.Fprintf(&b, ", %d moving (%d being worked on)", m.Pending, m.Active)
		}
	} else if g.total > 0 {
		fmt.Fprintf(&b, "moved %d/%d slots", g.done, g.total)
		if n := counts[client.SlotMoving]; n > 0 {
			fmt.Fprintf(&b, ", %d moving", n)
		}
	} else {
		fmt.Fprintf(&b, "%d slots moving", counts[client.SlotMoving])
	}
	fmt.Fprintf(&b, ", %d degraded, %d without a leader", counts[client.SlotDegraded], counts[client.SlotNoLeader])
	if g.detail != "" {
		b.WriteString("; " + g.detail)
	}
	return b.String()
}
