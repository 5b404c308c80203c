package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/timemachine-db/timemachine/auth"
	"github.com/timemachine-db/timemachine/model"
)

func newTokenCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Make API tokens for --auth-file"}
	var (
		role        string
		collections []string
		name        string
		asJSON      bool
		output      string
	)
	create := &cobra.Command{
		Use:   "new",
		Short: "Print a new random API token and its --auth-file entry",
		Long: `Prints a new random token (256 bits) on the first line and its entry for the
"tokens" list of the --auth-file on the second. The file holds only the
token's SHA-256, so the token is shown this once: hand it to its user, add
the entry to the auth file of every node, then send the nodes SIGHUP.`,
		Example: `  timemachine token new --role admin --name ops
  timemachine token new --role writer --collection billing --name billing-service
  timemachine token new --role reader --name dashboards -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := auth.ParseRole(role)
			if err != nil {
				return fmt.Errorf("--role: %w", err)
			}
			for _, c := range collections {
				if e := model.CheckName("--collection", c); e != nil {
					return e
				}
			}
			tok, err := auth.NewToken()
			if err != nil {
				return err
			}
			entry := auth.NewEntry(name, r, collections, tok)
			defer warnScopeFromEnv(cmd, collections)
			if asJSON || output == outputJSON {
				return printJSON(cmd.OutOrStdout(), struct {
					Token string     `json:"token"`
					Entry auth.Entry `json:"entry"`
				}{tok, entry})
			}
			b, err := json.Marshal(entry)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), tok)
			fmt.Fprintln(cmd.OutOrStdout(), string(b))
			fmt.Fprintln(cmd.ErrOrStderr(), "Line 1 is the token (shown only now); line 2 goes into the \"tokens\" list of every node's --auth-file, then send the nodes SIGHUP.")
			return nil
		},
	}
	f := create.Flags()
	f.StringVar(&role, "role", "", "reader, writer or admin (required)")
	f.StringSliceVar(&collections, "collection", nil, "limit the token to this collection (repeat or comma-separate; default: every collection)")
	f.StringVar(&name, "name", "", "a name for the token in logs and error messages")
	f.StringVarP(&output, "output", "o", outputTable, `table (the token, then its entry, a line each) or json ({"token","entry"})`)
	f.BoolVar(&asJSON, "json", false, "the same as -o json")
	_ = create.MarkFlagRequired("role")
	cmd.AddCommand(create)
	return cmd
}

// warnScopeFromEnv says on stderr when the token's collections came from
// TIMEMACHINE_COLLECTION (applyEnv's annotation): the job commands read
// the same variable for their collection, and a shell that exported it for
// them would otherwise make a scoped token without a word.
func warnScopeFromEnv(cmd *cobra.Command, collections []string) {
	f := cmd.Flags().Lookup("collection")
	if f == nil || len(collections) == 0 || len(f.Annotations[fromEnv]) == 0 {
		return
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "note: this token is limited to collection(s) %s, from %s; unset it or pass --collection for another scope\n", strings.Join(collections, ","), f.Annotations[fromEnv][0])
}
