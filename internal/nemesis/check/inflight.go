package check

import (
	"fmt"
	"sort"

	"github.com/timemachine-db/timemachine/internal/nemesis/history"
)

// InFlightResult is what the in-flight checker found over the capped
// route's deliveries: a route's max_in_flight is "requests open at once"
// cluster-wide (API.md §3), counted at the receiver from each request's
// arrival to its answer.
type InFlightResult struct {
	Cap        int // 0: the run had no capped route
	Deliveries int
	MaxOpen    int
	// InWindow are the moments above the cap within a fault's window
	// (from its start to RouteGraceMs after its end): allowed,
	// inflight/DESIGN.md lists how a fault can cause them.
	InWindow []string
	// Outside are the moments above the cap outside every window:
	// violations.
	Outside []string
}

// InFlight sweeps the capped route's requests in the order the receiver
// saw them and reports every arrival that found the cap already reached.
func InFlight(h *history.History) InFlightResult {
	res := InFlightResult{Cap: h.Meta.RouteMaxInFlight}
	if res.Cap == 0 {
		return res
	}
	grace := h.Meta.RouteGraceMs * 1e6
	type event struct {
		at    int64
		delta int
		d     *history.Delivery
	}
	var evs []event
	for i := range h.Deliveries {
		d := &h.Deliveries[i]
		if d.Route == "" {
			continue
		}
		res.Deliveries++
		end := max(d.Reply.Mono, d.Recv.Mono)
		evs = append(evs, event{d.Recv.Mono, 1, d}, event{end, -1, d})
	}
	// An answer and an arrival at the same instant do not overlap.
	sort.SliceStable(evs, func(i, j int) bool {
		if evs[i].at != evs[j].at {
			return evs[i].at < evs[j].at
		}
		return evs[i].delta < evs[j].delta
	})
	inWindow := func(at int64) string {
		for _, f := range h.Faults {
			end := f.End.Mono
			if end != history.Never.Mono {
				end += grace
			}
			if at >= f.Start.Mono && at <= end {
				return fmt.Sprintf("%s (fault %d, cycle %d)", f.Kind, f.ID, f.Cycle)
			}
		}
		return ""
	}
	open := 0
	for _, e := range evs {
		open += e.delta
		res.MaxOpen = max(res.MaxOpen, open)
		if e.delta < 0 || open <= res.Cap {
			continue
		}
		what := fmt.Sprintf("%d requests open at %.3f s: delivery #%d of %s from %s", open, sec(e.at), e.d.Seq, e.d.JobID, orDash(e.d.From))
		if f := inWindow(e.at); f != "" {
			res.InWindow = append(res.InWindow, what+" during "+f)
		} else {
			res.Outside = append(res.Outside, what)
		}
	}
	return res
}
