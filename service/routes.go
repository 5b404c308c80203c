package service

import (
	"context"

	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
)

// PutRoute creates (created=true) or replaces a route.
func (s *Service) PutRoute(ctx context.Context, r model.Route) (bool, error) {
	if err := s.admitRoute(r.Name); err != nil {
		return false, err
	}
	if err := s.sealRoute(&r); err != nil {
		return false, err
	}
	res, err := s.fwd.ProposeMeta(ctx, &raftfsm.PutRoute{R: r, Now: s.now()})
	if err != nil {
		return false, fail(err)
	}
	return res[0].Code == model.CodeCreated, nil
}

// GetRoute returns a route.
// Like a collection's, a route's read catches up with the meta leader
// first (GetCollection).
func (s *Service) GetRoute(ctx context.Context, name string) (*model.Route, error) {
	st, err := s.catchUp(ctx)
	if err != nil {
		return nil, err
	}
	r, ok := st.Route(name)
	if !ok {
		return nil, model.NotFound("route %q does not exist", name)
	}
	return r, nil
}

// ListRoutes lists every route.
func (s *Service) ListRoutes(ctx context.Context) ([]*model.Route, error) {
	st, err := s.catchUp(ctx)
	if err != nil {
		return nil, err
	}
	return st.RouteList(), nil
}

// DeleteRoute removes a route. Jobs that still name it fail when they
// fire, with a last_error that says so.
func (s *Service) DeleteRoute(ctx context.Context, name string) error {
	res, err := s.fwd.ProposeMeta(ctx, &raftfsm.DeleteRoute{Name: name})
	if err != nil {
		return fail(err)
	}
	if res[0].Code == model.CodeNotFound {
		return model.NotFound("route %q does not exist", name)
	}
	return nil
}
