package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/timemachine-db/timemachine/client"
	"github.com/timemachine-db/timemachine/client/bench"
)

// adminCall runs one admin API call and prints its answer as -o says.
func adminCall(cmd *cobra.Command, cf *clientFlags, call func(*client.Client, context.Context) (any, error)) error {
	cl, ctx, done, err := cf.client()
	if err != nil {
		return err
	}
	defer done()
	v, err := call(cl, ctx)
	if err != nil {
		return err
	}
	if v == nil {
		fmt.Fprintln(cmd.OutOrStdout(), "ok")
		return nil
	}
	return cf.printer(cmd).object(v)
}

func newBenchCmd() *cobra.Command {
	var (
		cfg       bench.Config
		addrs     string
		asJSON    bool
		output    string
		schedules int
		duration  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Load a running cluster and measure create rate, fire rate and lateness",
		Long: `Starts a local webhook receiver, creates --jobs jobs on the cluster whose
callbacks point at it, and measures how fast they were created and fired and
how late (or early) each callback arrived.`,
		Example: `  timemachine bench --jobs 60000 --window 30s              # 2,000 fires/s for 30 s: lateness
  timemachine bench --jobs 100000 --at-once --batch 1000    # one instant: drain time
  timemachine bench --jobs 1000000 --batch 1000 --create-only   # pending load
  timemachine bench --schedules 10000 --duration 20s        # every-1s schedules: fires/s, lateness, duplicates`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			asJSON = asJSON || output == outputJSON // -o is checked for every command (checkFlags)
			cfg.Addrs = splitList(addrs)
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if schedules > 0 {
				rep, err := bench.RunSchedules(ctx, bench.ScheduleConfig{Addrs: cfg.Addrs, Collection: cfg.Collection, Schedules: schedules,
					Duration: duration, ReceiverAddr: cfg.ReceiverAddr, CallbackAddr: cfg.CallbackAddr, IDPrefix: cfg.IDPrefix,
					Token: cfg.Token, CAFile: cfg.CAFile, Pipeline: cfg.Pipeline}, cmd.ErrOrStderr())
				if rep != nil {
					if asJSON {
						if err := printJSON(cmd.OutOrStdout(), rep); err != nil {
							return err
						}
					} else {
						fmt.Fprintln(cmd.OutOrStdout(), rep.String())
					}
				}
				return err
			}
			rep, err := bench.Run(ctx, cfg, cmd.ErrOrStderr())
			if rep != nil {
				if asJSON {
					if err := printJSON(cmd.OutOrStdout(), rep); err != nil {
						return err
					}
				} else {
					fmt.Fprintln(cmd.OutOrStdout(), rep.String())
				}
				if err == nil && rep.JobsRequested > 0 && rep.JobsCreated == 0 {
					// A run that measured nothing is not a success (a
					// callback policy refusing the receiver's address, say).
					return fmt.Errorf("no job was created: all %d creates failed (the report above counts the errors)", rep.JobsRequested)
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&addrs, "addr", "127.0.0.1:8080", "HTTP address(es) of the nodes, comma-separated; creates are spread over all")
	f.StringVar(&cfg.Collection, "collection", bench.DefaultCollection, "collection for the bench jobs (created with 1h retention)")
	f.IntVar(&cfg.Jobs, "jobs", 10000, "jobs to create")
	f.DurationVar(&cfg.Window, "window", 0, "spread trigger times evenly over this span (0: all at one instant)")
	f.BoolVar(&cfg.AtOnce, "at-once", false, "all jobs due at one instant")
	f.DurationVar(&cfg.Lead, "lead", bench.DefaultLead, "time from the start to the first trigger")
	f.IntVar(&cfg.Batch, "batch", 1, "jobs per create request (1: single-job POSTs; up to 1000)")
	f.IntVar(&cfg.Concurrency, "concurrency", 0, "concurrent create clients (default 64 single, 8 batch)")
	f.IntVar(&cfg.MetaBytes, "meta-bytes", bench.DefaultMetaBytes, "size of each job's meta payload")
	f.StringVar(&cfg.ReceiverAddr, "receiver-addr", bench.DefaultReceiverAddr, "where the webhook receiver listens")
	f.StringVar(&cfg.CallbackAddr, "callback-addr", "", "host:port written into callback_url (default: the receiver's address)")
	f.IntVar(&cfg.ReceiverStatus, "receiver-status", 200, "HTTP status the receiver answers with")
	f.DurationVar(&cfg.WaitTimeout, "wait", bench.DefaultWaitTimeout, "how long to wait for missing callbacks after the last trigger")
	f.BoolVar(&cfg.CreateOnly, "create-only", false, "only create (far-future triggers) and report the create rate")
	f.StringVar(&cfg.IDPrefix, "id-prefix", "", "job id prefix (default: random per run)")
	f.Float64Var(&cfg.RateLimit, "rate-limit", 0, "deliver through a route limited to this many deliveries/s (rate_limit.per_second)")
	f.IntVar(&cfg.Burst, "burst", 0, "the route's rate_limit.burst (0: the server's default)")
	f.IntVar(&cfg.MaxInFlight, "max-in-flight", 0, "deliver through a route with this max_in_flight")
	f.IntVar(&cfg.BatchJobs, "batch-max-jobs", 0, "deliver through a batched route, up to this many jobs per POST (batch.max_jobs)")
	f.DurationVar(&cfg.BatchWait, "batch-max-wait", 0, "the batched route's batch.max_wait")
	f.BoolVar(&cfg.Pipeline, "pipeline", false, "deliver through a route with pipeline: true (callbacks HTTP/1.1-pipelined); with --schedules, the schedules name it")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON (the same as -o json)")
	f.StringVarP(&output, "output", "o", outputTable, "output format: table (the report for people) or json (for scripts)")
	f.IntVar(&schedules, "schedules", 0, "instead of jobs: this many every-1s schedules, first occurrences spread over a second; measures their occurrences")
	f.DurationVar(&duration, "duration", 20*time.Second, "with --schedules: the measuring window")
	registerAuthFlags(cmd, &cfg.Token, &cfg.CAFile)
	return cmd
}
