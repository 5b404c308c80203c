package raftgroup

import (
	"errors"

	"github.com/hashicorp/raft"

	"github.com/timemachine-db/timemachine/storage"
)

// Errors a caller can act on. Raft's own errors are mapped to these, so
// nothing above this package needs to know hashicorp/raft's.
var (
	// ErrNotLeader: this replica does not lead the group; Leader says who
	// does, if anyone.
	ErrNotLeader = errors.New("not the group's leader")
	// ErrUnknownOutcome: leadership changed while the write was in flight;
	// it may or may not have committed. Retrying a create with the same id
	// is safe.
	ErrUnknownOutcome = errors.New("leadership changed while the write was in flight; its outcome is unknown")
	// ErrClosed: the replica is shutting down.
	ErrClosed = errors.New("the replica is shutting down")
	// ErrOverloaded: the raft queue did not take the write in time.
	ErrOverloaded = errors.New("the group is overloaded")
	// ErrStorage: this node could not write the entry to its raft log (a
	// full disk, an I/O error). The entry was neither stored nor sent to
	// any follower, so nothing changed; the node is stopping.
	ErrStorage = errors.New("this node's storage failed")
)

func mapRaftErr(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return ErrNotLeader
	case errors.Is(err, raft.ErrLeadershipLost):
		return ErrUnknownOutcome
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrClosed
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return ErrOverloaded
	case errors.Is(err, storage.ErrFatal):
		return ErrStorage
	}
	return err
}
