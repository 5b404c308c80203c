package node

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/serf"
)

// Serf tags every timemachine node publishes. The role tag keeps other
// serf users on the same network out of the cluster.
const (
	tagRole   = "role"
	roleValue = "timemachine"
	tagID     = "id"
	tagHTTP   = "http"
	tagBind   = "bind"
	tagExpect = "expect"
)

// member is a timemachine node as serf sees it.
type member struct {
	ID       string
	HTTPAddr string
	BindAddr string
	SerfAddr string
	Status   serf.MemberStatus
	Expect   int
}

// startSerf starts gossip on --serf-addr and joins --join. Serf keeps a
// snapshot in the data directory, so a restarted node rejoins the members
// it knew even without --join.
func (n *Node) startSerf(httpAddr, bindAddr string) error {
	host, portStr, err := net.SplitHostPort(n.cfg.SerfAddr)
	if err != nil {
		return fmt.Errorf("--serf-addr %q: %w", n.cfg.SerfAddr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("--serf-addr %q: bad port", n.cfg.SerfAddr)
	}
	conf := serf.DefaultConfig()
	conf.Init()
	conf.NodeName = n.id.NodeID
	conf.Tags = map[string]string{
		tagRole:   roleValue,
		tagID:     n.id.NodeID,
		tagHTTP:   httpAddr,
		tagBind:   bindAddr,
		tagExpect: strconv.Itoa(n.cfg.BootstrapExpect),
	}
	conf.EventCh = n.serfEvents
	if err := os.MkdirAll(filepath.Join(n.cfg.DataDir, "serf"), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Join(n.cfg.DataDir, "serf"), err)
	}
	conf.SnapshotPath = filepath.Join(n.cfg.DataDir, "serf", "snapshot")
	conf.RejoinAfterLeave = true
	conf.ReconnectTimeout = 72 * time.Hour
	logger := log.New(&slogLineWriter{log: n.log.With("component", "serf")}, "", 0)
	conf.Logger = logger
	ml := memberlist.DefaultLANConfig()
	if n.cfg.FastGossip {
		ml = memberlist.DefaultLocalConfig()
	}
	ml.Name = n.id.NodeID
	ml.BindAddr, ml.BindPort = host, port
	if port != 0 {
		ml.AdvertiseAddr, ml.AdvertisePort = host, port
	}
	ml.Logger = logger
	conf.MemberlistConfig = ml
	s, err := serf.Create(conf)
	if err != nil {
		return fmt.Errorf("start gossip on %s: %w", n.cfg.SerfAddr, err)
	}
	n.serf = s
	if len(n.cfg.Join) > 0 {
		go n.joinLoop()
	}
	return nil
}

// joinLoop retries --join until it reaches someone: members may start in
// any order.
func (n *Node) joinLoop() {
	for attempt := 0; ; attempt++ {
		joined, err := n.serf.Join(n.cfg.Join, true)
		if err == nil && joined > 0 {
			n.log.Info("joined cluster gossip", "via", strings.Join(n.cfg.Join, ","), "reached", joined)
			return
		}
		if attempt%10 == 0 {
			n.log.Warn("cannot reach any --join address yet; retrying", "join", strings.Join(n.cfg.Join, ","), "error", err)
		}
		select {
		case <-n.stop:
			return
		case <-time.After(time.Second):
		}
	}
}

// members lists the timemachine nodes serf knows.
func (n *Node) members() []member {
	var out []member
	for _, m := range n.serf.Members() {
		if m.Tags[tagRole] != roleValue {
			continue
		}
		exp, _ := strconv.Atoi(m.Tags[tagExpect])
		out = append(out, member{
			ID:       m.Tags[tagID],
			HTTPAddr: m.Tags[tagHTTP],
			BindAddr: m.Tags[tagBind],
			SerfAddr: net.JoinHostPort(m.Addr.String(), strconv.Itoa(int(m.Port))),
			Status:   m.Status,
			Expect:   exp,
		})
	}
	return out
}

// slogLineWriter forwards the standard-library log lines of serf and
// memberlist to slog at a level read from their "[LEVEL]" prefix.
type slogLineWriter struct{ log *slog.Logger }

func (w *slogLineWriter) Write(p []byte) (int, error) {
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
	w.log.Log(context.Background(), lvl, line)
	return len(p), nil
}
