package liveness

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/timemachine-db/timemachine/rpc/peer"
)

// Pinger sends one liveness ping carrying this node's wall time (Unix ns)
// and hands done the peer's wall time when it answered (0: the peer does
// not say), or the error; done is called once, must not block, and is not
// called after cancel. rpc/peer's Client implements it. (No goroutine
// waits for the answer: it was ~10 % of an idle node's wake-ups,
// docs/scaling.md, fifth pass.)
type Pinger interface {
	PingAsync(addr string, wall int64, done func(peerWall int64, err error)) (cancel func())
}

// Config configures a Tracker. Zero durations take the defaults.
type Config struct {
	Self string
	// Peers returns the members to watch (node id → internal address);
	// called once per round.
	Peers  func() map[string]string
	Pinger Pinger
	// Clock is the node's wall clock (time.Now, or the --debug-faults
	// clock); only used for the offset, never for timing.
	Clock func() time.Time
	// Interval between two pings of one peer (default 200ms).
	Interval time.Duration
	// Lease: a slot leader may send callbacks while a majority of the
	// slot's voters answered a ping sent less than Lease ago (default
	// 500ms). It must stay below DeadAfter and below raft's heartbeat
	// timeout (docs/reliability.md#liveness-fencing-and-clocks).
	Lease time.Duration
	// DeadAfter: a peer that answered no ping sent within it is dead
	// (default 700ms). A refused or broken connection makes it dead at
	// once.
	DeadAfter time.Duration
	// MaxOffset is --max-clock-offset (default 250ms).
	MaxOffset time.Duration
	// OnChange is called (from the tracker's goroutine) when a peer turns
	// dead or alive again, and when this node's clock crosses MaxOffset.
	OnChange func()
	// OnStep is called (from the tracker's goroutine) when a round sees
	// that the wall clock stepped: whatever sleeps on the monotonic clock
	// until a wall-clock time should look again.
	OnStep func()
	Logger *slog.Logger
}

// Defaults of Config.
const (
	DefaultInterval  = 200 * time.Millisecond
	DefaultLease     = 500 * time.Millisecond
	DefaultDeadAfter = 700 * time.Millisecond
	DefaultMaxOffset = 250 * time.Millisecond
)

// samples kept per peer for the offset: the one with the smallest round
// trip among the recent ones is used.
const (
	sampleWindow = 8
	sampleMaxAge = 3 * time.Second
)

// stepLimit: a jump of the wall clock against the monotonic one of more
// than this between two rounds is a clock step (an NTP step, the debug
// clock): the offsets measured before it are void.
const stepLimit = 50 * time.Millisecond

// Tracker pings every peer and keeps, per peer, when it last answered and
// the offset of its clock. Safe for concurrent use.
type Tracker struct {
	cfg   Config
	log   *slog.Logger
	start time.Time // monotonic base

	// drift is wall minus monotonic time (ns) when the last round ran; a
	// different value now means the wall clock stepped since.
	drift atomic.Int64

	mu        sync.Mutex
	peers     map[string]*peerState
	exceeded  bool
	steppedAt time.Duration // mono; when a clock step voided the offsets
	lastRound time.Duration // mono; when the latest round ran
	stopped   bool          // Run returned
	// stallEnd is when this node's own rounds resumed after a stall (a
	// round later than stallAfter): a peer's silence counts from there
	// (deadLocked), because pings this node did not send, or whose answers
	// it did not read, are no evidence against the peer.
	stallEnd time.Duration
}

// stallAfter: a gap between two rounds this long means this node itself
// was not scheduled (CPU starvation, a pause of its own).
func (t *Tracker) stallAfter() time.Duration { return min(3*t.cfg.Interval, 300*time.Millisecond) }

type peerState struct {
	addr      string
	firstSeen time.Duration // mono
	lastOK    time.Duration // mono send time of the latest answered ping; 0: never
	fastFail  bool          // the latest ping failed at once (refused, connection broken)
	inflight  bool
	seq       uint64        // the ping in flight (or the latest): older answers are void
	sentAt    time.Duration // mono, when the ping in flight was sent
	cancel    func()        // gives up the ping in flight
	dead      bool
	samples   []sample
	// gaps counts the lapses in this peer's answers: an answer to a ping
	// sent more than Lease after the previous answered one (LeaseEpoch).
	gaps uint64
}

type sample struct {
	at     time.Duration // mono, when it was taken
	offset time.Duration // peer clock minus ours
	rtt    time.Duration
}

// New returns a Tracker; Run starts it.
func New(cfg Config) *Tracker {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.DeadAfter <= 0 {
		cfg.DeadAfter = DefaultDeadAfter
	}
	if cfg.MaxOffset <= 0 {
		cfg.MaxOffset = DefaultMaxOffset
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.OnChange == nil {
		cfg.OnChange = func() {}
	}
	if cfg.OnStep == nil {
		cfg.OnStep = func() {}
	}
	t := &Tracker{cfg: cfg, log: cfg.Logger.With("component", "liveness"), start: time.Now(), peers: map[string]*peerState{}}
	t.drift.Store(t.currentDrift())
	return t
}

func (t *Tracker) mono() time.Duration { return time.Since(t.start) }

func (t *Tracker) currentDrift() int64 { return t.cfg.Clock().UnixNano() - int64(t.mono()) }

// stepped reports whether the wall clock jumped since the last round.
func (t *Tracker) stepped() bool {
	return abs(time.Duration(t.currentDrift()-t.drift.Load())) > stepLimit
}

// Run pings the peers every Interval until ctx ends.
func (t *Tracker) Run(ctx context.Context) {
	tick := time.NewTicker(t.cfg.Interval)
	defer tick.Stop()
	defer t.stop()
	for {
		t.round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// round starts a ping to every peer that has none in flight, and judges
// every peer's state. A ping unanswered for DeadAfter is given up (as its
// timeout did when a goroutine waited for each): a new one goes instead.
func (t *Tracker) round(ctx context.Context) {
	want := t.cfg.Peers()
	now := t.mono()
	type start struct {
		id  string
		seq uint64
	}
	var starts []start
	var giveUp []func()
	stepped := t.stepped()
	t.mu.Lock()
	if t.lastRound > 0 && now-t.lastRound > t.stallAfter() {
		t.stallEnd = now
		t.log.Info("this node's liveness rounds stalled; peers' silence is judged afresh", "stall", (now - t.lastRound).Round(time.Millisecond))
	}
	t.lastRound = now
	if stepped {
		// Offsets measured across the step mean nothing: start over.
		for _, p := range t.peers {
			p.samples = nil
		}
		t.steppedAt = now
		t.drift.Store(t.currentDrift())
		t.log.Warn("the wall clock stepped; clock offsets are measured again before this node fires")
	}
	for id, addr := range want {
		if id == t.cfg.Self || addr == "" {
			continue
		}
		p := t.peers[id]
		if p == nil {
			p = &peerState{firstSeen: now}
			t.peers[id] = p
		}
		if p.addr != addr {
			p.addr, p.samples = addr, nil
		}
		if p.inflight && now-p.sentAt >= t.cfg.DeadAfter {
			p.inflight = false
			if p.cancel != nil {
				giveUp = append(giveUp, p.cancel)
				p.cancel = nil
			}
		}
		if !p.inflight {
			p.inflight = true
			p.seq++
			p.sentAt = now
			starts = append(starts, start{id, p.seq})
		}
	}
	for id, p := range t.peers {
		if _, ok := want[id]; !ok {
			if p.cancel != nil {
				giveUp = append(giveUp, p.cancel)
			}
			delete(t.peers, id)
		}
	}
	t.mu.Unlock()
	for _, c := range giveUp {
		c()
	}
	if ctx.Err() == nil {
		for _, s := range starts {
			t.ping(s.id, s.seq)
		}
	}
	if stepped {
		t.cfg.OnStep()
	}
	t.judge()
}

// ConnLost pings the peer at addr now unless a ping to it is in flight:
// its connection broke (rpc/peer ClientOptions.OnConnLost). A peer that
// died refuses the ping's dial, and is found dead at once rather than at
// the next round — with rounds every 200 ms, up to 200 ms later; a peer
// that merely dropped a connection answers. An in-flight ping on the
// broken connection fails by itself, with the same effect.
func (t *Tracker) ConnLost(addr string) {
	var id string
	var seq uint64
	t.mu.Lock()
	if !t.stopped {
		for pid, p := range t.peers {
			if p.addr == addr && !p.inflight {
				p.inflight = true
				p.seq++
				p.sentAt = t.mono()
				id, seq = pid, p.seq
				break
			}
		}
	}
	t.mu.Unlock()
	if id != "" {
		t.ping(id, seq)
	}
}

// stop gives up the pings in flight; answers still arriving count for
// nothing (the node is shutting down: a closed client is no verdict).
func (t *Tracker) stop() {
	t.mu.Lock()
	t.stopped = true
	var giveUp []func()
	for _, p := range t.peers {
		if p.cancel != nil {
			giveUp = append(giveUp, p.cancel)
			p.cancel = nil
		}
	}
	t.mu.Unlock()
	for _, c := range giveUp {
		c()
	}
}

// ping sends ping seq to peer id; answered records its outcome.
func (t *Tracker) ping(id string, seq uint64) {
	t.mu.Lock()
	p := t.peers[id]
	if p == nil || p.seq != seq || !p.inflight {
		t.mu.Unlock()
		return
	}
	addr := p.addr
	t.mu.Unlock()
	sent := t.mono()
	t1 := t.cfg.Clock().UnixNano()
	cancel := t.cfg.Pinger.PingAsync(addr, t1, func(t2 int64, err error) {
		t.answered(id, addr, seq, sent, t1, t2, err)
	})
	t.mu.Lock()
	if p := t.peers[id]; p != nil && p.seq == seq && p.inflight {
		p.cancel = cancel
	}
	t.mu.Unlock()
}

// answered records the outcome of ping seq to peer id at addr, sent at
// sent (mono) carrying t1, answered with the peer's wall time t2.
func (t *Tracker) answered(id, addr string, seq uint64, sent time.Duration, t1, t2 int64, err error) {
	recv := t.mono()
	t3 := t.cfg.Clock().UnixNano()
	t.mu.Lock()
	p := t.peers[id]
	if p == nil || p.addr != addr || p.seq != seq || t.stopped {
		t.mu.Unlock()
		return
	}
	p.inflight, p.cancel = false, nil
	if err != nil {
		// A timeout says nothing new (DeadAfter judges silence); a
		// refused or broken connection says the peer is gone now — unless
		// this node broke it itself, on an earlier verdict (peer.Client's
		// Drop): counted, a verdict caused by a starved moment would renew
		// itself at every drop (seen forming 1,024 slots: 60-90 verdicts
		// per node).
		fast := !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && !errors.Is(err, peer.ErrDropped)
		p.fastFail = fast
		t.mu.Unlock()
		if fast {
			t.judge()
		}
		return
	}
	p.fastFail = false
	if sent > p.lastOK {
		if p.lastOK > 0 && sent-p.lastOK >= t.cfg.Lease {
			p.gaps++
		}
		p.lastOK = sent
	}
	if t2 != 0 && sent > t.steppedAt {
		rtt := recv - sent
		s := sample{at: recv, rtt: rtt, offset: time.Duration(t2 - (t1+t3)/2)}
		p.samples = append(p.samples, s)
		if len(p.samples) > sampleWindow {
			p.samples = p.samples[1:]
		}
	}
	wasDead := p.dead
	t.mu.Unlock()
	if wasDead {
		t.judge()
	}
}

// judge updates every peer's dead flag and the clock verdict, and calls
// OnChange when any of them changed.
func (t *Tracker) judge() {
	now := t.mono()
	changed := false
	t.mu.Lock()
	for id, p := range t.peers {
		dead := t.deadLocked(p, now)
		if dead != p.dead {
			p.dead, changed = dead, true
			if dead {
				t.log.Info("peer unreachable: no answer to liveness pings", "peer", id,
					"refused", p.fastFail, "silent_for", (now - max(p.lastOK, p.firstSeen)).Round(time.Millisecond))
			} else {
				t.log.Info("peer reachable again", "peer", id)
			}
		}
	}
	skew, unc, _ := t.offsetLocked(now)
	exceeded := abs(skew) > t.cfg.MaxOffset
	if exceeded != t.exceeded {
		t.exceeded, changed = exceeded, true
		switch {
		case exceeded && unmeasurable(skew, unc, t.cfg.MaxOffset):
			t.log.Warn("this node cannot tell whether its clock is within --max-clock-offset of the cluster majority's: its liveness pings were answered too late to measure (this process starved of CPU, or a slow network); it gives up and refuses slot leadership until a measurement is clear",
				"offset", skew.Round(time.Millisecond), "uncertainty", unc.Round(time.Millisecond), "max_clock_offset", t.cfg.MaxOffset)
		case exceeded:
			t.log.Warn("this node's clock is off the cluster majority's by more than --max-clock-offset: it gives up and refuses slot leadership until the clocks agree again (check NTP/chrony)",
				"offset", skew.Round(time.Millisecond), "uncertainty", unc.Round(time.Millisecond), "max_clock_offset", t.cfg.MaxOffset)
		default:
			t.log.Info("this node's clock is within --max-clock-offset of the majority's again", "offset", skew.Round(time.Millisecond))
		}
	}
	t.mu.Unlock()
	if changed {
		t.cfg.OnChange()
	}
}

// unmeasurable reports whether an offset beyond maxOffset may still be
// within it, given the reading's uncertainty: the pings themselves were
// late (a starved process or a slow network), and the reading cannot tell
// a clock that is off from one that is not. The node steps down either
// way (the safe call); only what it tells the operator differs — "check
// NTP" sent operators after clocks that agreed (a black-box review: one
// machine's clock, read off by 837 ms ± 1.6 s under CPU starvation).
func unmeasurable(skew, unc, maxOffset time.Duration) bool {
	return abs(skew)-unc <= maxOffset
}

func (t *Tracker) deadLocked(p *peerState, now time.Duration) bool {
	if p.fastFail {
		return true
	}
	// Forming 1,024 slots starved every process for moments; counted,
	// this node's own stall made peers "dead", and each verdict hurried
	// elections that starved it more (docs/scaling.md).
	last := max(p.lastOK, p.firstSeen, t.stallEnd)
	return now-last > t.cfg.DeadAfter
}

// Dead reports whether peer id is considered dead (unknown peers are not).
func (t *Tracker) Dead(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.peers[id]
	return p != nil && t.deadLocked(p, t.mono())
}

// LeaseHeld reports whether a majority of voters (this node counts
// itself) answered a liveness ping sent less than Lease ago: the
// condition for a slot leader to start a callback. Monotonic time only.
func (t *Tracker) LeaseHeld(voters []string) bool {
	if len(voters) == 0 {
		return false
	}
	now := t.mono()
	ok := 0
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, v := range voters {
		if v == t.cfg.Self {
			ok++
			continue
		}
		if p := t.peers[v]; p != nil && p.lastOK > 0 && now-p.lastOK < t.cfg.Lease {
			ok++
		}
	}
	return ok*2 > len(voters)
}

// LeaseEpoch changes whenever one of the voters' answers lapsed for the
// lease or longer and came back (this node paused or cut off, or the
// peer). A leader whose lease lapsed may have been replaced meanwhile, and
// fresh ping answers do not say otherwise — its peers answer pings whoever
// they follow — so a slot leader confirms its leadership with raft once
// per epoch before it sends a callback again (slot.Replica.fenced): a
// follower leader paused for 2 s sent a callback its successor had
// delivered 177 ms after it resumed, on a lease its fresh pings renewed.
func (t *Tracker) LeaseEpoch(voters []string) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var e uint64
	for _, v := range voters {
		if p := t.peers[v]; p != nil {
			e += p.gaps
		}
	}
	return e
}

// Offset is this node's clock minus the cluster majority's (the median of
// the offsets to every reachable member, this node counting as 0) and the
// uncertainty of that figure (half the round trip of the sample it comes
// from). ok is false when no peer's clock is known.
func (t *Tracker) Offset() (skew, uncertainty time.Duration, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.offsetLocked(t.mono())
}

func (t *Tracker) offsetLocked(now time.Duration) (time.Duration, time.Duration, bool) {
	type obs struct{ off, unc time.Duration }
	all := []obs{{}} // this node
	for _, p := range t.peers {
		if t.deadLocked(p, now) {
			continue
		}
		if s, ok := best(p.samples, now); ok {
			all = append(all, obs{s.offset, s.rtt / 2})
		}
	}
	if len(all) == 1 {
		return 0, 0, false
	}
	sort.Slice(all, func(i, j int) bool { return all[i].off < all[j].off })
	m := all[(len(all)-1)/2]
	if len(all)%2 == 0 {
		// Two middle values: the majority cannot tell which side is
		// right; take the one nearer this node's clock.
		if hi := all[len(all)/2]; abs(hi.off) < abs(m.off) {
			m = hi
		}
	}
	return -m.off, m.unc, true
}

// best is the recent sample with the smallest round trip.
func best(ss []sample, now time.Duration) (sample, bool) {
	var b sample
	found := false
	for _, s := range ss {
		if now-s.at > sampleMaxAge {
			continue
		}
		if !found || s.rtt < b.rtt {
			b, found = s, true
		}
	}
	return b, found
}

// settlingLocked: a clock step happened a moment ago and the offsets
// are not measured again yet (a few rounds).
func (t *Tracker) settlingLocked(now time.Duration) bool {
	return t.steppedAt > 0 && now-t.steppedAt < 3*t.cfg.Interval+t.cfg.DeadAfter/2
}

// ClockOK reports whether this node's clock is within MaxOffset of the
// majority's (true while no peer's clock is known). Right after the wall
// clock stepped it is false until the offsets are measured again, even
// before the next round notices the step.
func (t *Tracker) ClockOK() bool {
	if t.stepped() {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.exceeded && !t.settlingLocked(t.mono())
}

// Exceeded reports whether this node's clock is off the majority's by
// more than MaxOffset, and by how much.
func (t *Tracker) Exceeded() (bool, time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	skew, _, _ := t.offsetLocked(t.mono())
	return t.exceeded, skew
}

// FireNow is the time a slot leader compares due times with: the local
// clock minus how far it may be ahead of the majority's (never plus: a
// slow clock only makes callbacks late) and minus the uncertainty of that
// measurement. A job due at d fires only once FireNow() >= d, so it never
// fires before d on the majority's clock.
func (t *Tracker) FireNow(local time.Time) time.Time {
	skew, unc, ok := t.Offset()
	if !ok {
		return local
	}
	return local.Add(-max(0, skew) - unc)
}

// PeerOffsets returns every known peer's clock offset (peer minus this
// node), for metrics.
func (t *Tracker) PeerOffsets() map[string]time.Duration {
	now := t.mono()
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]time.Duration{}
	for id, p := range t.peers {
		if s, ok := best(p.samples, now); ok {
			out[id] = s.offset
		}
	}
	return out
}

// DeadPeers lists the peers considered dead, sorted.
func (t *Tracker) DeadPeers() []string {
	now := t.mono()
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for id, p := range t.peers {
		if t.deadLocked(p, now) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Silent reports how long peer id has not answered a ping: since the
// send time of its latest answered ping, or since it was first watched
// when it never answered; 0 for a peer not watched. A stall of this
// node's own rounds counts as an answer, as in Dead.
func (t *Tracker) Silent(id string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.peers[id]
	if p == nil {
		return 0
	}
	return max(0, t.mono()-max(p.lastOK, p.firstSeen, t.stallEnd))
}

// Addr returns the address a peer is pinged at ("" when not watched).
func (t *Tracker) Addr(id string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.peers[id]; p != nil {
		return p.addr
	}
	return ""
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
