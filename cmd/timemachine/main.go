package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/timemachine-db/timemachine/client"
)

// version is stamped at build time with -ldflags "-X main.version=…":
// `make build` and `make release` use `git describe --tags --always --dirty`,
// so a tagged commit prints its tag (v0.3.0), a later one the tag plus commits
// and hash (v0.3.0-4-g1a2b3c4), a checkout without tags the abbreviated commit,
// and any of them "-dirty" with uncommitted changes. Unstamped builds (go
// build, go install) fall back to what the Go toolchain recorded: see
// buildVersion.
var version = "dev"

// Exit codes of the client commands (docs/operations.md#the-command-line);
// the server has its own for storage failures (server.go).
const (
	exitOK        = 0
	exitFailed    = 1 // the request failed: the server's error, or no server answered
	exitUsage     = 2 // bad command line: unknown command or flag, missing or invalid argument
	exitTimeout   = 3 // --wait (or a request) ran out of --timeout before the cluster got there
	exitUnhealthy = 4 // admin status: a slot is not healthy
)

// exitError carries a process exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErr marks a bad command line (exit code 2).
func usageErr(err error) error { return &exitError{code: exitUsage, err: err} }

func main() {
	root := newRoot()
	err := root.Execute()
	if err == nil {
		os.Exit(exitOK)
	}
	code, msg := describeExit(err)
	fmt.Fprintln(os.Stderr, "error:", msg)
	os.Exit(code)
}

// describeExit picks the exit code of an error and the one line that
// describes it.
func describeExit(err error) (int, string) {
	msg := err.Error()
	var pe *client.ProtocolError
	if errors.As(err, &pe) {
		ct := pe.ContentType
		if ct == "" {
			ct = "no content type"
		}
		msg = fmt.Sprintf("%s does not answer like a timemachine node (HTTP %d, %s): check --addr", pe.Base, pe.HTTPStatus, ct)
	}
	var ee *exitError
	var ae *client.ArgumentError
	switch {
	case errors.As(err, &ee):
		return ee.code, msg
	case errors.As(err, &ae): // refused before sending: an argument or --addr, --ca-cert, …
		return exitUsage, msg
	case errors.Is(err, context.DeadlineExceeded):
		return exitTimeout, msg
	case strings.HasPrefix(msg, "unknown command") || strings.HasPrefix(msg, "unknown flag") || strings.HasPrefix(msg, "unknown shorthand flag"):
		return exitUsage, msg
	}
	return exitFailed, msg
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "timemachine",
		Short:         "A distributed, durable timer database: one-shot jobs fired as webhooks at their time",
		Version:       buildVersion(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd.Flags()); err != nil {
				return usageErr(err)
			}
			return checkFlags(cmd.Flags())
		},
	}
	root.SetVersionTemplate("timemachine {{.Version}}\n") // --version prints what `version` prints
	root.AddCommand(newServerCmd(), newJobCmd(), newAdminCmd(), newBenchCmd(), newVersionCmd())
	root.AddCommand(newCollectionCmd(), newRouteCmd(), newScheduleCmd())
	root.AddCommand(newHealthCmd()) // the container HEALTHCHECK probe (health.go)
	root.AddCommand(newTokenCmd())  // API tokens for --auth-file (token.go)
	strictCommands(root)
	return root
}

// strictCommands makes every mistake on the command line a usage error
// (exit 2) that says what went wrong: a bad flag or argument count, and an
// unknown subcommand, with the nearest known ones ("job lst" → "list").
// Cobra itself only does the latter for the root and prints help with exit
// 0 for a group command given a word it does not know.
func strictCommands(c *cobra.Command) {
	c.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageErr(fmt.Errorf("%w (see %s --help)", err, cmd.CommandPath()))
	})
	c.SuggestionsMinimumDistance = 2
	if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				msg += "; did you mean " + strings.Join(s, " or ") + "?"
			}
			return usageErr(fmt.Errorf("%s (see %s --help)", msg, cmd.CommandPath()))
		}
	} else if c.Args != nil {
		check := c.Args
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return usageErr(fmt.Errorf("%s: %w (usage: %s)", cmd.CommandPath(), err, cmd.UseLine()))
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		strictCommands(sub)
	}
}

// positiveFlags must be above zero when given: zero or a negative count,
// page size or duration is a mistake (their defaults, which may be 0 for
// "choose for me", are not checked).
var positiveFlags = map[string]bool{
	"limit": true, "slots": true, "replicas": true, "timeout": true, "concurrency": true,
	"jobs": true, "batch": true, "bootstrap-expect": true, "move-concurrency": true,
	"fire-concurrency": true, "failure-grace": true, "replica-warn-after": true, "cache-mb": true,
	"max-in-flight": true, "max-attempts": true, "burst": false,
}

// checkFlags refuses bad values the flag types let through: -o other than
// table or json, and zero or negative values of positiveFlags.
func checkFlags(fs *pflag.FlagSet) error {
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		if !f.Changed {
			return
		}
		v := f.Value.String()
		switch {
		case f.Name == "output":
			if v != outputTable && v != outputJSON {
				errs = append(errs, fmt.Errorf("-o/--output %q: want table or json", v))
			}
		case positiveFlags[f.Name]:
			bad := false
			switch f.Value.Type() {
			case "duration":
				d, err := time.ParseDuration(v)
				bad = err == nil && d <= 0
			case "int", "int64", "float64":
				n, err := strconv.ParseFloat(v, 64)
				bad = err == nil && n <= 0
			}
			if bad {
				errs = append(errs, fmt.Errorf("--%s %s: must be greater than zero", f.Name, v))
			}
		}
	})
	if len(errs) > 0 {
		return usageErr(errors.Join(errs...))
	}
	return nil
}

// applyEnv gives every flag not set on the command line the value of
// TIMEMACHINE_<FLAG> (dashes as underscores), as docs/operations.md#running-a-node
// describes.
// fromEnv annotates a flag whose value applyEnv took from the environment
// (the variable's name), for commands that say so (token new).
const fromEnv = "timemachine-from-env"

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
			_ = fs.SetAnnotation(f.Name, fromEnv, []string{name})
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", name, v, err))
		}
		_ = fs.SetAnnotation(f.Name, fromEnv, []string{name})
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
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output == outputJSON { // -o is checked for every command (checkFlags)
				return printJSON(cmd.OutOrStdout(), struct {
					Version string `json:"version"`
				}{buildVersion()})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "timemachine %s\n", buildVersion())
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", outputTable, `output format: table ("timemachine VERSION") or json ({"version"})`)
	return cmd
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
