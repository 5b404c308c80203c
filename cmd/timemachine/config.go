package main

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/timemachine-db/timemachine/client"
)

// retryFlags are the fields of a retry policy (docs/api.md#jobs), for
// jobs and collections. Only the flags given go into the request; the
// server fills in the rest from the collection, then its defaults.
type retryFlags struct {
	maxAttempts                  int
	initial, maxInterval, maxAge string
	multiplier                   float64
}

func (r *retryFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.IntVar(&r.maxAttempts, "max-attempts", 0, "retry policy: attempts before the job fails")
	f.StringVar(&r.initial, "initial-interval", "", "retry policy: wait before the first retry (Go duration, e.g. 1s)")
	f.Float64Var(&r.multiplier, "multiplier", 0, "retry policy: each wait is the previous one times this")
	f.StringVar(&r.maxInterval, "max-interval", "", "retry policy: longest wait between attempts (Go duration)")
	f.StringVar(&r.maxAge, "max-age", "", "retry policy: stop retrying this long after the trigger time (Go duration)")
}

// policy is the retry policy of the flags given, nil when none was.
func (r *retryFlags) policy(cmd *cobra.Command) *client.RetryPolicy {
	f := cmd.Flags()
	var p client.RetryPolicy
	set := false
	if f.Changed("max-attempts") {
		p.MaxAttempts, set = &r.maxAttempts, true
	}
	if f.Changed("multiplier") {
		p.Multiplier, set = &r.multiplier, true
	}
	if r.initial != "" || r.maxInterval != "" || r.maxAge != "" {
		p.InitialInterval, p.MaxInterval, p.MaxAge, set = r.initial, r.maxInterval, r.maxAge, true
	}
	if !set {
		return nil
	}
	return &p
}

func retryText(p *client.RetryPolicy) string {
	if p == nil {
		return "-"
	}
	var parts []string
	if p.MaxAttempts != nil {
		parts = append(parts, "attempts="+strconv.Itoa(*p.MaxAttempts))
	}
	if p.InitialInterval != "" {
		parts = append(parts, "initial="+p.InitialInterval)
	}
	if p.Multiplier != nil {
		parts = append(parts, "x"+strconv.FormatFloat(*p.Multiplier, 'g', -1, 64))
	}
	if p.MaxInterval != "" {
		parts = append(parts, "max="+p.MaxInterval)
	}
	if p.MaxAge != "" {
		parts = append(parts, "max-age="+p.MaxAge)
	}
	return orDash(strings.Join(parts, " "))
}

// newCollectionCmd is `timemachine collection put|get|list|delete`: a
// namespace of jobs and its defaults (docs/api.md#collections-and-routes).
func newCollectionCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{Use: "collection", Short: "Create or replace, read, list and delete collections"}
	cf.register(cmd)

	var (
		rp                              retryFlags
		callbackTimeout, retention, sig string
		body                            string
	)
	put := &cobra.Command{
		Use:   "put NAME",
		Short: "Create or replace a collection (PUT); prints it",
		Example: `  timemachine collection put billing --retention 72h --callback-timeout 5s --max-attempts 8
  timemachine collection put billing --signing-secret whsec_…   # callbacks signed (Standard Webhooks)
  timemachine collection put billing --body billing.json        # the API's JSON object; "-" reads stdin`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, done, err := cf.client()
			if err != nil {
				return err
			}
			defer done()
			var out client.Collection
			if body != "" {
				err = sendBody(ctx, cl, http.MethodPut, "/v1/collections/"+pathEscape(args[0]), body, nil, &out)
			} else {
				c := client.Collection{RetryPolicy: rp.policy(cmd), CallbackTimeout: callbackTimeout, Retention: retention, SigningSecret: sig}
				out, _, err = cl.PutCollection(ctx, args[0], c)
			}
			if err != nil {
				return err
			}
			return cf.printer(cmd).object(out)
		},
	}
	rp.register(put)
	f := put.Flags()
	f.StringVar(&callbackTimeout, "callback-timeout", "", "default callback timeout of its jobs (Go duration, e.g. 10s)")
	f.StringVar(&retention, "retention", "", "how long finished jobs stay readable (Go duration; default 24h)")
	f.StringVar(&sig, "signing-secret", "", "sign callbacks with this secret (whsec_ + base64; prefer TIMEMACHINE_SIGNING_SECRET)")
	f.StringVar(&body, "body", "", "file with the JSON collection object (or - for stdin), sent to the API as it is; replaces the other flags")

	get := &cobra.Command{
		Use:   "get NAME",
		Short: "Read a collection (secrets are never shown)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, done, err := cf.client()
			if err != nil {
				return err
			}
			defer done()
			c, err := cl.GetCollection(ctx, args[0])
			if err != nil {
				return err
			}
			return cf.printer(cmd).object(c)
		},
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the collections",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, ctx, done, err := cf.client()
			if err != nil {
				return err
			}
			defer done()
			cs, err := cl.ListCollections(ctx)
			if err != nil {
				return err
			}
			if cs == nil {
				cs = []client.Collection{}
			}
			p := cf.printer(cmd)
			if p.format == outputJSON {
				return p.json(struct {
					Collections []client.Collection `json:"collections"`
				}{cs})
			}
			rows := make([][]string, 0, len(cs))
			for _, c := range cs {
				rows = append(rows, []string{c.Name, orDash(c.Status), orDash(c.Retention), orDash(c.CallbackTimeout),
					retryText(c.RetryPolicy), strconv.FormatBool(c.SigningSecretSet)})
			}
			return p.table([]string{"NAME", "STATUS", "RETENTION", "CALLBACK TIMEOUT", "RETRY", "SIGNED"}, rows)
		},
	}
	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a collection and every job in it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, done, err := cf.client()
			if err != nil {
				return err
			}
			defer done()
			if err := cl.DeleteCollection(ctx, args[0]); err != nil {
				return err
			}
			return cf.printer(cmd).done(deleted{Deleted: "collection", ID: args[0]})
		},
	}
	cmd.AddCommand(put, get, list, del)
	return cmd
}

// newRouteCmd is `timemachine route put|get|list|delete`: named webhook
// targets with delivery control (docs/api.md#collections-and-routes).
func newRouteCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{Use: "route", Short: "Create or replace, read, list and delete routes (named webhook targets)"}
	cf.register(cmd)

	var (
		r       client.Route
		headers []string
		rate    float64
		burst   int
		batchN  int
		batchW  string
		body    string
	)
	put := &cobra.Command{
		Use:   "put NAME",
		Short: "Create or replace a route (PUT); prints it",
		Example: `  timemachine route put billing --webhook-url https://hooks.example.com/t --header 'X-Team=billing'
  timemachine route put bulk --webhook-url http://10.0.0.5/batch --batch-max-jobs 100 --batch-max-wait 20ms \
      --rate-limit 100 --burst 20 --max-in-flight 10
  timemachine route put fast --webhook-url http://10.0.0.6/hook --pipeline   # a fast receiver that answers in order
  timemachine route put billing --body route.json   # the API's JSON object; "-" reads stdin`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if body != "" {
				cl, ctx, done, err := cf.client()
				if err != nil {
					return err
				}
				defer done()
				var out client.Route
				if err := sendBody(ctx, cl, http.MethodPut, "/v1/routes/"+pathEscape(args[0]), body, nil, &out); err != nil {
					return err
				}
				return cf.printer(cmd).object(out)
			}
			rt := r
			{
				if rt.WebhookURL == "" {
					return usageErr(fmt.Errorf("give the route's --webhook-url (or --body)"))
				}
				if len(headers) > 0 {
					rt.Headers = map[string]string{}
					for _, h := range headers {
						k, v, ok := strings.Cut(h, "=")
						if !ok || strings.TrimSpace(k) == "" {
							return usageErr(fmt.Errorf("--header %q: want NAME=VALUE", h))
						}
						rt.Headers[strings.TrimSpace(k)] = v
					}
				}
				f := cmd.Flags()
				if f.Changed("rate-limit") || f.Changed("burst") {
					if rate <= 0 {
						return usageErr(fmt.Errorf("--rate-limit must be positive (deliveries per second), got %v", rate))
					}
					if burst < 0 {
						return usageErr(fmt.Errorf("--burst must not be negative, got %d", burst))
					}
					rt.RateLimit = &client.RateLimit{PerSecond: rate, Burst: burst}
				}
				if f.Changed("batch-max-jobs") || batchW != "" {
					if batchN <= 0 {
						return usageErr(fmt.Errorf("--batch-max-jobs must be positive, got %d", batchN))
					}
					rt.Batch = &client.RouteBatch{MaxJobs: batchN, MaxWait: batchW}
				}
			}
			cl, ctx, done, err := cf.client()
			if err != nil {
				return err
			}
			defer done()
			out, _, err := cl.PutRoute(ctx, args[0], rt)
			if err != nil {
				return err
			}
			return cf.printer(cmd).object(out)
		},
	}
	f := put.Flags()
	f.StringVar(&r.WebhookURL, "webhook-url", "", "where the route's callbacks go (required)")
	f.StringArrayVar(&headers, "header", nil, "NAME=VALUE header sent with every callback (repeat for more)")
	f.StringVar(&r.SigningSecret, "signing-secret", "", "sign callbacks with this secret (whsec_ + base64; wins over the collection's)")
	f.StringVar(&r.Timeout, "webhook-timeout", "", "callback timeout of the route (the route's \"timeout\"; Go duration, e.g. 10s)")
	f.Float64Var(&rate, "rate-limit", 0, "deliveries per second, cluster-wide (rate_limit.per_second)")
	f.IntVar(&burst, "burst", 0, "bursts above --rate-limit up to this many (rate_limit.burst)")
	f.IntVar(&r.MaxInFlight, "max-in-flight", 0, "callbacks open at once")
	f.IntVar(&batchN, "batch-max-jobs", 0, "send due jobs together, up to this many per POST (batch.max_jobs)")
	f.StringVar(&batchW, "batch-max-wait", "", "wait at most this long to fill a batch (batch.max_wait; Go duration)")
	f.BoolVar(&r.Pipeline, "pipeline", false, "send callbacks HTTP/1.1-pipelined, several per connection before their answers (pipeline; the receiver must answer in order)")
	f.StringVar(&body, "body", "", "file with the JSON route object (or - for stdin), sent to the API as it is; replaces the other flags")

	get := &cobra.Command{
		Use:   "get NAME",
		Short: "Read a route (secrets are never shown)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, done, err := cf.client()
			if err != nil {
				return err
			}
			defer done()
			rt, err := cl.GetRoute(ctx, args[0])
			if err != nil {
				return err
			}
			return cf.printer(cmd).object(rt)
		},
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the routes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, ctx, done, err := cf.client()
			if err != nil {
				return err
			}
			defer done()
			rs, err := cl.ListRoutes(ctx)
			if err != nil {
				return err
			}
			if rs == nil {
				rs = []client.Route{}
			}
			p := cf.printer(cmd)
			if p.format == outputJSON {
				return p.json(struct {
					Routes []client.Route `json:"routes"`
				}{rs})
			}
			rows := make([][]string, 0, len(rs))
			for _, rt := range rs {
				rows = append(rows, []string{rt.Name, rt.WebhookURL, orDash(rt.Timeout), rateText(rt.RateLimit),
					intOrDash(rt.MaxInFlight), batchText(rt.Batch), strconv.FormatBool(rt.Pipeline), headerNames(rt.Headers),
					strconv.FormatBool(rt.SigningSecretSet)})
			}
			return p.table([]string{"NAME", "WEBHOOK URL", "TIMEOUT", "RATE LIMIT", "MAX IN FLIGHT", "BATCH", "PIPELINE", "HEADERS", "SIGNED"}, rows)
		},
	}
	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a route",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, done, err := cf.client()
			if err != nil {
				return err
			}
			defer done()
			if err := cl.DeleteRoute(ctx, args[0]); err != nil {
				return err
			}
			return cf.printer(cmd).done(deleted{Deleted: "route", ID: args[0]})
		},
	}
	cmd.AddCommand(put, get, list, del)
	return cmd
}

func rateText(r *client.RateLimit) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("%g/s burst %d", r.PerSecond, r.Burst)
}

func batchText(b *client.RouteBatch) string {
	if b == nil {
		return "-"
	}
	return fmt.Sprintf("%d jobs / %s", b.MaxJobs, orDash(b.MaxWait))
}

func intOrDash(n int) string {
	if n == 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

func headerNames(h map[string]string) string {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	return orDash(strings.Join(names, ","))
}
