package service

import (
	"github.com/timemachine-db/timemachine/model"
)

// Default limits on the meta state: every node keeps all collections and
// routes in memory and every meta write copies them, so they must stay
// bounded (--max-collections, --max-routes).
const (
	DefaultMaxCollections = 10000
	DefaultMaxRoutes      = 10000
)

// admitCollection refuses a new collection past the limit. Replacing an
// existing one is always allowed. The count is this node's copy of the
// meta state, so concurrent creates on several nodes may pass the limit
// by a few; it bounds growth, it is not a quota.
func (s *Service) admitCollection(name string) error {
	st := s.meta.State()
	if _, ok := st.Collections.Get(name); ok || s.maxCollections <= 0 {
		return nil
	}
	if n := st.Collections.Len(); n >= s.maxCollections {
		return model.Conflict("the cluster has %d collections, the limit (--max-collections %d); delete unused ones or raise the limit on every node", n, s.maxCollections)
	}
	return nil
}

// admitRoute refuses a new route past the limit.
func (s *Service) admitRoute(name string) error {
	st := s.meta.State()
	if _, ok := st.Routes.Get(name); ok || s.maxRoutes <= 0 {
		return nil
	}
	if n := st.Routes.Len(); n >= s.maxRoutes {
		return model.Conflict("the cluster has %d routes, the limit (--max-routes %d); delete unused ones or raise the limit on every node", n, s.maxRoutes)
	}
	return nil
}
