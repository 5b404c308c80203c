package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/timemachine-db/timemachine/internal/nemesis/check"
	"github.com/timemachine-db/timemachine/internal/nemesis/cluster"
	"github.com/timemachine-db/timemachine/internal/nemesis/fault"
	"github.com/timemachine-db/timemachine/internal/nemesis/history"
	"github.com/timemachine-db/timemachine/internal/nemesis/netfault"
	"github.com/timemachine-db/timemachine/internal/nemesis/workload"
)

// Config is one run.
type Config struct {
	Bin     string // bin/timemachine
	Out     string // the run's directory: history, deliveries, node logs, report
	Seed    uint64
	Nodes   int // 3 or 5
	Cycles  int
	Kinds   []fault.Kind
	MaxHold time.Duration // caps every fault's duration (0: none)
	Clients int
	// Network: "auto" (namespaces when possible), "netns" or "loopback".
	Network string
	// FailoverTarget bounds kill and pause failovers; PartitionTarget the
	// time until the majority serves writes after a one-node cut.
	FailoverTarget  time.Duration
	PartitionTarget time.Duration
	// SettleTimeout bounds the wait for a healthy cluster after each cycle.
	SettleTimeout time.Duration
	Policy        workload.Policy
	// Progress gets the human-readable account of the run.
	Progress io.Writer
	// Command is how the run was started (recorded; printed for replays).
	Command string
	// KeepData keeps the nodes' data directories (they are removed at the
	// end otherwise; logs are always kept).
	KeepData bool
	// RaftLogLevel, when set, is every server's --raft-log-level (its
	// default, warn, leaves elections out of the logs: what a candidate
	// did and why it lost shows at info).
	RaftLogLevel string
}

const (
	coll             = "nemesis"
	callbackTimeout  = 2 * time.Second
	probeTimeout     = 30 * time.Second
	probeTryTimeout  = time.Second
	formTimeout      = 90 * time.Second
	drainAfterLast   = 60 * time.Second
	quietAfterDrain  = 3 * time.Second
	finalReadClients = 4
	// The capped route: its cap, and how long after a fault the checker
	// allows it exceeded (a place lives 5 s unrenewed, inflight.Hold).
	routeName = "capped"
	// pipedRoute: half the workload's jobs go through it (pipelined).
	pipedRoute = "piped"
	routeCap   = 1
	routeGrace = 6 * time.Second
)

type run struct {
	cfg   Config
	log   *slog.Logger
	out   io.Writer
	clock *history.Clock
	rec   *history.Recorder
	topo  *netfault.Topology // nil on loopback
	cl    *cluster.Cluster
	rcv   *workload.Receiver
	wl    *workload.Workload
	http  *http.Client
	meta  history.Meta

	mu      sync.Mutex
	faultID int
	clock0  bool // the build supports clock faults
}

func (r *run) printf(format string, a ...any) {
	fmt.Fprintf(r.out, format+"\n", a...)
}

// Run runs the cluster under the workload and the fault schedule, then the
// checkers; it returns their report. An error means the run itself could
// not be carried out (no binary, the cluster never formed, ...).
func Run(ctx context.Context, cfg Config) (check.Report, error) {
	if cfg.Nodes == 0 {
		cfg.Nodes = 3
	}
	if cfg.Clients == 0 {
		cfg.Clients = 4
	}
	if cfg.FailoverTarget == 0 {
		cfg.FailoverTarget = 2 * time.Second
	}
	if cfg.PartitionTarget == 0 {
		cfg.PartitionTarget = 5 * time.Second
	}
	if cfg.SettleTimeout == 0 {
		cfg.SettleTimeout = 60 * time.Second
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return check.Report{}, err
	}
	unlock, err := lockOut(cfg.Out)
	if err != nil {
		return check.Report{}, err
	}
	defer unlock()
	logF, err := os.Create(filepath.Join(cfg.Out, "runner.log"))
	if err != nil {
		return check.Report{}, err
	}
	defer logF.Close()
	r := &run{cfg: cfg, out: cfg.Progress, log: slog.New(slog.NewTextHandler(logF, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	r.printf("nemesis: seed %d (replay: %s)", cfg.Seed, replayCommand(cfg))
	err = r.execute(ctx)
	r.teardown()
	if err != nil {
		return check.Report{}, err
	}
	rep, err := Check(cfg.Out)
	if err != nil {
		return rep, err
	}
	f, err := os.Create(filepath.Join(cfg.Out, "report.txt"))
	if err == nil {
		rep.Write(f, 0)
		f.Close()
	}
	rep.Write(r.out, 20)
	r.printf("history, deliveries, node logs and the full report: %s", cfg.Out)
	return rep, nil
}

// Options derives the checkers' options from a run's meta.
func Options(m history.Meta) check.Options {
	return check.Options{
		Fire: check.FireOptions{
			CallbackTimeout:   time.Duration(m.CallbackTimeoutMs) * time.Millisecond,
			FailoverAllowance: time.Duration(m.FailoverAllowanceMs) * time.Millisecond,
			DeadlineWall:      m.DrainedUntil,
		},
		FailoverTarget: time.Duration(m.FailoverTargetMs) * time.Millisecond,
	}
}

// Check loads a run from dir and runs every checker over it.
func Check(dir string) (check.Report, error) {
	h, err := history.Load(dir)
	if err != nil {
		return check.Report{}, err
	}
	return check.Run(h, Options(h.Meta)), nil
}

func replayCommand(cfg Config) string {
	if cfg.Command != "" {
		return cfg.Command
	}
	return fmt.Sprintf("nemesis -seed %d -nodes %d -cycles %d -faults %s", cfg.Seed, cfg.Nodes, cfg.Cycles, fault.Names(cfg.Kinds))
}

func (r *run) execute(ctx context.Context) error {
	cfg := r.cfg
	r.clock = history.NewClock()
	rec, err := history.NewRecorder(cfg.Out, r.clock)
	if err != nil {
		return err
	}
	r.rec = rec
	r.meta = history.Meta{Seed: cfg.Seed, Nodes: cfg.Nodes, Cycles: cfg.Cycles, StartWall: r.clock.StartWall(),
		Binary: cfg.Bin, Version: cluster.Version(cfg.Bin), CallbackTimeoutMs: callbackTimeout.Milliseconds(),
		FailoverAllowanceMs: (cfg.FailoverTarget + time.Second).Milliseconds(), FailoverTargetMs: cfg.FailoverTarget.Milliseconds(),
		Unsupported: map[string]string{}, NodeAddrs: map[string]string{}, Command: replayCommand(cfg)}
	for _, k := range cfg.Kinds {
		r.meta.Faults = append(r.meta.Faults, string(k))
	}

	// The network.
	var nw cluster.Net = cluster.Loopback{}
	r.meta.Mode = "loopback"
	var nsErr error
	switch cfg.Network {
	case "loopback":
		nsErr = errors.New("-network loopback")
	default:
		nsErr = netfault.Available()
		if nsErr == nil {
			netfault.CleanupStale()
			r.topo, nsErr = netfault.New(cluster.BindPort, r.log)
		}
		if nsErr != nil && cfg.Network == "netns" {
			return fmt.Errorf("network namespaces: %w", nsErr)
		}
	}
	if r.topo != nil {
		nw, r.meta.Mode = r.topo, "netns"
	} else {
		for _, k := range cfg.Kinds {
			if k.Network() {
				r.meta.Unsupported[string(k)] = "needs network namespaces: " + nsErr.Error()
			}
		}
	}
	// Clock faults need the server's hidden --debug-faults hook.
	var extra []string
	if cluster.SupportsFlag(cfg.Bin, "--debug-faults") {
		extra = append(extra, "--debug-faults")
		r.clock0 = true
	} else if hasKind(cfg.Kinds, fault.Clock) {
		r.meta.Unsupported[string(fault.Clock)] = "not supported by this build (no --debug-faults flag)"
	}
	if cfg.RaftLogLevel != "" {
		extra = append(extra, "--raft-log-level", cfg.RaftLogLevel)
	}
	r.printf("network: %s; binary: %s (%s)", r.meta.Mode, cfg.Bin, r.meta.Version)
	for k, why := range r.meta.Unsupported {
		r.printf("%s faults: %s", k, why)
	}

	cl, err := cluster.New(cluster.Config{Bin: cfg.Bin, Dir: filepath.Join(cfg.Out, "cluster"), FixedPorts: r.topo != nil,
		ExtraArgs: extra, Log: r.log}, nw)
	if err != nil {
		return err
	}
	r.cl = cl
	r.http = cl.Client(5 * time.Second)

	// The schedule, printed before anything runs.
	steps := fault.Schedule(cfg.Seed, fault.Options{Cycles: cfg.Cycles, Kinds: cfg.Kinds, MaxHold: cfg.MaxHold})
	r.printf("schedule (%d cycles of %s):", len(steps), fault.Names(cfg.Kinds))
	for _, s := range steps {
		r.printf("  %3d  %s", s.Cycle, s)
	}

	// The cluster.
	start := time.Now()
	var first *cluster.Node
	for i := 0; i < cfg.Nodes; i++ {
		var join []string
		if first != nil {
			join = []string{first.SerfAddr}
		}
		n, err := cl.AddNode(cfg.Nodes, join)
		if err != nil {
			return err
		}
		if first == nil {
			first = n
		}
		r.meta.NodeAddrs[n.ID] = n.Host
	}
	for _, n := range cl.Nodes() {
		if err := n.Start(); err != nil {
			return err
		}
	}
	if _, err := cl.WaitHealthy(ctx, formTimeout); err != nil {
		return fmt.Errorf("the cluster did not form: %w", err)
	}
	r.printf("cluster of %d formed in %v", cfg.Nodes, time.Since(start).Round(time.Millisecond))

	// The receiver, on the clients' side of the network.
	var ln net.Listener
	if r.topo != nil {
		ln, err = r.topo.Listen("tcp", net.JoinHostPort(r.topo.HubIP(), "0"))
	} else {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		return fmt.Errorf("receiver: %w", err)
	}
	r.rcv = workload.NewReceiver(ln, r.clock, rec, cfg.Policy, cfg.Seed, r.nodeOf)
	if err := r.createCollection(ctx); err != nil {
		return err
	}
	if err := r.createRoute(ctx); err != nil {
		return err
	}
	r.saveMeta()

	r.wl = workload.New(workload.Config{Coll: coll, Clients: cfg.Clients, Seed: cfg.Seed, CallbackURL: r.rcv.URL(),
		CallbackTimeout: callbackTimeout, TriggerMin: 200 * time.Millisecond, TriggerMax: 4 * time.Second, PastFraction: 0.1,
		ThinkMin: 20 * time.Millisecond, ThinkMax: 80 * time.Millisecond, CreateRetries: 1, PipelinedRoute: pipedRoute},
		rec, cl.Client(6*time.Second), r.targets)
	capped := &workload.Capped{Route: routeName, Coll: "default", Every: 100 * time.Millisecond,
		TriggerMin: 300 * time.Millisecond, TriggerMax: 1500 * time.Millisecond, Seed: cfg.Seed,
		Client: cl.Client(3 * time.Second), Targets: r.targets}
	wctx, stopWork := context.WithCancel(ctx)
	workDone := make(chan struct{})
	go func() { defer close(workDone); r.wl.Run(wctx) }()
	cappedDone := make(chan struct{})
	go func() { defer close(cappedDone); capped.Run(wctx) }()
	sleepCtx(ctx, 2*time.Second) // a steady state first

	for _, s := range steps {
		if ctx.Err() != nil {
			break
		}
		c := r.cycle(ctx, s)
		rec.Cycle(c)
		_ = rec.Flush()
		if !c.Recovered && !r.repair(ctx) {
			r.printf("the cluster did not recover after cycle %d; stopping the schedule here", s.Cycle)
			break
		}
	}
	stopWork()
	<-workDone
	<-cappedDone
	r.printf("workload stopped: %d jobs written, %d deliveries so far; capped route: %d jobs created, %d creates refused or unanswered",
		len(r.wl.Jobs()), r.rcv.Count(), capped.Created, capped.Failed)

	// Everything healed, then wait for what is owed.
	r.repair(ctx)
	r.drain(ctx)
	r.printf("final reads of %d jobs", len(r.wl.Jobs()))
	r.wl.FinalReads(ctx, 200, finalReadClients)
	r.mu.Lock()
	r.meta.DrainedUntil = r.clock.Now().Wall
	r.mu.Unlock()
	r.saveMeta()
	return nil
}

// saveMeta records the run's meta as it is now (the last record wins).
func (r *run) saveMeta() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rec.Meta(r.meta)
}

// unsupported says why a fault kind cannot run here, if it cannot.
func (r *run) unsupported(k fault.Kind) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	why, ok := r.meta.Unsupported[string(k)]
	return why, ok
}

func hasKind(ks []fault.Kind, k fault.Kind) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

// lockOut takes the run directory for this run alone (flock on
// out/.lock): two runs in one directory start nodes on the same data
// directories and delete each other's, and the history they leave is
// neither's (it happened: a run started twice by accident looked like a
// cluster that lost two nodes' data in a kill-all).
func lockOut(out string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(out, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("another nemesis run is using %s (%w): wait for it or choose another -out", out, err)
	}
	return func() { _ = f.Close() }, nil
}

// teardown stops the processes, removes the namespaces and closes the
// record.
func (r *run) teardown() {
	if r.cl != nil {
		r.cl.Stop()
	}
	if r.rcv != nil {
		r.rcv.Close()
	}
	if r.topo != nil {
		if err := r.topo.Close(); err != nil {
			r.log.Warn("removing the namespaces", "error", err)
		}
	}
	if r.rec != nil {
		if err := r.rec.Close(); err != nil {
			r.printf("writing the history: %v", err)
		}
	}
	if r.cl != nil && !r.cfg.KeepData {
		for _, n := range r.cl.Nodes() {
			_ = os.RemoveAll(n.DataDir)
		}
	}
}

// nodeOf names the node a callback came from.
func (r *run) nodeOf(ip string) string {
	if r.topo == nil {
		return ""
	}
	if i := r.topo.NodeIndex(ip); i >= 0 {
		return fmt.Sprintf("n%d", i+1)
	}
	return ""
}

// targets are the nodes clients send requests to: every member whose
// process runs, paused or cut off included (clients do not know).
func (r *run) targets() []workload.Endpoint {
	var out []workload.Endpoint
	for _, n := range r.cl.Members() {
		if n.Running() {
			out = append(out, workload.Endpoint{ID: n.ID, HTTPAddr: n.HTTPAddr})
		}
	}
	return out
}

func (r *run) createCollection(ctx context.Context) error {
	members := r.cl.Members()
	st, b, err := r.cl.Do(ctx, members[0], "PUT", "/v1/collections/"+coll, map[string]any{})
	if err != nil || (st != http.StatusCreated && st != http.StatusOK) {
		return fmt.Errorf("PUT /v1/collections/%s: %d %s %v", coll, st, b, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range members {
		for {
			st, _, err := r.cl.Do(ctx, n, "GET", "/v1/collections/"+coll, nil)
			if err == nil && st == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("collection %s not visible through %s: %d %v", coll, n.ID, st, err)
			}
			sleepCtx(ctx, 20*time.Millisecond)
		}
	}
	return nil
}

// createRoute puts the capped route: max_in_flight 1, below the node
// count, so every request takes a place from the meta leader (package
// inflight); the in-flight checker counts its requests open at once.
// It also puts the pipelined route half the workload's jobs name.
func (r *run) createRoute(ctx context.Context) error {
	members := r.cl.Members()
	body := map[string]any{"webhook_url": r.rcv.URL() + workload.RoutePath, "max_in_flight": routeCap, "timeout": callbackTimeout.String()}
	st, b, err := r.cl.Do(ctx, members[0], "PUT", "/v1/routes/"+routeName, body)
	if err != nil || (st != http.StatusCreated && st != http.StatusOK) {
		return fmt.Errorf("PUT /v1/routes/%s: %d %s %v", routeName, st, b, err)
	}
	r.mu.Lock()
	r.meta.RouteMaxInFlight, r.meta.RouteGraceMs = routeCap, routeGrace.Milliseconds()
	r.mu.Unlock()
	// The pipelined route: the workload's own callbacks, half of them.
	body = map[string]any{"webhook_url": r.rcv.URL() + "/cb/piped", "pipeline": true, "timeout": callbackTimeout.String()}
	st, b, err = r.cl.Do(ctx, members[0], "PUT", "/v1/routes/"+pipedRoute, body)
	if err != nil || (st != http.StatusCreated && st != http.StatusOK) {
		return fmt.Errorf("PUT /v1/routes/%s: %d %s %v", pipedRoute, st, b, err)
	}
	return nil
}

// repair makes every member run again: resumes paused ones, starts the
// stopped, heals the network, and waits for health. It reports whether the
// cluster is healthy.
func (r *run) repair(ctx context.Context) bool {
	if r.topo != nil {
		if err := r.topo.Heal(); err != nil {
			r.log.Error("heal network", "error", err)
		}
	}
	for _, n := range r.cl.Members() {
		if n.Paused() {
			_ = n.Resume()
		}
		if !n.Running() {
			if err := n.Start(); err != nil {
				r.log.Error("restart", "node", n.ID, "error", err)
			}
		}
	}
	if _, err := r.cl.WaitHealthy(ctx, r.cfg.SettleTimeout); err != nil {
		r.printf("  repair: %v", err)
		return false
	}
	return true
}

// drain waits until every job owed a delivery has one (or 60 s after the
// last trigger time), then a little more for repeats to show.
func (r *run) drain(ctx context.Context) {
	last := time.UnixMilli(r.wl.LastTrigger())
	deadline := last.Add(drainAfterLast)
	r.mu.Lock()
	opt := Options(r.meta).Fire
	r.mu.Unlock()
	for ctx.Err() == nil {
		opt.DeadlineWall = r.clock.Now().Wall
		res := check.Fires(r.rec.Snapshot(), opt)
		now := time.Now()
		if len(res.Lost) == 0 && now.After(last.Add(2*time.Second)) {
			break
		}
		if now.After(deadline) {
			r.printf("drain: %d jobs still undelivered %v after the last trigger time", len(res.Lost), drainAfterLast)
			break
		}
		sleepCtx(ctx, 2*time.Second)
	}
	sleepCtx(ctx, quietAfterDrain)
}

// sleepCtx waits d (a fault's duration or a pacing interval, not a wait
// for some state) or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// ids lists nodes' ids.
func ids(ns []*cluster.Node) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.ID
	}
	return out
}

func sortedIDs(ns []*cluster.Node) []string {
	out := ids(ns)
	sort.Strings(out)
	return out
}

func joinIDs(ns []*cluster.Node) string { return strings.Join(ids(ns), ",") }
