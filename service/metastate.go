package service

import (
	"context"

	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
)

// Existence checks against the meta state. This node's copy may trail a
// change made through another node a moment ago, so before answering that
// a collection or route does not exist, a check catches up with the meta
// leader (forward.CatchUpMeta); when it cannot, the answer is unavailable,
// never a 404 (docs/architecture.md#the-meta-state-and-deletions).

// catchUp brings the local meta state up to the meta leader's.
func (s *Service) catchUp(ctx context.Context) (*raftfsm.MetaState, error) {
	st, err := s.fwd.CatchUpMeta(ctx)
	if err != nil {
		return nil, fail(err)
	}
	return st, nil
}

// liveCollection returns a collection that can take jobs, and the meta
// state it was found in.
func (s *Service) liveCollection(ctx context.Context, name string) (*model.Collection, *raftfsm.MetaState, error) {
	st := s.meta.State()
	c, ok := st.Collection(name)
	if !ok {
		var err error
		if st, err = s.catchUp(ctx); err != nil {
			return nil, nil, err
		}
		c, ok = st.Collection(name)
	}
	if ok && c.Deleting {
		// Rare: look again as of now. The deletion may have finished
		// (a 204 already answered through another node): then it is
		// gone, a 404, not "being deleted".
		var err error
		if st, err = s.catchUp(ctx); err != nil {
			return nil, nil, err
		}
		c, ok = st.Collection(name)
	}
	if !ok {
		return nil, nil, model.NotFound("collection %q does not exist; create it with PUT /v1/collections/%s", name, name)
	}
	if c.Deleting {
		return nil, nil, model.Conflict("collection %q is being deleted; wait for DELETE /v1/collections/%s to finish, then create it again", name, name)
	}
	return c, st, nil
}

// collectionGone is the answer to a write the slot refused because the
// collection was deleted after this node checked it (raftfsm, collection
// fences): this node's view of the collection trailed the deletion.
func collectionGone(name string) *model.Error {
	return model.Conflict("collection %q was deleted while this request was on its way (nothing was written); create the collection again with PUT /v1/collections/%s, then retry", name, name)
}

// knownCollection returns a collection (deleting or not).
func (s *Service) knownCollection(ctx context.Context, name string) (*model.Collection, error) {
	if c, ok := s.meta.State().Collection(name); ok {
		return c, nil
	}
	st, err := s.catchUp(ctx)
	if err != nil {
		return nil, err
	}
	if c, ok := st.Collection(name); ok {
		return c, nil
	}
	return nil, model.NotFound("collection %q does not exist", name)
}

// routesKnown reports whether every route the inputs name is known.
func routesKnown(st *raftfsm.MetaState, in []model.JobInput) bool {
	for i := range in {
		if r := in[i].Spec.Route; r != "" && in[i].Err == nil {
			if _, ok := st.Route(r); !ok {
				return false
			}
		}
	}
	return true
}

func routeMissing(name string) *model.Error {
	return model.NotFound("route %q does not exist; create it with PUT /v1/routes/%s", name, name)
}
