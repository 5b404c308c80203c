package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/dht"
	"github.com/timemachine-db/timemachine/internal/testutil"
	"github.com/timemachine-db/timemachine/model"
)

// The operations of docs/operations.md (scale out, drain, remove,
// transfer, replace) on an in-process cluster under a steady create+fire
// load: every step finishes, and the load sees no acknowledged job lost,
// none delivered twice, none early.

// opsLoad creates bursts of jobs, all due at one instant a little later,
// through every live node in turn, and counts the deliveries per
// Idempotency-Key. Bursts fill the fire pool (tests run with a small one
// and a receiver that takes a moment), which is when a planned hand-off
// used to let a popped job start after the drain.
type opsLoad struct {
	t    *testing.T
	tc   *testCluster
	srv  *http.Server
	url  string
	stop chan struct{}
	wg   sync.WaitGroup

	mu       sync.Mutex
	acked    map[string]int64 // Idempotency-Key → trigger time (ms)
	got      map[string][]time.Time
	attempts map[string][]string // Idempotency-Key → "attempt@time" of each delivery
	batches  int
	errs     int
	// ev, when set, excuses a duplicate whose slot had an unplanned
	// election around it (see raftEvents); nil: every duplicate fails.
	ev *raftEvents
}

func startLoad(t *testing.T, tc *testCluster) *opsLoad {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ld := &opsLoad{t: t, tc: tc, url: "http://" + l.Addr().String() + "/hook", stop: make(chan struct{}),
		acked: map[string]int64{}, got: map[string][]time.Time{}, attempts: map[string][]string{}}
	ld.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		now := time.Now()
		time.Sleep(2 * time.Millisecond)
		ld.mu.Lock()
		k := req.Header.Get("Idempotency-Key")
		ld.got[k] = append(ld.got[k], now)
		ld.attempts[k] = append(ld.attempts[k], req.Header.Get("X-Timemachine-Attempt")+"@"+now.Format("15:04:05.000"))
		ld.mu.Unlock()
		w.WriteHeader(200)
	})}
	go func() { _ = ld.srv.Serve(l) }()
	t.Cleanup(func() { _ = ld.srv.Close() })
	ld.wg.Add(1)
	go ld.run()
	return ld
}

func (ld *opsLoad) run() {
	defer ld.wg.Done()
	for b := 0; ; b++ {
		select {
		case <-ld.stop:
			return
		case <-time.After(150 * time.Millisecond):
		}
		nodes := ld.tc.live()
		if len(nodes) == 0 {
			continue
		}
		n := nodes[b%len(nodes)]
		trig := time.Now().Add(800 * time.Millisecond).UnixMilli()
		in := make([]model.JobInput, 30)
		for i := range in {
			in[i] = model.JobInput{ID: fmt.Sprintf("b%d-%d", b, i), Spec: model.JobSpec{TriggerTime: trig, CallbackURL: ld.url, Hash: uint64(i + 1)}}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := n.svc.CreateJobs(ctx, "default", in)
		cancel()
		if err != nil {
			ld.mu.Lock()
			ld.errs++
			if ld.errs <= 3 {
				ld.t.Logf("load: create through %s failed: %v", n.ID(), err)
			}
			ld.mu.Unlock()
			continue // not acknowledged: it may or may not exist
		}
		ld.mu.Lock()
		for _, r := range res {
			if r.Err == nil && (r.Code == model.CodeCreated || r.Code == model.CodeOK) {
				ld.acked[fmt.Sprintf("default:%s:%d", r.ID, trig)] = trig
			}
		}
		ld.batches++
		ld.mu.Unlock()
	}
}

// waitAcked waits until the load has n acknowledged jobs, so a test whose
// steps finish quickly still judges a load worth judging (finish requires
// 100).
func (ld *opsLoad) waitAcked(n int, timeout time.Duration) {
	ld.t.Helper()
	testutil.Eventually(ld.t, timeout, fmt.Sprintf("%d jobs acknowledged by the load", n), func() error {
		ld.mu.Lock()
		defer ld.mu.Unlock()
		if len(ld.acked) < n {
			return fmt.Errorf("%d acknowledged", len(ld.acked))
		}
		return nil
	})
}

// finish stops creating, waits until every acknowledged job was delivered,
// listens a while longer for late duplicates, and checks: none lost, none
// delivered twice, none early.
func (ld *opsLoad) finish(timeout time.Duration) {
	t := ld.t
	t.Helper()
	close(ld.stop)
	ld.wg.Wait()
	testutil.Eventually(t, timeout, "every acknowledged job delivered", func() error {
		ld.mu.Lock()
		defer ld.mu.Unlock()
		missing := 0
		for k := range ld.acked {
			if len(ld.got[k]) == 0 {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d of %d acknowledged jobs not delivered", missing, len(ld.acked))
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	ld.mu.Lock()
	defer ld.mu.Unlock()
	var dups, excused, early []string
	for k, at := range ld.got {
		if len(at) > 1 {
			ok, why := ld.unplannedElection(k, at)
			d := fmt.Sprintf("%s %v %s", k, ld.attempts[k], why)
			if ok {
				excused = append(excused, d)
			} else {
				dups = append(dups, d)
			}
		}
		if trig, ok := ld.acked[k]; ok && at[0].UnixMilli() < trig {
			early = append(early, k)
		}
	}
	sort.Strings(dups)
	sort.Strings(excused)
	t.Logf("load: %d batches failed", ld.errs)
	t.Logf("load: %d acknowledged jobs in %d batches, %d delivered, %d duplicates after planned moves only, %d after an unplanned election, %d early",
		len(ld.acked), ld.batches, len(ld.got), len(dups), len(excused), len(early))
	if ld.ev != nil {
		evs := ld.ev.unplannedWins()
		t.Logf("load: %d leaderships won in unplanned elections (a heartbeat timeout: at the start, or a process stalled, or a leader found dead)", len(evs))
		for i, e := range evs[:min(40, len(evs))] {
			t.Logf("  unplanned election %d: %s won by %s at %s", i+1, e.group, e.node, e.at.Format("15:04:05.000"))
		}
	}
	if ld.ev != nil && len(dups) > 0 {
		ld.ev.mu.Lock()
		for _, w := range ld.ev.warnings[:min(40, len(ld.ev.warnings))] {
			t.Logf("  warning: %s", w)
		}
		ld.ev.mu.Unlock()
	}
	if len(excused) > 0 {
		t.Logf("%d jobs delivered again after an unplanned election of their slot (allowed, as after a crash): %s", len(excused), strings.Join(excused[:min(10, len(excused))], ", "))
	}
	if len(ld.acked) < 100 {
		t.Errorf("the load acknowledged only %d jobs", len(ld.acked))
	}
	if len(dups) > 0 {
		t.Errorf("%d jobs delivered more than once: %s", len(dups), strings.Join(dups[:min(10, len(dups))], ", "))
	}
	if len(early) > 0 {
		t.Errorf("%d jobs delivered early", len(early))
	}
}

// raftEvents records, from every node's raft log (at INFO), the leaders
// that won an UNPLANNED election: one their replica started because it
// stopped hearing from its leader (raft's "heartbeat timeout reached,
// starting election", which the liveness check's hurried elections also
// end in). The target of a planned transfer becomes a candidate on the old
// leader's TimeoutNow instead, which logs no timeout. An unplanned
// election is a crash as far as the contract goes: callbacks in flight on
// the old leader may be delivered again (API.md §5 promises no duplicate
// for planned moves only). Under -race on this shared 2-core machine all
// the in-process nodes stall together now and then, past the 300 ms
// heartbeat timeout, and the load test must tell those elections from a
// planned move that duplicated.
type raftEvents struct {
	mu sync.Mutex
	// pending: the node's replica of the group timed out on its leader
	// and is about to be a candidate (key node/group).
	pending map[string]bool
	// unplanned: the candidacy now running began with a timeout.
	unplanned map[string]bool
	wins      []raftEvent
	// warnings are the other WARN+ lines, for the log of a failed run
	// (e.g. a planned transfer that went ahead with callbacks in flight).
	warnings []string
}

type raftEvent struct {
	at          time.Time
	node, group string
	unplanned   bool
}

// tweak wraps each node's logger so its raft lines are recorded, and has
// raft log at INFO (candidate and leader states).
func (ev *raftEvents) tweak(next func(int, *Config)) func(int, *Config) {
	ev.pending, ev.unplanned = map[string]bool{}, map[string]bool{}
	return func(i int, c *Config) {
		if next != nil {
			next(i, c)
		}
		c.RaftLogLevel = "info"
		c.Logger = slog.New(&eventHandler{ev: ev, next: c.Logger.Handler()})
	}
}

func (ev *raftEvents) record(r slog.Record, node, group string) {
	k := node + "/" + group
	ev.mu.Lock()
	defer ev.mu.Unlock()
	switch m := r.Message; {
	case strings.Contains(m, "heartbeat timeout reached, starting election"):
		ev.pending[k] = true
	case strings.Contains(m, "Election timeout reached, restarting election"):
		ev.pending[k] = ev.unplanned[k]
	case strings.Contains(m, "entering candidate state"):
		ev.unplanned[k], ev.pending[k] = ev.pending[k], false
	case strings.Contains(m, "entering leader state"):
		ev.wins = append(ev.wins, raftEvent{at: r.Time, node: node, group: group, unplanned: ev.unplanned[k]})
		ev.unplanned[k] = false
	case r.Level >= slog.LevelWarn, strings.Contains(m, "node removed from the cluster"):
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s %s %s %q", r.Time.Format("15:04:05.000"), node, group, r.Level, m)
		r.Attrs(func(a slog.Attr) bool {
			fmt.Fprintf(&b, " %s", a)
			return true
		})
		ev.warnings = append(ev.warnings, b.String())
	}
}

// winsOf lists the leadership wins of group, oldest first.
func (ev *raftEvents) winsOf(group string) []raftEvent {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	var out []raftEvent
	for _, e := range ev.wins {
		if e.group == group {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}

func (ev *raftEvents) unplannedWins() []raftEvent {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	var out []raftEvent
	for _, e := range ev.wins {
		if e.unplanned {
			out = append(out, e)
		}
	}
	return out
}

type eventHandler struct {
	ev    *raftEvents
	next  slog.Handler
	attrs []slog.Attr
}

func (h *eventHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || h.next.Enabled(ctx, l)
}

func (h *eventHandler) Handle(ctx context.Context, r slog.Record) error {
	node, group := "", ""
	for _, a := range h.attrs {
		switch a.Key {
		case "node":
			node = a.Value.String()
		case "group":
			group = a.Value.String()
		}
	}
	if r.Level >= slog.LevelInfo {
		h.ev.record(r, node, group)
	}
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h *eventHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &eventHandler{ev: h.ev, next: h.next.WithAttrs(as), attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}

func (h *eventHandler) WithGroup(name string) slog.Handler {
	return &eventHandler{ev: h.ev, next: h.next.WithGroup(name), attrs: h.attrs}
}

// unplannedElection judges a duplicate of job key (collection:id:trigger)
// delivered at the times at: both deliveries said attempt 1, so two
// leaders (or one leader in two terms) each fired it once, and the
// outcome of the first firing never reached the second. A planned
// hand-off commits the outcomes of the callbacks in flight before it
// lets go (the drain gate), and a committed outcome survives any later
// election, so only an unplanned loss of leadership between the two can
// explain it: an unplanned win in the slot from 1 s before the first
// delivery (a stalled, deposed leader that fired late) up to the second.
// Then the duplicate is allowed, as after a crash; otherwise — only
// planned wins, or none — it fails. (A planned move that duplicated in
// the same window as an unplanned election would pass unnoticed: a
// limitation, which the non-race run in make test narrows.) why lists the
// slot's wins around the deliveries either way.
func (ld *opsLoad) unplannedElection(key string, at []time.Time) (ok bool, why string) {
	if ld.ev == nil {
		return false, ""
	}
	parts := strings.Split(key, ":")
	if len(parts) != 3 {
		return false, ""
	}
	s := dht.SlotOf(parts[0], parts[1], ld.tc.cfgs[0].Slots)
	first, last := at[0], at[len(at)-1]
	var hist []string
	for _, e := range ld.ev.winsOf(fmt.Sprintf("slot-%d", s)) {
		if e.at.After(last) || e.at.Before(first.Add(-3*time.Second)) {
			continue
		}
		kind := "planned"
		if e.unplanned {
			kind = "unplanned"
			ok = ok || !e.at.Before(first.Add(-time.Second))
		}
		hist = append(hist, fmt.Sprintf("%s won by %s at %s", kind, e.node, e.at.Format("15:04:05.000")))
	}
	return ok, fmt.Sprintf("(slot %d: %s)", s, strings.Join(hist, "; "))
}

// opsTweak is the node configuration of these tests: a small fire pool (so
// bursts queue), a short warning threshold for the replica watcher.
func opsTweak(i int, c *Config) {
	c.FireConcurrency = 8
	c.ReplicaWarnAfter = 5 * time.Second
}

// addNode starts one more node that joins the cluster through n1.
func (tc *testCluster) addNode(id string) *Node {
	tc.t.Helper()
	var c Config
	var n *Node
	for attempt := 1; ; attempt++ {
		c = tc.cfgs[0]
		c.NodeID, c.DataDir, c.BindAddr, c.SerfAddr = id, tc.t.TempDir(), freeAddr(tc.t), freeAddr(tc.t)
		c.BootstrapExpect, c.Join = 1, []string{tc.cfgs[0].SerfAddr}
		tc.net.Register(id, c.BindAddr)
		c.MuxDialer, c.PeerDialer = tc.net.MuxDialer(id), tc.net.PeerDialer(id)
		var err error
		if n, err = Start(c); err == nil {
			break
		}
		if attempt == 3 || !addrInUse(err) {
			tc.t.Fatal(err)
		}
		tc.t.Logf("starting %s again on other ports: %v", id, err)
	}
	tc.cfgs = append(tc.cfgs, c)
	tc.mu.Lock()
	tc.nodes = append(tc.nodes, n)
	tc.mu.Unlock()
	return n
}

// removeNode removes a node without force through n1, again while the
// answer is unavailable: n1 could not confirm what the node holds (a
// status call that failed or a slot without a leader in its view), which
// on this shared machine, under -race, happens now and then.
func (tc *testCluster) removeNode(id string) (res *model.RemoveResult, err error) {
	tc.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err = tc.nodes[0].svc.RemoveNode(opCtx(tc.t), id, false)
		if !isKind(err, model.KindUnavailable) || time.Now().After(deadline) {
			return res, err
		}
		tc.t.Logf("remove %s: %v (retrying)", id, err)
		time.Sleep(200 * time.Millisecond)
	}
}

// node returns the live node with the id.
func (tc *testCluster) node(id string) *Node {
	for _, n := range tc.live() {
		if n.ID() == id {
			return n
		}
	}
	tc.t.Fatalf("no live node %s", id)
	return nil
}

// info reads /v1/cluster through a live node other than skip, checking
// on the way that the node rows are what the slot rows say (replicas and
// leaderships are counted from the raft configurations, never the
// target): a node that leads or holds a replica is never shown empty.
func (tc *testCluster) info(skip string) *model.ClusterInfo {
	tc.t.Helper()
	for _, n := range tc.live() {
		if n.ID() == skip {
			continue
		}
		info, err := n.svc.Cluster(context.Background())
		if err != nil {
			tc.t.Fatal(err)
		}
		reps, led := map[string]int{}, map[string]int{}
		for _, s := range info.Slots {
			if s.Leader != "" {
				led[s.Leader]++
			}
			for _, id := range append(append([]string(nil), s.Replicas...), s.Nonvoters...) {
				reps[id]++
			}
		}
		for _, nd := range info.Nodes {
			if nd.Replicas != reps[nd.ID] || nd.SlotsLed != led[nd.ID] {
				tc.t.Fatalf("node %s shown with %d replicas, %d led; its slots say %d and %d", nd.ID, nd.Replicas, nd.SlotsLed, reps[nd.ID], led[nd.ID])
			}
		}
		return info
	}
	tc.t.Fatal("no live node")
	return nil
}

// settledCluster is met when every slot is healthy with rf replicas and
// no move is pending.
func (tc *testCluster) settledCluster(skip string, rf int) func() error {
	return func() error {
		info := tc.info(skip)
		for _, s := range info.Slots {
			if s.State != "healthy" || len(s.Replicas) != rf {
				return fmt.Errorf("slot %d: %s %v (target %v)", s.Slot, s.State, s.Replicas, s.Target)
			}
		}
		if m := info.Moves; m != nil && m.Pending > 0 {
			return fmt.Errorf("moves: %+v", *m)
		}
		return nil
	}
}

func nodeRow(info *model.ClusterInfo, id string) (model.NodeInfo, bool) {
	for _, nd := range info.Nodes {
		if nd.ID == id {
			return nd, true
		}
	}
	return model.NodeInfo{}, false
}

// Scale out 3 → 5 with a rebalance, then drain and remove two nodes back to
// 3, under load: every step finishes, the drained nodes leave the meta
// group only once they hold nothing, say so on /readyz, are refused
// removal while they hold anything, and the load sees nothing lost,
// duplicated or early.
func TestOpsScaleOutAndInUnderLoad(t *testing.T) {
	ev := &raftEvents{}
	tc := startCluster(t, 3, ev.tweak(opsTweak))
	ld := startLoad(t, tc)
	ld.ev = ev
	tc.addNode("n4")
	tc.addNode("n5")
	testutil.Eventually(t, 30*time.Second, "n4 and n5 in the node table", func() error {
		info := tc.info("")
		for _, id := range []string{"n4", "n5"} {
			if nd, ok := nodeRow(info, id); !ok || nd.Status != "alive" {
				return fmt.Errorf("%s: %+v", id, nd)
			}
		}
		return nil
	})
	moves, err := tc.nodes[0].svc.Rebalance(opCtx(tc.t), false)
	if err != nil || len(moves) == 0 {
		t.Fatalf("rebalance: %v %v", moves, err)
	}
	leaderMoves := map[int]string{}
	for _, m := range moves {
		if m.Kind == "leader" {
			leaderMoves[m.Slot] = m.To
		}
	}
	t.Logf("rebalance: %d moves, %d of them leaderships", len(moves), len(leaderMoves))
	start := time.Now()
	testutil.Eventually(t, 120*time.Second, "the rebalance done: 5 nodes, every slot healthy", tc.settledCluster("", 3))
	// Leaders too: each slot ends up led where the answer said, which
	// spreads the 12 leaderships over the 5 nodes (2 or 3 each).
	testutil.Eventually(t, 60*time.Second, "leaders moved as the rebalance said", func() error {
		info := tc.info("")
		for s, to := range leaderMoves {
			if l := info.Slots[s].Leader; l != to {
				return fmt.Errorf("slot %d led by %s, the rebalance said %s", s, l, to)
			}
		}
		for _, nd := range info.Nodes {
			if nd.SlotsLed < 2 || nd.SlotsLed > 3 {
				return fmt.Errorf("%s leads %d slots, want 2 or 3", nd.ID, nd.SlotsLed)
			}
		}
		return nil
	})
	info := tc.info("")
	for _, nd := range info.Nodes {
		if nd.Replicas < 7 || nd.Replicas > 8 {
			t.Fatalf("after the rebalance %s holds %d replicas, want 7 or 8 (36 over 5)", nd.ID, nd.Replicas)
		}
	}
	// The controller's progress, and its counter, live in memory on the
	// meta leader of the moment, and only the meta leader reports them: a
	// view without its answer has no progress, and a meta election during
	// the rebalance (the race detector on a shared machine can stall a
	// process past the heartbeat timeout) starts a new leader at 0. So
	// the progress is waited for, its Done is checked only when the meta
	// leader did not change, and the counter is added up over every node,
	// all five still running here.
	testutil.Eventually(t, 20*time.Second, "the meta leader's move progress, nothing pending", func() error {
		if info = tc.info(""); info.Moves == nil || info.Moves.Pending != 0 {
			return fmt.Errorf("move progress %+v (meta leader %q)", info.Moves, info.MetaLeader)
		}
		return nil
	})
	metaChanges := 0.0
	for _, n := range tc.live() {
		v, _ := metricSum(t, n, "timemachine_raft_leader_changes_total", map[string]string{"group": "meta"})
		metaChanges += v
	}
	if info.Moves.Done == 0 && metaChanges == 0 {
		t.Fatalf("move progress after the rebalance: %+v, and the meta leader never changed", *info.Moves)
	}
	t.Logf("rebalance to 5 nodes settled in %v (%d slots moved, as the meta leader %s saw them; %v meta leader changes seen)",
		time.Since(start).Round(time.Millisecond), info.Moves.Done, info.MetaLeader, metaChanges)
	done := 0.0
	for _, n := range tc.live() {
		v, _ := metricSum(t, n, "timemachine_moves_done_total", nil)
		done += v
	}
	if done < 1 {
		t.Errorf("timemachine_moves_done_total adds up to %v over the nodes after the rebalance moved %d slots", done, info.Moves.Done)
	}

	for _, id := range []string{"n5", "n4"} {
		// Refused while it holds replicas: conflict, or unavailable when
		// n1 could not confirm what the node holds.
		if _, err := tc.nodes[0].svc.RemoveNode(opCtx(tc.t), id, false); !isKind(err, model.KindConflict) && !isKind(err, model.KindUnavailable) {
			t.Fatalf("removing %s while it holds replicas: %v, want conflict", id, err)
		}
		start := time.Now()
		res, err := tc.nodes[0].svc.DrainNode(opCtx(tc.t), id)
		if err != nil || res.Node != id || res.Status != "draining" {
			t.Fatalf("drain %s: %+v %v", id, res, err)
		}
		// Refused again now that it drains, unless the drain already
		// finished: under -race on the shared machine the drain call
		// itself has taken 5 s, and a drain 2 to 3 s. A removal accepted
		// while the node still had a replica open is the bug this checks.
		drainCall := time.Since(start)
		n := tc.node(id)
		removedEarly := false
		if res, err := tc.nodes[0].svc.RemoveNode(opCtx(tc.t), id, false); err == nil {
			if open := n.slots.Len(); open != 0 {
				t.Fatalf("removing %s while it drains: %+v, accepted while it has %d replicas open (the drain call took %v)", id, res, open, drainCall)
			}
			t.Logf("%s already drained when its removal was asked (the drain call took %v): removed", id, drainCall)
			removedEarly = true
		} else if !isKind(err, model.KindConflict) && !isKind(err, model.KindUnavailable) {
			t.Fatalf("removing %s while it drains: %v, want conflict", id, err)
		}
		testutil.Eventually(t, 20*time.Second, id+" says it drains", func() error {
			if err := n.Ready(); err == nil || !strings.Contains(err.Error(), "draining") && !strings.Contains(err.Error(), "drained") && !(removedEarly && strings.Contains(err.Error(), "removed")) {
				return fmt.Errorf("readyz: %v", err)
			}
			return nil
		})
		testutil.Eventually(t, 120*time.Second, id+" drained", func() error {
			info := tc.info(id)
			nd, _ := nodeRow(info, id)
			if nd.Replicas != 0 || nd.SlotsLed != 0 {
				return fmt.Errorf("%s still holds %d, leads %d", id, nd.Replicas, nd.SlotsLed)
			}
			if n.slots.Len() != 0 {
				return fmt.Errorf("%s still has %d replicas open", id, n.slots.Len())
			}
			return tc.settledCluster(id, 3)()
		})
		testutil.Eventually(t, 30*time.Second, id+" out of the meta group", func() error {
			st := tc.nodes[0].meta.Status()
			if contains(st.Voters, id) || contains(st.Nonvoters, id) {
				return fmt.Errorf("meta voters %v nonvoters %v", st.Voters, st.Nonvoters)
			}
			return nil
		})
		if err := n.Ready(); !removedEarly && (err == nil || !strings.Contains(err.Error(), "drained")) {
			t.Fatalf("%s readyz after the drain: %v", id, err)
		}
		t.Logf("drain of %s took %v", id, time.Since(start).Round(time.Millisecond))
		if !removedEarly {
			// Until it is removed, a drained node is compacted with the others.
			cres, err := tc.nodes[0].svc.Compact(opCtx(tc.t))
			if err != nil {
				t.Fatal(err)
			}
			compacted := false
			for _, r := range cres {
				compacted = compacted || r.Node == id && r.OK
			}
			if !compacted {
				t.Fatalf("compact while %s is drained answers %+v, without it", id, cres)
			}
			if _, err := tc.removeNode(id); err != nil {
				t.Fatalf("remove %s: %v", id, err)
			}
		}
		testutil.Eventually(t, 20*time.Second, id+" told it was removed", func() error {
			if err := n.Ready(); err == nil || !strings.Contains(err.Error(), "removed") {
				return fmt.Errorf("readyz: %v", err)
			}
			return nil
		})
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		tc.set(tc.index(id), nil)
	}
	// Removed nodes do not come back: not in /v1/cluster, not through gossip.
	time.Sleep(3 * time.Second)
	info = tc.info("")
	if len(info.Nodes) != 3 {
		t.Fatalf("after removing n4 and n5: %+v", info.Nodes)
	}
	for _, n := range tc.live() {
		for _, m := range n.cluster.GossipMembers() {
			if m == "n4" || m == "n5" {
				t.Fatalf("%s still sees %s alive in gossip", n.ID(), m)
			}
		}
	}
	// Metrics: nodes by status on the meta leader, leaders and follower
	// lag on every node. (The moves done were checked when the rebalance
	// settled: the counter lives on whichever node was meta leader then.)
	testutil.Eventually(t, 20*time.Second, "a meta leader", func() error {
		if info = tc.info(""); info.MetaLeader == "" {
			return errors.New("none known")
		}
		return nil
	})
	// Waited for: the gauge is set by the meta leader's controller pass,
	// which may not have run yet on a leader that just took over.
	testutil.Eventually(t, 15*time.Second, "timemachine_cluster_nodes{status=alive} = 3 on the meta leader", func() error {
		info = tc.info("")
		if info.MetaLeader == "" {
			return errors.New("no meta leader")
		}
		if v, _ := metricSum(t, tc.node(info.MetaLeader), "timemachine_cluster_nodes", map[string]string{"status": "alive"}); v != 3 {
			return fmt.Errorf("%s: %v", info.MetaLeader, v)
		}
		return nil
	})
	// Waited for: an unplanned election (a stall under -race) leaves
	// slots without a leader for a moment.
	testutil.Eventually(t, 20*time.Second, "timemachine_slot_leaders adding up to 12, with follower lag where they lead", func() error {
		leaders := 0.0
		for _, n := range tc.live() {
			v, _ := metricSum(t, n, "timemachine_slot_leaders", nil)
			leaders += v
			if v > 0 {
				if _, ok := metricSum(t, n, "timemachine_follower_lag_entries", nil); !ok {
					return fmt.Errorf("%s leads %v slots and reports no follower lag", n.ID(), v)
				}
			}
		}
		if leaders != 12 {
			return fmt.Errorf("timemachine_slot_leaders adds up to %v", leaders)
		}
		return nil
	})
	ld.finish(60 * time.Second)
}

// metricSum adds up the samples of a metric on a node whose labels
// include want; found is false when the node has no such sample.
func metricSum(t *testing.T, n *Node, name string, want map[string]string) (sum float64, found bool) {
	t.Helper()
	mfs, err := n.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	sample:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue sample
				}
			}
			found = true
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum, found
}

// opCtx bounds an admin call of a test (remove, drain, compact,
// rebalance, transfer) at two minutes, well past what any of them takes
// here: one that waits on a peer that never answers fails the test with
// the call's error instead of holding the package until its timeout.
func opCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// untilAvailable runs op until it returns anything but 503 unavailable,
// for 30 s at most (the client's default bound on resending a call), and
// fails the test on any other error.
func untilAvailable(t *testing.T, op func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := op()
		if err == nil {
			return
		}
		if !isKind(err, model.KindUnavailable) || time.Now().After(deadline) {
			t.Fatal(err)
		}
		t.Logf("resending after: %v", err)
		time.Sleep(250 * time.Millisecond)
	}
}

func isKind(err error, k model.Kind) bool {
	var me *model.Error
	return errors.As(err, &me) && me.Kind == k
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// admin transfer: the slot's leadership moves, with a planned transfer, and
// stays — the balancer keeps it there (its passes run every 3 s) — until
// the next rebalance; a graceful stop of the node that leads the most
// (the SIGTERM hand-off) delivers nothing twice either.
func TestOpsTransferHoldsAndHandOffUnderLoad(t *testing.T) {
	ev := &raftEvents{}
	tc := startCluster(t, 3, ev.tweak(opsTweak))
	ld := startLoad(t, tc)
	ld.ev = ev
	info := tc.info("")
	s := info.Slots[5]
	to := ""
	for _, id := range s.Replicas {
		if id != s.Leader {
			to = id
			break
		}
	}
	res, err := tc.nodes[2].svc.TransferSlot(opCtx(tc.t), 5, to)
	if err != nil {
		t.Fatal(err)
	}
	if res.Slot != 5 || res.From != s.Leader || res.To != to || res.PreferredLeader != to || res.Leader != to {
		t.Fatalf("transfer answer %+v (leader was %s)", res, s.Leader)
	}
	// The counters follow raft's observations on a goroutine of their
	// own: they may lag the transfer's answer by a moment.
	testutil.Eventually(t, 3*time.Second, "the new leader's counters", func() error {
		if v, _ := metricSum(t, tc.node(to), "timemachine_raft_leader_changes_total", map[string]string{"group": "5"}); v < 1 {
			return fmt.Errorf("timemachine_raft_leader_changes_total{group=5} on %s = %v after a transfer to it", to, v)
		}
		if _, ok := metricSum(t, tc.node(to), "timemachine_raft_elections_total", map[string]string{"group": "5"}); !ok {
			return fmt.Errorf("no timemachine_raft_elections_total{group=5} on %s, which won slot 5's election", to)
		}
		return nil
	})
	testutil.Eventually(t, 3*time.Second, "every node's view shows the new leader", func() error {
		if l := tc.info("").Slots[5].Leader; l != to {
			return fmt.Errorf("led by %q", l)
		}
		return nil
	})
	deadline := time.Now().Add(12 * time.Second)
	for time.Now().Before(deadline) {
		info := tc.info("")
		if l := info.Slots[5].Leader; l != to {
			t.Fatalf("slot 5 led by %q %v after the transfer to %s", l, time.Until(deadline), to)
		}
		if info.Slots[5].PreferredLeader != to {
			t.Fatalf("preferred leader %q", info.Slots[5].PreferredLeader)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// A transfer to a node without a replica is refused.
	if _, err := tc.nodes[0].svc.TransferSlot(opCtx(tc.t), 5, "n9"); !isKind(err, model.KindNotFound) {
		t.Fatalf("transfer to an unknown node: %v", err)
	}
	// The next rebalance ends the preference; its dry run says so (a
	// leader move for slot 5) and changes nothing.
	leaderMove := func(moves []model.Move) bool {
		for _, m := range moves {
			if m.Slot == 5 && m.Kind == "leader" && (m.From == to || m.To != "") {
				return true
			}
		}
		return false
	}
	plan, err := tc.nodes[1].svc.Rebalance(opCtx(tc.t), true)
	if err != nil {
		t.Fatal(err)
	}
	if !leaderMove(plan) {
		t.Fatalf("the rebalance dry run plans no leader move for slot 5 (preferred leader %s): %+v", to, plan)
	}
	if p := tc.nodes[0].meta.State().Slots[5].PreferredLeader; p != to {
		t.Fatalf("preferred leader %q after a dry run, want %s", p, to)
	}
	moves, err := tc.nodes[0].svc.Rebalance(opCtx(tc.t), false)
	if err != nil {
		t.Fatal(err)
	}
	if !leaderMove(moves) {
		t.Fatalf("the rebalance answers no leader move for slot 5 (preferred leader %s): %+v", to, moves)
	}
	if p := tc.nodes[0].meta.State().Slots[5].PreferredLeader; p != "" {
		t.Fatalf("preferred leader %q after a rebalance", p)
	}
	// SIGTERM hand-off of the node leading the most slots.
	victim, most := "", -1
	for id, c := range tc.leaderCounts() {
		if c > most {
			victim, most = id, c
		}
	}
	if err := tc.node(victim).Close(); err != nil {
		t.Fatal(err)
	}
	tc.set(tc.index(victim), nil)
	testutil.Eventually(t, 20*time.Second, "every slot led again", func() error {
		for _, s := range tc.info("").Slots {
			if s.Leader == "" || s.Leader == victim {
				return fmt.Errorf("slot %d led by %q", s.Slot, s.Leader)
			}
		}
		return nil
	})
	ld.finish(60 * time.Second)
}

// The only node of a cluster holds every replica, so removing it is
// refused as for any node that holds replicas: 409 conflict (API.md §5),
// not 400 — the request is well formed; the cluster's state forbids it.
func TestOpsRemoveOnlyNodeConflicts(t *testing.T) {
	tc := startCluster(t, 1, nil)
	for _, force := range []bool{false, true} {
		if _, err := tc.nodes[0].svc.RemoveNode(opCtx(tc.t), "n1", force); !isKind(err, model.KindConflict) {
			t.Fatalf("remove the only node (force %v): %v, want conflict", force, err)
		}
	}
}

// A transfer to the node that leads already pins the slot there; the next
// rebalance ends the pin, and since no leadership goes anywhere it plans
// no move (a one-node cluster answered a "leader" move to no node, and
// --wait counted it: a black-box review).
func TestOpsRebalanceEndsAPinWithoutAMove(t *testing.T) {
	tc := startCluster(t, 1, nil)
	if _, err := tc.nodes[0].svc.TransferSlot(opCtx(tc.t), 3, "n1"); err != nil {
		t.Fatal(err)
	}
	if p := tc.nodes[0].meta.State().Slots[3].PreferredLeader; p != "n1" {
		t.Fatalf("preferred leader %q after the transfer", p)
	}
	for _, dry := range []bool{true, false} {
		moves, err := tc.nodes[0].svc.Rebalance(opCtx(tc.t), dry)
		if err != nil {
			t.Fatal(err)
		}
		if len(moves) != 0 {
			t.Fatalf("rebalance (dry run %v) of one node plans %+v", dry, moves)
		}
	}
	if p := tc.nodes[0].meta.State().Slots[3].PreferredLeader; p != "" {
		t.Fatalf("preferred leader %q after the rebalance", p)
	}
}

// admin remove refuses a node that holds replicas (409) and --force on a
// node that answers; a dead node removed with force has its replicas
// re-created elsewhere, disappears from /v1/cluster, and comes back only
// as a restarted process (which re-joins as a new member).
func TestOpsForceRemoveDeadNodeAndRejoin(t *testing.T) {
	// n4 is killed with the load running: callbacks it had in flight may
	// be delivered again by the slots' new leaders (an unplanned election,
	// allowed as after any crash), so duplicates are judged by raftEvents.
	ev := &raftEvents{}
	tc := startCluster(t, 4, ev.tweak(opsTweak))
	if _, err := tc.nodes[0].svc.RemoveNode(opCtx(tc.t), "n4", false); !isKind(err, model.KindConflict) {
		t.Fatalf("remove a node holding replicas: %v", err)
	}
	if _, err := tc.nodes[0].svc.RemoveNode(opCtx(tc.t), "n4", true); !isKind(err, model.KindConflict) {
		t.Fatalf("force-remove a node that answers: %v", err)
	}
	ld := startLoad(t, tc)
	ld.ev = ev
	tc.kill(3)
	testutil.Eventually(t, 20*time.Second, "n4 not answering", func() error {
		nd, _ := nodeRow(tc.info(""), "n4")
		if nd.Status == "alive" {
			return errors.New("still alive")
		}
		return nil
	})
	res, err := tc.nodes[0].svc.RemoveNode(opCtx(tc.t), "n4", true)
	if err != nil || !res.Forced || len(res.Slots) == 0 {
		t.Fatalf("force remove: %+v %v", res, err)
	}
	testutil.Eventually(t, 90*time.Second, "n4's replicas re-created on the others", tc.settledCluster("", 3))
	if _, ok := nodeRow(tc.info(""), "n4"); ok {
		t.Fatal("n4 still listed after its removal")
	}
	ld.waitAcked(120, 30*time.Second)
	ld.finish(60 * time.Second)
	// The dead node restarts: a new process, so it joins again, holding
	// nothing (its old replicas are deleted once their groups confirm it
	// is out).
	tc.restart(3)
	restarted := time.Now()
	// Usually a few seconds. When the meta leader's gossip still held the
	// old process as dead or suspect, it took the new one's alive only at
	// a later exchange: 20 s in 1 of 24 runs alone, over 30 s once in a
	// loaded race run, over 60 s once in a make test run; the restarted
	// node now syncs with every node it knows as it starts (cluster
	// syncWithAll). Not re-joining at all still fails.
	testutil.Eventually(t, 60*time.Second, "n4 re-joined", func() error {
		nd, ok := nodeRow(tc.info(""), "n4")
		if !ok || nd.Status != "alive" {
			return fmt.Errorf("n4: %+v", nd)
		}
		return nil
	})
	t.Logf("n4 re-joined %v after its restart", time.Since(restarted).Round(time.Millisecond))
	testutil.Eventually(t, 30*time.Second, "n4's stale replicas deleted", func() error {
		if n := tc.nodes[3].slots.Len(); n != 0 {
			return fmt.Errorf("%d replicas open", n)
		}
		return nil
	})
}

// A restarted node whose serf snapshot is gone and that has no --join (n1,
// the first node) rejoins the gossip through the addresses in its copy of
// the meta state.
func TestOpsRejoinWithoutSerfSnapshot(t *testing.T) {
	tc := startCluster(t, 3, nil)
	if err := tc.nodes[0].Close(); err != nil {
		t.Fatal(err)
	}
	tc.set(0, nil)
	if err := os.RemoveAll(filepath.Join(tc.cfgs[0].DataDir, "serf")); err != nil {
		t.Fatal(err)
	}
	if len(tc.cfgs[0].Join) != 0 {
		t.Fatal("n1 is expected to start without --join")
	}
	tc.restart(0)
	testutil.Eventually(t, 30*time.Second, "n1 back in everyone's gossip", func() error {
		for _, n := range tc.live() {
			seen := false
			for _, m := range n.cluster.GossipMembers() {
				if m == "n1" {
					seen = true
				}
			}
			if !seen {
				return fmt.Errorf("%s does not see n1 alive", n.ID())
			}
		}
		return nil
	})
	tc.waitReady(30 * time.Second)
}

// The meta leader changes, again and again, in the middle of a rebalance:
// each new one re-derives the moves from the targets and the raft
// configurations (nothing about a move is persisted) and finishes them.
func TestOpsMetaLeaderChangeMidMove(t *testing.T) {
	tc := startCluster(t, 3, func(i int, c *Config) { c.MoveConcurrency = 1 })
	// Data to copy, so moves take a while.
	far := time.Now().Add(time.Hour).UnixMilli()
	for b := 0; b < 40; b++ {
		createJobs(t, tc.nodes[b%3], "default", fmt.Sprintf("data%d", b), 1000, far, "http://127.0.0.1:1/hook")
	}
	tc.addNode("n4")
	testutil.Eventually(t, 30*time.Second, "n4 in the node table", func() error {
		if nd, ok := nodeRow(tc.info(""), "n4"); !ok || nd.Status != "alive" {
			return errors.New("not yet")
		}
		return nil
	})
	if _, err := tc.nodes[0].svc.Rebalance(opCtx(tc.t), false); err != nil {
		t.Fatal(err)
	}
	changes, midway := 0, 0
	deadline := time.Now().Add(120 * time.Second)
	for time.Now().Before(deadline) {
		info := tc.info("")
		if tc.settledCluster("", 3)() == nil {
			break
		}
		leader, _ := tc.nodes[0].meta.Leader()
		if leader == "" {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if m := info.Moves; m != nil && m.Pending > 0 && changes > 0 {
			midway++ // a meta leader that took over is carrying the moves on
		}
		if changes < 6 {
			tc.node(leader).meta.TransferLeadership(5 * time.Second)
			if l, _ := tc.nodes[0].meta.Leader(); l != leader {
				changes++
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := tc.settledCluster("", 3)(); err != nil {
		t.Fatalf("the rebalance did not finish: %v", err)
	}
	t.Logf("%d meta leader changes, %d observations of a new meta leader carrying moves on", changes, midway)
	if changes == 0 || midway == 0 {
		t.Fatalf("the meta leader did not change mid-move (%d changes, %d midway)", changes, midway)
	}
	if nd, _ := nodeRow(tc.info(""), "n4"); nd.Replicas != 9 {
		t.Fatalf("n4 holds %d replicas, want 9", nd.Replicas)
	}
}

// A rebalance planned while a node is down but inside its failure grace
// period (it keeps its replicas there) never plans a leadership onto it:
// its slots' leader moves name the stand-ins the balancer will pick, and
// every leader move of the answer is carried out, so `--wait` finishes.
func TestOpsRebalanceWithADeadNodePlansLeadersOnLiveNodes(t *testing.T) {
	tc := startCluster(t, 3, nil) // FailureGrace: an hour
	tc.kill(2)
	testutil.Eventually(t, 20*time.Second, "every slot led by n1 or n2", func() error {
		for _, s := range tc.info("").Slots {
			if s.Leader == "" || s.Leader == "n3" {
				return fmt.Errorf("slot %d led by %q", s.Slot, s.Leader)
			}
		}
		return nil
	})
	onDead := func(moves []model.Move) error {
		for _, m := range moves {
			if m.To == "n3" {
				return fmt.Errorf("move %+v plans the dead node", m)
			}
		}
		return nil
	}
	plan, err := tc.nodes[0].svc.Rebalance(opCtx(t), true)
	if err != nil {
		t.Fatal(err)
	}
	if err := onDead(plan); err != nil {
		t.Fatalf("dry run: %v (plan %+v)", err, plan)
	}
	moves, err := tc.nodes[0].svc.Rebalance(opCtx(t), false)
	if err != nil {
		t.Fatal(err)
	}
	if err := onDead(moves); err != nil {
		t.Fatalf("rebalance: %v (moves %+v)", err, moves)
	}
	testutil.Eventually(t, 30*time.Second, "every planned leadership in place", func() error {
		info := tc.info("")
		for _, m := range moves {
			if m.Kind == "leader" && m.To != "" && info.Slots[m.Slot].Leader != m.To {
				return fmt.Errorf("slot %d led by %q, planned %s", m.Slot, info.Slots[m.Slot].Leader, m.To)
			}
		}
		return nil
	})
}

// Routine moves log nothing at ERROR (API.md §5), also after a compaction
// truncated the raft logs: the leaders then send the replicas they add a
// snapshot, and the "failed to get log … log not found" raft logs before
// it is routine (raftgroup/logger.go). A black-box review found one such
// ERROR per slot in every move after `admin compact`.
func TestOpsMovesAfterCompactLogNoErrors(t *testing.T) {
	sink := &errorSink{}
	tc := startCluster(t, 4, func(i int, c *Config) {
		c.Logger = slog.New(sinkHandler{Handler: c.Logger.Handler(), sink: sink})
	})
	rcv := newReceiver(t)
	// One job per request: each its own raft entry, so that every slot's
	// log outgrows the 64 entries a snapshot keeps (slot.TrailingLogs)
	// and the compaction truncates it.
	trig := time.Now().Add(time.Hour).UnixMilli()
	for i := range 1200 {
		createJobs(t, tc.nodes[i%4], "default", fmt.Sprintf("cmp%d", i), 1, trig, rcv.url)
	}
	sink.reset()
	if _, err := tc.nodes[0].svc.Compact(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	id := tc.nodes[3].ID()
	// Right after the compaction, on a loaded host (CI under -race), the
	// drain's meta catch-up may take longer than its 2 s and answer 503:
	// the client resends those, and so does this test.
	untilAvailable(t, func() error {
		_, err := tc.nodes[0].svc.DrainNode(opCtx(t), id)
		return err
	})
	testutil.Eventually(t, 120*time.Second, id+" drained", func() error {
		nd, _ := nodeRow(tc.info(id), id)
		if nd.Replicas != 0 || nd.SlotsLed != 0 {
			return fmt.Errorf("%s still holds %d, leads %d", id, nd.Replicas, nd.SlotsLed)
		}
		return tc.settledCluster(id, 3)()
	})
	if recs := sink.records(); len(recs) > 0 {
		t.Fatalf("a compaction and a drain logged %d lines at ERROR, want none; the first: %q", len(recs), recs[:min(3, len(recs))])
	}
}

// errorSink keeps what the handlers wrapping it logged at ERROR.
type errorSink struct {
	mu   sync.Mutex
	recs []string
}

func (s *errorSink) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs = nil
}

func (s *errorSink) records() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.recs)
}

// sinkHandler passes records on and copies those at ERROR to sink, with
// the attributes they were logged with (the node, the group).
type sinkHandler struct {
	slog.Handler
	sink  *errorSink
	attrs string
}

func (h sinkHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelError || h.Handler.Enabled(ctx, l)
}

func (h sinkHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		h.sink.mu.Lock()
		h.sink.recs = append(h.sink.recs, h.attrs+r.Message)
		h.sink.mu.Unlock()
	}
	if !h.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h sinkHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return sinkHandler{Handler: h.Handler.WithAttrs(as), sink: h.sink, attrs: h.attrs + fmt.Sprint(as) + " "}
}

func (h sinkHandler) WithGroup(name string) slog.Handler {
	return sinkHandler{Handler: h.Handler.WithGroup(name), sink: h.sink, attrs: h.attrs}
}
