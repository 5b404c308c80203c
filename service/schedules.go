package service

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/recur"
)

// firstOccurrence is the first occurrence of spec after now, or 0 while it
// is paused or has ended. An "every" schedule counts from now.
func firstOccurrence(spec *model.ScheduleSpec, now int64) (anchor, next int64, err error) {
	anchor = now
	r, err := recur.FromSchedule(spec, anchor)
	if err != nil {
		return 0, 0, model.Invalid("%v", err)
	}
	if spec.Paused {
		return anchor, 0, nil
	}
	// An occurrence at now itself is not in the past: it fires.
	return anchor, r.Next(now - 1), nil
}

// PutSchedule creates (created=true) or replaces a schedule. The
// collection, and the route it names, must exist. The first occurrence is
// computed here, from this node's clock; a PUT of the same spec again
// changes nothing. ifMatch, when not zero, must be the schedule's current
// version (If-Match), else nothing changes and the error is
// precondition_failed.
func (s *Service) PutSchedule(ctx context.Context, coll, id string, spec model.ScheduleSpec, ifMatch uint64) (model.ScheduleView, bool, error) {
	c, st, err := s.liveCollection(ctx, coll)
	if err != nil {
		return model.ScheduleView{}, false, err
	}
	if spec.Route != "" {
		if _, ok := st.Route(spec.Route); !ok {
			if st, err = s.catchUp(ctx); err != nil {
				return model.ScheduleView{}, false, err
			}
		}
		if _, ok := st.Route(spec.Route); !ok {
			return model.ScheduleView{}, false, routeMissing(spec.Route)
		}
	}
	now := s.now()
	anchor, next, err := firstOccurrence(&spec, now)
	if err != nil {
		return model.ScheduleView{}, false, err
	}
	sl := s.slotOf(coll, id)
	cmd := &raftfsm.PutSchedule{Coll: coll, ID: id, Spec: spec, Anchor: anchor, Next: next, Now: now, IfMatch: ifMatch, CollInc: c.Incarnation}
	// Re-sending is safe: the same spec again is "exists".
	res, resent, err := s.proposeResolved(ctx, sl, cmd)
	if err != nil {
		return model.ScheduleView{}, false, fail(err)
	}
	r := res[0]
	if r.Code == model.CodeRejected {
		return model.ScheduleView{}, false, collectionGone(coll)
	}
	created := r.Code == model.CodeCreated
	// ours: the attempt whose outcome was unknown wrote the schedule (its
	// spec and its stamp), so the re-sent one found it in place.
	ours := resent && r.Schedule != nil && r.Schedule.UpdatedAt == now && r.Schedule.Spec.Hash == spec.Hash
	if ours && (r.Code == model.CodeExists || r.Code == model.CodePreconditionFailed) {
		created = r.Schedule.Version == 1 && r.Schedule.CreatedAt == now
	} else if r.Code == model.CodePreconditionFailed {
		if r.Schedule == nil {
			return model.ScheduleView{}, false, model.PreconditionFailed("If-Match: %d, but schedule %q does not exist in collection %q", ifMatch, id, coll)
		}
		return model.ScheduleView{}, false, model.PreconditionFailed("If-Match: %d, but schedule %q is at version %d; read it again and retry", ifMatch, id, r.Schedule.Version)
	}
	if r.Schedule == nil {
		return model.ScheduleView{}, false, model.Internal("the slot answered a schedule write without the schedule")
	}
	if !created && (r.Code == model.CodeOK || ours) && r.Schedule.NextFireAt != r.Schedule.LastFireAt {
		// Replaced: the old version's occurrence created ahead is not the
		// new version's to fire. Unless the new version fires at that very
		// time: then it is that occurrence too (the schedule loop may
		// already have advanced past it, finding the id taken), and
		// removing it would lose it.
		s.dropPending(ctx, sl, coll, id, r.Schedule.LastFireAt)
	}
	v := model.ScheduleView{Schedule: r.Schedule}
	if r.Schedule.LastFireAt != 0 {
		// A schedule that has fired: its answer shows the latest
		// occurrence's status, as a GET does. The write stands whatever
		// this read answers; a failed or slow read (a second at most, so
		// a committed write is not answered late) leaves the status out.
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		if sc, st, ok, err := s.fwd.GetSchedule(rctx, sl, coll, id); err == nil && ok && sc.Version == r.Schedule.Version {
			v.LastStatus = st
		}
		cancel()
	}
	return v, created, nil
}

// GetSchedule reads a schedule on its slot's leader.
func (s *Service) GetSchedule(ctx context.Context, coll, id string) (model.ScheduleView, error) {
	if _, err := s.knownCollection(ctx, coll); err != nil {
		return model.ScheduleView{}, err
	}
	sc, st, ok, err := s.fwd.GetSchedule(ctx, s.slotOf(coll, id), coll, id)
	if err != nil {
		return model.ScheduleView{}, fail(err)
	}
	if !ok {
		return model.ScheduleView{}, model.NotFound("schedule %q does not exist in collection %q", id, coll)
	}
	return model.ScheduleView{Schedule: sc, LastStatus: st}, nil
}

// DeleteSchedule stops and removes a schedule. Occurrences already due stay
// jobs of their own; the one created ahead of its time is removed with it.
func (s *Service) DeleteSchedule(ctx context.Context, coll, id string) error {
	if _, err := s.knownCollection(ctx, coll); err != nil {
		return err
	}
	sl := s.slotOf(coll, id)
	res, resent, err := s.proposeResolved(ctx, sl, &raftfsm.DeleteSchedule{Coll: coll, ID: id})
	if err != nil {
		return fail(err)
	}
	if res[0].Code == model.CodeOK && res[0].Schedule != nil {
		s.dropPending(ctx, sl, coll, id, res[0].Schedule.LastFireAt)
	}
	if res[0].Code == model.CodeNotFound {
		if resent {
			s.log.Warn("a schedule DELETE's outcome stayed unknown: the schedule is gone", "collection", coll, "id", id)
			return model.ErrOutcomeUnknown
		}
		return model.NotFound("schedule %q does not exist in collection %q", id, coll)
	}
	return nil
}

// dropPending removes the occurrence at of schedule id when it was created
// ahead of its time and is still waiting for it: the slot leader creates
// an occurrence up to 750 ms before it is due (slot/schedules.go
// scheduleLead), so without this a DELETE or a replacing PUT (a pause, a
// new spec) answered before that time still let the stopped version fire
// once more (API.md §3: DELETE "stops it"). An occurrence that is due, has
// been retried or replaced by its own PUT, or whose callback has started
// (the job guard answers firing) is left alone, and so is a job of that id
// that is not the schedule's. Best effort: the schedule write stands
// whatever happens here, and a failure is logged.
func (s *Service) dropPending(ctx context.Context, sl int, coll, id string, at int64) {
	if at <= s.now() {
		return
	}
	occ := model.OccurrenceID(id, at)
	j, found, err := s.fwd.GetJob(ctx, sl, coll, occ)
	if err != nil {
		s.log.Warn("an occurrence created ahead may still fire after its schedule was stopped: reading it failed", "collection", coll, "occurrence", occ, "error", err)
		return
	}
	if !found || j.Schedule != id || j.Status != model.StatusScheduled || j.TriggerTime != at || j.Attempts != 0 {
		return
	}
	// A CodeFiring answer: its time came while we asked; it fires, as any
	// due occurrence does.
	if _, err := s.fwd.ProposeSlot(ctx, sl, &raftfsm.DeleteIncarnation{Coll: coll, ID: occ, CreatedAt: j.CreatedAt}); err != nil {
		s.log.Warn("an occurrence created ahead may still fire after its schedule was stopped: deleting it failed", "collection", coll, "occurrence", occ, "error", err)
	}
}

// ListSchedules lists a collection's schedules in id order, limit at most,
// after the id after; more says whether a next page exists.
func (s *Service) ListSchedules(ctx context.Context, coll, after string, limit int) ([]model.ScheduleView, bool, error) {
	if _, err := s.knownCollection(ctx, coll); err != nil {
		return nil, false, err
	}
	count := s.slotCount()
	pages := make([]model.ScheduleListPage, count)
	stats := make([][]string, count)
	errs := make([]error, count)
	var wg sync.WaitGroup
	for sl := 0; sl < count; sl++ {
		wg.Add(1)
		go func(sl int) {
			defer wg.Done()
			pages[sl], stats[sl], errs[sl] = s.fwd.ListSchedules(ctx, sl, coll, after, limit)
		}(sl)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, false, fail(err)
	}
	var all []model.ScheduleView
	more := false
	for i, p := range pages {
		more = more || p.More
		for k, sc := range p.Schedules {
			st := ""
			if k < len(stats[i]) {
				st = stats[i][k]
			}
			all = append(all, model.ScheduleView{Schedule: sc, LastStatus: st})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].ID < all[j].ID })
	if len(all) > limit {
		all, more = all[:limit], true
	}
	return all, more, nil
}

// Redrive schedules dead letters again, now, with attempts reset: the
// jobs named in ids, or those whose trigger time is in [from, to). It
// answers how many were sent again. Re-sending after an unknown outcome
// is safe (a redriven job is no longer failed), but the count then misses
// the ones the lost attempt redrove.
func (s *Service) Redrive(ctx context.Context, coll string, ids []string, from, to int64) (int64, error) {
	c, _, err := s.liveCollection(ctx, coll)
	if err != nil {
		return 0, err
	}
	now := s.now()
	bySlot := map[int][]string{}
	if len(ids) > 0 {
		for _, id := range ids {
			sl := s.slotOf(coll, id)
			bySlot[sl] = append(bySlot[sl], id)
			if sc, _, ok := model.SplitOccurrenceID(id); ok {
				// An occurrence lives in its schedule's slot.
				if o := s.slotOf(coll, sc); o != sl {
					bySlot[o] = append(bySlot[o], id)
				}
			}
		}
	} else {
		for sl := 0; sl < s.slotCount(); sl++ {
			bySlot[sl] = nil
		}
	}
	var (
		mu    sync.Mutex
		total int64
		errs  []error
		wg    sync.WaitGroup
	)
	for sl, sids := range bySlot {
		wg.Add(1)
		go func(sl int, sids []string) {
			defer wg.Done()
			var n int64
			var err error
			if len(ids) > 0 {
				n, err = s.redriveIDs(ctx, sl, c, s.unexpired(ctx, sl, c, sids, now), now)
			} else {
				n, err = s.redriveRange(ctx, sl, c, from, to, now)
			}
			mu.Lock()
			total += n
			if err != nil {
				errs = append(errs, err)
			}
			mu.Unlock()
		}(sl, sids)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return total, fail(err)
	}
	return total, nil
}

// redriveIDs redrives the dead letters among ids on slot sl.
func (s *Service) redriveIDs(ctx context.Context, sl int, c *model.Collection, ids []string, now int64) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	res, _, err := s.proposeResolved(ctx, sl, &raftfsm.Redrive{Coll: c.Name, IDs: ids, Now: now})
	if err != nil {
		return 0, err
	}
	return res[0].N, nil
}

// unexpired leaves out of ids the jobs of slot sl that are finished and
// past their collection's retention at now: they are gone to reads
// (model.Collection.Expired), so a redrive by id does not send them again
// and does not count them. An id the read cannot settle stays (the state
// machine redrives only dead letters).
func (s *Service) unexpired(ctx context.Context, sl int, c *model.Collection, ids []string, now int64) []string {
	out := ids[:0:0]
	for _, id := range ids {
		if j, ok, err := s.fwd.GetJob(ctx, sl, c.Name, id); err == nil && ok && c.Expired(j, now) {
			continue
		}
		out = append(out, id)
	}
	return out
}

// redriveRange pages through the slot's dead letters in [from, to) with
// the list index and redrives each page by id, leaving out those past
// their retention (unexpired).
func (s *Service) redriveRange(ctx context.Context, sl int, c *model.Collection, from, to, now int64) (int64, error) {
	if to <= 0 {
		to = model.MaxTriggerMs
	}
	q := model.ListQuery{Coll: c.Name, Status: model.StatusFailed, From: from, To: to, Limit: model.MaxBatch}
	var n int64
	for {
		page, err := s.fwd.ListSlot(ctx, sl, q)
		if err != nil {
			return n, err
		}
		ids := make([]string, 0, len(page.Jobs))
		for _, j := range page.Jobs {
			if !c.Expired(j, now) {
				ids = append(ids, j.ID)
			}
		}
		k, err := s.redriveIDs(ctx, sl, c, ids, now)
		n += k
		if err != nil {
			return n, err
		}
		if !page.Stopped {
			return n, nil
		}
		pos := page.Pos
		q.After = &pos
	}
}
