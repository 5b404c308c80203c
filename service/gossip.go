package service

import (
	"context"

	"github.com/timemachine-db/timemachine/model"
)

// GossipKeys lists or changes the gossip encryption keys of every member
// (the cluster's serf key manager does it).
func (s *Service) GossipKeys(ctx context.Context, op, key string) (*model.GossipKeyring, error) {
	kr, err := s.cluster.GossipKeys(ctx, op, key)
	return kr, fail(err)
}
