package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// Result is one side's outcome of one workload. Its JSON field names are the
// subset of `timemachine bench --json` (client/bench.Report) the table uses,
// so both sides decode into it.
type Result struct {
	Mode          string  `json:"mode"` // "window", "at_once" or "create_only"
	JobsRequested int     `json:"jobs_requested"`
	Batch         int     `json:"batch"`
	Concurrency   int     `json:"concurrency"`
	WindowSeconds float64 `json:"window_seconds"`
	JobsCreated   int     `json:"jobs_created"`
	CreateSeconds float64 `json:"create_seconds"`
	CreateRate    float64 `json:"create_rate"`
	CreatedLate   int     `json:"created_late"`
	Fired         int     `json:"fired"`
	Missing       int     `json:"missing"`
	Duplicates    int     `json:"duplicates"`
	Early         int     `json:"early"`
	WorstEarlyMs  float64 `json:"worst_early_ms"`
	Lateness      Latency `json:"lateness_ms"`
	FireRate      float64 `json:"fire_rate"`
	DrainSeconds  float64 `json:"drain_seconds,omitempty"`
	TimedOut      bool    `json:"timed_out"`
	// System names the side: "asynq" or "timemachine" (set by the table
	// from its argument when the report does not carry it).
	System string `json:"system,omitempty"`
}

// Latency summarises a distribution in milliseconds (nearest-rank
// percentiles), as client/bench.Latency.
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

// deliveries are the receiver's records of one timer run: per task, its due
// time and the first receive time (zero: never received), plus when each
// create was acknowledged and how many deliveries repeated a task.
type deliveries struct {
	due        []time.Time
	acked      []time.Time
	first      []time.Time
	duplicates int
}

// result turns the records into the figures `timemachine bench` reports for
// the same mode: lateness over tasks acknowledged before their due time,
// early deliveries, the fire rate from the first due time to the last first
// delivery and, at once, the drain time from the instant.
func (d *deliveries) result(mode string) Result {
	r := Result{Mode: mode, JobsRequested: len(d.due), Duplicates: d.duplicates}
	var late []int64
	var firstDue, lastFirst time.Time
	for i, due := range d.due {
		if d.acked[i].IsZero() {
			continue
		}
		r.JobsCreated++
		if firstDue.IsZero() || due.Before(firstDue) {
			firstDue = due
		}
		createdLate := d.acked[i].After(due)
		if createdLate {
			r.CreatedLate++
		}
		got := d.first[i]
		if got.IsZero() {
			r.Missing++
			continue
		}
		r.Fired++
		if got.After(lastFirst) {
			lastFirst = got
		}
		lag := got.Sub(due)
		if lag < 0 {
			r.Early++
			r.WorstEarlyMs = max(r.WorstEarlyMs, float64(-lag)/float64(time.Millisecond))
		}
		if !createdLate {
			late = append(late, int64(lag))
		}
	}
	r.Lateness = summarize(late)
	if r.Fired > 0 && lastFirst.After(firstDue) {
		span := lastFirst.Sub(firstDue).Seconds()
		r.FireRate = float64(r.Fired) / span
		if mode == "at_once" {
			r.DrainSeconds = span
		}
	}
	return r
}

// row is one line of the comparison table: a workload and its two sides.
type row struct {
	asynq, tm *Result
}

// workload names a result's shape for the table's first column.
func workload(r *Result) string {
	switch r.Mode {
	case "create_only":
		if r.Batch > 1 {
			return fmt.Sprintf("create, batches of %s", count(r.Batch))
		}
		return fmt.Sprintf("create, one job per request, %d clients", r.Concurrency)
	case "at_once":
		return fmt.Sprintf("%s due at one instant: drained in / early", count(r.JobsRequested))
	default:
		return fmt.Sprintf("%s timers over %s: fire rate / lateness p99 / early",
			count(r.JobsRequested), time.Duration(r.WindowSeconds*float64(time.Second)))
	}
}

// cell renders one side's figures for its workload.
func cell(r *Result) string {
	if r == nil {
		return "—"
	}
	var s string
	switch r.Mode {
	case "create_only":
		s = fmt.Sprintf("%s/s", rate(r.CreateRate))
	case "at_once":
		s = fmt.Sprintf("%.2f s / %s", r.DrainSeconds, earlyPct(r))
	default:
		s = fmt.Sprintf("%s/s / %s ms / %s", rate(r.FireRate), ms(r.Lateness.P99), earlyPct(r))
	}
	if r.Mode != "create_only" && (r.Missing > 0 || r.TimedOut) {
		s += fmt.Sprintf(" (%d missing)", r.Missing)
	}
	if r.JobsCreated < r.JobsRequested {
		s += fmt.Sprintf(" (%d of %d created)", r.JobsCreated, r.JobsRequested)
	}
	return s
}

// earlyPct renders the early count with its share of the fired jobs.
func earlyPct(r *Result) string {
	if r.Early == 0 || r.Fired == 0 {
		return fmt.Sprintf("%d early", r.Early)
	}
	return fmt.Sprintf("%d early (%.0f%%)", r.Early, 100*float64(r.Early)/float64(r.Fired))
}

// ratio compares the sides where higher is better for timemachine.
func ratio(r row) string {
	if r.asynq == nil || r.tm == nil {
		return ""
	}
	var a, t float64
	switch r.tm.Mode {
	case "create_only":
		a, t = r.asynq.CreateRate, r.tm.CreateRate
	case "at_once":
		a, t = 1/r.asynq.DrainSeconds, 1/r.tm.DrainSeconds
	default:
		a, t = r.asynq.FireRate, r.tm.FireRate
	}
	if a <= 0 || math.IsInf(a, 0) || math.IsInf(t, 0) {
		return ""
	}
	return fmt.Sprintf("%.2f×", t/a)
}

// writeTable prints the results as a Markdown table, pairing the asynq and
// timemachine results of the same workload in the order first seen.
func writeTable(w io.Writer, results []*Result) {
	var order []string
	rows := map[string]*row{}
	for _, r := range results {
		k := workload(r)
		rw, ok := rows[k]
		if !ok {
			rw = &row{}
			rows[k] = rw
			order = append(order, k)
		}
		if r.System == "asynq" {
			rw.asynq = r
		} else {
			rw.tm = r
		}
	}
	fmt.Fprintln(w, "| workload | asynq | timemachine | timemachine ÷ asynq |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, k := range order {
		rw := rows[k]
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", k, cell(rw.asynq), cell(rw.tm), ratio(*rw))
	}
}

// decodeResult reads one JSON report (either side's) and names its system.
func decodeResult(rd io.Reader, system string) (*Result, error) {
	var r Result
	if err := json.NewDecoder(rd).Decode(&r); err != nil {
		return nil, fmt.Errorf("decode %s report: %w", system, err)
	}
	if r.System == "" {
		r.System = system
	}
	return &r, nil
}

// count renders n with thousands separators ("100,000"), or as "100k".
func count(n int) string {
	if n >= 1000 && n%1000 == 0 {
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// rate renders a per-second figure as "66.9k" or "950".
func rate(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.1fk", v/1000)
	}
	return fmt.Sprintf("%.0f", v)
}

// ms renders milliseconds with a thousands separator above 1,000.
func ms(v float64) string {
	if v >= 1000 {
		s := fmt.Sprintf("%.0f", v)
		var b strings.Builder
		for i, c := range s {
			if i > 0 && (len(s)-i)%3 == 0 {
				b.WriteByte(',')
			}
			b.WriteRune(c)
		}
		return b.String()
	}
	return fmt.Sprintf("%.1f", v)
}
