package service

import (
	"context"

	"github.com/timemachine-db/timemachine/model"
)

// The cluster and admin entry points delegate to the cluster control
// plane; only the mapping of its errors is done here.

// Cluster describes the cluster from this node's view.
func (s *Service) Cluster(ctx context.Context) (*model.ClusterInfo, error) {
	info, err := s.cluster.Info(ctx)
	return info, fail(err)
}

// Ready returns nil when this node is in the cluster and every slot has a
// leader, else an error saying why not.
func (s *Service) Ready() error {
	if s.ready != nil {
		if err := s.ready(); err != nil {
			return err
		}
	}
	return s.cluster.Ready()
}

// Rebalance plans (dryRun) or commits the fewest replica moves that even
// out replica and leader counts.
func (s *Service) Rebalance(ctx context.Context, dryRun bool) ([]model.Move, error) {
	moves, err := s.cluster.Rebalance(ctx, dryRun)
	return moves, fail(err)
}

// Compact snapshots every replica of every live node and compacts their
// storage.
func (s *Service) Compact(ctx context.Context) ([]model.CompactResult, error) {
	res, err := s.cluster.Compact(ctx)
	return res, fail(err)
}

// TransferSlot makes node to the preferred leader of a slot and moves the
// leadership there (a planned transfer).
func (s *Service) TransferSlot(ctx context.Context, slot int, to string) (*model.TransferResult, error) {
	res, err := s.cluster.TransferSlot(ctx, slot, to)
	return res, fail(err)
}

// DrainNode marks a node draining: its replicas and leaderships move away.
func (s *Service) DrainNode(ctx context.Context, id string) (*model.DrainResult, error) {
	res, err := s.cluster.DrainNode(ctx, id)
	return res, fail(err)
}

// RemoveNode takes a node that holds nothing (or, with force, a dead one)
// out of the cluster.
func (s *Service) RemoveNode(ctx context.Context, id string, force bool) (*model.RemoveResult, error) {
	res, err := s.cluster.RemoveNode(ctx, id, force)
	return res, fail(err)
}
