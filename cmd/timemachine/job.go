package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/timemachine-db/timemachine/client"
)

// clientFlags are shared by every command that talks to a running cluster;
// client() is the one place that builds the client from them.
type clientFlags struct {
	output  string
	addr    string
	timeout time.Duration
	token   string
	caCert  string
}

func (c *clientFlags) register(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVarP(&c.output, "output", "o", outputTable, "output format: table (for people) or json (for scripts)")
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

func newJobCmd() *cobra.Command {
	var cf clientFlags
	var coll string
	cmd := &cobra.Command{Use: "job", Short: "Create, read, delete, list and redrive jobs"}
	cf.register(cmd)
	cmd.PersistentFlags().StringVarP(&coll, "collection", "c", "default", "collection of the job")

	var (
		id, at, delay, url, route, meta, body, timeout string
		rp                                             retryFlags
	)
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a job (POST); prints the job",
		Example: `  timemachine job create --delay 30s --url http://127.0.0.1:9000/hook --meta '{"user":42}'
  timemachine job create --id reminder-1 --at 2026-12-01T09:00:00Z --route billing
  timemachine job create --body job.json        # the API's JSON job object; "-" reads stdin`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if body != "" {
				cl, ctx, done, err := cf.client()
				if err != nil {
					return err
				}
				defer done()
				var out client.Job
				withID := func(obj map[string]json.RawMessage) bool {
					var id string
					return json.Unmarshal(obj["id"], &id) == nil && id != ""
				}
				if err := sendBody(ctx, cl, http.MethodPost, "/v1/collections/"+pathEscape(coll)+"/jobs", body, withID, &out); err != nil {
					return err
				}
				return cf.printer(cmd).object(out)
			}
			var j client.Job
			{
				j.ID, j.CallbackURL, j.Route, j.CallbackTimeout = id, url, route, timeout
				switch {
				case at != "" && delay != "":
					return usageErr(fmt.Errorf("give --at or --delay, not both"))
				case at != "":
					ms, err := parseTimeFlag("--at", at)
					if err != nil {
						return err
					}
					j.TriggerTime = *ms
				case delay != "":
					j.Delay = delay
				default:
					return usageErr(fmt.Errorf("give the job's time: --at (unix ms or RFC 3339) or --delay (e.g. 90s)"))
				}
				if meta != "" {
					if !json.Valid([]byte(meta)) {
						return usageErr(fmt.Errorf("--meta is not valid JSON: %s", meta))
					}
					j.Meta = client.Meta(meta)
				}
				j.RetryPolicy = rp.policy(cmd)
			}
			cl, ctx, done, err := cf.client()
			if err != nil {
				return err
			}
			defer done()
			out, _, err := cl.CreateJob(ctx, coll, j)
			if err != nil {
				return err
			}
			return cf.printer(cmd).object(out)
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
	rp.register(create)
	cf2.StringVar(&body, "body", "", "file with the JSON job object (or - for stdin), sent to the API as it is; replaces the other flags")

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
			return cf.printer(cmd).object(j)
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
			return cf.printer(cmd).done(deleted{Deleted: "job", Collection: coll, ID: args[0]})
		},
	}
	var (
		status, from, to, cursor, schedule string
		limit                              int
		all                                bool
	)
	list := &cobra.Command{
		Use:   "list",
		Short: "List jobs by trigger time",
		Long: `List jobs by trigger time, a page at a time (--all: every page).
With -o json the answer is the API's page, {"jobs":[…],"next_cursor":"…"}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, ctx, done, err := cf.client()
			if err != nil {
				return err
			}
			defer done()
			opts := client.ListOptions{Status: status, Limit: limit, Cursor: cursor, Schedule: schedule}
			if opts.From, err = parseTimeFlag("--from", from); err != nil {
				return err
			}
			if opts.To, err = parseTimeFlag("--to", to); err != nil {
				return err
			}
			var res client.JobPage
			for {
				page, err := cl.ListJobs(ctx, coll, opts)
				if err != nil {
					return err
				}
				res.Jobs = append(res.Jobs, page.Jobs...)
				res.NextCursor = page.NextCursor
				if !all || page.NextCursor == "" {
					break
				}
				opts.Cursor = page.NextCursor
			}
			if res.Jobs == nil {
				res.Jobs = []client.Job{}
			}
			p := cf.printer(cmd)
			if p.format == outputJSON {
				return p.json(res)
			}
			rows := make([][]string, 0, len(res.Jobs))
			for _, j := range res.Jobs {
				target := j.CallbackURL
				if j.Route != "" {
					target = "route:" + j.Route
				}
				rows = append(rows, []string{j.ID, msTime(j.TriggerTime), j.Status, strconv.Itoa(j.Attempts), target, orDash(j.LastError)})
			}
			if err := p.table([]string{"ID", "TRIGGER", "STATUS", "ATTEMPTS", "TARGET", "LAST ERROR"}, rows); err != nil {
				return err
			}
			if res.NextCursor != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "more: --cursor %s (or --all)\n", res.NextCursor)
			}
			return nil
		},
	}
	lf := list.Flags()
	lf.StringVar(&status, "status", "", "scheduled, succeeded or failed (failed lists the dead letters)")
	lf.StringVar(&from, "from", "", "trigger time lower bound, inclusive (unix ms or RFC 3339)")
	lf.StringVar(&to, "to", "", "trigger time upper bound, exclusive (unix ms or RFC 3339)")
	lf.StringVar(&schedule, "schedule", "", "only the occurrences of this schedule")
	lf.IntVar(&limit, "limit", 100, "jobs per page (1-1000)")
	lf.StringVar(&cursor, "cursor", "", "continue from a previous page")
	lf.BoolVar(&all, "all", false, "follow cursors to the end")

	var (
		ids        []string
		rfrom, rto string
	)
	redrive := &cobra.Command{
		Use:   "redrive",
		Short: "Send dead letters (failed jobs) again, now, with attempts reset",
		Example: `  timemachine job redrive -c billing --ids inv-1,inv-2
  timemachine job redrive -c billing --from 2026-11-01T00:00:00Z --to 2026-11-02T00:00:00Z`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var req client.RedriveRequest
			req.IDs = ids
			var err error
			if req.From, err = parseTimeFlag("--from", rfrom); err != nil {
				return err
			}
			if req.To, err = parseTimeFlag("--to", rto); err != nil {
				return err
			}
			switch {
			case len(ids) == 0 && req.From == nil && req.To == nil:
				return usageErr(fmt.Errorf("give --ids, or a trigger-time range with --from/--to"))
			case len(ids) > 0 && (req.From != nil || req.To != nil):
				return usageErr(fmt.Errorf("give --ids or --from/--to, not both"))
			}
			cl, ctx, done, err := cf.client()
			if err != nil {
				return err
			}
			defer done()
			res, err := cl.Redrive(ctx, coll, req)
			if err != nil {
				return err
			}
			return cf.printer(cmd).object(res)
		},
	}
	rf := redrive.Flags()
	rf.StringSliceVar(&ids, "ids", nil, "ids of the dead letters (comma-separated)")
	rf.StringVar(&rfrom, "from", "", "trigger time lower bound, inclusive (unix ms or RFC 3339)")
	rf.StringVar(&rto, "to", "", "trigger time upper bound, exclusive (unix ms or RFC 3339)")
	cmd.AddCommand(create, get, del, list, redrive)
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
		return nil, usageErr(fmt.Errorf("%s %q: use unix milliseconds or RFC 3339", name, v))
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
		return nil, usageErr(fmt.Errorf("read %s: %w", name, err))
	}
	return b, nil
}
