package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // served only with --pprof-addr
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/timemachine-db/timemachine/cluster"
	"github.com/timemachine-db/timemachine/forward"
	"github.com/timemachine-db/timemachine/inflight"
	"github.com/timemachine-db/timemachine/liveness"
	"github.com/timemachine-db/timemachine/meta"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/raftgroup"
	"github.com/timemachine-db/timemachine/rpc/beat"
	"github.com/timemachine-db/timemachine/rpc/httpapi"
	"github.com/timemachine-db/timemachine/rpc/mux"
	"github.com/timemachine-db/timemachine/rpc/peer"
	"github.com/timemachine-db/timemachine/rpc/webhook"
	"github.com/timemachine-db/timemachine/service"
	"github.com/timemachine-db/timemachine/slot"
	"github.com/timemachine-db/timemachine/storage"
)

// The service is the API's backend.
var _ httpapi.Backend = (*service.Service)(nil)

// Node is one running timemachine server: the parts below, started and
// stopped in order. It holds no logic of its own.
type Node struct {
	cfg  Config
	id   *identity
	log  *slog.Logger
	lock *os.File

	db      *storage.DB
	logDB   *storage.RaftLogDB
	mux     *mux.Mux
	beats   *beat.Coalescer // the slots' heartbeats, coalesced per peer node
	rpcSrv  *peer.Server
	rpc     *peer.Client
	meta    *meta.Replica
	slots   *slot.Registry
	fwd     *forward.Forwarder
	cluster *cluster.Cluster
	svc     *service.Service
	sec     *security

	// wired is closed once every part exists: work that the meta replica
	// may start before that (its leadership) waits for it. clustered is
	// closed once the cluster has started (its gossip exists): the
	// controller waits for it.
	wired     chan struct{}
	clustered chan struct{}
	fireSlots chan struct{}
	targets   *slot.Targets
	lanes     *slot.Lanes // route delivery control, shared by the node's slots
	// places and holder hold max_in_flight cluster-wide for routes capped
	// below the node count (package inflight): places grants while this
	// node leads the meta group, holder asks for this node's requests.
	places   *inflight.Owner
	holder   *inflight.Holder
	hosts    hostsCache
	dlv      *deliverer
	webhook  *webhook.Client
	metrics  *metrics
	live     *liveness.Tracker
	liveKick chan struct{}
	// backMu/back: closed (and replaced) when a peer the liveness check
	// had found dead answers again (waitReachable).
	backMu sync.Mutex
	back   chan struct{}
	// awaiting: groups (key/dead leader) whose replica here waits for the
	// other followers' verdicts before it campaigns (hurryorder.go).
	awaitMu  sync.Mutex
	awaiting map[string]bool
	dclock   *debugClock // --debug-faults only
	api      *httpapi.Server
	httpLn   net.Listener
	pprof    *http.Server

	stop      chan struct{}  // closed when the node stops: ends its own loops
	loops     sync.WaitGroup // the node's own loops (resuming deletions)
	servers   sync.WaitGroup // rpc, HTTP and pprof servers
	fatal     chan error
	fatalOnce sync.Once
	closeOnce sync.Once
	serveDone chan struct{}
}

// Start opens the data directory and starts every part of the node. It
// returns once the node serves HTTP; the cluster forms (or the node
// rejoins it) and slots elect their leaders right after.
func Start(cfg Config) (_ *Node, err error) {
	var dclock *debugClock
	if cfg.DebugFaults {
		dclock = &debugClock{}
		cfg.Clock = dclock.now
	}
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, &ConfigError{Err: err}
	}
	n := &Node{
		cfg: cfg, log: cfg.Logger, slots: slot.NewRegistry(), wired: make(chan struct{}), clustered: make(chan struct{}),
		fatal: make(chan error, 1), serveDone: make(chan struct{}), stop: make(chan struct{}),
		dclock: dclock, liveKick: make(chan struct{}, 1),
	}
	defer func() {
		if err != nil {
			n.closeParts(false)
		}
	}()
	if n.lock, err = lockDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	if n.id, err = loadIdentity(&cfg); err != nil {
		return nil, err
	}
	n.log = n.log.With("node", n.id.NodeID)
	n.log.Info("starting", "data_dir", cfg.DataDir, "http_addr", cfg.HTTPAddr, "bind_addr", cfg.BindAddr, "serf_addr", cfg.SerfAddr)
	if n.sec, err = loadSecurity(&cfg, n.log); err != nil {
		return nil, err
	}
	n.cfg = cfg // loadSecurity sets the TLS dialers

	if n.db, err = storage.Open(filepath.Join(cfg.DataDir, "pebble"), storage.Options{CacheBytes: cfg.CacheBytes, Logger: n.log, OnFatal: n.onFatal}); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(cfg.DataDir, "raft"), 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", filepath.Join(cfg.DataDir, "raft"), err)
	}
	if n.logDB, err = storage.OpenRaftLogDB(filepath.Join(cfg.DataDir, "raft", "slots.db"), n.log); err != nil {
		return nil, err
	}
	n.finishDestroys()
	n.logDB.SetOnFatal(n.onFatal)
	muxOpts := mux.Options{Logger: n.log}
	if n.sec.peerTLS != nil {
		muxOpts.TLS = n.sec.peerTLS.PeerServerConfig()
	}
	if n.mux, err = mux.ListenWith(cfg.BindAddr, muxOpts); err != nil {
		return nil, err
	}
	rpcLn, err := n.mux.Listen(mux.ProtoRPC, 0)
	if err != nil {
		return nil, err
	}
	n.rpcSrv = peer.NewServer(rpcLn, n.log)
	n.rpcSrv.SetClock(cfg.Clock)
	n.rpc = peer.NewClient(peer.ClientOptions{Dial: cfg.PeerDialer, Logger: n.log, OnConnLost: n.connLost})
	n.beats = beat.New(n.rpc, beat.Options{Logger: n.log, Flush: beatFlush(cfg.Timing), HoldAnswers: beatHold(cfg.Timing), Park: beatPark(cfg.Timing),
		WaitReachable: n.waitReachable})
	n.beats.Serve(n.rpcSrv)
	interval, lease, deadAfter := livenessTiming(cfg.Timing)
	n.live = liveness.New(liveness.Config{
		Self: n.id.NodeID, Peers: n.livePeers, Pinger: n.rpc, Clock: cfg.Clock,
		Interval: interval, Lease: lease, DeadAfter: deadAfter, MaxOffset: cfg.MaxClockOffset,
		OnChange: n.kickLiveness, OnStep: n.clockStepped, Logger: n.log,
	})

	metaStream, err := n.mux.StreamLayer(mux.MetaGroup, nil)
	if err != nil {
		return nil, err
	}
	metaStream.Dialer = cfg.MuxDialer
	n.metrics = newMetrics(n)
	if n.meta, err = meta.Open(meta.Config{
		NodeID: n.id.NodeID, Dir: filepath.Join(cfg.DataDir, "raft", "meta"), Stream: metaStream,
		Logger: n.log, RaftLogLevel: cfg.RaftLogLevel, Timing: cfg.Timing,
		OnLeader: n.runController,
		OnChange: func(*raftfsm.MetaState) { n.kickReconcile() },
		OnFatal:  n.onFatal,
		OnEvent:  func(e raftgroup.Event) { n.metrics.raftEvent("meta", e) },
		Floors:   n.logDB,
		WrapTransport: func(nt *raft.NetworkTransport) raft.Transport {
			return n.beats.WrapAlwaysOpen(mux.MetaGroup, nt)
		},
		LeaderlessConsent: func(voters []string) bool { return n.leaderlessConsent(metaGroupKey, voters) },
	}); err != nil {
		return nil, err
	}

	n.sec.egress.SetInternal(n.isInternal)
	n.webhook = webhook.New(webhook.Options{Egress: n.sec.egress})
	n.dlv = newDeliverer(n.webhook, n.sec.secrets)
	n.fireSlots = make(chan struct{}, cfg.FireConcurrency)
	n.targets = slot.NewTargets(cfg.FirePerTarget)
	n.places = inflight.NewOwner(inflight.OwnerConfig{
		Self: n.id.NodeID, Peers: n.livePeers, Census: inflight.CensusOver(n.rpc), Dead: n.live.Dead, Logger: n.log,
		Serving: func() bool { return n.fwd != nil && n.fwd.MetaQuorate() },
		Local:   func() []inflight.LeaseRef { return n.holder.Held() },
	})
	n.holder = inflight.NewHolder(inflight.HolderConfig{
		Self: n.id.NodeID, Owner: n.meta.Leader, Client: n.rpc, Local: n.places, Logger: n.log,
	})
	n.lanes = slot.NewLanes(slot.LanesConfig{
		Clock: cfg.Clock, Batch: n.dlv, Metrics: n.metrics, Logger: n.log,
		SlotCount: func() int { return n.meta.State().SlotCount },
		Hosts:     n.slotHosts,
		InFlight:  n.holder,
		Route:     func(name string) (*model.Route, bool) { return n.meta.State().Route(name) },
	})

	if n.httpLn, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		return nil, fmt.Errorf("listen on http address %s: %w", cfg.HTTPAddr, err)
	}
	n.fwd = forward.New(forward.Config{
		NodeID: n.id.NodeID, Slots: n.slots, Meta: n.meta, Client: n.rpc, Logger: n.log,
		AddrOf: func(id string) string { return n.cluster.AddrOf(id) },
		Dead:   n.live.Dead,
	})
	n.cluster = cluster.New(cluster.Config{
		NodeID: n.id.NodeID, HTTPAddr: n.HTTPAddr(), BindAddr: n.BindAddr(),
		SerfAddr: cfg.SerfAddr, SerfDir: filepath.Join(cfg.DataDir, "serf"), Join: cfg.Join,
		BootstrapExpect: cfg.BootstrapExpect, FastGossip: cfg.FastGossip, GossipKey: n.sec.gossipKey,
		SlotCount: n.id.SlotCount, Replicas: cfg.Replicas, FailureGrace: cfg.FailureGrace,
		MaxMoves: cfg.MoveConcurrency, ReplicaWarnAfter: cfg.ReplicaWarnAfter,
		Clock: cfg.Clock, Logger: n.log,
		Meta: n.meta, Slots: n.slots, Forward: n.fwd, Client: n.rpc,
		OpenSlot:       n.openSlot,
		HasSlotData:    n.hasSlotData,
		AdoptSlotCount: n.adoptSlotCount,
		CompactStorage: func(ctx context.Context) error { return n.db.Compact(ctx, []byte{0}, []byte{0xff, 0xff}) },
		// Heard: tracked by the liveness check (every node of the table
		// but those that left) and not judged dead.
		Hears: func(id string) bool { return n.live.Addr(id) != "" && !n.live.Dead(id) },
		Unreachable: func(id string) bool {
			return n.live.Addr(id) != "" && n.live.Dead(id) && n.live.Silent(id) >= unreachableAfter
		},
	})
	n.svc = service.New(service.Config{
		Meta: n.meta, Forward: n.fwd, Cluster: n.cluster, Clock: cfg.Clock, Logger: n.log,
		OnCreated: func(k int) { n.metrics.created.Add(float64(k)) },
		Secrets:   n.sec.sealer(), MaxCollections: cfg.MaxCollections, MaxRoutes: cfg.MaxRoutes,
		Ready: n.clockReady,
	})
	var debugClockFn func(time.Duration) error
	if cfg.DebugFaults {
		debugClockFn = n.SetClockOffset
	}
	n.api = httpapi.New(n.svc, httpapi.Options{
		DebugClock:     debugClockFn,
		Clock:          cfg.Clock,
		MaxMetaBytes:   cfg.MaxMetaBytes,
		Logger:         n.log,
		MetricsHandler: n.metrics.handler(),
		Observe:        n.metrics.observeHTTP,
		LookupCollection: func(name string) *model.Collection {
			c, _ := n.meta.State().Collection(name)
			return c
		},
		LookupRoute: func(name string) *model.Route {
			r, _ := n.meta.State().Route(name)
			return r
		},
		MaxBodyBytes:   cfg.MaxBodyBytes,
		MaxConns:       cfg.MaxConns,
		MaxConnsPerIP:  cfg.MaxConnsPerIP,
		Auth:           n.sec.auth,
		AllowedOrigins: cfg.AllowedOrigins,
		TLSConfig:      n.sec.httpTLSConfig(),
		CheckTarget:    n.checkTarget,
		Serving:        n.serving,
	})
	n.fwd.Register(n.rpcSrv)
	n.cluster.Register(n.rpcSrv)
	inflight.Register(n.rpcSrv, n.places, n.holder)
	n.rpcSrv.Handle(methodLastIndexes, n.serveLastIndexes)
	close(n.wired)
	n.goServe(func() { _ = n.rpcSrv.Serve() })

	if err := n.cluster.Start(); err != nil {
		return nil, err
	}
	close(n.clustered)
	n.goServe(func() {
		defer close(n.serveDone)
		if err := n.api.Serve(n.httpLn); err != nil {
			n.log.Error("http server stopped", "error", err)
		}
	})
	n.goLoop(n.resumeDeletions)
	n.goLoop(n.watchLiveness)
	if cfg.PprofAddr != "" {
		n.pprof = &http.Server{Addr: cfg.PprofAddr, ReadHeaderTimeout: 10 * time.Second}
		n.goServe(func() {
			n.log.Info("serving pprof", "addr", cfg.PprofAddr)
			if err := n.pprof.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				n.log.Warn("pprof server stopped", "error", err)
			}
		})
	}
	n.log.Info("serving", "http_addr", n.HTTPAddr(), "bind_addr", n.BindAddr())
	return n, nil
}

func (n *Node) goLoop(f func()) {
	n.loops.Add(1)
	go func() {
		defer n.loops.Done()
		f()
	}()
}

func (n *Node) goServe(f func()) {
	n.servers.Add(1)
	go func() {
		defer n.servers.Done()
		f()
	}()
}

// runController runs the cluster controller while this node leads the meta
// group; leadership can come before the node is fully wired and its
// cluster started (a sole meta voter campaigns as it opens: the
// controller read the gossip handle while cluster.Start wrote it).
func (n *Node) runController(ctx context.Context) {
	select {
	case <-n.clustered:
	case <-ctx.Done():
		return
	}
	go n.places.Lead(ctx)
	n.cluster.RunController(ctx)
}

// kickReconcile wakes the reconciler after a meta change; changes applied
// while the node is still being wired are picked up by its first pass.
func (n *Node) kickReconcile() {
	select {
	case <-n.wired:
		n.cluster.KickReconcile()
	default:
	}
}

// resumeDeletions finishes collection deletions a restart cut short.
func (n *Node) resumeDeletions() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	go func() {
		select {
		case <-n.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	n.svc.ResumeDeletions(ctx)
}

// ID is the node's id.
func (n *Node) ID() string { return n.id.NodeID }

// HTTPAddr is the address the API listens on.
func (n *Node) HTTPAddr() string { return n.httpLn.Addr().String() }

// BindAddr is the internal port's address.
func (n *Node) BindAddr() string { return n.mux.Addr().String() }

// Service is the node's API backend (the HTTP API calls it; tests too).
func (n *Node) Service() *service.Service { return n.svc }

// Fatal delivers a storage failure after which the node must stop: a slot
// replica's state write failed, or Pebble failed (the error then wraps
// storage.ErrFatal, and storage must not be touched again — not even by
// Close).
func (n *Node) Fatal() <-chan error { return n.fatal }

func (n *Node) onFatal(err error) {
	n.fatalOnce.Do(func() {
		n.fatal <- err
		if n.cfg.OnFatal != nil {
			n.cfg.OnFatal(err)
		}
	})
}

// Ready reports nil when the node is in the cluster, every slot has a
// leader and its clock is within bounds, else why not.
func (n *Node) Ready() error { return n.svc.Ready() }

// serving is the API's Serving gate. A node taken out of the cluster
// (admin remove) holds nothing and its picture of the cluster stopped at
// its removal: it listed itself as draining and forwarded writes as if it
// were a member. Its API now says what /readyz says, on every request but
// /healthz, /readyz, /metrics and the API description.
func (n *Node) serving() error {
	if n.cluster == nil {
		return nil
	}
	if at := n.cluster.Removed(); !at.IsZero() {
		return fmt.Errorf("this node was removed from the cluster at %s (admin remove): it serves nothing; send requests to another node, or restart it to join the cluster again", at.UTC().Format(time.RFC3339))
	}
	return nil
}

// WaitReady blocks until Ready reports nil or ctx ends.
func (n *Node) WaitReady(ctx context.Context) error { return n.cluster.WaitReady(ctx) }

// Close stops the node cleanly: the HTTP API stops taking requests, slot
// and meta leadership is handed to other voters where there are any, slot
// leaders finish the callbacks in flight and commit their outcomes, the
// node leaves the gossip, then raft groups, the internal port and storage
// close in that order.
func (n *Node) Close() error {
	var err error
	n.closeOnce.Do(func() {
		n.log.Info("stopping")
		if n.api != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if e := n.api.Shutdown(ctx); e != nil {
				n.log.Warn("http shutdown", "error", e)
			}
			cancel()
			// A stop that arrives before the server took its listener
			// would leave Serve waiting forever: close the listener too.
			_ = n.httpLn.Close()
			select {
			case <-n.serveDone:
			case <-time.After(5 * time.Second):
				n.log.Warn("http server did not stop in time; going on")
			}
		}
		if n.cluster != nil {
			n.cluster.StopLoops()
		}
		if n.meta != nil {
			n.meta.TransferLeadership(3 * time.Second)
		}
		err = n.closeParts(true)
		n.log.Info("stopped")
	})
	return err
}

// Kill stops the node abruptly, as a crash would (tests): no leadership
// hand-off, no graceful leave, callbacks in flight abandoned.
func (n *Node) Kill() {
	n.closeOnce.Do(func() {
		if n.cluster != nil {
			n.cluster.LeaveGossip(false)
		}
		if n.api != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = n.api.Shutdown(ctx)
			cancel()
			_ = n.httpLn.Close()
		}
		_ = n.closeParts(false)
	})
}

// closeParts stops whatever Start started, in order; parts never started
// are nil and skipped.
func (n *Node) closeParts(graceful bool) error {
	var errs []error
	close(n.stop)
	if n.cluster != nil {
		n.cluster.StopLoops()
	}
	n.loops.Wait()
	if n.pprof != nil {
		_ = n.pprof.Close()
	}
	var wg sync.WaitGroup
	for _, r := range n.slots.All() {
		wg.Add(1)
		go func(r *slot.Replica) {
			defer wg.Done()
			if graceful {
				r.TransferLeadership(3 * time.Second)
			}
			if err := r.Close(); err != nil {
				n.log.Warn("closing slot replica", "error", err)
			}
		}(r)
	}
	wg.Wait()
	if n.cluster != nil {
		n.cluster.LeaveGossip(graceful)
	}
	if n.meta != nil {
		if err := n.meta.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if n.beats != nil {
		_ = n.beats.Close()
	}
	if n.rpcSrv != nil {
		_ = n.rpcSrv.Close()
	}
	if n.rpc != nil {
		_ = n.rpc.Close()
	}
	if n.httpLn != nil {
		_ = n.httpLn.Close() // Start failed before the API served it
	}
	n.servers.Wait()
	if n.logDB != nil {
		if err := n.logDB.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if n.webhook != nil {
		n.webhook.Close()
	}
	if n.mux != nil {
		_ = n.mux.Close()
	}
	if n.db != nil {
		if err := n.db.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if n.lock != nil {
		_ = n.lock.Close()
	}
	return errors.Join(errs...)
}
