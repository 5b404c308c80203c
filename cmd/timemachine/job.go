package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/timemachine-db/timemachine/client"
)

// clientFlags are shared by every command that talks to a running cluster.
type clientFlags struct {
	addr    string
	timeout time.Duration
	token   string
	caCert  string
}

func (c *clientFlags) register(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVar(&c.addr, "addr", "127.0.0.1:8080", "HTTP address of any node (several, comma-separated, are tried in turn)")
	cmd.PersistentFlags().DurationVar(&c.timeout, "timeout", 30*time.Second, "give up after this long")
	registerAuthFlags(cmd, &c.token, &c.caCert)
}

func (c *clientFlags) client() (*client.Client, context.Context, context.CancelFunc, error) {
	cl, err := client.New(splitList(c.addr), append(authOptions(c.token, c.caCert), client.WithTimeout(c.timeout))...)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	return cl, ctx, func() { cancel(); cl.Close() }, nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newJobCmd() *cobra.Command {
	var cf clientFlags
	var coll string
	cmd := &cobra.Command{Use: "job", Short: "Create, read, delete and list jobs"}
	cf.register(cmd)
	cmd.PersistentFlags().StringVarP(&coll, "collection", "c", "default", "collection of the job")

	var (
		id, at, delay, url, route, meta, body, timeout string
		maxAttempts                                    int
	)
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a job (POST); prints the job",
		Example: `  timemachine job create --delay 30s --url http://127.0.0.1:9000/hook --meta '{"user":42}'
  timemachine job create --id reminder-1 --at 2026-12-01T09:00:00Z --route billing
  timemachine job create --body job.json        # the API's JSON job object; "-" reads stdin`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var raw []byte
			if body != "" {
				var err error
				if raw, err = readArg(body); err != nil {
					return err
				}
			} else {
				j := map[string]any{}
				if id != "" {
					j["id"] = id
				}
				switch {
				case at != "" && delay != "":
					return fmt.Errorf("give --at or --delay, not both")
				case at != "":
					if ms, err := strconv.ParseInt(at, 10, 64); err == nil {
						j["trigger_time"] = ms
					} else {
						j["trigger_time"] = at
					}
				case delay != "":
					j["delay"] = delay
				default:
					return fmt.Errorf("give the job's time: --at (unix ms or RFC 3339) or --delay (e.g. 90s)")
				}
				if url != "" {
					j["callback_url"] = url
				}
				if route != "" {
					j["route"] = route
				}
				if meta != "" {
					if !json.Valid([]byte(meta)) {
						return fmt.Errorf("--meta is not valid JSON: %s", meta)
					}
					j["meta"] = json.RawMessage(meta)
				}
				if timeout != "" {
					j["callback_timeout"] = timeout
				}
				if maxAttempts > 0 {
					j["retry_policy"] = map[string]any{"max_attempts": maxAttempts}
				}
				raw, _ = json.Marshal(j)
			}
			cl, ctx, done, err := cf.client()
			if err != nil {
				return err
			}
			defer done()
			status, out, err := cl.Do(ctx, client.RawRequest{Method: "POST", Path: "/v1/collections/" + coll + "/jobs", Body: raw})
			if err != nil {
				return err
			}
			return printRaw(cmd.OutOrStdout(), status, out)
		},
	}
	cf2 := create.Flags()
	cf2.StringVar(&id, "id", "", "job id (generated when absent)")
	cf2.StringVar(&at, "at", "", "trigger time: unix milliseconds or RFC 3339")
	cf2.StringVar(&delay, "delay", "", "trigger after this long (Go duration, e.g. 90s)")
	cf2.StringVar(&url, "url", "", "callback URL")
	cf2.StringVar(&route, "route", "", "route name (instead of --url)")
	cf2.StringVar(&meta, "meta", "", "JSON echoed in the callback")
	cf2.StringVar(&timeout, "callback-timeout", "", "callback timeout (Go duration)")
	cf2.IntVar(&maxAttempts, "max-attempts", 0, "retry policy: attempts before the job fails")
	cf2.StringVar(&body, "body", "", "file with the JSON job object (or - for stdin); replaces the other flags")

	get := &cobra.Command{
		Use:   "get ID",
		Short: "Read a job and its status",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, done, err := cf.client()
			if err != nil {
				return err
			}
			defer done()
			j, err := cl.GetJob(ctx, coll, args[0])
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), j)
		},
	}
	del := &cobra.Command{
		Use:   "delete ID",
		Short: "Cancel and remove a job",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, done, err := cf.client()
			if err != nil {
				return err
			}
			defer done()
			if err := cl.DeleteJob(ctx, coll, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted %s/%s\n", coll, args[0])
			return nil
		},
	}
	var (
		status, from, to, cursor string
		limit                    int
		all                      bool
	)
	list := &cobra.Command{
		Use:   "list",
		Short: "List jobs by trigger time (one JSON object per line)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, ctx, done, err := cf.client()
			if err != nil {
				return err
			}
			defer done()
			opts := client.ListOptions{Status: status, Limit: limit, Cursor: cursor}
			if opts.From, err = parseTimeFlag("--from", from); err != nil {
				return err
			}
			if opts.To, err = parseTimeFlag("--to", to); err != nil {
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			for {
				page, err := cl.ListJobs(ctx, coll, opts)
				if err != nil {
					return err
				}
				jobs, next := page.Jobs, page.NextCursor
				for _, j := range jobs {
					if err := enc.Encode(j); err != nil {
						return err
					}
				}
				if !all || next == "" {
					if next != "" {
						fmt.Fprintf(cmd.ErrOrStderr(), "more: --cursor %s\n", next)
					}
					return nil
				}
				opts.Cursor = next
			}
		},
	}
	lf := list.Flags()
	lf.StringVar(&status, "status", "", "scheduled, succeeded or failed (failed lists the dead letters)")
	lf.StringVar(&from, "from", "", "trigger time lower bound, inclusive (unix ms or RFC 3339)")
	lf.StringVar(&to, "to", "", "trigger time upper bound, exclusive (unix ms or RFC 3339)")
	lf.IntVar(&limit, "limit", 100, "jobs per page (1-1000)")
	lf.StringVar(&cursor, "cursor", "", "continue from a previous page")
	lf.BoolVar(&all, "all", false, "follow cursors to the end")
	cmd.AddCommand(create, get, del, list)
	return cmd
}

func parseTimeFlag(name, v string) (*int64, error) {
	if v == "" {
		return nil, nil
	}
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
		return &ms, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return nil, fmt.Errorf("%s %q: use unix milliseconds or RFC 3339", name, v)
	}
	ms := t.UnixMilli()
	return &ms, nil
}

func readArg(name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(os.Stdin)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return b, nil
}

// printRaw prints an API answer; an error body becomes the command's error.
func printRaw(w io.Writer, status int, body []byte) error {
	if status >= 400 {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(body, &e) == nil && e.Error.Code != "" {
			return fmt.Errorf("%d %s: %s", status, e.Error.Code, e.Error.Message)
		}
		return fmt.Errorf("HTTP %d: %s", status, strings.TrimSpace(string(body)))
	}
	var v any
	if json.Unmarshal(body, &v) != nil {
		_, err := w.Write(body)
		return err
	}
	return printJSON(w, v)
}
