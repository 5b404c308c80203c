package raftgroup

import (
	"context"
	"log/slog"
	"sync"
	"testing"
)

type capture struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (c *capture) Enabled(context.Context, slog.Level) bool { return true }
func (c *capture) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	c.recs = append(c.recs, r)
	c.mu.Unlock()
	return nil
}
func (c *capture) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *capture) WithGroup(string) slog.Handler      { return c }

// Routine per-RPC failures of hashicorp/raft (a peer being removed or
// restarted, a connection closed, an election) are not logged at WARN or
// ERROR; what an operator must act on keeps its level.
func TestRaftLogLevels(t *testing.T) {
	for _, tc := range []struct {
		line string
		want slog.Level
	}{
		{`[ERROR] slot-3: failed to appendEntries to: peer="{Voter n2 127.0.0.1:7002}" error=EOF`, slog.LevelDebug},
		{`[ERROR] slot-3: failed to heartbeat to: peer=127.0.0.1:7002 backoff time=10ms error="dial tcp 127.0.0.1:7002: connect: connection refused"`, slog.LevelDebug},
		{`[ERROR] slot-3: failed to pipeline appendEntries: error="connection reset by peer"`, slog.LevelDebug},
		{`[ERROR] slot-3: failed to make requestVote RPC: target="{Voter n2 127.0.0.1:7002}" error=EOF term=4`, slog.LevelDebug},
		{`[ERROR] slot-3: failed to decode incoming command: error="read tcp 127.0.0.1:7001->127.0.0.1:51234: read: connection reset by peer"`, slog.LevelDebug},
		{`[WARN]  slot-3: failed to contact: server-id=n4 time=2.5s`, slog.LevelDebug},
		{`[WARN]  slot-3: failed to contact quorum of nodes, stepping down`, slog.LevelInfo},
		{`[WARN]  slot-3: rejecting vote request since we have a leader: from=127.0.0.1:7002 leader=127.0.0.1:7001`, slog.LevelDebug},
		{`[WARN]  slot-3: heartbeat timeout reached, starting election: last-leader-addr= last-leader-id=`, slog.LevelInfo},
		{`[WARN]  slot-3: appendEntries rejected, sending older logs: peer="{Nonvoter n4 127.0.0.1:7004}" next=1`, slog.LevelDebug},
		{`[ERROR] slot-3: failed to take snapshot: error="nothing new to snapshot"`, slog.LevelDebug},
		// A leader whose log was compacted sends the new replica a
		// snapshot instead.
		{`[ERROR] slot-3: failed to get log: index=1 error="log not found"`, slog.LevelDebug},
		// Not routine: these stay.
		{`[ERROR] slot-3: failed to get log: index=7 error="read /data/raft.db: input/output error"`, slog.LevelError},
		{`[WARN]  slot-3: failed to get log entry: index=7 error="log not found"`, slog.LevelWarn},
		{`[ERROR] slot-3: failed to commit logs: error="disk full"`, slog.LevelError},
		{`[WARN]  slot-3: failed to read metadata: error=EOF`, slog.LevelWarn},
		{`[INFO]  slot-3: entering follower state: follower="Node at 127.0.0.1:7001 [Follower]"`, slog.LevelInfo},
	} {
		c := &capture{}
		w := &slogWriter{log: slog.New(c)}
		if _, err := w.Write([]byte(tc.line + "\n")); err != nil {
			t.Fatal(err)
		}
		if len(c.recs) != 1 || c.recs[0].Level != tc.want {
			t.Errorf("%s\n  logged %v, want level %v", tc.line, c.recs, tc.want)
		}
	}
}
