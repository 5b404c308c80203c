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

	"github.com/hashicorp/serf/serf"
	"github.com/timemachine-db/timemachine/meta"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/rpc/httpapi"
	"github.com/timemachine-db/timemachine/rpc/mux"
	"github.com/timemachine-db/timemachine/rpc/peer"
	"github.com/timemachine-db/timemachine/rpc/webhook"
	"github.com/timemachine-db/timemachine/slot"
	"github.com/timemachine-db/timemachine/storage"
)

// Node is one running timemachine server.
type Node struct {
	cfg  Config
	id   *identity
	log  *slog.Logger
	lock *os.File

	db     *storage.DB
	logDB  *storage.RaftLogDB
	mux    *mux.Mux
	rpcSrv *peer.Server
	rpc    *peer.Client
	meta   *meta.Replica
	serf   *serf.Serf

	serfEvents chan serf.Event
	kick       chan struct{} // wakes the reconciler
	ctrlKick   chan struct{} // wakes the controller

	mu    sync.RWMutex
	slots map[int]*slot.Replica // the slot replicas hosted here

	hintMu sync.Mutex
	hints  map[int]string // slot → last known leader id

	view clusterView // what every node reported, refreshed in the background

	fireSlots chan struct{}
	dlv       *deliverer
	webhook   *webhook.Client
	metrics   *metrics
	api       *httpapi.Server
	httpLn    net.Listener

	stop      chan struct{}
	wg        sync.WaitGroup
	fatal     chan error
	fatalOnce sync.Once
	closeOnce sync.Once
	serveDone chan struct{}
}

// Start opens the data directory and starts every part of the node. It
// returns once the node serves HTTP; the cluster forms (or the node
// rejoins it) and slots elect their leaders right after.
func Start(cfg Config) (_ *Node, err error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	n := &Node{
		cfg: cfg, log: cfg.Logger,
		fatal: make(chan error, 1), serveDone: make(chan struct{}), stop: make(chan struct{}),
		serfEvents: make(chan serf.Event, 256), kick: make(chan struct{}, 1), ctrlKick: make(chan struct{}, 1),
		slots: map[int]*slot.Replica{}, hints: map[int]string{},
	}
	defer func() {
		if err != nil {
			close(n.stop)
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

	if n.db, err = storage.Open(filepath.Join(cfg.DataDir, "pebble"), storage.Options{CacheBytes: cfg.CacheBytes, Logger: n.log}); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(cfg.DataDir, "raft"), 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", filepath.Join(cfg.DataDir, "raft"), err)
	}
	if n.logDB, err = storage.OpenRaftLogDB(filepath.Join(cfg.DataDir, "raft", "slots.db"), n.log); err != nil {
		return nil, err
	}
	if n.mux, err = mux.Listen(cfg.BindAddr, n.log); err != nil {
		return nil, err
	}
	rpcLn, err := n.mux.Listen(mux.ProtoRPC, 0)
	if err != nil {
		return nil, err
	}
	n.rpcSrv = peer.NewServer(rpcLn, n.log)
	for m := mProposeSlot; m <= mMetaIndex; m++ {
		n.rpcSrv.Handle(m, func(ctx context.Context, b []byte) ([]byte, error) { return n.handleRPC(ctx, m, b) })
	}
	go func() { _ = n.rpcSrv.Serve() }()
	n.rpc = peer.NewClient(peer.ClientOptions{Dial: cfg.PeerDialer, Logger: n.log})

	metaStream, err := n.mux.StreamLayer(mux.MetaGroup, nil)
	if err != nil {
		return nil, err
	}
	metaStream.Dialer = cfg.MuxDialer
	if n.meta, err = meta.Open(meta.Config{
		NodeID: n.id.NodeID, Dir: filepath.Join(cfg.DataDir, "raft", "meta"), Stream: metaStream,
		Logger: n.log, RaftLogLevel: cfg.RaftLogLevel, Timing: cfg.Timing,
		OnLeader: n.runController,
		OnChange: func(*raftfsm.MetaState) { n.kickReconcile() },
	}); err != nil {
		return nil, err
	}

	n.webhook = webhook.New(webhook.Options{})
	n.metrics = newMetrics(n)
	n.dlv = newDeliverer(n.webhook)
	n.fireSlots = make(chan struct{}, cfg.FireConcurrency)

	n.api = httpapi.New(n, httpapi.Options{
		Clock:          cfg.Clock,
		MaxMetaBytes:   cfg.MaxMetaBytes,
		Logger:         n.log,
		MetricsHandler: n.metrics.handler(),
		Observe:        n.metrics.observeHTTP,
		LookupCollection: func(name string) *model.Collection {
			c, _ := n.meta.State().Collection(name)
			return c
		},
	})
	if n.httpLn, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		return nil, fmt.Errorf("listen on http address %s: %w", cfg.HTTPAddr, err)
	}
	if err := n.startSerf(n.httpLn.Addr().String(), n.mux.Addr().String()); err != nil {
		return nil, err
	}

	// Replicas this node already holds start at once, in parallel with the
	// meta group's election, instead of waiting for the meta state.
	n.openExisting()
	n.goLoop(n.bootstrapLoop)
	n.goLoop(n.reconcileLoop)
	n.goLoop(n.viewLoop)
	n.goLoop(n.serfEventLoop)
	go func() {
		defer close(n.serveDone)
		if err := n.api.Serve(n.httpLn); err != nil {
			n.log.Error("http server stopped", "error", err)
		}
	}()
	n.goLoop(n.resumeDeletions)
	if cfg.PprofAddr != "" {
		go func() {
			n.log.Info("serving pprof", "addr", cfg.PprofAddr)
			srv := &http.Server{Addr: cfg.PprofAddr, ReadHeaderTimeout: 10 * time.Second}
			if err := srv.ListenAndServe(); err != nil {
				n.log.Warn("pprof server stopped", "error", err)
			}
		}()
	}
	n.log.Info("serving", "http_addr", n.httpLn.Addr().String(), "bind_addr", n.mux.Addr().String())
	return n, nil
}

func (n *Node) goLoop(f func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
}

// ID is the node's id.
func (n *Node) ID() string { return n.id.NodeID }

// HTTPAddr is the address the API listens on.
func (n *Node) HTTPAddr() string { return n.httpLn.Addr().String() }

// BindAddr is the internal port's address.
func (n *Node) BindAddr() string { return n.mux.Addr().String() }

// Fatal delivers a storage failure after which the node must stop.
func (n *Node) Fatal() <-chan error { return n.fatal }

func (n *Node) onFatal(err error) {
	n.fatalOnce.Do(func() { n.fatal <- err })
}

func (n *Node) kickReconcile() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

func (n *Node) kickController() {
	select {
	case n.ctrlKick <- struct{}{}:
	default:
	}
}

func (n *Node) localReplicas() []*slot.Replica {
	n.mu.RLock()
	defer n.mu.RUnlock()
	out := make([]*slot.Replica, 0, len(n.slots))
	for _, r := range n.slots {
		out = append(out, r)
	}
	return out
}

// WaitReady blocks until Ready reports nil or ctx ends.
func (n *Node) WaitReady(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		err := n.Ready()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node not ready: %w", err)
		case <-t.C:
		}
	}
}

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
		close(n.stop)
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
		close(n.stop)
		if n.serf != nil {
			_ = n.serf.Shutdown()
		}
		if n.api != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = n.api.Shutdown(ctx)
			cancel()
		}
		_ = n.closeParts(false)
	})
}

func (n *Node) closeParts(graceful bool) error {
	var errs []error
	n.wg.Wait()
	var wg sync.WaitGroup
	for _, r := range n.localReplicas() {
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
	if n.serf != nil {
		if graceful {
			if err := n.serf.Leave(); err != nil {
				n.log.Debug("serf leave", "error", err)
			}
		}
		_ = n.serf.Shutdown()
	}
	if n.meta != nil {
		if err := n.meta.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if n.rpcSrv != nil {
		_ = n.rpcSrv.Close()
	}
	if n.rpc != nil {
		_ = n.rpc.Close()
	}
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
