package check

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/timemachine-db/timemachine/internal/nemesis/history"
)

// Options configures every checker.
type Options struct {
	Lin            LinOptions
	Fire           FireOptions
	FailoverTarget time.Duration
}

// Report is the verdict of every checker over one run.
type Report struct {
	Meta       history.Meta
	Ops        int
	ByOutcome  map[string]int // "create 201", "get unknown", ...
	Lin        LinResult
	Fire       FireResult
	Failover   FailoverResult
	InFlight   InFlightResult
	Unrecovery []string // cycles after which the cluster did not become healthy again
	Observed   []string // contract violations the runner saw during the cycles
}

// Run runs every checker over h.
func Run(h *history.History, opt Options) Report {
	r := Report{Meta: h.Meta, Ops: len(h.Ops), ByOutcome: map[string]int{}}
	for _, op := range h.Ops {
		k := string(op.Kind) + " "
		switch op.Outcome {
		case history.OK:
			k += fmt.Sprint(op.Status)
		case history.Fail:
			k += "refused"
			if op.Status != 0 {
				k += fmt.Sprintf(" (%d)", op.Status)
			}
		default:
			k += "indeterminate"
			if op.Status != 0 {
				k += fmt.Sprintf(" (%d)", op.Status)
			}
		}
		r.ByOutcome[k]++
	}
	r.Lin = Linearizability(h, opt.Lin)
	// The capped route's deliveries are not the workload's jobs: the fire
	// checker sees the rest, the in-flight checker those.
	plain := *h
	plain.Deliveries = nil
	for _, d := range h.Deliveries {
		if d.Route == "" {
			plain.Deliveries = append(plain.Deliveries, d)
		}
	}
	r.Fire = Fires(&plain, opt.Fire)
	r.InFlight = InFlight(h)
	r.Failover = Failovers(h, opt.FailoverTarget)
	for _, c := range h.Cycles {
		if !c.Recovered {
			r.Unrecovery = append(r.Unrecovery, fmt.Sprintf("cycle %d (%s %s): %s", c.N, c.Fault, c.Detail, c.Problem))
		}
		for _, v := range c.Violations {
			r.Observed = append(r.Observed, fmt.Sprintf("cycle %d (%s): %s", c.N, c.Fault, v))
		}
	}
	return r
}

// Violations counts every contract violation and missed target.
func (r Report) Violations() int {
	return len(r.Lin.Violations) + len(r.Lin.ErrorsThatTookEffect) + r.Fire.Violations() + r.Failover.Violations() + len(r.InFlight.Outside) + len(r.Unrecovery) + len(r.Observed)
}

// Summary lines, one per finding category, for the report's head and the
// runner's exit message.
func (r Report) Summary() []string {
	line := func(n int, what string) string { return fmt.Sprintf("%6d  %s", n, what) }
	return []string{
		line(len(r.Lin.Violations), "linearizability violations (job keys)"),
		line(len(r.Lin.ErrorsThatTookEffect), "5xx answers that took effect (job keys)"),
		line(len(r.Fire.Lost), "lost acknowledged jobs"),
		line(len(r.Fire.Early), "early fires (checker's clock)"),
		line(len(r.Fire.AfterDelete), "fires after an acknowledged DELETE"),
		line(len(r.Fire.AfterReplace), "fires of a replaced trigger after the PUT's 200"),
		line(len(r.Fire.InFlightAtAck), "callbacks in flight when a DELETE 204 / PUT 200 reached the client"),
		line(len(r.Fire.Outside), "duplicates outside any fault's in-flight window"),
		line(len(r.Fire.PlannedDups), "duplicates during planned moves"),
		line(len(r.Fire.StaleDups), "duplicates re-sent by a deposed node after its fault healed"),
		line(len(r.Fire.ResentOnClose), "attempts re-sent at once after the receiver closed without answering"),
		line(len(r.Fire.Stray)+len(r.Fire.BadHeaders), "stray deliveries / bad headers"),
		line(r.Failover.Violations(), fmt.Sprintf("failovers over %v or never", r.Failover.Target)),
		line(len(r.InFlight.Outside), "moments above the capped route's max_in_flight outside any fault's window"),
		line(len(r.Unrecovery), "cycles after which the cluster did not recover"),
		line(len(r.Observed), "other contract violations seen by the runner"),
	}
}

// Write prints the report: the figures, then every finding (at most
// perKind of each kind; 0: all).
func (r Report) Write(w io.Writer, perKind int) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	p("== checkers (seed %d, %d nodes, %s, %d cycles) ==", r.Meta.Seed, r.Meta.Nodes, r.Meta.Mode, r.Meta.Cycles)
	var outs []string
	for k, v := range r.ByOutcome {
		outs = append(outs, fmt.Sprintf("%s: %d", k, v))
	}
	sort.Strings(outs)
	p("operations: %d (%s)", r.Ops, strings.Join(outs, ", "))
	p("linearizability: %d keys, %d operations (%d indeterminate writes)", r.Lin.Keys, r.Lin.Ops, r.Lin.Indeterminate)
	f := r.Fire
	p("fires: %d deliveries of %d jobs; %d owed a delivery, %d delivered", f.Deliveries, f.Jobs, f.Owed, f.Delivered)
	var kinds []string
	for k, n := range f.InWindowByKind {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(kinds)
	p("duplicates within a fault's in-flight window (allowed): %d %v", len(f.InWindow), kinds)
	p("callbacks of a node cut off at a failover, in flight when its successor acknowledged a DELETE / PUT (allowed): %d", len(f.InFlightAtFailover))
	for _, d := range f.InFlightAtFailover {
		p("  %s", d)
	}
	var lk []string
	for k := range f.Lateness {
		lk = append(lk, k)
	}
	sort.Strings(lk)
	for _, k := range lk {
		p("lateness (first delivery) during %-18s %s", k+":", f.Lateness[k])
	}
	p("failover (fault → every slot the victim led writable): %s; target %v", r.Failover.All, r.Failover.Target)
	if in := r.InFlight; in.Cap > 0 {
		p("capped route (max_in_flight %d): %d deliveries, at most %d open at once; above the cap within a fault's window (allowed): %d",
			in.Cap, in.Deliveries, in.MaxOpen, len(in.InWindow))
	}
	var fk []string
	for k := range r.Failover.ByFault {
		fk = append(fk, k)
	}
	sort.Strings(fk)
	for _, k := range fk {
		p("  %-16s %s", k+":", r.Failover.ByFault[k])
	}
	if len(r.Lin.Undecided) > 0 {
		p("linearizability undecided (checker timeout) for %d keys: %v", len(r.Lin.Undecided), r.Lin.Undecided)
	}
	if len(r.Meta.Unsupported) > 0 {
		var us []string
		for k, v := range r.Meta.Unsupported {
			us = append(us, k+": "+v)
		}
		sort.Strings(us)
		p("not covered: %s", strings.Join(us, "; "))
	}
	p("-- summary: %d violations --", r.Violations())
	for _, l := range r.Summary() {
		p("%s", l)
	}
	list := func(title string, items []string) {
		if len(items) == 0 {
			return
		}
		p("-- %s (%d) --", title, len(items))
		for i, it := range items {
			if perKind > 0 && i == perKind {
				p("  … and %d more", len(items)-perKind)
				break
			}
			p("  %s", it)
		}
	}
	findings := func(fs []KeyFinding) []string {
		var out []string
		for _, f := range fs {
			out = append(out, f.String())
		}
		return out
	}
	dups := func(ds []Duplicate) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.String())
		}
		return out
	}
	var early []string
	for _, e := range f.Early {
		early = append(early, e.String())
	}
	list("linearizability violations", findings(r.Lin.Violations))
	list("5xx answers that took effect", findings(r.Lin.ErrorsThatTookEffect))
	list("lost", f.Lost)
	list("early", early)
	list("fired after an acknowledged DELETE", f.AfterDelete)
	list("replaced trigger fired after the PUT's 200", f.AfterReplace)
	list("in flight when a DELETE 204 / PUT 200 reached the client", f.InFlightAtAck)
	list("duplicates outside any fault window", dups(f.Outside))
	list("duplicates during planned moves", dups(f.PlannedDups))
	list("duplicates re-sent by a deposed node after its fault healed", dups(f.StaleDups))
	list("attempts re-sent at once after the receiver closed without answering", dups(f.ResentOnClose))
	list("stray deliveries", f.Stray)
	list("bad headers", f.BadHeaders)
	list("above the capped route's max_in_flight outside any fault window", r.InFlight.Outside)
	list("above the capped route's max_in_flight within a fault window (allowed)", r.InFlight.InWindow)
	list("failover over target", r.Failover.OverTarget)
	list("failover never completed", r.Failover.Never)
	list("failover not observed (healed before the target)", r.Failover.Inconclusive)
	list("not recovered", r.Unrecovery)
	list("seen by the runner", r.Observed)
}
