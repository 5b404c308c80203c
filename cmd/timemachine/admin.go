package main

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/timemachine-db/timemachine/client"
)

func newAdminCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{Use: "admin", Short: "Operate the cluster: status, rebalance, compaction, leadership, drain"}
	cf.register(cmd)

	status := &cobra.Command{
		Use:   "status",
		Short: "Print nodes, slots, leaders and replica health",
		Args:  cobra.NoArgs,
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
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintf(w, "slots: %d\treplication factor: %d\n\n", info.SlotCount, info.ReplicationFactor)
			fmt.Fprintln(w, "NODE\tHTTP\tSTATUS\tLEADS\tREPLICAS")
			for _, n := range info.Nodes {
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\n", n.ID, n.HTTPAddr, n.Status, n.SlotsLed, n.Replicas)
			}
			fmt.Fprintln(w)
			fmt.Fprintln(w, "SLOT\tLEADER\tREPLICAS\tSTATE")
			unhealthy := 0
			for _, s := range info.Slots {
				if s.State != "healthy" {
					unhealthy++
				}
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\n", s.Slot, orDash(s.Leader), strings.Join(s.Replicas, ","), s.State)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			if unhealthy > 0 {
				return &exitError{code: 2, err: fmt.Errorf("%d of %d slots are not healthy", unhealthy, len(info.Slots))}
			}
			return nil
		},
	}
	var dryRun bool
	rebalance := &cobra.Command{
		Use:   "rebalance",
		Short: "Move whole slots so replicas and leaders are even",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return adminCall(cmd, &cf, func(cl *client.Client, c ctxT) (any, error) { return cl.Rebalance(c, dryRun) })
		},
	}
	rebalance.Flags().BoolVar(&dryRun, "dry-run", false, "print the moves without making them")
	compact := &cobra.Command{
		Use:   "compact",
		Short: "Compact storage and truncate raft logs on every node",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return adminCall(cmd, &cf, func(cl *client.Client, c ctxT) (any, error) { return cl.Compact(c) })
		},
	}
	transfer := &cobra.Command{
		Use:   "transfer SLOT NODE",
		Short: "Move a slot's leadership to NODE",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := strconv.Atoi(args[0])
			if err != nil || s < 0 {
				return fmt.Errorf("SLOT %q: want a slot number", args[0])
			}
			return adminCall(cmd, &cf, func(cl *client.Client, c ctxT) (any, error) { return struct{}{}, cl.TransferSlot(c, s, args[1]) })
		},
	}
	drain := &cobra.Command{
		Use:   "drain NODE",
		Short: "Move every replica and leadership off NODE",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return adminCall(cmd, &cf, func(cl *client.Client, c ctxT) (any, error) { return struct{}{}, cl.Drain(c, args[0]) })
		},
	}
	remove := &cobra.Command{
		Use:   "remove NODE",
		Short: "Take a drained or dead NODE out of the cluster",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return adminCall(cmd, &cf, func(cl *client.Client, c ctxT) (any, error) { return nil, cl.RemoveNode(c, args[0], false) })
		},
	}
	cmd.AddCommand(newGossipKeysCmd(&cf))
	cmd.AddCommand(status, rebalance, compact, transfer, drain, remove)
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
