package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/timemachine-db/timemachine/client"
)

// newScheduleCmd is `timemachine schedule put|get|list|delete`: recurring
// jobs (docs/api.md#schedules).
func newScheduleCmd() *cobra.Command {
	var cf clientFlags
	var coll string
	cmd := &cobra.Command{Use: "schedule", Short: "Create or replace, read, list and delete schedules (recurring jobs)"}
	cf.register(cmd)
	cmd.PersistentFlags().StringVarP(&coll, "collection", "c", "default", "collection of the schedule")

	var (
		s              client.Schedule
		meta, body     string
		startAt, endAt string
		rp             retryFlags
	)
	put := &cobra.Command{
		Use:   "put ID",
		Short: "Create or replace a schedule (PUT); prints it",
		Example: `  timemachine schedule put heartbeat --every 30s --url http://127.0.0.1:9000/hook
  timemachine schedule put daily-report --cron '0 9 * * *' --timezone Europe/Berlin --route reports
  timemachine schedule put daily-report --body schedule.json   # the API's JSON object; "-" reads stdin`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if body != "" {
				cl, ctx, done, err := cf.client()
				if err != nil {
					return err
				}
				defer done()
				var out client.Schedule
				path := "/v1/collections/" + pathEscape(coll) + "/schedules/" + pathEscape(args[0])
				if err := sendBody(ctx, cl, http.MethodPut, path, body, nil, &out); err != nil {
					return err
				}
				return cf.printer(cmd).object(out)
			}
			sc := s
			{
				if (sc.Cron == "") == (sc.Every == "") {
					return usageErr(fmt.Errorf("give exactly one of --cron (5 fields) and --every (a Go duration, at least 1s)"))
				}
				if (sc.CallbackURL == "") == (sc.Route == "") {
					return usageErr(fmt.Errorf("give exactly one of --url and --route"))
				}
				if meta != "" {
					if !json.Valid([]byte(meta)) {
						return usageErr(fmt.Errorf("--meta is not valid JSON: %s", meta))
					}
					sc.Meta = client.Meta(meta)
				}
				for _, t := range []struct {
					name, v string
					dst     *int64
				}{{"--start-at", startAt, &sc.StartAt}, {"--end-at", endAt, &sc.EndAt}} {
					ms, err := parseTimeFlag(t.name, t.v)
					if err != nil {
						return err
					}
					if ms != nil {
						*t.dst = *ms
					}
				}
				sc.RetryPolicy = rp.policy(cmd)
			}
			cl, ctx, done, err := cf.client()
			if err != nil {
				return err
			}
			defer done()
			out, _, err := cl.PutSchedule(ctx, coll, args[0], sc)
			if err != nil {
				return err
			}
			return cf.printer(cmd).object(out)
		},
	}
	f := put.Flags()
	f.StringVar(&s.Cron, "cron", "", "5-field cron expression, e.g. '*/5 * * * *'")
	f.StringVar(&s.Every, "every", "", "fixed interval (Go duration, at least 1s), instead of --cron")
	f.StringVar(&s.Timezone, "timezone", "", "IANA time zone of --cron (default UTC), e.g. Europe/Berlin")
	f.StringVar(&s.CallbackURL, "url", "", "callback URL of every occurrence")
	f.StringVar(&s.Route, "route", "", "route name (instead of --url)")
	f.StringVar(&meta, "meta", "", "JSON echoed in every occurrence's callback")
	f.StringVar(&s.CallbackTimeout, "callback-timeout", "", "callback timeout (Go duration)")
	f.StringVar(&startAt, "start-at", "", "first possible occurrence (unix ms or RFC 3339)")
	f.StringVar(&endAt, "end-at", "", "last possible occurrence (unix ms or RFC 3339)")
	f.BoolVar(&s.Paused, "paused", false, "create or replace it paused (no occurrences until put again without)")
	rp.register(put)
	f.StringVar(&body, "body", "", "file with the JSON schedule object (or - for stdin), sent to the API as it is; replaces the other flags")

	get := &cobra.Command{
		Use:   "get ID",
		Short: "Read a schedule: next and last occurrence, missed count",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, done, err := cf.client()
			if err != nil {
				return err
			}
			defer done()
			out, err := cl.GetSchedule(ctx, coll, args[0])
			if err != nil {
				return err
			}
			return cf.printer(cmd).object(out)
		},
	}
	var (
		limit  int
		cursor string
		all    bool
	)
	list := &cobra.Command{
		Use:   "list",
		Short: "List a collection's schedules by id",
		Long: `List a collection's schedules by id, a page at a time (--all: every page).
With -o json the answer is the API's page, {"schedules":[…],"next_cursor":"…"}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, ctx, done, err := cf.client()
			if err != nil {
				return err
			}
			defer done()
			opts := client.ListSchedulesOptions{Limit: limit, Cursor: cursor}
			var res client.SchedulePage
			for {
				page, err := cl.ListSchedules(ctx, coll, opts)
				if err != nil {
					return err
				}
				res.Schedules = append(res.Schedules, page.Schedules...)
				res.NextCursor = page.NextCursor
				if !all || page.NextCursor == "" {
					break
				}
				opts.Cursor = page.NextCursor
			}
			if res.Schedules == nil {
				res.Schedules = []client.Schedule{}
			}
			p := cf.printer(cmd)
			if p.format == outputJSON {
				return p.json(res)
			}
			rows := make([][]string, 0, len(res.Schedules))
			for _, sc := range res.Schedules {
				when := sc.Cron
				if sc.Every != "" {
					when = "every " + sc.Every
				}
				target := sc.CallbackURL
				if sc.Route != "" {
					target = "route:" + sc.Route
				}
				next := msTime(sc.NextFireAt)
				if sc.NextFireAt == 0 {
					next = "-"
				}
				if sc.Paused {
					next = "paused"
				}
				rows = append(rows, []string{sc.ID, when, orDash(sc.Timezone), next, orDash(sc.LastStatus), strconv.FormatInt(sc.Missed, 10), target})
			}
			if err := p.table([]string{"ID", "WHEN", "TIMEZONE", "NEXT", "LAST STATUS", "MISSED", "TARGET"}, rows); err != nil {
				return err
			}
			if res.NextCursor != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "more: --cursor %s (or --all)\n", res.NextCursor)
			}
			return nil
		},
	}
	lf := list.Flags()
	lf.IntVar(&limit, "limit", 100, "schedules per page (1-1000)")
	lf.StringVar(&cursor, "cursor", "", "continue from a previous page")
	lf.BoolVar(&all, "all", false, "follow cursors to the end")

	del := &cobra.Command{
		Use:   "delete ID",
		Short: "Stop and remove a schedule (occurrences already created stay)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, done, err := cf.client()
			if err != nil {
				return err
			}
			defer done()
			if err := cl.DeleteSchedule(ctx, coll, args[0]); err != nil {
				return err
			}
			return cf.printer(cmd).done(deleted{Deleted: "schedule", Collection: coll, ID: args[0]})
		},
	}
	cmd.AddCommand(put, get, list, del)
	return cmd
}
