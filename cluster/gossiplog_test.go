package cluster

import (
	"context"
	"log/slog"
	"sync"
	"testing"
)

// recordLevels is a slog handler that keeps the level of every record.
type recordLevels struct {
	mu     sync.Mutex
	levels []slog.Level
	msgs   []string
}

func (h *recordLevels) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordLevels) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.levels = append(h.levels, r.Level)
	h.msgs = append(h.msgs, r.Message)
	return nil
}
func (h *recordLevels) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordLevels) WithGroup(string) slog.Handler      { return h }

// Each gossip line is logged at the level its prefix gives, except the
// junk a stranger can make (DEBUG, summed up at INFO) and the lines a
// node's own stop makes (DEBUG: a clean SIGTERM logs no ERROR).
func TestGossipLogLevels(t *testing.T) {
	for _, c := range []struct {
		name, line string
		want       slog.Level
	}{
		{"error", "[ERR] memberlist: Push/Pull with n2 failed: dial tcp 127.0.0.1:7947: connect: connection refused", slog.LevelError},
		{"warning", "[WARN] memberlist: Was able to connect to n2 over TCP but UDP probes failed", slog.LevelWarn},
		{"info", "[INFO] serf: EventMemberJoin: n2 127.0.0.1", slog.LevelInfo},
		{"debug", "[DEBUG] memberlist: Stream connection from=127.0.0.1:50000", slog.LevelDebug},
		{"junk", "[ERR] memberlist: Decrypt packet failed: no installed keys could decrypt the message from=127.0.0.1:1234", slog.LevelDebug},
		{"own stop", "[ERR] memberlist: Failed to send UDP ping: write udp 127.0.0.1:39563->127.0.0.1:39564: use of closed network connection", slog.LevelDebug},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := &recordLevels{}
			w := &gossipLogWriter{log: slog.New(h)}
			if _, err := w.Write([]byte(c.line + "\n")); err != nil {
				t.Fatal(err)
			}
			if len(h.levels) == 0 {
				t.Fatal("nothing logged")
			}
			if h.levels[0] != c.want {
				t.Errorf("logged at %v, want %v: %q", h.levels[0], c.want, h.msgs[0])
			}
		})
	}
}
