package cluster

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

	"github.com/timemachine-db/timemachine/raftfsm"
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
	// tagStarted is when this process started (unix ms): a node removed
	// from the cluster is ignored in gossip until a process of it that
	// started after the removal shows up (restarted and re-joined).
	tagStarted = "started"
)

// member is a timemachine node as serf sees it.
type member struct {
	ID       string
	HTTPAddr string
	BindAddr string
	SerfAddr string
	Status   serf.MemberStatus
	Expect   int
	Started  int64 // unix ms, 0 when not published (an older version)
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
		tagRole:    roleValue,
		tagID:      c.cfg.NodeID,
		tagHTTP:    c.cfg.HTTPAddr,
		tagBind:    c.cfg.BindAddr,
		tagExpect:  strconv.Itoa(c.cfg.BootstrapExpect),
		tagStarted: strconv.FormatInt(c.startedAt, 10),
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
	// Gossip messages here are small (probes, acks, a few tags); memberlist
	// LZW-compresses every one by default, which was ~7 % of an idle
	// 12-slot node's CPU (docs/benchmarks.md, "Idle cost on a quiet host").
	// Receivers take compressed and plain messages alike, so nodes of
	// either setting gossip together.
	ml.EnableCompression = false
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
	// Not one of the loops StopLoops waits for: a join attempt can take
	// seconds, and shutting serf down (LeaveGossip) is what cuts it short.
	// LeaveGossip waits for it.
	c.joinDone = make(chan struct{})
	go func() {
		defer close(c.joinDone)
		c.joinLoop()
	}()
	return nil
}

// joinLoop keeps this node in the gossip: until it sees another member, it
// tries --join and the gossip addresses of the nodes in its copy of the
// meta state (replayed from the meta raft log as it catches up), every
// second, until one answers. Members may start in any order, and a
// restarted node cannot rely on serf's snapshot alone: when the snapshot
// lists no member that is alive, serf gives up re-joining ("Failed to
// re-join any previously known node") and, without --join, the node
// would stay out of the gossip until its replicas were moved away. It
// starts with syncWithAll.
func (c *Cluster) joinLoop() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	// synced: this process has made a serf Join (which broadcasts a join
	// intent newer than every intent the members it reached hold).
	addrs := c.joinAddrs()
	synced := len(addrs) > 0 && c.syncWithAll(addrs)
	if len(addrs) > 0 && !synced {
		select { // the loop's first join would be the same one again
		case <-c.stop:
			return
		case <-t.C:
		}
	}
	for attempt := 0; ; attempt++ {
		if c.removedAt.Load() > 0 {
			return // removed: this process stays out
		}
		if c.otherAlive() {
			if !synced {
				// No address was known at start (no --join, and the meta
				// state of a restarted node is its last snapshot, empty
				// before the first meta snapshot, until a leader tells it
				// what is committed): only serf's snapshot re-joined this
				// process, a join with no intent, and members holding the
				// prune's leave intent of a removed node take it for
				// "leaving". Join the members it now sees.
				synced = c.syncWithAll(c.otherMemberAddrs())
			}
			if attempt > 0 {
				c.log.Info("in the cluster gossip", "members", c.serf.NumNodes())
			}
			if !c.waitLonely(t.C) {
				return
			}
			attempt = 0
			continue
		}
		addrs := c.joinAddrs()
		if len(addrs) > 0 {
			joined, err := c.serf.Join(addrs, true)
			if joined > 0 {
				synced = true
			}
			if err == nil && joined > 0 {
				c.log.Info("joined cluster gossip", "via", strings.Join(addrs, ","), "reached", joined)
				continue
			}
			if attempt%10 == 9 {
				c.log.Warn("cannot reach any other node's gossip address yet; retrying", "tried", strings.Join(addrs, ","), "error", err)
			}
		}
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
	}
}

// syncWithAll joins, once as the process starts, every node this one knows
// (addrs: --join and its copy of the meta state, joinAddrs), even when
// serf's snapshot has re-joined it already. The snapshot's re-join is a
// memberlist join alone, through the first previous member that answers:
// serf broadcasts no join intent for it. A member that does not list this
// node (serf pruned it) then takes it in with the newest intent it keeps
// for its name, and after an `admin remove --force` that is the leave
// intent of the prune (forgetRemoved, kept five minutes): it marks the new
// process "leaving", and no push-pull corrects that, since the new process
// carries no newer intent. When that member was the meta leader, a node
// restarted after its removal stayed "left" in the node table for 20 s to
// over a minute (node TestOpsForceRemoveDeadNodeAndRejoin, once in a make
// test run; it re-joined at once whenever joinLoop's own join won the race
// with the snapshot). serf's Join exchanges state with every address,
// which also tells the new process of any member that still holds its old
// one as dead (it refutes at once), and then broadcasts a join intent
// newer than everything it learnt, so every member takes the new process
// as alive (TestRestartedRemovedNodeRejoinsAtOnce). A node that knows no
// other address (the first start of a cluster's first node) skips it. It
// reports false when it tried and no node answered.
func (c *Cluster) syncWithAll(addrs []string) (ok bool) {
	if c.removedAt.Load() > 0 {
		return true
	}
	if len(addrs) == 0 {
		return true
	}
	joined, err := c.serf.Join(addrs, true)
	if joined > 0 {
		c.log.Debug("synced gossip with the known nodes", "addrs", strings.Join(addrs, ","), "reached", joined)
		return true
	}
	c.log.Debug("no known node answered the first gossip join; retrying", "addrs", strings.Join(addrs, ","), "error", err)
	return false
}

// waitLonely returns true once this node has seen no other live member
// for a while (gossip lost: join again), false when the node stops.
func (c *Cluster) waitLonely(tick <-chan time.Time) bool {
	lonely := 0
	for {
		select {
		case <-c.stop:
			return false
		case <-tick:
		}
		if c.otherAlive() || len(c.joinAddrs()) == 0 {
			lonely = 0
			continue
		}
		if lonely++; lonely >= 10 {
			return true
		}
	}
}

// otherMemberAddrs are the gossip addresses of the other members gossip
// shows alive.
func (c *Cluster) otherMemberAddrs() []string {
	var out []string
	for _, m := range c.aliveMembers() {
		if m.ID != c.cfg.NodeID {
			out = append(out, m.SerfAddr)
		}
	}
	return out
}

// otherAlive reports whether gossip shows another live member.
func (c *Cluster) otherAlive() bool {
	for _, m := range c.aliveMembers() {
		if m.ID != c.cfg.NodeID {
			return true
		}
	}
	return false
}

// joinAddrs are --join and the gossip addresses of the other nodes in the
// local meta state.
func (c *Cluster) joinAddrs() []string {
	seen := map[string]bool{c.cfg.SerfAddr: true}
	var out []string
	add := func(a string) {
		if a != "" && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	for _, a := range c.cfg.Join {
		add(a)
	}
	if c.cfg.Meta != nil {
		for _, nd := range c.cfg.Meta.State().NodeList() {
			if nd.ID != c.cfg.NodeID {
				add(nd.SerfAddr)
			}
		}
	}
	return out
}

// rejoinEvery is how often a member gossip calls failed, but which the
// liveness check hears, is joined to again.
const rejoinEvery = 2 * time.Second

// rejoinHeard joins gossip again to each member that serf calls failed
// while this node's liveness check hears it (Config.Hears). After a
// partition heals, each side's memberlist holds the other as dead at the
// incarnation it last saw, ignores an "alive" at that same incarnation,
// and neither probes nor pushes state to dead members; only memberlist's
// 30 s push-pull or serf's 30 s reconnect found them again, and the node
// table said "failed" (the cluster not healthy) for 6–32 s after the
// heal in the nemesis' partition cycles. A join is a push-pull: the
// healed node learns it was declared dead, refutes it with a higher
// incarnation, and every member takes it back within a gossip round.
//
// It does the same for a node of the node table that serf does not list
// at all while the liveness check hears it. After a whole-cluster restart
// a process can miss a node entirely: its snapshot's re-join and
// syncWithAll's join reach that node before it listens, and the node's
// "alive" broadcasts were all sent before this process was in the
// others' member lists. Only the next push-pull (30 s) told it, and the
// meta leader kept such a node "failed" in the node table meanwhile — in a
// 5-node nemesis run (seed 20261207, cycle 27) for 45 s, long enough for
// the controller to move every replica off the live node and take it
// out of the meta group.
func (c *Cluster) rejoinHeard(st *raftfsm.MetaState) {
	if c.serf == nil || c.cfg.Hears == nil || c.removedAt.Load() > 0 {
		return // removed: this process stays out of the gossip (joinLoop)
	}
	now := time.Now()
	known := map[string]bool{}
	var heard []member
	for _, m := range c.members() {
		known[m.ID] = true
		if m.Status != serf.StatusFailed || m.ID == c.cfg.NodeID || c.tombstoned(st, m) {
			continue
		}
		heard = append(heard, m)
	}
	for _, nd := range st.NodeList() {
		if nd.ID == c.cfg.NodeID || known[nd.ID] || nd.SerfAddr == "" {
			continue
		}
		if _, removed := st.Tombstone(nd.ID); removed {
			continue
		}
		heard = append(heard, member{ID: nd.ID, SerfAddr: nd.SerfAddr})
	}
	for _, m := range heard {
		if now.Sub(c.rejoined[m.ID]) < rejoinEvery || !c.cfg.Hears(m.ID) {
			continue
		}
		if _, running := c.rejoining.LoadOrStore(m.ID, struct{}{}); running {
			continue
		}
		last := c.rejoined[m.ID]
		c.rejoined[m.ID] = now
		// Once per episode at Info: a member whose gossip never takes the
		// join (another gossip key) would log every 2 s.
		lvl := slog.LevelInfo
		if now.Sub(last) < time.Minute {
			lvl = slog.LevelDebug
		}
		msg := "gossip calls a node failed that answers liveness pings: joining it again"
		if !known[m.ID] {
			msg = "gossip does not know a node that answers liveness pings: joining it"
		}
		c.log.Log(context.Background(), lvl, msg, "node", m.ID, "serf_addr", m.SerfAddr)
		go func(id, addr string) {
			defer c.rejoining.Delete(id)
			c.serfMu.Lock()
			down := c.serfDown
			c.serfMu.Unlock()
			if down {
				return
			}
			if _, err := c.serf.Join([]string{addr}, true); err != nil {
				c.log.Debug("joining a member again", "node", id, "addr", addr, "error", err)
			}
		}(m.ID, m.SerfAddr)
	}
}

// tombstoned reports whether m is the old process of a removed node (a
// process started after the removal is a re-join and is not).
func (c *Cluster) tombstoned(st *raftfsm.MetaState, m member) bool {
	t, ok := st.Tombstone(m.ID)
	if !ok {
		return false
	}
	if t.StartedAt > 0 {
		return m.Started <= t.StartedAt
	}
	return m.Started <= t.At
}

// forgetRemoved, on the meta leader, keeps removed nodes out of the
// gossip: a removed node's process that still runs is told it was
// removed (it then leaves the gossip), and one that failed or left is
// pruned from serf's member list. Each at most every 10 s per node.
func (c *Cluster) forgetRemoved(st *raftfsm.MetaState) {
	if len(st.Removed) == 0 || c.serf == nil {
		return
	}
	now := time.Now()
	for _, m := range c.members() {
		if !c.tombstoned(st, m) || now.Sub(c.removedNoticed[m.ID]) < 10*time.Second {
			continue
		}
		c.removedNoticed[m.ID] = now
		if m.Status == serf.StatusAlive {
			t, _ := st.Tombstone(m.ID)
			go c.tellRemoved(m.ID, m.BindAddr, t.At)
			continue
		}
		if err := c.serf.RemoveFailedNodePrune(m.ID); err != nil {
			c.log.Debug("pruning a removed node from gossip", "node", m.ID, "error", err)
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
		started, _ := strconv.ParseInt(m.Tags[tagStarted], 10, 64)
		out = append(out, member{
			ID:       m.Tags[tagID],
			HTTPAddr: m.Tags[tagHTTP],
			BindAddr: m.Tags[tagBind],
			SerfAddr: net.JoinHostPort(m.Addr.String(), strconv.Itoa(int(m.Port))),
			Status:   m.Status,
			Expect:   exp,
			Started:  started,
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

// GossipMembers lists the ids of the members gossip shows alive (a removed
// node's old process left out).
func (c *Cluster) GossipMembers() []string {
	st := c.cfg.Meta.State()
	var out []string
	for _, m := range c.aliveMembers() {
		if !c.tombstoned(st, m) {
			out = append(out, m.ID)
		}
	}
	return out
}
