package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// version is stamped at build time with -ldflags "-X main.version=…":
// `make build` and `make release` use `git describe --tags --always --dirty`,
// so a tagged commit prints its tag (v0.3.0), a later one the tag plus commits
// and hash (v0.3.0-4-g1a2b3c4), a checkout without tags the abbreviated commit,
// and any of them "-dirty" with uncommitted changes. Unstamped builds (go
// build, go install) fall back to what the Go toolchain recorded: see
// buildVersion.
var version = "dev"

// exitError carries a process exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

func main() {
	root := newRoot()
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		var ee *exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "timemachine",
		Short:         "A distributed, durable timer database: one-shot jobs fired as webhooks at their time",
		Version:       buildVersion(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return applyEnv(cmd.Flags())
		},
	}
	root.SetVersionTemplate("timemachine {{.Version}}\n") // --version prints what `version` prints
	root.AddCommand(newServerCmd(), newJobCmd(), newAdminCmd(), newBenchCmd(), newVersionCmd())
	root.AddCommand(newHealthCmd()) // the container HEALTHCHECK probe (health.go)
	root.AddCommand(newTokenCmd())  // API tokens for --auth-file (token.go)
	return root
}

// applyEnv gives every flag not set on the command line the value of
// TIMEMACHINE_<FLAG> (dashes as underscores), as docs/operations.md#running-a-node
// describes.
func applyEnv(fs *pflag.FlagSet) error {
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			return
		}
		name := "TIMEMACHINE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		v, ok := os.LookupEnv(name)
		if !ok {
			return
		}
		if sv, isSlice := f.Value.(pflag.SliceValue); isSlice {
			if err := sv.Replace(splitList(v)); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", name, v, err))
			}
			f.Changed = true
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", name, v, err))
		}
	})
	return errors.Join(errs...)
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintf(cmd.OutOrStdout(), "timemachine %s\n", buildVersion())
		},
	}
}

// buildVersion is the stamped version, or for an unstamped build the module
// version `go install …@v1.2.3` records, else the commit `go build` records
// from the checkout (12 hex digits, "-dirty" with uncommitted changes, the
// same shape as git describe gives without tags), else "dev".
func buildVersion() string {
	if version != "dev" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return version
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return version
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}
