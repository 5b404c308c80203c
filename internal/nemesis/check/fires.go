package check

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/timemachine-db/timemachine/internal/nemesis/history"
)

// FireOptions tunes the fire checker.
type FireOptions struct {
	// CallbackTimeout is the jobs' callback_timeout: a callback may be in
	// flight that long before a fault, and an attempt is over that long
	// after it reached the receiver at the latest.
	CallbackTimeout time.Duration
	// FailoverAllowance extends a fault's in-flight window past its end:
	// callbacks the old leader had in flight may repeat until a new leader
	// has taken over.
	FailoverAllowance time.Duration
	// DeadlineWall (Unix ns): jobs triggering after DeadlineWall -
	// LateAllowance owe no delivery (the run stopped waiting for them).
	DeadlineWall  int64
	LateAllowance time.Duration
	// EarlyTolerance: a delivery this much before its trigger_time is not
	// counted as early (0: none).
	EarlyTolerance time.Duration
}

// Dist is a lateness distribution.
type Dist struct {
	N             int
	P50, P99, Max time.Duration
}

func (d Dist) String() string {
	if d.N == 0 {
		return "no data"
	}
	return fmt.Sprintf("n=%d p50 %v p99 %v max %v", d.N, d.P50.Round(time.Millisecond), d.P99.Round(time.Millisecond), d.Max.Round(time.Millisecond))
}

func distOf(ds []time.Duration) Dist {
	if len(ds) == 0 {
		return Dist{}
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return Dist{N: len(s), P50: s[len(s)/2], P99: s[(len(s)*99)/100], Max: s[len(s)-1]}
}

// EarlyFire is a delivery received before its trigger_time by the
// checker's clock.
type EarlyFire struct {
	Key     string
	Trigger int64 // Unix ms
	Attempt int
	From    string
	By      time.Duration // how early
	Fault   string        // the fault window it fell in ("" none)
}

func (e EarlyFire) String() string {
	s := fmt.Sprintf("%s trigger %d attempt %d from %s: %v early", e.Key, e.Trigger, e.Attempt, orDash(e.From), e.By)
	if e.Fault != "" {
		s += " (during " + e.Fault + ")"
	}
	return s
}

// Duplicate is one (Idempotency-Key, attempt) delivered more than once.
type Duplicate struct {
	IdemKey string
	Attempt int
	Copies  int
	From    []string
	Answers []string // the receiver's answer to each copy
	// Window names the unplanned fault whose in-flight window the attempt
	// was due in ("" none); Planned the planned move's.
	Window  string
	Planned string
	// Stale: a later copy came from a node after the fault that had cut
	// it off (pause, partition, ...) ended, when another node had already
	// delivered it: a deposed leader sending callbacks it no longer owns.
	Stale string
}

func (d Duplicate) String() string {
	s := fmt.Sprintf("%s attempt %d ×%d from %v answered %v", d.IdemKey, d.Attempt, d.Copies, d.From, d.Answers)
	switch {
	case d.Stale != "":
		s += " (" + d.Stale + ")"
	case d.Window != "":
		s += " (due in the in-flight window of " + d.Window + ")"
	case d.Planned != "":
		s += " (during the planned " + d.Planned + ")"
	}
	return s
}

// FireResult is the fire checker's verdict.
type FireResult struct {
	Deliveries int
	Jobs       int // keys written
	Owed       int // jobs that had to be delivered
	Delivered  int // ... and were
	// Violations.
	Lost          []string    // owed, never delivered
	Early         []EarlyFire // before trigger_time
	AfterDelete   []string    // delivered after a 204 to its DELETE reached the client
	InFlightAtAck []string    // a callback in flight when a 204 DELETE or a 200 PUT replacing it reached the client
	AfterReplace  []string    // the replaced trigger delivered after the PUT's 200 reached the client
	Stray         []string    // a job or trigger_time never written
	BadHeaders    []string    // Idempotency-Key / attempt header not as the contract says
	Outside       []Duplicate // duplicates outside every fault's in-flight window
	PlannedDups   []Duplicate // duplicates during planned moves only
	StaleDups     []Duplicate // re-sent by a deposed leader after its fault healed
	ResentOnClose []Duplicate // re-sent at once, same attempt, after the receiver closed without answering
	// Allowed: a callback sent by a node right before it was killed,
	// paused or cut off, still in flight when its successor acknowledged
	// a DELETE or PUT: the successor cannot know of it (API.md §4: after
	// a failover the callbacks in flight may repeat).
	InFlightAtFailover []string
	// Allowed: duplicates within an unplanned fault's in-flight window.
	InWindow       []Duplicate
	InWindowByKind map[string]int
	// Lateness of each delivered job's first delivery, by the fault window
	// its trigger time fell in ("none" outside every fault).
	Lateness map[string]Dist
}

// Violations counts the contract violations.
func (r FireResult) Violations() int {
	return len(r.Lost) + len(r.Early) + len(r.AfterDelete) + len(r.InFlightAtAck) + len(r.AfterReplace) +
		len(r.Stray) + len(r.BadHeaders) + len(r.Outside) + len(r.PlannedDups) + len(r.StaleDups) + len(r.ResentOnClose)
}

// possible is one state a job may be in at some point of its writes.
type possible struct {
	exists  bool
	trigger int64
	setAt   int64 // wall ns of the call that set the trigger
}

// supersede is a write acknowledged at ack (mono) after which the
// callbacks of the triggers it replaced must not be sent.
type supersede struct {
	op       history.Op
	ack      int64
	triggers map[int64]bool
	what     string
}

// Fires checks the receiver's log against the operations: delivery of
// every acknowledged, undeleted job, none early, none after an
// acknowledged delete or replace, duplicates only where a fault can
// explain them, and the lateness by fault kind.
func Fires(h *history.History, opt FireOptions) FireResult {
	res := FireResult{Deliveries: len(h.Deliveries), InWindowByKind: map[string]int{}, Lateness: map[string]Dist{}}
	startWall := h.Meta.StartWall
	toMono := func(wallNs int64) int64 { return wallNs - startWall }
	cbt := int64(opt.CallbackTimeout)

	// Writes per key, in call order; reads for the diagnosis of lost jobs.
	writes := map[string][]history.Op{}
	reads := map[string][]history.Op{}
	for _, op := range h.Ops {
		if !op.Write() {
			reads[op.Key()] = append(reads[op.Key()], op)
		}
	}
	var keys []string
	for _, op := range h.Ops {
		if !op.Write() || op.Outcome == history.Fail {
			continue
		}
		k := op.Key()
		if _, ok := writes[k]; !ok {
			keys = append(keys, k)
		}
		writes[k] = append(writes[k], op)
	}
	sort.Strings(keys)
	res.Jobs = len(keys)
	dels := map[string][]history.Delivery{}
	for _, d := range h.Deliveries {
		if d.Bad != "" {
			res.BadHeaders = append(res.BadHeaders, fmt.Sprintf("delivery #%d from %s: %s", d.Seq, orDash(d.From), d.Bad))
			continue
		}
		dels[d.Key()] = append(dels[d.Key()], d)
	}

	faultAt := func(mono int64, planned bool, before, after int64) string {
		for _, f := range h.Faults {
			if f.Planned != planned {
				continue
			}
			end := f.End.Mono
			if end == history.Never.Mono {
				end = math.MaxInt64 - after
			}
			if mono >= f.Start.Mono-before && mono <= end+after {
				return f.Kind
			}
		}
		return ""
	}

	lateness := map[string][]time.Duration{}
	setAt := map[string]int64{} // Idempotency-Key → earliest call (wall ns) of a write with that trigger
	for _, k := range keys {
		ws := writes[k]
		written := map[int64]int64{} // trigger → earliest call wall
		states := []possible{{}}
		var sups []supersede
		for _, op := range ws {
			if op.Kind != history.Delete {
				if w, ok := written[op.Trigger]; !ok || op.Call.Wall < w {
					written[op.Trigger] = op.Call.Wall
				}
			}
			before := triggersOf(states)
			states = applyWrite(states, op)
			if op.Outcome == history.OK && op.Ret != history.Never {
				switch {
				case op.Kind == history.Delete && (op.Status == http.StatusNoContent || op.Status == http.StatusOK):
					sups = append(sups, supersede{op: op, ack: op.Ret.Mono, triggers: before, what: "DELETE 204"})
				case op.Kind == history.Put && (op.Status == http.StatusOK):
					old := map[int64]bool{}
					for t := range before {
						if t != op.Trigger {
							old[t] = true
						}
					}
					sups = append(sups, supersede{op: op, ack: op.Ret.Mono, triggers: old, what: "PUT 200"})
				}
			}
		}
		for t, at := range written {
			coll, id, _ := strings.Cut(k, "/")
			setAt[coll+":"+id+":"+strconv.FormatInt(t, 10)] = at
		}
		ds := dels[k]

		// Stray triggers, headers, early fires.
		for _, d := range ds {
			if _, ok := written[d.Trigger]; !ok {
				res.Stray = append(res.Stray, fmt.Sprintf("%s delivered with trigger_time %d, never written (from %s)", k, d.Trigger, orDash(d.From)))
			}
			if want := d.Coll + ":" + d.JobID + ":" + strconv.FormatInt(d.Trigger, 10); d.IdemKey != want {
				res.BadHeaders = append(res.BadHeaders, fmt.Sprintf("%s: Idempotency-Key %q, want %q", k, d.IdemKey, want))
			}
			if d.AttemptHeader != d.Attempt || d.Attempt < 1 {
				res.BadHeaders = append(res.BadHeaders, fmt.Sprintf("%s: X-Timemachine-Attempt %d, body attempt %d", k, d.AttemptHeader, d.Attempt))
			}
			if early := d.Trigger*int64(time.Millisecond) - d.Recv.Wall; early > int64(opt.EarlyTolerance) {
				res.Early = append(res.Early, EarlyFire{Key: k, Trigger: d.Trigger, Attempt: d.Attempt, From: d.From,
					By: time.Duration(early), Fault: faultAt(d.Recv.Mono, false, 0, 0) + faultAt(d.Recv.Mono, true, 0, 0)})
			}
		}

		// Deliveries after an acknowledged delete or replace.
		for _, s := range sups {
			for _, d := range ds {
				if !s.triggers[d.Trigger] || rewritten(ws, s.op, d) {
					continue
				}
				end := d.Reply.Mono
				if lim := d.Recv.Mono + cbt - int64(100*time.Millisecond); cbt > 0 && lim < end {
					end = lim
				}
				desc := fmt.Sprintf("%s trigger %d attempt %d from %s received %.3fs (answered %s at %.3fs); %s via %s acknowledged at %.3fs (sent %.3fs)",
					k, d.Trigger, d.Attempt, orDash(d.From), sec(d.Recv.Mono), d.Answer, sec(d.Reply.Mono), s.what, s.op.Via, sec(s.ack), sec(s.op.Call.Mono))
				switch {
				case d.Recv.Mono > s.ack && s.what == "DELETE 204":
					res.AfterDelete = append(res.AfterDelete, desc)
				case d.Recv.Mono > s.ack:
					res.AfterReplace = append(res.AfterReplace, desc)
				case end > s.ack && isolatedSender(h.Faults, d, s.ack, cbt) != "":
					res.InFlightAtFailover = append(res.InFlightAtFailover, desc+" ("+isolatedSender(h.Faults, d, s.ack, cbt)+")")
				case end > s.ack:
					res.InFlightAtAck = append(res.InFlightAtAck, desc)
				}
			}
		}

		// Owed delivery.
		owed, allowed := owes(states)
		if owed {
			var latest int64
			for t := range allowed {
				latest = max(latest, t)
			}
			if opt.DeadlineWall > 0 && latest*int64(time.Millisecond) > opt.DeadlineWall-int64(opt.LateAllowance) {
				owed = false
			}
		}
		var first *history.Delivery
		for i := range ds {
			d := &ds[i]
			if allowed[d.Trigger] && (first == nil || d.Recv.Mono < first.Recv.Mono) {
				first = d
			}
		}
		if owed {
			res.Owed++
			if first == nil {
				res.Lost = append(res.Lost, fmt.Sprintf("%s: owed a delivery with trigger_time in %v, got %d deliveries%s%s", k, sortedKeys(allowed), len(ds), lastWrite(ws), lastRead(reads[k])))
			} else {
				res.Delivered++
			}
		}
		if first != nil {
			from := max(first.Trigger*int64(time.Millisecond), written[first.Trigger])
			kind := faultAt(toMono(from), false, cbt, int64(opt.FailoverAllowance))
			if kind == "" {
				kind = faultAt(toMono(from), true, cbt, int64(opt.FailoverAllowance))
			}
			if kind == "" {
				kind = "none"
			}
			lateness[kind] = append(lateness[kind], time.Duration(first.Recv.Wall-from))
		}
	}

	// Deliveries of keys never written.
	for k, ds := range dels {
		if _, ok := writes[k]; !ok {
			res.Stray = append(res.Stray, fmt.Sprintf("%s: %d deliveries of a job never written", k, len(ds)))
		}
	}

	// Duplicates: one (Idempotency-Key, attempt) more than once.
	type dk struct {
		key     string
		attempt int
	}
	groups := map[dk][]history.Delivery{}
	for _, d := range h.Deliveries {
		if d.Bad == "" {
			g := dk{d.IdemKey, d.AttemptHeader}
			groups[g] = append(groups[g], d)
		}
	}
	for g, ds := range groups {
		if len(ds) < 2 {
			continue
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i].Recv.Mono < ds[j].Recv.Mono })
		dup := Duplicate{IdemKey: g.key, Attempt: g.attempt, Copies: len(ds)}
		for _, d := range ds {
			dup.From = append(dup.From, orDash(d.From))
			dup.Answers = append(dup.Answers, d.Answer)
		}
		// When the attempt was due: attempt 1 at its trigger time (or its
		// write, for a trigger in the past); a retry when first received.
		due := ds[0].Recv.Mono
		if g.attempt == 1 {
			if at, ok := setAt[g.key]; ok {
				due = toMono(max(ds[0].Trigger*int64(time.Millisecond), at))
			}
		}
		dup.Stale = staleSender(h.Faults, ds, cbt)
		if recreated(writes[ds[0].Key()], ds) {
			// Deleted, then created again by a write that had been
			// pending: a new job that happens to share the key.
			dup.Window = "a re-creation by an indeterminate write"
		} else {
			dup.Window = faultAt(due, false, cbt, int64(opt.FailoverAllowance))
		}
		if dup.Window == "" {
			// Due in no unplanned fault's window, but the first copy's
			// sender was cut off by one while that copy was in flight
			// (the next cycle's kill, say) and a successor sent it
			// again: the in-flight duplicate the contract allows, also
			// when it was due during a planned move.
			dup.Window = cutOffBy(h.Faults, ds[0], ds[1], cbt)
		}
		if dup.Window == "" {
			dup.Planned = faultAt(due, true, cbt, int64(opt.FailoverAllowance))
		}
		switch {
		case resentOnClose(ds):
			res.ResentOnClose = append(res.ResentOnClose, dup)
		case dup.Stale != "" && dup.Window != "a re-creation by an indeterminate write":
			res.StaleDups = append(res.StaleDups, dup)
		case dup.Window != "":
			res.InWindow = append(res.InWindow, dup)
			res.InWindowByKind[dup.Window]++
		case dup.Planned != "":
			res.PlannedDups = append(res.PlannedDups, dup)
		default:
			res.Outside = append(res.Outside, dup)
		}
	}
	for _, l := range [][]Duplicate{res.InWindow, res.PlannedDups, res.Outside, res.StaleDups, res.ResentOnClose} {
		sort.Slice(l, func(i, j int) bool {
			return l[i].IdemKey < l[j].IdemKey || l[i].IdemKey == l[j].IdemKey && l[i].Attempt < l[j].Attempt
		})
	}
	sort.Slice(res.Early, func(i, j int) bool { return res.Early[i].By > res.Early[j].By })
	sort.Strings(res.Stray)
	for kind, ls := range lateness {
		res.Lateness[kind] = distOf(ls)
	}
	return res
}

// rewritten reports whether a delivery after the superseding write sup can
// come from a write that set its trigger again: an indeterminate write
// with that trigger called before the delivery (it may take effect at any
// time after its call, e.g. a request held by a paused node and applied
// when it resumed), or a successful one called after sup was.
func rewritten(ws []history.Op, sup history.Op, d history.Delivery) bool {
	for _, w := range ws {
		if w.Kind == history.Delete || w.Trigger != d.Trigger || w.Call.Mono >= d.Recv.Mono {
			continue
		}
		if w.Outcome == history.Unknown {
			return true
		}
		if w.Outcome == history.OK && (w.Status == http.StatusCreated || w.Status == http.StatusOK) && w.Call.Mono > sup.Call.Mono {
			return true
		}
	}
	return false
}

// recreated: between two copies, the job was deleted (204) and a write
// that may set its trigger again explains the later copy.
func recreated(ws []history.Op, ds []history.Delivery) bool {
	for _, del := range ws {
		if del.Kind != history.Delete || del.Outcome != history.OK || (del.Status != http.StatusNoContent && del.Status != http.StatusOK) {
			continue
		}
		for i := 1; i < len(ds); i++ {
			if ds[0].Recv.Mono < del.Ret.Mono && del.Ret.Mono < ds[i].Recv.Mono && rewritten(ws, del, ds[i]) {
				return true
			}
		}
	}
	return false
}

// resentOnClose: a copy the receiver answered by closing the connection
// is followed, within a second, by another copy of the same attempt from
// the same node: the sender's HTTP client re-sent the POST on EOF instead
// of counting a failed attempt.
func resentOnClose(ds []history.Delivery) bool {
	for i := 1; i < len(ds); i++ {
		a, b := ds[i-1], ds[i]
		if a.Answer == "close" && a.From == b.From && b.Recv.Mono-a.Reply.Mono < int64(time.Second) {
			return true
		}
	}
	return false
}

// staleSender finds a copy (after the first) sent by a node after the
// unplanned fault that isolated it had ended, when the first copy came
// from another node before that: the node was deposed during its fault and
// still sent the callback afterwards. It needs the senders' identities
// (empty in loopback runs: nothing is found).
//
// Not when the first copy's sender was itself killed, paused or cut off
// after it sent it (at most a callback timeout after) and before the
// second copy, after the second sender's fault had ended: the second
// sender was then elected again, and its copy is the allowed repeat of a
// callback in flight at a failover (seen in the nemesis: n2, the leader
// during n1's pause, had attempt 3 in flight when it was killed 0.7 s
// after n1 resumed; n1, elected again, sent attempt 3).
func staleSender(faults []history.Fault, ds []history.Delivery, cbt int64) string {
	first := ds[0]
	if first.From == "" {
		return ""
	}
	for _, d := range ds[1:] {
		if d.From == "" || d.From == first.From {
			continue
		}
		for _, f := range faults {
			if f.Planned || !f.Isolates || f.End == history.Never || !slices.Contains(f.Targets, d.From) {
				continue
			}
			if first.Recv.Mono <= f.End.Mono && d.Recv.Mono > f.End.Mono && !failedOver(faults, first, d, f.End.Mono, cbt) {
				return fmt.Sprintf("%s delivered it at %.3fs, %s again at %.3fs after its %s ended at %.3fs",
					first.From, sec(first.Recv.Mono), d.From, sec(d.Recv.Mono), f.Kind, sec(f.End.Mono))
			}
		}
	}
	return ""
}

// isolatedSender names the unplanned fault that cut d's sender off (kill,
// pause, partition) while d was in flight and before the write was
// acknowledged at ack: the callback started at most a callback timeout
// before the fault began, and the acknowledgement came after it began,
// from the sender's successor. "" when there is none.
//
// Packet loss or delay on the sender's links counts too, for a callback
// sent while it lasted: the others' liveness checks can find the sender
// dead under it and elect a successor while the sender still holds its
// own lease (its pings answered, theirs lost: seed 3945754073149428009,
// cycle 7, 27 % loss — a TimeoutNow election 1 ms before the old leader's
// callback left, and the DELETE's 204 from the new leader while it was
// in flight). The contract allows what a failover leaves in flight; the
// duplicates check already counts these faults' windows.
func isolatedSender(faults []history.Fault, d history.Delivery, ack, cbt int64) string {
	if d.From == "" {
		return ""
	}
	for _, f := range faults {
		if f.Planned || !slices.Contains(f.Targets, d.From) {
			continue
		}
		switch {
		case f.Isolates:
			if d.Recv.Mono >= f.Start.Mono-cbt && d.Recv.Mono <= f.End.Mono && ack >= f.Start.Mono {
				return fmt.Sprintf("sent by %s as its %s began at %.3fs", d.From, f.Kind, sec(f.Start.Mono))
			}
		case f.Kind == "loss" || f.Kind == "delay":
			if d.Recv.Mono >= f.Start.Mono && d.Recv.Mono <= f.End.Mono {
				return fmt.Sprintf("sent by %s during the %s on its links from %.3fs", d.From, f.Kind, sec(f.Start.Mono))
			}
		}
	}
	return ""
}

// cutOffBy names the kind of the unplanned fault that stopped first's
// sender (kill, pause, partition, kill-all) after first was received and
// before second was, at most cbt after first was sent; "" when none did.
func cutOffBy(faults []history.Fault, first, second history.Delivery, cbt int64) string {
	for _, g := range faults {
		stops := g.Isolates || g.Kind == "kill-all"
		if g.Planned || !stops || first.From == "" || !slices.Contains(g.Targets, first.From) {
			continue
		}
		if g.Start.Mono >= first.Recv.Mono && g.Start.Mono <= first.Recv.Mono+cbt && g.Start.Mono <= second.Recv.Mono {
			return g.Kind
		}
	}
	return ""
}

// failedOver reports whether first's sender was isolated by an unplanned
// fault that began after after, at most cbt after first was sent, and
// before second was.
func failedOver(faults []history.Fault, first, second history.Delivery, after, cbt int64) bool {
	for _, g := range faults {
		// A kill of every node isolates nobody, but it stops first's
		// sender as surely as a kill of that node alone.
		stops := g.Isolates || g.Kind == "kill-all"
		if g.Planned || !stops || !slices.Contains(g.Targets, first.From) {
			continue
		}
		if g.Start.Mono > after && g.Start.Mono >= first.Recv.Mono && g.Start.Mono <= first.Recv.Mono+cbt && g.Start.Mono <= second.Recv.Mono {
			return true
		}
	}
	return false
}

// applyWrite advances the set of states a job may be in by one write.
func applyWrite(states []possible, op history.Op) []possible {
	set := possible{exists: true, trigger: op.Trigger, setAt: op.Call.Wall}
	switch {
	case op.Outcome == history.Unknown:
		switch op.Kind {
		case history.Create:
			// Only where it did not exist yet.
			var out []possible
			for _, s := range states {
				out = append(out, s)
				if !s.exists {
					out = append(out, set)
				}
			}
			return dedupe(out)
		case history.Put:
			return dedupe(append(states, set))
		case history.Delete:
			return dedupe(append(states, possible{}))
		}
	case op.Kind == history.Create && (op.Status == http.StatusCreated):
		return []possible{set}
	case op.Kind == history.Create && op.Status == http.StatusOK:
		// It existed with this very spec.
		return []possible{set}
	case op.Kind == history.Put && (op.Status == http.StatusOK || op.Status == http.StatusCreated):
		return []possible{set}
	case op.Kind == history.Delete && (op.Status == http.StatusNoContent || op.Status == http.StatusOK || op.Status == http.StatusNotFound):
		return []possible{{}}
	}
	return states // refused (409, 412, ...): nothing changed
}

func dedupe(ps []possible) []possible {
	seen := map[possible]bool{}
	var out []possible
	for _, p := range ps {
		q := p
		q.setAt = 0
		if !seen[q] {
			seen[q] = true
			out = append(out, p)
		}
	}
	return out
}

func triggersOf(states []possible) map[int64]bool {
	out := map[int64]bool{}
	for _, s := range states {
		if s.exists {
			out[s.trigger] = true
		}
	}
	return out
}

// owes: the job exists in every state it may end in; allowed: the
// triggers a delivery may carry to pay the debt.
func owes(states []possible) (bool, map[int64]bool) {
	allowed := triggersOf(states)
	for _, s := range states {
		if !s.exists {
			return false, allowed
		}
	}
	return len(states) > 0, allowed
}

// lastRead describes the last successful read of a job (its status and
// last_error say why it was not delivered).
func lastRead(ops []history.Op) string {
	for i := len(ops) - 1; i >= 0; i-- {
		op := ops[i]
		if op.Kind == history.Get && op.Outcome == history.OK && op.Status == http.StatusOK {
			s := fmt.Sprintf("; last read via %s at %.3fs: v%d %s, %d attempts", op.Via, sec(op.Call.Mono), op.Version, op.JobStatus, op.JobAttempts)
			if op.JobLastError != "" {
				s += fmt.Sprintf(", last_error %q", op.JobLastError)
			}
			return s
		}
	}
	return ""
}

func lastWrite(ws []history.Op) string {
	if len(ws) == 0 {
		return ""
	}
	op := ws[len(ws)-1]
	return fmt.Sprintf("; last write: %s via %s at %.3fs → %s %d", op.Kind, op.Via, sec(op.Call.Mono), op.Outcome, op.Status)
}

func sortedKeys(m map[int64]bool) []int64 {
	var out []int64
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func sec(mono int64) float64 {
	if mono == history.Never.Mono {
		return math.Inf(1)
	}
	return float64(mono) / 1e9
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
