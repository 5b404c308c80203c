package node

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/timemachine-db/timemachine/liveness"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftgroup"
	"github.com/timemachine-db/timemachine/slot"
)

// debugClock is the process's wall clock under --debug-faults: true time
// plus an offset set through POST /v1/debug/clock, for the nemesis's clock
// faults. Everything that reads the node's clock sees it (scheduler,
// stamps, liveness), nothing measures durations with it.
type debugClock struct{ off atomic.Int64 }

func (c *debugClock) now() time.Time { return time.Now().Add(time.Duration(c.off.Load())).Round(0) }

// SetClockOffset shifts the node's wall clock by d (--debug-faults only).
func (n *Node) SetClockOffset(d time.Duration) error {
	if n.dclock == nil {
		return errors.New("the clock can only be shifted with --debug-faults")
	}
	n.dclock.off.Store(int64(d))
	n.log.Warn("debug: wall clock shifted", "offset", d)
	return nil
}

// livenessTiming derives the liveness settings from raft's timing: the
// lease stays below every way another node could be elected (a follower on
// its own: the heartbeat timeout; a hurried one: only after the liveness
// check found this node dead, DeadAfter). Pings go every 2/5 of the lease
// (200 ms against 500 ms; it was a fifth, 100 ms, and the pings were the
// largest part of an idle 12-slot node's wake-ups — docs/scaling.md,
// fifth pass): the lease holds while a ping's answer takes less than
// 300 ms, and a peer whose connection breaks is pinged at once
// (Tracker.ConnLost), so a killed node is found dead as soon as before.
func livenessTiming(t raftgroup.Timing) (interval, lease, deadAfter time.Duration) {
	t = t.WithDefaults()
	lease = min(liveness.DefaultLease, t.HeartbeatTimeout/2)
	deadAfter = lease + liveness.DefaultDeadAfter - liveness.DefaultLease
	interval = min(liveness.DefaultInterval, lease*2/5)
	return interval, lease, deadAfter
}

// beatFlush is how long the slots' coalesced heartbeats to a peer wait
// for company (rpc/beat Options.Flush): a tenth of the slots' raft lease —
// 50 ms with a 500 ms lease, 500 ms with the slots' production 5 s
// (heartbeats every 1-2 s: at 20 ms a batch carried ~1.4 of them, so
// nearly every heartbeat was its own call and wake-up; at 100 ms a node
// of 256 slots still sent ~9 batches a second to each peer). With the
// parked heartbeats (beatPark) raft's rounds are 2-3.5 s apart, so a
// heartbeat reaches its follower up to ~4 s after the one before, well
// inside the follower's 10 s timeout; nothing else waits on it (a read's heartbeat round
// goes at once, Transport.Confirm; failover does not wait for heartbeats).
func beatFlush(t raftgroup.Timing) time.Duration {
	lease := slot.SlotLeaderLease
	if t.HeartbeatTimeout != 0 {
		lease = t.WithDefaults().LeaderLeaseTimeout
	}
	return lease / 10
}

// beatHold is how old a follower's heartbeat answer may be to answer the
// next heartbeat of its group (rpc/beat Options.HoldAnswers): half the
// slots' heartbeat timeout, 5 s with the production 10 s. A round is the
// park (beatPark, up to 0.15 of the timeout with the tick) plus
// raft's own wait (a tenth to a fifth), 2-3.5 s, so in a steady state
// every heartbeat is answered from the one before; a leader cut off from
// its followers steps down up to that much later (rpc/beat held.go says
// why nothing is fenced by that).
func beatHold(t raftgroup.Timing) time.Duration {
	hb := slot.SlotHeartbeatTimeout
	if t.HeartbeatTimeout != 0 {
		hb = t.WithDefaults().HeartbeatTimeout
	}
	return hb / 2
}

// beatPark is how long a heartbeat answered from a held answer stays in
// raft's call at least (rpc/beat Options.Park), until the next shared
// tick: a tenth of the heartbeat timeout, 1 s. raft's check-quorum
// sees an answer every 2-3.5 s against its 5 s lease.
func beatPark(t raftgroup.Timing) time.Duration {
	hb := slot.SlotHeartbeatTimeout
	if t.HeartbeatTimeout != 0 {
		hb = t.WithDefaults().HeartbeatTimeout
	}
	return hb / 10
}

// livePeers is what the liveness check pings: every member of the node
// table that has not left, and a node the table says left that still
// votes in a slot this node holds. The table can call a live voter "left"
// for a while (gossip held its restarted process as leaving: a black-box
// review, 2026-11-28); unpinged, it counted for no slot's lease, so a slot
// whose other voter was down sent no callback until its configuration
// changed (35 s late in that review).
func (n *Node) livePeers() map[string]string {
	return pingable(n.meta.State().Nodes, func(yield func(string) bool) {
		for _, r := range n.slots.All() {
			for _, v := range r.Voters() {
				if !yield(v) {
					return
				}
			}
		}
	})
}

// pingable is livePeers over the node table and the voters of the slots
// this node holds (read only when the table names a node that left).
func pingable(nodes map[string]*model.Node, localVoters iter.Seq[string]) map[string]string {
	out := map[string]string{}
	var left map[string]string
	for id, nd := range nodes {
		switch {
		case nd.BindAddr == "":
		case nd.Status != model.NodeLeft:
			out[id] = nd.BindAddr
		default:
			if left == nil {
				left = map[string]string{}
			}
			left[id] = nd.BindAddr
		}
	}
	if len(left) == 0 {
		return out
	}
	for v := range localVoters {
		if addr, ok := left[v]; ok {
			out[v] = addr
		}
	}
	return out
}

// waitReachable blocks until the peer at addr is not dead to the liveness
// check (true) or ctx ends (false): the slots' transports hold an append
// that failed to an unreachable peer this way (rpc/beat holdFailed). A
// peer the check has not judged dead counts as reachable.
func (n *Node) waitReachable(ctx context.Context, addr string) bool {
	if n.live == nil {
		return false
	}
	for {
		n.backMu.Lock()
		if n.back == nil {
			n.back = make(chan struct{})
		}
		back := n.back
		n.backMu.Unlock()
		dead := false
		for _, d := range n.live.DeadPeers() {
			if n.live.Addr(d) == addr {
				dead = true
			}
		}
		if !dead {
			return true
		}
		select {
		case <-back:
		case <-ctx.Done():
			return false
		}
	}
}

// peerBack wakes waitReachable: a peer the liveness check had found dead
// answers again.
func (n *Node) peerBack() {
	n.backMu.Lock()
	if n.back != nil {
		close(n.back)
		n.back = nil
	}
	n.backMu.Unlock()
}

// kickLiveness wakes the liveness reaction loop (a peer died or came
// back, the clock verdict changed).
func (n *Node) kickLiveness() {
	select {
	case n.liveKick <- struct{}{}:
	default:
	}
}

// connLost has the liveness check ping a peer whose connection broke
// (rpc/peer ClientOptions.OnConnLost).
func (n *Node) connLost(addr string) {
	if l := n.live; l != nil {
		l.ConnLost(addr)
	}
}

// clockStepped wakes the slot leaders' loops, which sleep on the monotonic
// clock until wall-clock due times (slot Replica.ClockStepped).
func (n *Node) clockStepped() {
	for _, rep := range n.slots.All() {
		rep.ClockStepped()
	}
}

// watchLiveness runs the liveness check and reacts to it: the connections
// to a dead peer are dropped (calls waiting on them fail at once), the
// followers of groups a dead peer led elect a new leader now, and while
// this node's clock is out of bounds it hands its slot leaderships away.
func (n *Node) watchLiveness() {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		n.live.Run(ctx)
	}()
	defer func() { cancel(); wg.Wait() }()
	// The loop wakes every reactTick only while there is something to
	// retry (a peer dead, the clock out of bounds); otherwise only the
	// tracker's verdict changes wake it (kickLiveness), so an idle node
	// does not wake ten times a second for nothing.
	tick := time.NewTimer(reactTick)
	defer tick.Stop()
	r := &livenessReactor{n: n, dropped: map[string]bool{}, hurried: map[string]time.Time{}, handing: map[int]time.Time{}}
	for {
		select {
		case <-n.stop:
			return
		case <-n.liveKick:
		case <-tick.C:
		}
		if r.react() {
			tick.Reset(reactTick)
		}
	}
}

// reactTick is how often the reaction loop runs while a peer is dead or
// the clock is out of bounds (hurried elections retried, leaderships
// handed away).
const reactTick = 100 * time.Millisecond

type livenessReactor struct {
	n       *Node
	dropped map[string]bool      // dead peers whose connections were dropped
	hurried map[string]time.Time // group/dead leader → when an election was hurried
	handing map[int]time.Time    // slot → when its leadership was handed away
}

// hurryStagger separates the followers of one group: each starts its
// election that much after the one before it in the order of hurryOrder,
// so one of them wins the first round instead of splitting the vote. It
// exceeds the usual spread of the followers' own detections of the dead
// leader (up to ~200 ms: pings go every 200 ms), which it must outlast for
// the order to hold.
const hurryStagger = 250 * time.Millisecond

// hurryRetry is how soon a group that still follows a dead leader is
// hurried again. Expedite is a no-op while the group's hurry runs, so this
// only matters when the previous call could not start one (the follower
// was a candidate then, or did not name the dead leader yet); it was 2 s,
// and a failover whose first hurry came too early waited that long
// (3.03 s for a paused leader in the nemesis).
const hurryRetry = 300 * time.Millisecond

// react reacts to the tracker's verdicts; it reports whether it must run
// again soon (a peer dead, the clock out of bounds).
func (r *livenessReactor) react() bool {
	n := r.n
	dead := n.live.DeadPeers()
	for _, d := range dead {
		if !r.dropped[d] {
			r.dropped[d] = true
			if addr := n.live.Addr(d); addr != "" {
				// Closing connections can wait (a TLS close writes an
				// alert); the hurried elections below must not.
				go func(d string) {
					n.rpc.Drop(addr, fmt.Errorf("node %s answers no liveness ping", d))
					n.mux.DropPeer(addr)
				}(d)
			}
		}
	}
	for d := range r.dropped {
		if !slices.Contains(dead, d) {
			delete(r.dropped, d)
			n.peerBack()
			// Back: the raft connections dialed to it while it was
			// silent may sit in TCP's retransmission backoff for seconds
			// (mux.DropPeer); raft dials fresh ones.
			if addr := n.live.Addr(d); addr != "" {
				go n.mux.DropPeer(addr)
			}
		}
	}
	now := time.Now()
	for key, at := range r.hurried {
		if now.Sub(at) > hurryRetry {
			delete(r.hurried, key)
		}
	}
	if len(dead) > 0 {
		var plans []hurryPlan
		// voters and last are read only for groups whose leader is dead
		// (this runs every 100 ms while a peer is dead).
		add := func(name string, leader string, voters func() []string, last func() (uint64, uint64), hurry func(string, time.Duration, func() bool),
			campaign func(string) bool, leaderNow func() string) {
			if leader == "" || leader == n.ID() || !slices.Contains(dead, leader) {
				return
			}
			key := name + "/" + leader
			if _, ok := r.hurried[key]; ok {
				return
			}
			r.hurried[key] = now
			all := voters()
			if !slices.Contains(all, n.ID()) {
				return // a nonvoter has no vote to win (raftgroup Campaign)
			}
			var others []string
			for _, v := range all {
				if v != leader && v != n.ID() && !slices.Contains(dead, v) {
					others = append(others, v)
				}
			}
			plans = append(plans, hurryPlan{group: name, leader: leader, others: others, voters: len(all), last: newLogPos(last()), hurry: hurry,
				campaign: campaign, leaderNow: leaderNow})
		}
		for _, rep := range n.slots.All() {
			id, _ := rep.Leader()
			var campaign func(string) bool
			if rep.CanCampaign() {
				campaign = rep.Campaign
			}
			add(groupKey(rep.Slot()), id, rep.Voters, rep.LastLog, rep.Expedite, campaign, func() string { id, _ := rep.Leader(); return id })
		}
		id, _ := n.meta.Leader()
		var campaign func(string) bool
		if n.meta.CanCampaign() {
			campaign = n.meta.Campaign
		}
		add(metaGroupKey, id, n.meta.Voters, n.meta.LastLog, n.meta.Expedite, campaign, func() string { id, _ := n.meta.Leader(); return id })
		if len(plans) > 0 {
			// Asking the other followers takes a round trip; the
			// reactor must not wait for it.
			go n.hurryInOrder(plans)
		}
	}
	if ex, _ := n.live.Exceeded(); ex {
		for _, rep := range n.slots.All() {
			if !rep.IsLeader() {
				continue
			}
			if at, ok := r.handing[rep.Slot()]; ok && now.Sub(at) < 3*time.Second {
				continue
			}
			r.handing[rep.Slot()] = now
			go func(rep *slot.Replica) {
				n.log.Info("handing a slot's leadership away: this node's clock is out of bounds", "slot", rep.Slot())
				rep.TransferLeadership(3 * time.Second)
			}(rep)
		}
	} else {
		clear(r.handing)
	}
	ex, _ := n.live.Exceeded()
	return len(dead) > 0 || ex || len(r.hurried) > 0
}

// clockReady is /readyz's clock condition.
func (n *Node) clockReady() error {
	if ex, skew := n.live.Exceeded(); ex {
		return fmt.Errorf("this node's clock is %v off the cluster majority's (--max-clock-offset %v): it leads no slot until the clocks agree; check its time synchronisation (NTP, chrony)",
			skew.Round(time.Millisecond), n.cfg.MaxClockOffset)
	}
	return nil
}

// clockCollector exports the clock offsets at scrape time.
type clockCollector struct{ n *Node }

var (
	clockOffsetDesc   = prometheus.NewDesc("timemachine_clock_offset_seconds", "Clock offset as measured by liveness pings: per peer, the peer's clock minus this node's; peer=\"majority\", this node's clock minus the cluster majority's (the median).", []string{"peer"}, nil)
	clockUncertDesc   = prometheus.NewDesc("timemachine_clock_offset_uncertainty_seconds", "Uncertainty of this node's offset to the majority (half the round trip of the sample it comes from).", nil, nil)
	clockExceededDesc = prometheus.NewDesc("timemachine_clock_offset_exceeded", "1 while this node's clock is off the majority's by more than --max-clock-offset (it then leads no slot).", nil, nil)
)

func (c *clockCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- clockOffsetDesc
	ch <- clockUncertDesc
	ch <- clockExceededDesc
}

func (c *clockCollector) Collect(ch chan<- prometheus.Metric) {
	live := c.n.live
	for peer, off := range live.PeerOffsets() {
		ch <- prometheus.MustNewConstMetric(clockOffsetDesc, prometheus.GaugeValue, off.Seconds(), peer)
	}
	skew, unc, _ := live.Offset()
	ch <- prometheus.MustNewConstMetric(clockOffsetDesc, prometheus.GaugeValue, skew.Seconds(), "majority")
	ch <- prometheus.MustNewConstMetric(clockUncertDesc, prometheus.GaugeValue, unc.Seconds())
	ex := 0.0
	if e, _ := live.Exceeded(); e {
		ex = 1
	}
	ch <- prometheus.MustNewConstMetric(clockExceededDesc, prometheus.GaugeValue, ex)
}

// unreachableAfter is how long a peer must have answered no liveness ping
// before the controller leaves it out of placement as an unreachable
// newcomer (cluster Config.Unreachable: alive in gossip, voting in no
// slot). A node whose internal port refuses this one (a certificate from
// another CA) stays silent for good and is left out 5 s after it joined;
// a newcomer behind a lossy link, whose pings are lost now and then, is
// not: with the bare liveness verdict (800 ms of silence) a rebalance
// right after a join during 22 % packet loss planned nothing onto it
// (the nemesis, seed 20261213, cycle 3).
const unreachableAfter = 5 * time.Second
