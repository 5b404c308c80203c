package cluster

import (
	"fmt"
	"log"
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
func (c *Cluster) startSerf() error {
	host, portStr, err := net.SplitHostPort(c.cfg.SerfAddr)
	if err != nil {
		return fmt.Errorf("--serf-addr %q: %w", c.cfg.SerfAddr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("--serf-addr %q: bad port", c.cfg.SerfAddr)
	}
	conf := serf.DefaultConfig()
	conf.Init()
	conf.NodeName = c.cfg.NodeID
	conf.Tags = map[string]string{
		tagRole:   roleValue,
		tagID:     c.cfg.NodeID,
		tagHTTP:   c.cfg.HTTPAddr,
		tagBind:   c.cfg.BindAddr,
		tagExpect: strconv.Itoa(c.cfg.BootstrapExpect),
	}
	conf.EventCh = c.serfEvents
	if err := os.MkdirAll(c.cfg.SerfDir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", c.cfg.SerfDir, err)
	}
	conf.SnapshotPath = filepath.Join(c.cfg.SerfDir, "snapshot")
	conf.RejoinAfterLeave = true
	conf.ReconnectTimeout = 72 * time.Hour
	logger := log.New(&gossipLogWriter{log: c.log.With("component", "serf")}, "", 0)
	conf.Logger = logger
	ml := memberlist.DefaultLANConfig()
	if c.cfg.FastGossip {
		ml = memberlist.DefaultLocalConfig()
	}
	ml.Name = c.cfg.NodeID
	ml.BindAddr, ml.BindPort = host, port
	if port != 0 {
		ml.AdvertiseAddr, ml.AdvertisePort = host, port
	}
	ml.Logger = logger
	conf.MemberlistConfig = ml
	if err := c.configureKeyring(conf); err != nil {
		return err
	}
	s, err := serf.Create(conf)
	if err != nil {
		return fmt.Errorf("start gossip on %s: %w", c.cfg.SerfAddr, err)
	}
	c.serf = s
	if len(c.cfg.Join) > 0 {
		// Not one of the loops StopLoops waits for: a join attempt can
		// take seconds, and shutting serf down (LeaveGossip) is what cuts
		// it short. LeaveGossip waits for it.
		c.joinDone = make(chan struct{})
		go func() {
			defer close(c.joinDone)
			c.joinLoop()
		}()
	}
	return nil
}

// joinLoop retries --join until it reaches someone: members may start in
// any order.
func (c *Cluster) joinLoop() {
	for attempt := 0; ; attempt++ {
		joined, err := c.serf.Join(c.cfg.Join, true)
		if err == nil && joined > 0 {
			c.log.Info("joined cluster gossip", "via", strings.Join(c.cfg.Join, ","), "reached", joined)
			return
		}
		if attempt%10 == 0 {
			c.log.Warn("cannot reach any --join address yet; retrying", "join", strings.Join(c.cfg.Join, ","), "error", err)
		}
		select {
		case <-c.stop:
			return
		case <-time.After(time.Second):
		}
	}
}

// members lists the timemachine nodes serf knows.
func (c *Cluster) members() []member {
	if c.serf == nil {
		return nil
	}
	var out []member
	for _, m := range c.serf.Members() {
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

// serfEventLoop turns gossip events into controller and reconciler
// wake-ups.
func (c *Cluster) serfEventLoop() {
	for {
		select {
		case <-c.stop:
			return
		case e := <-c.serfEvents:
			if _, ok := e.(serf.MemberEvent); ok {
				c.kickController()
				c.KickReconcile()
			}
		}
	}
}

// aliveMembers are the timemachine nodes serf sees alive, with self.
func (c *Cluster) aliveMembers() []member {
	var out []member
	for _, m := range c.members() {
		if m.Status == serf.StatusAlive && m.ID != "" {
			out = append(out, m)
		}
	}
	return out
}
