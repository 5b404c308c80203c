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
	// A lone replica, or a fresh group, always starts with an election:
	// raft reports it as a warning, it is routine.
	if lvl == slog.LevelWarn && strings.Contains(line, "heartbeat timeout reached, starting election") {
		lvl = slog.LevelInfo
	}
	// Drop hclog's level prefix ("[INFO]  name: ").
	if i := strings.Index(line, "]"); i >= 0 && i < 10 {
		line = strings.TrimSpace(line[i+1:])
	}
	w.log.Log(context.Background(), lvl, line)
}

var _ io.Writer = (*slogWriter)(nil)
