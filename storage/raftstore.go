package storage

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	bolt "go.etcd.io/bbolt"
)

// RaftStores are the durable stores of one raft group replica.
type RaftStores struct {
	Log       *raftboltdb.BoltStore
	Snapshots *raft.FileSnapshotStore
	dir       string
}

// OpenRaftStores opens (creating if needed) the bolt log/stable store and
// the file snapshot store of one raft group replica under dir.
//
// Bolt runs with NoFreelistSync and the hashmap freelist: the freelist is
// rebuilt on open instead of being rewritten on every commit, which halves the
// bytes each fsync carries once the log has churned. Open has a timeout so a
// second process on the same data directory fails fast instead of hanging on
// the file lock.
func OpenRaftStores(dir string, logOutput io.Writer) (*RaftStores, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create raft dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, "raft.db")
	ls, err := raftboltdb.New(raftboltdb.Options{
		Path: path,
		BoltOptions: &bolt.Options{
			Timeout:        2 * time.Second,
			NoFreelistSync: true,
			FreelistType:   bolt.FreelistMapType,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("open raft log %s: %w (another process may be using this data directory; if the file is corrupt, move it aside and let the replica be re-created from its peers)", path, err)
	}
	ss, err := raft.NewFileSnapshotStore(dir, 1, logOutput)
	if err != nil {
		_ = ls.Close()
		return nil, fmt.Errorf("open raft snapshots in %s: %w", dir, err)
	}
	return &RaftStores{Log: ls, Snapshots: ss, dir: dir}, nil
}

// Close closes the log store.
func (r *RaftStores) Close() error {
	if err := r.Log.Close(); err != nil {
		return fmt.Errorf("close raft log in %s: %w", r.dir, err)
	}
	return nil
}

// Size is the bytes on disk of the log file and the snapshots.
func (r *RaftStores) Size() int64 {
	var total int64
	_ = filepath.Walk(r.dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			total += info.Size()
		}
		return nil
	})
	return total
}

// Dir is the replica's raft directory.
func (r *RaftStores) Dir() string { return r.dir }
