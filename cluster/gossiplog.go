package cluster

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// gossipLogWriter forwards the standard-library log lines of serf and
// memberlist to slog at the level their "[LEVEL]" prefix gives — except
// the lines memberlist writes for every malformed, unauthenticated or
// undecryptable packet or stream it receives. Anybody who can send a UDP
// datagram to the serf port can make those (5,000 junk datagrams once
// wrote 4,858 ERROR lines), so they are logged at DEBUG and summed up in
// one INFO line at most every junkSummaryEvery.
type gossipLogWriter struct {
	log *slog.Logger

	mu       sync.Mutex
	junk     int
	last     string
	lastSent time.Time
}

const junkSummaryEvery = 10 * time.Second

// junkMarkers identify memberlist's lines about traffic it could not read
// or authenticate (memberlist/net.go); they say nothing about the health
// of real members.
var junkMarkers = []string{
	"Decrypt packet failed", "No installed keys could decrypt", "invalid checksum",
	"missing message type byte", "not supported", "Received invalid msgType",
	"Failed to decode", "Failed to decompress", "failed to receive", "Failed to receive",
	"unacceptable label", "unexpected double", "Failed to read remote state",
	"Got ping for unexpected node", "Compound request had", "Remote node state size",
	"Encryption is configured but remote state is not encrypted",
}

// isShutdownLine reports a line memberlist writes when a send or a read
// meets its own socket already closed: that happens only while this node
// stops (a probe or gossip round racing Shutdown), so a clean SIGTERM
// would otherwise end with an ERROR ("Failed to send UDP ping: … use of
// closed network connection").
func isShutdownLine(line string) bool {
	return strings.Contains(line, "memberlist:") && strings.Contains(line, "use of closed network connection")
}

func isJunkLine(line string) bool {
	if !strings.Contains(line, "memberlist:") {
		return false
	}
	for _, m := range junkMarkers {
		if strings.Contains(line, m) {
			return true
		}
	}
	return false
}

func (w *gossipLogWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	lvl := slog.LevelInfo
	switch {
	case strings.Contains(line, "[ERR]"):
		lvl = slog.LevelError
	case strings.Contains(line, "[WARN]"):
		lvl = slog.LevelWarn
	case strings.Contains(line, "[DEBUG]"):
		lvl = slog.LevelDebug
	}
	if i := strings.Index(line, "] "); i >= 0 && i < 12 {
		line = line[i+2:]
	}
	if lvl >= slog.LevelWarn && isShutdownLine(line) {
		w.log.Debug(line)
		return len(p), nil
	}
	if lvl >= slog.LevelWarn && isJunkLine(line) {
		w.log.Debug(line)
		w.countJunk(line)
		return len(p), nil
	}
	w.log.Log(context.Background(), lvl, line)
	return len(p), nil
}

func (w *gossipLogWriter) countJunk(line string) {
	w.mu.Lock()
	w.junk++
	w.last = line
	now := time.Now()
	if now.Sub(w.lastSent) < junkSummaryEvery {
		w.mu.Unlock()
		return
	}
	n, last := w.junk, w.last
	w.junk, w.lastSent = 0, now
	w.mu.Unlock()
	w.log.Info("dropped gossip traffic that could not be read or authenticated (a node with another --gossip-key, or stray packets on the serf port); details at debug level",
		"dropped", n, "last", last)
}
