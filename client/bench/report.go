package bench

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// Report is the outcome of a run. Times are in milliseconds or seconds as the
// field names say; every figure comes from recorded timestamps.
type Report struct {
	// What was asked.
	Mode          string  `json:"mode"` // "window", "at_once" or "create_only"
	JobsRequested int     `json:"jobs_requested"`
	Batch         int     `json:"batch"`
	Concurrency   int     `json:"concurrency"`
	WindowSeconds float64 `json:"window_seconds"`
	LeadSeconds   float64 `json:"lead_seconds"`
	MetaBytes     int     `json:"meta_bytes"`
	Collection    string  `json:"collection"`
	IDPrefix      string  `json:"id_prefix"`
	ReceiverAddr  string  `json:"receiver_addr,omitempty"`
	// Route is the route the jobs were delivered through (runs with
	// delivery control); Batches counts batched POSTs received.
	Route   string `json:"route,omitempty"`
	Batches int    `json:"batches,omitempty"`

	// Create phase.
	JobsCreated int `json:"jobs_created"`
	// CreateErrors counts jobs not created, by error code (the contract's
	// codes, or "timeout" / "transport" for requests that got no answer).
	CreateErrors map[string]int `json:"create_errors,omitempty"`
	// CreateErrorSamples keeps the first message seen per code.
	CreateErrorSamples map[string]string `json:"create_error_samples,omitempty"`
	// CreateSeconds runs from the first create request to the last
	// acknowledgement; CreateRate = JobsCreated / CreateSeconds.
	CreateSeconds float64 `json:"create_seconds"`
	CreateRate    float64 `json:"create_rate"`
	// CreatedLate counts created jobs whose create was acknowledged after
	// their trigger_time; they are not lateness samples.
	CreatedLate int `json:"created_late"`

	// Fire phase (absent with create_only).
	Fired      int `json:"fired"`      // distinct jobs delivered
	Missing    int `json:"missing"`    // created but never delivered before the timeout
	Duplicates int `json:"duplicates"` // deliveries beyond the first per job
	Deliveries int `json:"deliveries"` // all deliveries of this run's jobs
	// Early counts deliveries received before their trigger_time (a
	// contract violation); WorstEarlyMs is the largest such lead.
	Early        int     `json:"early"`
	WorstEarlyMs float64 `json:"worst_early_ms"`
	// TriggerMismatch counts deliveries whose payload trigger_time differs
	// from the one the job was created with.
	TriggerMismatch int `json:"trigger_mismatch"`
	// Foreign counts deliveries that were not this run's jobs (e.g. left
	// over from an earlier run in the same collection).
	Foreign int `json:"foreign"`
	// Lateness is first receive time − trigger_time over jobs created before
	// their trigger time.
	Lateness Latency `json:"lateness_ms"`
	// FireRate is Fired / FireSpanSeconds, the span running from the first
	// trigger_time to the last first-delivery.
	FireRate        float64 `json:"fire_rate"`
	FireSpanSeconds float64 `json:"fire_span_seconds"`
	// DrainSeconds (at_once only) is the last first-delivery − the trigger
	// instant: how long the cluster took to fire the whole burst.
	DrainSeconds float64 `json:"drain_seconds,omitempty"`
	// PerSecond (window runs) is the lateness of the jobs due in each
	// second of the window, in order: where a tail comes from (the first
	// second, a stall, or every second alike). A window of whole seconds
	// leaves its last job (due at its very end) out.
	PerSecond []SecondLateness `json:"per_second,omitempty"`
	// TimedOut is set when the wait ended at WaitTimeout with jobs missing.
	TimedOut bool `json:"timed_out"`
	// Interrupted is set when the context ended the run early; the figures
	// cover what happened until then.
	Interrupted bool `json:"interrupted,omitempty"`
}

// maxPerSecondShown bounds the per-second line of the table; -o json has
// every second.
const maxPerSecondShown = 120

// Latency summarises a distribution in milliseconds (nearest-rank
// percentiles).
type Latency struct {
	Samples int     `json:"samples"`
	Min     float64 `json:"min"`
	Mean    float64 `json:"mean"`
	P50     float64 `json:"p50"`
	P90     float64 `json:"p90"`
	P99     float64 `json:"p99"`
	P999    float64 `json:"p999"`
	Max     float64 `json:"max"`
}

// summarize sorts ns in place and returns its summary in milliseconds.
func summarize(ns []int64) Latency {
	if len(ns) == 0 {
		return Latency{}
	}
	slices.Sort(ns)
	var sum float64
	for _, v := range ns {
		sum += float64(v)
	}
	ms := func(v int64) float64 { return float64(v) / float64(time.Millisecond) }
	return Latency{
		Samples: len(ns),
		Min:     ms(ns[0]),
		Mean:    sum / float64(len(ns)) / float64(time.Millisecond),
		P50:     ms(ns[rank(len(ns), 0.50)]),
		P90:     ms(ns[rank(len(ns), 0.90)]),
		P99:     ms(ns[rank(len(ns), 0.99)]),
		P999:    ms(ns[rank(len(ns), 0.999)]),
		Max:     ms(ns[len(ns)-1]),
	}
}

// rank is the nearest-rank index of percentile p in n sorted samples.
func rank(n int, p float64) int {
	r := int(math.Ceil(p*float64(n))) - 1
	return min(max(r, 0), n-1)
}

// String renders the report for people.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "timemachine bench: %d jobs, mode %s", r.JobsRequested, r.Mode)
	if r.Mode == "window" {
		fmt.Fprintf(&b, " (%s)", secs(r.WindowSeconds))
	}
	fmt.Fprintf(&b, ", lead %s, batch %d, concurrency %d, meta %d B, collection %q, ids %s-N\n",
		secs(r.LeadSeconds), r.Batch, r.Concurrency, r.MetaBytes, r.Collection, r.IDPrefix)
	fmt.Fprintf(&b, "create    %d/%d created in %s = %.0f jobs/s", r.JobsCreated, r.JobsRequested, secs(r.CreateSeconds), r.CreateRate)
	if r.Mode != "create_only" {
		fmt.Fprintf(&b, "; %d created after their trigger time (not lateness samples)", r.CreatedLate)
	}
	b.WriteByte('\n')
	if len(r.CreateErrors) > 0 {
		codes := make([]string, 0, len(r.CreateErrors))
		for c := range r.CreateErrors {
			codes = append(codes, c)
		}
		sort.Strings(codes)
		for _, c := range codes {
			fmt.Fprintf(&b, "  errors  %-20s %d  e.g. %s\n", c, r.CreateErrors[c], r.CreateErrorSamples[c])
		}
	}
	if r.Mode == "create_only" {
		if r.Interrupted {
			b.WriteString("interrupted\n")
		}
		return b.String()
	}
	fmt.Fprintf(&b, "fire      %d fired, %d missing, %d duplicates, %d early (worst %.1f ms), %d trigger mismatches, %d foreign\n",
		r.Fired, r.Missing, r.Duplicates, r.Early, r.WorstEarlyMs, r.TriggerMismatch, r.Foreign)
	l := r.Lateness
	fmt.Fprintf(&b, "lateness  ms over %d jobs: p50 %.1f  p90 %.1f  p99 %.1f  p99.9 %.1f  max %.1f  (min %.1f, mean %.1f)\n",
		l.Samples, l.P50, l.P90, l.P99, l.P999, l.Max, l.Min, l.Mean)
	fmt.Fprintf(&b, "rate      %.0f fires/s over %s (first trigger → last delivery)", r.FireRate, secs(r.FireSpanSeconds))
	if r.Mode == "at_once" {
		fmt.Fprintf(&b, "; burst drained in %s", secs(r.DrainSeconds))
	}
	b.WriteByte('\n')
	if n := len(r.PerSecond); n > 0 && n <= maxPerSecondShown {
		b.WriteString("lateness p99 ms by second of the window:")
		for _, s := range r.PerSecond {
			fmt.Fprintf(&b, " %.0f", s.P99)
		}
		b.WriteByte('\n')
	}
	if r.Route != "" {
		fmt.Fprintf(&b, "route     %s: %d batched POSTs\n", r.Route, r.Batches)
	}
	if r.TimedOut {
		b.WriteString("timed out waiting for missing deliveries\n")
	}
	if r.Interrupted {
		b.WriteString("interrupted\n")
	}
	return b.String()
}

func secs(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}
