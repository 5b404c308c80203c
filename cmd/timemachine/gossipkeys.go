package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/timemachine-db/timemachine/client"
)

// newGossipKeysCmd is `timemachine admin gossip-keys`: the gossip keyring
// of every member, through the admin API (docs/operations.md#rotating-the-gossip-key).
func newGossipKeysCmd(cf *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gossip-keys",
		Short: "List or rotate the gossip encryption keys of every member (--gossip-key)",
		Long: `Rotating the gossip key, with no downtime:
  timemachine admin gossip-keys install NEWKEY   # every member can now decrypt with it
  timemachine admin gossip-keys use NEWKEY       # every member now encrypts with it
  timemachine admin gossip-keys remove OLDKEY    # the old key is gone everywhere
Each node saves its keyring in <data-dir>/serf/keyring, so the change survives
restarts; set --gossip-key to the new key too, for nodes started afresh.
Keys are listed by fingerprint only.`,
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "Show which keys (by fingerprint) the members hold",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return adminCall(cmd, cf, func(cl *client.Client, ctx context.Context) (any, error) {
				return cl.GossipKeys(ctx)
			})
		},
	}
	cmd.AddCommand(list)
	for _, op := range []struct{ name, short string }{
		{"install", "Install KEY on every member (it can then decrypt with it)"},
		{"use", "Make KEY, already installed, the one every member encrypts with"},
		{"remove", "Remove KEY from every member (not the one in use)"},
	} {
		cmd.AddCommand(&cobra.Command{
			Use:   op.name + " KEY",
			Short: op.short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return adminCall(cmd, cf, func(cl *client.Client, ctx context.Context) (any, error) {
					kr, err := cl.ChangeGossipKeys(ctx, op.name, args[0])
					if err != nil {
						return nil, fmt.Errorf("gossip-keys %s: %w", op.name, err)
					}
					return kr, nil
				})
			},
		})
	}
	return cmd
}
