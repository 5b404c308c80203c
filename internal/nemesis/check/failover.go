package check

import (
	"fmt"
	"sort"
	"time"

	"github.com/timemachine-db/timemachine/internal/nemesis/history"
)

// FailoverResult summarises the failover measurements: for each kill or
// pause of a node that led slots, the time from the fault until a create in
// every slot it led was acknowledged.
type FailoverResult struct {
	Target  time.Duration
	All     Dist
	ByFault map[string]Dist
	// Violations of the target: over it, or never writable within the
	// probe's timeout.
	OverTarget []string
	Never      []string
	// Inconclusive: the fault was healed before the target passed and
	// some slot became writable only after that: the failover itself was
	// not observed.
	Inconclusive []string
}

// Violations counts the measurements that missed the target.
func (r FailoverResult) Violations() int { return len(r.OverTarget) + len(r.Never) }

// Failovers checks every measurement against its own target, or target
// when it has none.
func Failovers(h *history.History, target time.Duration) FailoverResult {
	res := FailoverResult{Target: target, ByFault: map[string]Dist{}}
	var all []time.Duration
	by := map[string][]time.Duration{}
	for _, f := range h.Failovers {
		if len(f.Probes) == 0 {
			continue
		}
		target := target
		if f.TargetNs > 0 {
			target = time.Duration(f.TargetNs)
		}
		if f.HealedNs > 0 && time.Duration(f.HealedNs) < target && (f.All < 0 || f.All > f.HealedNs) {
			res.Inconclusive = append(res.Inconclusive, fmt.Sprintf("cycle %d %s of %s: healed after %v, before the %v target, with slots still not writable",
				f.Cycle, f.Fault, f.Victim, time.Duration(f.HealedNs).Round(time.Millisecond), target))
			continue
		}
		if f.All < 0 {
			var never []int
			for _, p := range f.Probes {
				if p.After < 0 {
					never = append(never, p.Slot)
				}
			}
			sort.Ints(never)
			res.Never = append(res.Never, fmt.Sprintf("cycle %d %s of %s: slots %v not writable within the probe timeout", f.Cycle, f.Fault, f.Victim, never))
			continue
		}
		d := time.Duration(f.All)
		all = append(all, d)
		by[f.Fault] = append(by[f.Fault], d)
		if target > 0 && d > target {
			var slow []string
			for _, p := range f.Probes {
				if time.Duration(p.After) > target {
					slow = append(slow, fmt.Sprintf("%d:%v", p.Slot, time.Duration(p.After).Round(time.Millisecond)))
				}
			}
			res.OverTarget = append(res.OverTarget, fmt.Sprintf("cycle %d %s of %s: %v (slots over %v: %v)", f.Cycle, f.Fault, f.Victim, d.Round(time.Millisecond), target, slow))
		}
	}
	res.All = distOf(all)
	for k, v := range by {
		res.ByFault[k] = distOf(v)
	}
	return res
}
