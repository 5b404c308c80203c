package slot

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
	"github.com/timemachine-db/timemachine/raftfsm"
)

// snapshotStore is the slot's raft.SnapshotStore: a file snapshot store
// whose local snapshots are pointers to the state in Pebble (see
// raftfsm/snapshot.go). When raft opens one to send it to a follower, the
// slot's current state is streamed into a temporary file first, so the
// follower receives the full form with its size known up front.
type snapshotStore struct {
	*raft.FileSnapshotStore
	fsm *raftfsm.SlotFSM
	dir string
}

// Open implements raft.SnapshotStore.
func (s *snapshotStore) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, rc, err := s.FileSnapshotStore.Open(id)
	if err != nil {
		return nil, nil, err
	}
	br := bufio.NewReader(rc)
	head, _ := br.Peek(8)
	if !raftfsm.IsPointerSnapshot(head) {
		return meta, readCloser{Reader: br, Closer: rc}, nil
	}
	_ = rc.Close()
	tmp, err := os.CreateTemp(s.dir, "stream-*.tmp")
	if err != nil {
		return nil, nil, fmt.Errorf("stream snapshot %s: %w", id, err)
	}
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if _, err := s.fsm.StreamState(bw); err != nil {
		removeTemp(tmp)
		return nil, nil, err
	}
	if err := bw.Flush(); err != nil {
		removeTemp(tmp)
		return nil, nil, fmt.Errorf("stream snapshot %s: %w", id, err)
	}
	size, err := tmp.Seek(0, io.SeekCurrent)
	if err == nil {
		_, err = tmp.Seek(0, io.SeekStart)
	}
	if err != nil {
		removeTemp(tmp)
		return nil, nil, fmt.Errorf("stream snapshot %s: %w", id, err)
	}
	full := *meta
	full.Size = size
	return &full, tempReader{f: tmp, Reader: bufio.NewReaderSize(tmp, 1<<20)}, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// tempReader deletes its file when closed.
type tempReader struct {
	io.Reader
	f *os.File
}

func (t tempReader) Close() error {
	removeTemp(t.f)
	return nil
}

func removeTemp(f *os.File) {
	_ = f.Close()
	_ = os.Remove(f.Name())
}

// removeStaleStreams deletes the temporary files of snapshot streams that a
// crash interrupted (a stream's file is removed when the stream is closed,
// which a crash skips). Nothing else writes stream-*.tmp in a replica's
// directory, and the replica is not open yet, so none is in use.
func removeStaleStreams(dir string, log *slog.Logger) {
	stale, err := filepath.Glob(filepath.Join(dir, "stream-*.tmp"))
	if err != nil {
		return // only a malformed pattern fails, and this one is fixed
	}
	for _, f := range stale {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			log.Warn("cannot remove a stale snapshot stream file", "file", f, "error", err)
			continue
		}
		log.Info("removed a snapshot stream file left by a crash", "file", f)
	}
}
