package raftgroup

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// newRaftLogger adapts hashicorp/raft's hclog output to slog.
func newRaftLogger(log *slog.Logger, name, level string) hclog.Logger {
	if level == "" {
		level = "warn"
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:        name,
		Level:       hclog.LevelFromString(level),
		Output:      &slogWriter{log: log.With("component", "raft", "group", name)},
		DisableTime: true,
	})
}

// slogWriter turns hclog's text lines into slog records at the matching
// level.
type slogWriter struct {
	log *slog.Logger
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *slogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	sc := bufio.NewScanner(bytes.NewReader(w.buf.Bytes()))
	consumed := 0
	for sc.Scan() {
		line := sc.Text()
		consumed += len(line) + 1
		w.emit(line)
	}
	if consumed > w.buf.Len() {
		consumed = w.buf.Len()
	}
	w.buf.Next(consumed)
	return len(p), nil
}

func (w *slogWriter) emit(line string) {
	lvl := slog.LevelInfo
	switch {
	case strings.Contains(line, "[ERROR]"):
		lvl = slog.LevelError
	case strings.Contains(line, "[WARN]"):
		lvl = slog.LevelWarn
	case strings.Contains(line, "[DEBUG]"), strings.Contains(line, "[TRACE]"):
		lvl = slog.LevelDebug
	}
	if lvl >= slog.LevelWarn {
		lvl = demote(line, lvl)
	}
	// Drop hclog's level prefix ("[INFO]  name: ").
	if i := strings.Index(line, "]"); i >= 0 && i < 10 {
		line = strings.TrimSpace(line[i+1:])
	}
	w.log.Log(context.Background(), lvl, line)
}

var _ io.Writer = (*slogWriter)(nil)

// routine lists what hashicorp/raft logs at WARN or ERROR although nothing
// is wrong that an operator must act on: a peer being removed or restarted
// refuses connections, a connection closes with EOF, a lagging follower is
// sent older entries or a snapshot, votes are refused during an election.
// Each line is about one RPC, and a single rebalance produced dozens of
// them at ERROR. They go to DEBUG (INFO for the few that say what the
// group did); the cluster's replica watcher logs a WARN, once, when a
// replica stays unreachable or behind long enough to need attention.
//
// "failed to get log … log not found" is one of them when a leader whose
// log was compacted (admin compact, or its own snapshots) adds a replica
// or catches one up: raft then sends a snapshot instead (replicateTo's
// fallback, logged at INFO as "installing snapshot on"). A black-box
// review saw one such ERROR per slot in every move after a compact. Raft
// logs the same line in two other places, a committed entry missing while
// applying and at start, and panics right after each: the panic says it.
var routine = []struct {
	substr string
	level  slog.Level
	also   string // when set, the line must contain it too
}{
	{"failed to appendEntries to", slog.LevelDebug, ""},
	{"failed to heartbeat to", slog.LevelDebug, ""},
	{"failed to pipeline appendEntries", slog.LevelDebug, ""},
	{"failed to start pipeline replication to", slog.LevelDebug, ""},
	{"failed to make requestVote RPC", slog.LevelDebug, ""},
	{"failed to send snapshot to", slog.LevelDebug, ""},
	{"failed to decode incoming command", slog.LevelDebug, ""},
	{"failed to flush response", slog.LevelDebug, ""},
	{"failed to accept connection", slog.LevelDebug, ""},
	{"failed to contact quorum of nodes", slog.LevelInfo, ""},
	{"failed to contact", slog.LevelDebug, ""},
	{"failed to get previous log", slog.LevelDebug, ""},
	{"failed to get log: index=", slog.LevelDebug, `error="log not found"`},
	{"appendEntries rejected, sending older logs", slog.LevelDebug, ""},
	{"previous log term mis-match", slog.LevelDebug, ""},
	{"clearing log suffix", slog.LevelDebug, ""},
	{"peer has newer term, stopping replication", slog.LevelDebug, ""},
	{"rejecting vote request", slog.LevelDebug, ""},
	{"rejecting pre-vote request", slog.LevelDebug, ""},
	{"duplicate requestVote from", slog.LevelDebug, ""},
	{"unable to get address for server", slog.LevelDebug, ""},
	{"skipping application of old log", slog.LevelDebug, ""},
	{"not part of stable configuration, aborting election", slog.LevelDebug, ""},
	{"heartbeat timeout reached, not part of a stable configuration", slog.LevelDebug, ""},
	{"nothing new to snapshot", slog.LevelDebug, ""},
	// A lone replica, or a fresh group, always starts with an election.
	{"heartbeat timeout reached, starting election", slog.LevelInfo, ""},
	{"Election timeout reached, restarting election", slog.LevelInfo, ""},
	{"new leader elected, stepping down", slog.LevelInfo, ""},
}

// demote returns the level a raft WARN/ERROR line is logged at.
func demote(line string, lvl slog.Level) slog.Level {
	for _, r := range routine {
		if strings.Contains(line, r.substr) && strings.Contains(line, r.also) {
			return r.level
		}
	}
	return lvl
}
