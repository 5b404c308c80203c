package service

import (
	"context"
	"errors"
	"sort"
	"sync"

	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
)

// CreateJobs creates jobs (POST semantics). The collection and the routes
// the jobs name must exist; the jobs are stamped with the time, grouped by
// slot, and each slot's group goes to its leader as one proposal, the
// slots committing in parallel. Results are in input order; an input that
// already carries a validation error is passed through.
func (s *Service) CreateJobs(ctx context.Context, coll string, in []model.JobInput) ([]model.JobResult, error) {
	c, st, err := s.liveCollection(ctx, coll)
	if err != nil {
		return nil, err
	}
	if !routesKnown(st, in) {
		if st, err = s.catchUp(ctx); err != nil {
			return nil, err
		}
	}
	out := make([]model.JobResult, len(in))
	now := s.now()
	bySlot := map[int][]int{}
	for i := range in {
		x := &in[i]
		out[i].ID = x.ID
		if x.Err != nil {
			out[i].Err = x.Err
			continue
		}
		if x.Spec.Route != "" {
			if _, ok := st.Route(x.Spec.Route); !ok {
				out[i].Err = routeMissing(x.Spec.Route)
				continue
			}
		}
		sl, other, alt := s.jobSlots(coll, x.ID)
		if alt {
			// A job of this id made before ids shaped like an occurrence
			// went to their schedule's slot lives where the id hashes:
			// the create must meet it there (200 or 409), not make a
			// second job of its id.
			_, there, err := s.fwd.GetJob(ctx, other, coll, x.ID)
			if err != nil {
				out[i].Err = toModel(fail(err))
				continue
			}
			if there {
				sl = other
			}
		}
		bySlot[sl] = append(bySlot[sl], i)
	}
	var (
		wg         sync.WaitGroup
		unknownMu  sync.Mutex
		anyUnknown bool
	)
	propose := func(sl int, idx []int) {
		cmds := make([]raftfsm.Command, len(idx))
		for k, i := range idx {
			cmds[k] = &raftfsm.Create{Coll: coll, ID: in[i].ID, Spec: in[i].Spec, Now: now, CollInc: c.Incarnation}
		}
		res, resent, err := s.proposeResolved(ctx, sl, cmds...)
		var failed []int // positions in idx whose create failed
		if err == nil {
			var again []int
			res, resent, again, err = s.createOverExpired(ctx, sl, c, cmds, res, resent)
			if err != nil {
				failed = again // the first proposal's other results stand
			}
		} else {
			failed = make([]int, len(idx))
			for k := range idx {
				failed[k] = k
			}
		}
		if err != nil {
			e := toModel(err)
			for _, k := range failed {
				out[idx[k]].Err = e
			}
			if errors.Is(err, model.ErrOutcomeUnknown) {
				unknownMu.Lock()
				anyUnknown = true
				unknownMu.Unlock()
			}
			if len(failed) == len(idx) {
				return
			}
		}
		created := 0
		for k, i := range idx {
			if out[i].Err != nil {
				continue
			}
			if res[k].Code == model.CodeRejected {
				out[i].Err = collectionGone(coll)
				continue
			}
			out[i].Code, out[i].Job = res[k].Code, res[k].Job
			if resent && res[k].Code == model.CodeExists && res[k].Job != nil && res[k].Job.CreatedAt == now {
				// Created by the attempt whose outcome was unknown:
				// the job carries this request's stamp. The answer is
				// the job as that create made it (it may have fired or
				// been retried since, while the outcome was sought).
				// (Made by it and deleted since, the state machine
				// answers created from the deleted job's tombstone,
				// and makes nothing: raftfsm create.)
				out[i].Code, out[i].Job = model.CodeCreated, asCreated(res[k].Job, in[i].Spec.TriggerTime)
			}
			if res[k].Code == model.CodeCreated {
				created++
			}
		}
		s.created(created)
	}
	// A request whose jobs all live in one slot (every single create)
	// proposes on its own goroutine: a goroutine per slot only pays off
	// when there are several slots to wait on at once.
	if len(bySlot) == 1 {
		for sl, idx := range bySlot {
			propose(sl, idx)
		}
	} else {
		for sl, idx := range bySlot {
			wg.Go(func() { propose(sl, idx) })
		}
		wg.Wait()
	}
	if anyUnknown {
		// Per-item answers cannot say "unknown": the request as a whole
		// gets none (re-sending a batch of creates with ids is safe).
		return nil, model.ErrOutcomeUnknown
	}
	return out, nil
}

// createOverExpired creates again the jobs whose create found a finished
// job of the same id past its collection's retention: reads treat that job
// as gone already (model.Collection.Expired), and the slot leader's upkeep
// removes it within 30 s; until then the create would answer 200 or 409
// with a job a GET answers 404 for. Each such job is deleted in the entry
// that creates the new one — that incarnation only (DeleteIncarnation, its
// created_at; it leaves the tombstone a re-send of its own create needs) —
// and the create's result replaces the first one. Rare, so the common path
// pays nothing for it. A job this very request made (a re-send after an
// unknown outcome finding its own job, which may have fired and expired
// since under a short retention) is not made again.
//
// It returns the positions it proposed again; an error is theirs alone:
// the first proposal's other results stand.
func (s *Service) createOverExpired(ctx context.Context, sl int, c *model.Collection, cmds []raftfsm.Command, res []model.Result, resent bool) ([]model.Result, bool, []int, error) {
	now := s.now()
	var again []int
	for k, r := range res {
		if (r.Code != model.CodeExists && r.Code != model.CodeConflict) || r.Job == nil || !c.Expired(r.Job, now) {
			continue
		}
		if resent && r.Job.CreatedAt == cmds[k].(*raftfsm.Create).Now {
			continue // this request's own job
		}
		again = append(again, k)
	}
	if len(again) == 0 {
		return res, resent, nil, nil
	}
	redo := make([]raftfsm.Command, 0, 2*len(again))
	for _, k := range again {
		cr := cmds[k].(*raftfsm.Create)
		redo = append(redo, &raftfsm.DeleteIncarnation{Coll: cr.Coll, ID: cr.ID, CreatedAt: res[k].Job.CreatedAt}, cr)
	}
	res2, resent2, err := s.proposeResolved(ctx, sl, redo...)
	if err != nil {
		return res, resent, again, err
	}
	for n, k := range again {
		res[k] = res2[2*n+1]
	}
	return res, resent || resent2, again, nil
}

// UpsertJob creates or replaces a job (PUT semantics); ifMatch, when not
// zero, must be the job's current version.
func (s *Service) UpsertJob(ctx context.Context, coll, id string, spec model.JobSpec, ifMatch uint64) (model.Result, error) {
	c, st, err := s.liveCollection(ctx, coll)
	if err != nil {
		return model.Result{}, err
	}
	if spec.Route != "" {
		if _, ok := st.Route(spec.Route); !ok {
			if st, err = s.catchUp(ctx); err != nil {
				return model.Result{}, err
			}
		}
		if _, ok := st.Route(spec.Route); !ok {
			return model.Result{}, routeMissing(spec.Route)
		}
	}
	res, err := s.upsertResolved(ctx, c, id, spec, ifMatch)
	if err != nil {
		return model.Result{}, fail(err)
	}
	switch res[0].Code {
	case model.CodeRejected:
		return res[0], collectionGone(coll)
	case model.CodeFiring:
		return res[0], model.Firing(res[0].Job)
	case model.CodePreconditionFailed:
		if res[0].Job == nil {
			return res[0], model.PreconditionFailed("If-Match: %d, but job %q does not exist", ifMatch, id)
		}
		return res[0], model.PreconditionFailed("If-Match: %d, but job %q is at version %d; read it again and retry", ifMatch, id, res[0].Job.Version)
	case model.CodeCreated:
		s.created(1)
	}
	return res[0], nil
}

// upsertResolved proposes an upsert and, when its outcome is unknown, finds
// it out (see resolve.go): by reading the job, and re-sending the upsert
// only when the read shows that the earlier attempt did not touch it.
//
// The job is read first: a finished job past its collection's retention
// is gone to reads (model.Collection.Expired), so a PUT with If-Match
// answers 412 for it, and one without deletes that incarnation in the
// entry that creates the new job (201, version 1), as if the leader's
// upkeep had removed it already.
func (s *Service) upsertResolved(ctx context.Context, c *model.Collection, id string, spec model.JobSpec, ifMatch uint64) ([]model.Result, error) {
	coll := c.Name
	sl, other, alt := s.jobSlots(coll, id)
	j, here, err := s.fwd.GetJob(ctx, sl, coll, id)
	if err != nil {
		return nil, err
	}
	if alt && !here {
		// An id shaped like an occurrence is made in its schedule's
		// slot; one made before that rule lives where its id hashes,
		// and a PUT replaces it there (GET looks there too).
		oj, there, err := s.fwd.GetJob(ctx, other, coll, id)
		if err != nil {
			return nil, err
		}
		if there {
			sl, j, here = other, oj, true
		}
	}
	cmd := &raftfsm.Upsert{Coll: coll, ID: id, Spec: spec, IfMatch: ifMatch, Now: s.now(), CollInc: c.Incarnation}
	cmds := []raftfsm.Command{cmd}
	if here && c.Expired(j, cmd.Now) {
		if ifMatch != 0 {
			return []model.Result{{Code: model.CodePreconditionFailed}}, nil
		}
		cmds = []raftfsm.Command{&raftfsm.DeleteIncarnation{Coll: coll, ID: id, CreatedAt: j.CreatedAt}, cmd}
	}
	res, err := s.fwd.ProposeSlot(ctx, sl, cmds...)
	if !unknown(err) {
		if err != nil {
			return nil, err
		}
		return res[len(res)-1:], nil
	}
	return s.resolveUpsert(ctx, sl, cmd)
}

// resolveUpsert finds out the outcome of cmd, an upsert on slot sl whose
// attempt's outcome was unknown (see resolve.go).
func (s *Service) resolveUpsert(ctx context.Context, sl int, cmd *raftfsm.Upsert) ([]model.Result, error) {
	coll, id, spec, ifMatch := cmd.Coll, cmd.ID, cmd.Spec, cmd.IfMatch
	ours := func(j *model.Job) bool { return j.SpecHash == spec.Hash && j.UpdatedAt == cmd.Now }
	r := newResolver(context.WithoutCancel(ctx))
	defer r.cancel()
	for r.next() {
		j, found, err := s.fwd.GetJob(r.ctx, sl, coll, id)
		if err != nil {
			continue // no leader to ask yet
		}
		switch {
		case found && ours(j):
			// The earlier attempt's work: its spec and its stamp.
			code := model.CodeOK
			if j.Version == 1 && j.CreatedAt == cmd.Now {
				code = model.CodeCreated
			}
			return []model.Result{{Code: code, Job: j}}, nil
		case ifMatch != 0 && found && j.Version == ifMatch:
			// Not applied yet. Send it again: it applies only at that
			// version, so at most one of the two attempts does. (An
			// absent job is not proof of anything: the attempt may have
			// created it and a DELETE removed it since — see
			// resolveCreates.)
			res, err := s.fwd.ProposeSlot(r.ctx, sl, cmd)
			if inconclusive(err) {
				continue
			}
			if err == nil && len(res) == 1 && res[0].Code == model.CodePreconditionFailed {
				// The read does not prove the earlier attempt will never
				// apply: it may sit in the leader's log, uncommitted
				// (the read reflects what was committed when it began),
				// and commit before the re-send. Its work then carries
				// this request's stamp; anything else moved the version
				// on, perhaps after it (seen in the nemesis: a PUT
				// answered 412 whose write had taken effect).
				if res[0].Job != nil && ours(res[0].Job) {
					return []model.Result{{Code: model.CodeOK, Job: res[0].Job}}, nil
				}
				s.log.Warn("a PUT's outcome stayed unknown", "collection", coll, "id", id)
				return nil, model.ErrOutcomeUnknown
			}
			return res, err
		default:
			// Changed since, by this write or another: not to be told
			// apart.
			s.log.Warn("a PUT's outcome stayed unknown", "collection", coll, "id", id)
			return nil, model.ErrOutcomeUnknown
		}
	}
	s.log.Warn("a PUT's outcome stayed unknown", "collection", coll, "id", id)
	return nil, model.ErrOutcomeUnknown
}

// GetJob reads a job on its slot's leader, so a client reads its own
// writes through any node.
func (s *Service) GetJob(ctx context.Context, coll, id string) (*model.Job, error) {
	c, err := s.knownCollection(ctx, coll)
	if err != nil {
		return nil, err
	}
	sl, other, alt := s.jobSlots(coll, id)
	j, ok, err := s.fwd.GetJob(ctx, sl, coll, id)
	if err == nil && !ok && alt {
		j, ok, err = s.fwd.GetJob(ctx, other, coll, id)
	}
	if err != nil {
		return nil, fail(err)
	}
	if !ok || c.Expired(j, s.now()) {
		return nil, model.NotFound("job %q does not exist in collection %q (finished jobs are removed after the collection's retention)", id, coll)
	}
	return j, nil
}

// DeleteJob removes a job. A finished job past its collection's retention
// is gone to reads (model.Collection.Expired): deleting it answers 404,
// as it would once the slot leader's upkeep had removed it.
func (s *Service) DeleteJob(ctx context.Context, coll, id string) error {
	c, err := s.knownCollection(ctx, coll)
	if err != nil {
		return err
	}
	sl, other, alt := s.jobSlots(coll, id)
	stamp := s.now()
	res, err := s.fwd.ProposeSlot(ctx, sl, &raftfsm.Delete{Coll: coll, ID: id})
	if err == nil && res[0].Code == model.CodeNotFound && alt {
		sl = other
		res, err = s.fwd.ProposeSlot(ctx, other, &raftfsm.Delete{Coll: coll, ID: id})
	}
	if unknown(err) {
		res, err = s.resolveDelete(ctx, sl, c, id, stamp)
	}
	if err != nil {
		return fail(err)
	}
	switch {
	case res[0].Code == model.CodeNotFound,
		res[0].Code == model.CodeOK && res[0].Job != nil && c.Expired(res[0].Job, stamp):
		return model.NotFound("job %q does not exist in collection %q", id, coll)
	case res[0].Code == model.CodeFiring:
		return model.Firing(res[0].Job)
	}
	return nil
}

// resolveDelete finds out the outcome of a DELETE whose proposal's outcome
// was unknown (see resolve.go). Once a leader answers, a job still there
// that was created before the DELETE began (stamp) was not deleted by it
// (and cannot be any more), and the delete is sent again — for that
// incarnation only (DeleteIncarnation). A job created after the DELETE
// began may be its client's: one that gave up waiting, deleted nothing it
// knew of, created the job anew and went on; it stays, and the outcome is
// unknown. A job gone leaves it unknown too: deleted by the earlier
// attempt, or before it (another delete, retention), which 204 and 404
// would each answer wrongly in one case (nemesis seed
// 9436398528753521832). A job still there but past its retention at the
// DELETE's stamp was gone to reads when the DELETE began: 404, whether or
// not the earlier attempt removed it.
func (s *Service) resolveDelete(ctx context.Context, sl int, c *model.Collection, id string, stamp int64) ([]model.Result, error) {
	coll := c.Name
	r := newResolver(context.WithoutCancel(ctx))
	defer r.cancel()
	for r.next() {
		j, found, err := s.fwd.GetJob(r.ctx, sl, coll, id)
		if err != nil {
			continue // no leader to ask yet
		}
		if found && c.Expired(j, stamp) {
			return []model.Result{{Code: model.CodeNotFound}}, nil
		}
		if !found || j.CreatedAt > stamp {
			break
		}
		res, err := s.fwd.ProposeSlot(r.ctx, sl, &raftfsm.DeleteIncarnation{Coll: coll, ID: id, CreatedAt: j.CreatedAt})
		if inconclusive(err) {
			continue // read again
		}
		if err != nil || res[0].Code != model.CodeNotFound {
			return res, err
		}
		break // gone between the read and the delete: not to be told apart
	}
	s.log.Warn("a DELETE's outcome stayed unknown", "collection", coll, "id", id)
	return nil, model.ErrOutcomeUnknown
}

// ListJobs lists a collection's jobs: every slot lists its part in order
// and the pages are merged. A slot that stopped early (its page limit or
// scan budget) bounds how far the merged page can go, so the next cursor
// never skips a job.
func (s *Service) ListJobs(ctx context.Context, q model.ListQuery) ([]*model.Job, *model.ListPos, error) {
	c, err := s.knownCollection(ctx, q.Coll)
	if err != nil {
		return nil, nil, err
	}
	count := s.slotCount()
	pages := make([]model.ListPage, count)
	errs := make([]error, count)
	var wg sync.WaitGroup
	only := -1
	if q.Schedule != "" {
		only = s.slotOf(q.Coll, q.Schedule) // occurrences live in their schedule's slot
	}
	for sl := 0; sl < count; sl++ {
		if only >= 0 && sl != only {
			continue
		}
		wg.Add(1)
		go func(sl int) {
			defer wg.Done()
			pages[sl], errs[sl] = s.fwd.ListSlot(ctx, sl, q)
		}(sl)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, nil, fail(err)
	}
	now := s.now()
	jobs, next := mergePages(pages, q.Limit, func(j *model.Job) bool { return c.Expired(j, now) })
	return jobs, next, nil
}

// mergePages merges per-slot pages (each ordered) into one page of at
// most limit jobs and the position to continue from (nil at the end).
// Jobs hide says are gone (past retention) are left out; the position
// still moves past them.
func mergePages(pages []model.ListPage, limit int, hide func(*model.Job) bool) ([]*model.Job, *model.ListPos) {
	var bound *model.ListPos
	var all []*model.Job
	for i := range pages {
		p := &pages[i]
		all = append(all, p.Jobs...)
		if p.Stopped && (bound == nil || p.Pos.Less(*bound)) {
			pos := p.Pos
			bound = &pos
		}
	}
	sort.Slice(all, func(i, j int) bool {
		return model.ListPos{Trigger: all[i].TriggerTime, ID: all[i].ID}.Less(model.ListPos{Trigger: all[j].TriggerTime, ID: all[j].ID})
	})
	var out []*model.Job
	for _, j := range all {
		pos := model.ListPos{Trigger: j.TriggerTime, ID: j.ID}
		if bound != nil && bound.Less(pos) {
			break
		}
		if hide != nil && hide(j) {
			continue
		}
		if len(out) == limit {
			last := out[len(out)-1]
			return out, &model.ListPos{Trigger: last.TriggerTime, ID: last.ID}
		}
		out = append(out, j)
	}
	return out, bound
}

// asCreated is job as its create made it: version 1, scheduled at its
// trigger time, no attempt yet. A resolved create answers it, so the 201
// describes the create, not whatever happened to the job since.
func asCreated(j *model.Job, trigger int64) *model.Job {
	if j.Version <= 1 {
		return j
	}
	c := *j
	c.Version, c.Status, c.TriggerTime, c.DueTime, c.Attempts = 1, model.StatusScheduled, trigger, trigger, 0
	c.UpdatedAt, c.FinishedAt, c.LastError = j.CreatedAt, 0, ""
	return &c
}

// jobSlots is the slot a job of this id is made in (home), and the other
// slot a job of that id may live in (alt reports whether there is one).
//
// An id shaped like a schedule's occurrence ("{schedule}@{ms}",
// model.SplitOccurrenceID) is made in its schedule's slot, where the
// schedule makes its occurrences: that one slot then decides whether the
// id exists, so a user's job and an occurrence never share an id. (When a
// user's job went where its id hashes, both were made, and both fired
// with the same Idempotency-Key: a receiver that deduplicates dropped
// one. A black-box review found it.) Any other id is made where it hashes
// (API.md §2). other is the hash slot of an occurrence-shaped id, when it
// differs from home: a job of that id made by an earlier version lives
// there, so reads, deletes, PUTs and creates look there too.
func (s *Service) jobSlots(coll, id string) (home, other int, alt bool) {
	own := s.slotOf(coll, id)
	sc, _, ok := model.SplitOccurrenceID(id)
	if !ok {
		return own, 0, false
	}
	home = s.slotOf(coll, sc)
	return home, own, home != own
}
