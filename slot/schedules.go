package slot

import (
	"context"
	"math"
	"time"

	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/recur"
	"github.com/timemachine-db/timemachine/storage"
)

// The schedule loop (slot/DESIGN.md#schedules) runs on the slot leader for
// one term, next to the job scheduler. When a schedule's next occurrence is
// due by the fence's clock, or about to be (leadFor), it proposes
// ScheduleAdvance, which creates the occurrence as an ordinary job due at
// its occurrence time; the job scheduler then fires it like any other job
// (retries, signatures, the never-early check right before the request
// leaves).
// Only the leader proposes, and the state machine applies an advance only
// while the schedule is still where the leader saw it, so each occurrence
// is created once cluster-wide, across failovers too.

// maxAdvanceRound bounds the schedules advanced in one raft entry.
const maxAdvanceRound = 1000

// scheduleLead is how long before its time an occurrence is created, at
// least. The occurrence is a job due at the occurrence time, which the job
// scheduler fires then and never before; creating it ahead keeps the raft
// commit of the advance out of the occurrence's lateness. A DELETE or a
// replacing PUT of the schedule within the lead of an occurrence finds
// that occurrence already a job: the service removes it (dropPending).
//
// When advances take longer to commit (a loaded host, a busy raft log),
// the lead grows with them, to twice the recent commit time, up to
// maxScheduleLead: with a fixed 250 ms, 3,000 schedules on three nodes of
// a loaded 2-core host arrived 0.5 s late at the median, the advances'
// commits being that slow. The cap stays below recur.MinEvery (1 s), so a
// schedule never has more than one occurrence created ahead: a DELETE
// has at most one to remove.
const (
	scheduleLead    = 250 * time.Millisecond
	maxScheduleLead = 750 * time.Millisecond
)

// leadFor is the lead for an advance commit time (its recent average).
func leadFor(commit time.Duration) time.Duration {
	return min(max(scheduleLead, 2*commit), maxScheduleLead)
}

// scheduleIdle is how long the loop waits before it looks again after a
// failed read, or at due schedules it could not advance.
const scheduleIdle = time.Second

// scheduleQuiet is the longest the loop sleeps while no schedule is due
// within it: it was scheduleIdle, a wake-up a second on every slot leader
// with no schedule at all (86 a second on a node of 256 slots,
// docs/scaling.md, fifth pass). A PUT or an advance wakes the loop
// (SchedulesChanged), and so does a step of the wall clock
// (Replica.ClockStepped).
const scheduleQuiet = time.Minute

// SchedulesChanged implements raftfsm.ScheduleObserver: schedule due
// entries were written, the earliest at earliest, so the loop looks again,
// and no later than there.
func (r *Replica) SchedulesChanged(earliest int64) {
	for {
		cur := r.schedNoted.Load()
		if earliest >= cur || r.schedNoted.CompareAndSwap(cur, earliest) {
			break
		}
	}
	select {
	case r.schedWake <- struct{}{}:
	default:
	}
}

// runSchedules is the leader's schedule loop for one term.
func (r *Replica) runSchedules(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	// low bounds the scans below: no live due entry is earlier. A term's
	// first scan reads the whole index; afterwards low follows the scans.
	low := int64(math.MinInt64)
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-r.schedWake:
		}
		wait := r.advanceDue(ctx, &low)
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(wait)
	}
}

// advanceDue advances every due schedule and returns how long the loop may
// sleep until the next one is due. *low is the scans' lower bound: every
// entry below it was advanced (advances only move entries later), so it
// moves up to the earliest entry the last scan left behind, and down to
// the earliest one written since (SchedulesChanged).
func (r *Replica) advanceDue(ctx context.Context, low *int64) time.Duration {
	for ctx.Err() == nil {
		// Entries written since the last scan may be below low (a PUT
		// through a node whose clock is behind): take the notes first,
		// so none written during the scan is lost.
		*low = min(*low, r.schedNoted.Swap(math.MaxInt64))
		local := r.cfg.Clock()
		now := r.fireNow(local).UnixMilli()
		var due []storage.DueEntry
		var next int64
		lead := leadFor(time.Duration(r.advanceCommit.Load()))
		horizon := now + lead.Milliseconds()
		err := raftfsm.ScanScheduleDue(r.db, r.slot, *low, horizon+scheduleQuiet.Milliseconds()+1, maxAdvanceRound+1, func(e storage.DueEntry) bool {
			if e.Due > horizon {
				next = e.Due
				return false
			}
			due = append(due, e)
			return len(due) < maxAdvanceRound
		})
		if err != nil {
			r.log.Error("schedules: reading the due index failed; retrying", "error", err)
			return scheduleIdle
		}
		if len(due) == 0 {
			// Nothing is due below now: the next scan may start there
			// (entries written below it later are noted).
			*low = max(*low, now)
			if next == 0 {
				return scheduleQuiet
			}
			return min(max(time.UnixMilli(next).Add(-lead).Sub(r.fireNow(r.cfg.Clock())), time.Millisecond), scheduleQuiet)
		}
		*low = max(*low, due[0].Due)
		if !r.fenced() {
			return fencedPause
		}
		scheds, err := raftfsm.GetSchedules(r.db, r.slot, due)
		if err != nil {
			r.log.Error("schedules: reading due schedules failed; retrying", "error", err)
			return scheduleIdle
		}
		cmds := make([]raftfsm.Command, 0, len(due))
		for i, e := range due {
			if c := r.advanceCmd(e, scheds[i], now); c != nil {
				cmds = append(cmds, c)
			}
		}
		if len(cmds) == 0 {
			return scheduleIdle
		}
		start := time.Now()
		if _, err := r.Propose(ctx, cmds...); err != nil {
			if ctx.Err() == nil {
				r.log.Warn("schedules: proposing occurrences failed; retrying", "error", err)
			}
			return fencedPause
		}
		// A moving average of the commit time (one in four), which the
		// lead follows.
		took := int64(time.Since(start))
		r.advanceCommit.Store((3*r.advanceCommit.Load() + took) / 4)
		if len(due) < maxAdvanceRound {
			// Loop once more: the scan picks up the next occurrence (and
			// anything that came due meanwhile).
			continue
		}
	}
	return scheduleIdle
}

// advanceCmd computes the advance of one due schedule at now, sc as read
// for its due entry e (nil: gone): the latest occurrence at or before now
// fires, the ones before it are counted as missed (the catch-up rule),
// and the following one becomes next.
func (r *Replica) advanceCmd(e storage.DueEntry, sc *model.Schedule, now int64) raftfsm.Command {
	if sc == nil || sc.NextFireAt != e.Due {
		return nil // changed since the scan; the next scan sees it as it is
	}
	spec, err := recur.FromSchedule(&sc.Spec, sc.Anchor)
	if err != nil {
		// Validated at PUT; a zone that vanished from this node's zoneinfo
		// fires this occurrence and stops (next 0) rather than spin.
		r.log.Error("schedules: cannot evaluate a schedule; it stops after this occurrence", "collection", e.Coll, "schedule", e.ID, "error", err)
		return &raftfsm.ScheduleAdvance{Coll: e.Coll, ID: e.ID, Version: sc.Version, Expected: sc.NextFireAt,
			Occurrence: sc.NextFireAt, Now: now}
	}
	var occ, skipped, following int64
	if sc.NextFireAt > now {
		// Created a little ahead (leadFor): the job fires at its time.
		occ, following = sc.NextFireAt, spec.Next(sc.NextFireAt)
	} else if occ, skipped, following = spec.Latest(sc.NextFireAt, now); occ == 0 {
		return nil
	}
	return &raftfsm.ScheduleAdvance{Coll: e.Coll, ID: e.ID, Version: sc.Version, Expected: sc.NextFireAt,
		Occurrence: occ, Missed: skipped, Next: following, Now: now}
}

// GetSchedule reads a schedule from this replica's state, and the status
// of its latest occurrence ("" when none is left).
func (r *Replica) GetSchedule(coll, id string) (*model.Schedule, string, bool, error) {
	sc, ok, err := raftfsm.GetSchedule(r.db, r.slot, coll, id)
	if err != nil || !ok {
		return nil, "", false, err
	}
	return sc, r.lastStatus(sc), true, nil
}

func (r *Replica) lastStatus(sc *model.Schedule) string {
	if sc.LastFireAt == 0 {
		return ""
	}
	j, ok, err := r.Get(sc.Collection, model.OccurrenceID(sc.ID, sc.LastFireAt))
	if err != nil || !ok {
		return ""
	}
	if c, known := r.cfg.Meta().Collection(sc.Collection); known && c.Expired(j, r.cfg.Clock().UnixMilli()) {
		return "" // gone to reads already (model.Collection.Expired)
	}
	return j.Status.String()
}

// ListSchedules lists a collection's schedules in this slot, in id order,
// after the id after, with the status of each one's latest occurrence.
func (r *Replica) ListSchedules(coll, after string, limit int) (model.ScheduleListPage, []string, error) {
	page, err := raftfsm.ListSchedules(r.db, r.slot, coll, after, limit)
	if err != nil {
		return page, nil, err
	}
	st := make([]string, len(page.Schedules))
	for i, sc := range page.Schedules {
		st[i] = r.lastStatus(sc)
	}
	return page, st, nil
}
