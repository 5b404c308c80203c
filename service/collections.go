package service

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
)

// PutCollection creates (created=true) or replaces a collection.
func (s *Service) PutCollection(ctx context.Context, c model.Collection) (bool, error) {
	if err := s.admitCollection(c.Name); err != nil {
		return false, err
	}
	if err := s.sealCollection(&c); err != nil {
		return false, err
	}
	res, err := s.fwd.ProposeMeta(ctx, &raftfsm.PutCollection{C: c, Now: s.now()})
	if err != nil {
		return false, fail(err)
	}
	switch res[0].Code {
	case model.CodeRejected:
		return false, model.Conflict("collection %q is being deleted; wait for the deletion to finish, then create it again", c.Name)
	case model.CodeCreated:
		return true, nil
	}
	return false, nil
}

// GetCollection returns a collection's configuration.
//
// Settings reads catch up with the meta leader first (a read index), so a
// read through any node sees every write answered before it: read from
// this node's copy alone, a GET right after a PUT or DELETE through
// another node showed the old settings up to ~100 ms later (a black-box
// review: 36 of 100 rounds). It costs one round trip to the meta leader;
// without one it answers 503, as a job read without a slot leader does.
func (s *Service) GetCollection(ctx context.Context, name string) (*model.Collection, error) {
	st, err := s.catchUp(ctx)
	if err != nil {
		return nil, err
	}
	c, ok := st.Collection(name)
	if !ok {
		return nil, model.NotFound("collection %q does not exist", name)
	}
	return c, nil
}

// ListCollections lists every collection, the implicit default included.
func (s *Service) ListCollections(ctx context.Context) ([]*model.Collection, error) {
	st, err := s.catchUp(ctx)
	if err != nil {
		return nil, err
	}
	return st.CollectionList(), nil
}

// DeleteCollection marks the collection as deleting (no new jobs), purges
// its jobs from every slot, then forgets it. Each step is idempotent, so a
// failed deletion is finished by calling DELETE again, and a node restart
// resumes it (ResumeDeletions).
func (s *Service) DeleteCollection(ctx context.Context, name string) error {
	if name == model.DefaultCollection {
		return model.Invalid("the default collection cannot be deleted; delete its jobs instead")
	}
	// Through knownCollection, which catches up before a 404: this node's
	// own copy may not have the collection yet when it was made through
	// another node a moment ago (TestCollectionLifecycleThroughAnyNode).
	if _, err := s.knownCollection(ctx, name); err != nil {
		return err
	}
	res, err := s.fwd.ProposeMeta(ctx, &raftfsm.MarkCollectionDeleting{Name: name, Now: s.now()})
	if err != nil {
		return fail(err)
	}
	if res[0].Code == model.CodeNotFound {
		return model.NotFound("collection %q does not exist", name)
	}
	// The incarnation being deleted, as the meta group has it now (this
	// node's copy may trail the mark just committed).
	st, err := s.catchUp(ctx)
	if err != nil {
		return fail(err)
	}
	c, ok := st.Collection(name)
	if !ok {
		return nil // forgotten already: another DELETE finished it
	}
	return s.finishDeletion(ctx, c)
}

// finishDeletion purges a deleting collection from every slot, fencing
// off its incarnation there (raftfsm, collection fences), then forgets it.
func (s *Service) finishDeletion(ctx context.Context, c *model.Collection) error {
	name := c.Name
	count := s.slotCount()
	var wg sync.WaitGroup
	errs := make([]error, count)
	for sl := 0; sl < count; sl++ {
		wg.Add(1)
		go func(sl int) {
			defer wg.Done()
			for {
				res, err := s.fwd.ProposeSlot(ctx, sl, &raftfsm.PurgeCollection{Coll: name, Limit: 5000, Fence: c.Incarnation + 1})
				if err != nil {
					errs[sl] = err
					return
				}
				if !res[0].More {
					return
				}
			}
		}(sl)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fail(fmt.Errorf("purging collection %q (retry the DELETE to finish it): %w", name, err))
	}
	if _, err := s.fwd.ProposeMeta(ctx, &raftfsm.ForgetCollection{Name: name}); err != nil {
		return fail(err)
	}
	return nil
}

// ResumeDeletions finishes the collection deletions a restart cut short.
// The node runs it once the cluster is ready, on the meta leader; it
// returns when ctx ends.
func (s *Service) ResumeDeletions(ctx context.Context) {
	if err := s.cluster.WaitReady(ctx); err != nil || !s.meta.IsLeader() {
		return
	}
	for _, c := range s.meta.State().CollectionList() {
		if !c.Deleting {
			continue
		}
		s.log.Info("resuming deletion of collection", "collection", c.Name)
		if err := s.finishDeletion(ctx, c); err != nil {
			s.log.Warn("resuming collection deletion failed; retry DELETE /v1/collections/"+c.Name, "error", err)
		}
	}
}
