package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/timemachine-db/timemachine/client"
)

func newAdminCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{Use: "admin", Short: "Operate the cluster: status, rebalance, compaction, leadership, drain, remove"}
	cf.register(cmd)

	status := &cobra.Command{
		Use:   "status",
		Short: "Print nodes, slots, leaders and replica health",
		Long: `Print nodes, slots, leaders and replica health as the slots' raft
configurations are (not the placement they are heading for). Exits 4 when a
slot is not healthy (moving, degraded or without a leader).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, ctx, done, err := cf.client()
			if err != nil {
				return err
			}
			defer done()
			info, err := cl.Cluster(ctx)
			if err != nil {
				return err
			}
			p := cf.printer(cmd)
			if p.format == outputJSON {
				err = p.json(info)
			} else {
				err = printStatus(p, info)
			}
			if err != nil {
				return err
			}
			if bad := info.NotHealthy(); len(bad) > 0 {
				return &exitError{code: exitUnhealthy, err: fmt.Errorf("%d of %d slots are not healthy", len(bad), len(info.Slots))}
			}
			return nil
		},
	}

	var (
		dryRun bool
		wait   bool
	)
	rebalance := &cobra.Command{
		Use:   "rebalance",
		Short: "Move whole slots so replicas and leaders are even",
		Long: `Move whole slots so replicas and leaders are even. With --wait, print the
progress until every planned move is done and the cluster is healthy again
(exit 0), or exit 3 when --timeout (default 10m with --wait) passes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, ctx, done, err := cf.client()
			if err != nil {
				return err
			}
			defer done()
			res, err := cl.Rebalance(ctx, dryRun)
			if err != nil {
				return err
			}
			p := cf.printer(cmd)
			if p.format == outputJSON {
				err = p.json(res)
			} else {
				err = printMoves(p, res)
			}
			if err != nil || !wait || dryRun {
				return err
			}
			return cf.waitFor(cmd, cl, "the rebalance", func(ci *client.ClusterInfo) progress {
				// Count slots, not moves: a slot may move a replica and its
				// leadership.
				pending := map[int]string{}
				slots := map[int]bool{}
				for _, m := range res.Moves {
					if m.Slot < 0 || m.Slot >= len(ci.Slots) {
						continue
					}
					slots[m.Slot] = true
					s := ci.Slots[m.Slot]
					switch m.Kind {
					case "leader":
						if m.To != "" && s.Leader != m.To {
							pending[m.Slot] = fmt.Sprintf("slot %d not yet led by %s", m.Slot, m.To)
						}
					default:
						if !contains(s.Replicas, m.To) || (m.From != "" && contains(s.Replicas, m.From)) {
							pending[m.Slot] = fmt.Sprintf("slot %d: %s → %s not done", m.Slot, orDash(m.From), m.To)
						}
					}
				}
				g := progress{reached: len(pending) == 0, done: len(slots) - len(pending), total: len(slots)}
				for _, m := range res.Moves { // the first pending, in the answer's order
					if d, ok := pending[m.Slot]; ok {
						g.detail = d
						break
					}
				}
				return g
			})
		},
	}
	rebalance.Flags().BoolVar(&dryRun, "dry-run", false, "print the moves without making them")
	rebalance.Flags().BoolVar(&wait, "wait", false, "print progress until the moves are done and the cluster is healthy")

	compact := &cobra.Command{
		Use:   "compact",
		Short: "Compact storage and truncate raft logs on every node",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var failed, total int
			err := adminCall(cmd, &cf, func(cl *client.Client, ctx context.Context) (any, error) {
				res, err := cl.Compact(ctx)
				if err != nil {
					return nil, err
				}
				for _, r := range res.Results {
					if !r.OK {
						failed++
					}
				}
				total = len(res.Results)
				return compactResult(res), nil
			})
			if err == nil && failed > 0 {
				err = fmt.Errorf("compaction failed on %d of %d nodes", failed, total)
			}
			return err
		},
	}

	var waitTransfer bool
	transfer := &cobra.Command{
		Use:   "transfer SLOT NODE",
		Short: "Move a slot's leadership to NODE (and keep it there)",
		Long: `Move a slot's leadership to NODE with a planned transfer; NODE stays the
slot's preferred leader until the next rebalance or until it leaves. With
--wait, print the progress until NODE leads the slot and the cluster is
healthy (exit 0), or exit 3 when --timeout (default 10m with --wait) passes.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := strconv.Atoi(args[0])
			if err != nil || s < 0 {
				return usageErr(fmt.Errorf("SLOT %q: want a slot number (0, 1, …)", args[0]))
			}
			to := args[1]
			cl, ctx, done, err := cf.client()
			if err != nil {
				return err
			}
			defer done()
			res, err := cl.TransferSlot(ctx, s, to)
			if err != nil {
				return err
			}
			if err := cf.printer(cmd).object(res); err != nil {
				return err
			}
			if !waitTransfer {
				return nil
			}
			return cf.waitFor(cmd, cl, "the transfer", func(ci *client.ClusterInfo) progress {
				if s >= len(ci.Slots) {
					return progress{detail: fmt.Sprintf("no slot %d", s)}
				}
				if l := ci.Slots[s].Leader; l != to {
					return progress{total: 1, detail: fmt.Sprintf("slot %d led by %s, not yet %s", s, orDash(l), to)}
				}
				return progress{reached: true, done: 1, total: 1, detail: fmt.Sprintf("slot %d led by %s", s, to)}
			})
		},
	}
	transfer.Flags().BoolVar(&waitTransfer, "wait", false, "print progress until NODE leads the slot and the cluster is healthy")

	var waitDrain bool
	drain := &cobra.Command{
		Use:   "drain NODE",
		Short: "Move every replica and leadership off NODE",
		Long: `Move every replica and leadership off NODE (it stays in the cluster, draining,
until removed). With --wait, print the progress until NODE holds and leads
nothing and the cluster is healthy (exit 0), or exit 3 when --timeout
(default 10m with --wait) passes. Then take it out with admin remove.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			cl, ctx, done, err := cf.client()
			if err != nil {
				return err
			}
			defer done()
			if ci, err := cl.Cluster(ctx); err == nil {
				if w := drainWarning(&ci, id); w != "" {
					fmt.Fprintln(cmd.ErrOrStderr(), "warning: "+w)
				}
			}
			res, err := cl.Drain(ctx, id)
			if err != nil {
				return err
			}
			if err := cf.printer(cmd).object(res); err != nil {
				return err
			}
			if !waitDrain {
				return nil
			}
			return cf.waitFor(cmd, cl, "the drain of "+id, func(ci *client.ClusterInfo) progress {
				n, ok := ci.Node(id)
				if !ok {
					return progress{reached: true, detail: id + " is gone"}
				}
				if n.Replicas > 0 || n.SlotsLed > 0 {
					return progress{detail: fmt.Sprintf("%s holds %d replicas, leads %d", id, n.Replicas, n.SlotsLed)}
				}
				return progress{reached: true, detail: fmt.Sprintf("%s holds and leads nothing", id)}
			})
		},
	}
	drain.Flags().BoolVar(&waitDrain, "wait", false, "print progress until NODE holds and leads nothing and the cluster is healthy")

	var force bool
	remove := &cobra.Command{
		Use:   "remove NODE",
		Short: "Take a drained (or, with --force, dead) NODE out of the cluster",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, done, err := cf.client()
			if err != nil {
				return err
			}
			defer done()
			if err := cl.RemoveNode(ctx, args[0], force); err != nil {
				return err // a conflict says what to do: drain first, or --force for a dead node
			}
			return cf.printer(cmd).done(deleted{Deleted: "node", ID: args[0]})
		},
	}
	remove.Flags().BoolVar(&force, "force", false, "remove a dead node whatever it holds (its replicas are re-created elsewhere)")
	cmd.AddCommand(newGossipKeysCmd(&cf))
	cmd.AddCommand(status, rebalance, compact, transfer, drain, remove)
	return cmd
}

// compactResult prints as a table of nodes (JSON: as client.CompactResult).
type compactResult client.CompactResult

func (r compactResult) rows() ([]string, [][]string) {
	rows := make([][]string, 0, len(r.Results))
	for _, n := range r.Results {
		rows = append(rows, []string{n.Node, strconv.FormatBool(n.OK), (time.Duration(n.TookMs) * time.Millisecond).String(),
			strconv.Itoa(n.SlotsSnapshotted), orDash(n.Error)})
	}
	return []string{"NODE", "OK", "TOOK", "SLOTS SNAPSHOTTED", "ERROR"}, rows
}

func printStatus(p printer, info client.ClusterInfo) error {
	fmt.Fprintf(p.w, "slots: %d  replication factor: %d", info.SlotCount, info.ReplicationFactor)
	if info.MetaLeader != "" {
		fmt.Fprintf(p.w, "  meta leader: %s", info.MetaLeader)
	}
	fmt.Fprintln(p.w)
	if m := info.Moves; m != nil && m.Pending > 0 {
		fmt.Fprintf(p.w, "moves: %d/%d slots done, %d moving (%d being worked on)\n", m.Done, m.Total, m.Pending, m.Active)
	}
	fmt.Fprintln(p.w)
	rows := make([][]string, 0, len(info.Nodes))
	for _, n := range info.Nodes {
		rows = append(rows, []string{n.ID, n.HTTPAddr, n.Status, strconv.Itoa(n.SlotsLed), strconv.Itoa(n.Replicas)})
	}
	if err := p.table([]string{"NODE", "HTTP", "STATUS", "LEADS", "REPLICAS"}, rows); err != nil {
		return err
	}
	fmt.Fprintln(p.w)
	rows = rows[:0]
	for _, s := range info.Slots {
		state := s.State
		if len(s.Nonvoters) > 0 {
			state += " +" + strings.Join(s.Nonvoters, ",")
		}
		if len(s.Target) > 0 {
			state += " → " + strings.Join(s.Target, ",")
		}
		rows = append(rows, []string{strconv.Itoa(s.Slot), orDash(s.Leader), strings.Join(s.Replicas, ","), state})
	}
	return p.table([]string{"SLOT", "LEADER", "REPLICAS", "STATE"}, rows)
}

func printMoves(p printer, res client.RebalanceResult) error {
	verb := "moving"
	if res.DryRun {
		verb = "would move (dry run)"
	}
	if len(res.Moves) == 0 {
		_, err := fmt.Fprintln(p.w, "no moves: replicas and leaders are even")
		return err
	}
	fmt.Fprintf(p.w, "%s %d:\n", verb, len(res.Moves))
	rows := make([][]string, 0, len(res.Moves))
	for _, m := range res.Moves {
		rows = append(rows, []string{strconv.Itoa(m.Slot), orDash(m.Kind), orDash(m.From), orDash(m.To)})
	}
	return p.table([]string{"SLOT", "KIND", "FROM", "TO"}, rows)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// drainWarning says what a drain of id costs when the nodes left serving
// cannot hold the replication factor: the factor is min(--replicas,
// nodes), so draining one of three nodes leaves every slot with two
// replicas, which survive no failure. The drain goes ahead (API.md §5);
// the operator hears it before, not from admin status later.
func drainWarning(ci *client.ClusterInfo, id string) string {
	remain := 0
	for _, n := range ci.Nodes {
		if n.ID != id && n.Status == client.NodeAlive {
			remain++
		}
	}
	rf := ci.ReplicationFactor
	if remain >= rf {
		return ""
	}
	if remain == 0 {
		return fmt.Sprintf("no serving node but %s remains: nothing can move off it until another node joins", id)
	}
	msg := fmt.Sprintf("after draining %s, %d serving node(s) remain: every slot keeps %d replica(s) instead of %d and survives the loss of %d node(s) (it survives %d now); join another node first to keep %d",
		id, remain, remain, rf, (remain-1)/2, (rf-1)/2, rf)
	var down []string
	for _, n := range ci.Nodes {
		if n.ID != id && (n.Status == client.NodeFailed || n.Status == client.NodeLeft) {
			down = append(down, n.ID)
		}
	}
	if len(down) > 0 {
		// Counted as members by the placement, they serve nothing: the
		// moves that need them wait until they are back.
		msg += fmt.Sprintf(" (%s down: kept as members, serving nothing, and moves onto them wait until they are back)", strings.Join(down, ", "))
	}
	return msg
}
