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

// RaftStores are the durable stores of one raft group replica: its log,
// its stable state (term, vote) and its snapshots.
type RaftStores struct {
	Log       raft.LogStore
	Stable    raft.StableStore
	Snapshots *raft.FileSnapshotStore
	dir       string
	close     func() error
}

// OpenRaftStores gives a raft group its own raft-boltdb file under dir (the
// meta group: small and written rarely) and a file snapshot store that
// keeps one snapshot.
//
// Bolt runs with NoFreelistSync and the hashmap freelist, and with a lock
// timeout so a second process on the same data directory fails fast
// instead of hanging.
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
	return &RaftStores{Log: ls, Stable: ls, Snapshots: ss, dir: dir, close: ls.Close}, nil
}

// OpenGroupStores gives a raft group its log and stable state inside the
// node's shared RaftLogDB (its keys there are prefixed by name) and its own
// file snapshot store under dir.
func OpenGroupStores(db *RaftLogDB, name, dir string, logOutput io.Writer) (*RaftStores, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create raft dir %s: %w", dir, err)
	}
	gl, err := db.Group(name)
	if err != nil {
		return nil, err
	}
	ss, err := raft.NewFileSnapshotStore(dir, 1, logOutput)
	if err != nil {
		return nil, fmt.Errorf("open raft snapshots in %s: %w", dir, err)
	}
	return &RaftStores{Log: gl, Stable: gl, Snapshots: ss, dir: dir, close: func() error { return nil }}, nil
}

// Close closes what the stores own (a shared RaftLogDB stays open).
func (r *RaftStores) Close() error {
	if err := r.close(); err != nil {
		return fmt.Errorf("close raft stores in %s: %w", r.dir, err)
	}
	return nil
}

// Size is the bytes on disk under the replica's raft directory (snapshots,
// and the log when it has its own file).
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
