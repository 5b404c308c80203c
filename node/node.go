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
	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/rpc/httpapi"
	"github.com/timemachine-db/timemachine/rpc/mux"
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

	db      *storage.DB
	logDB   *storage.RaftLogDB
	mux     *mux.Mux
	meta    *slot.MetaReplica
	mu      sync.RWMutex
	slots   []*slot.Replica // by slot number; nil where this node holds no replica
	webhook *webhook.Client
	metrics *metrics
	api     *httpapi.Server
	httpLn  net.Listener

	fatal     chan error
	fatalOnce sync.Once
	closeOnce sync.Once
	serveDone chan struct{}
}

// Start opens the data directory and starts every part of the node. It
// returns once the node serves HTTP; slots elect their leaders right after.
func Start(cfg Config) (_ *Node, err error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.BootstrapExpect > 1 || len(cfg.Join) > 0 {
		return nil, errors.New("--join and --bootstrap-expect > 1 form multi-node clusters, which this build does not support yet; run a single node")
	}
	n := &Node{cfg: cfg, log: cfg.Logger, fatal: make(chan error, 1), serveDone: make(chan struct{})}
	defer func() {
		if err != nil {
			n.closeParts()
		}
	}()
	if n.lock, err = lockDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	if n.id, err = loadIdentity(&cfg); err != nil {
		return nil, err
	}
	n.log = n.log.With("node", n.id.NodeID)
	n.log.Info("starting", "data_dir", cfg.DataDir, "slots", n.id.SlotCount, "http_addr", cfg.HTTPAddr, "bind_addr", cfg.BindAddr)

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
	self := raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(n.id.NodeID), Address: raft.ServerAddress(n.mux.Addr().String())}

	metaStream, err := n.mux.StreamLayer(mux.MetaGroup, nil)
	if err != nil {
		return nil, err
	}
	if n.meta, err = slot.OpenMeta(slot.MetaConfig{
		NodeID: n.id.NodeID, Dir: filepath.Join(cfg.DataDir, "raft", "meta"), Stream: metaStream,
		Logger: n.log, RaftLogLevel: cfg.RaftLogLevel, Timing: cfg.Timing,
	}); err != nil {
		return nil, err
	}
	if err := n.meta.Bootstrap([]raft.Server{self}); err != nil {
		return nil, err
	}

	n.webhook = webhook.New(webhook.Options{})
	n.metrics = newMetrics(n)
	dlv := newDeliverer(n.webhook)
	fireSlots := make(chan struct{}, cfg.FireConcurrency)
	n.slots = make([]*slot.Replica, n.id.SlotCount)
	for s := 0; s < n.id.SlotCount; s++ {
		stream, err := n.mux.StreamLayer(uint16(s), nil)
		if err != nil {
			return nil, err
		}
		r, err := slot.Open(slot.Config{
			Slot: s, NodeID: n.id.NodeID, Dir: filepath.Join(cfg.DataDir, "raft", fmt.Sprintf("slot-%04d", s)),
			LogDB: n.logDB, DB: n.db, Stream: stream, Meta: n.meta.State, Deliverer: dlv, Metrics: n.metrics,
			Logger: n.log, RaftLogLevel: cfg.RaftLogLevel, Clock: cfg.Clock, Timing: cfg.Timing,
			FireSlots: fireSlots, MaintenanceInterval: cfg.MaintenanceInterval, OnFatal: n.onFatal,
			MetaReady: n.meta.WaitCaughtUp,
		})
		if err != nil {
			return nil, err
		}
		n.slots[s] = r
		if err := r.Bootstrap([]raft.Server{self}); err != nil {
			return nil, err
		}
	}

	n.api = httpapi.New(n, httpapi.Options{
		Clock:          cfg.Clock,
		MaxMetaBytes:   cfg.MaxMetaBytes,
		Logger:         n.log,
		MetricsHandler: n.metrics.handler(),
		Observe:        n.metrics.observeHTTP,
		LookupCollection: func(name string) *raftfsm.Collection {
			c, _ := n.meta.State().Collection(name)
			return c
		},
	})
	if n.httpLn, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		return nil, fmt.Errorf("listen on http address %s: %w", cfg.HTTPAddr, err)
	}
	go func() {
		defer close(n.serveDone)
		if err := n.api.Serve(n.httpLn); err != nil {
			n.log.Error("http server stopped", "error", err)
		}
	}()
	go n.resumeDeletions()
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

// ID is the node's id.
func (n *Node) ID() string { return n.id.NodeID }

// HTTPAddr is the address the API listens on.
func (n *Node) HTTPAddr() string { return n.httpLn.Addr().String() }

// Fatal delivers a storage failure after which the node must stop.
func (n *Node) Fatal() <-chan error { return n.fatal }

func (n *Node) onFatal(err error) {
	n.fatalOnce.Do(func() { n.fatal <- err })
}

func (n *Node) localReplicas() []*slot.Replica {
	n.mu.RLock()
	defer n.mu.RUnlock()
	out := make([]*slot.Replica, 0, len(n.slots))
	for _, r := range n.slots {
		if r != nil {
			out = append(out, r)
		}
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

// Close stops the node: the HTTP API stops taking requests, slot leaders
// finish the callbacks in flight and commit their outcomes, then raft
// groups, the internal port and storage close in that order.
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
			<-n.serveDone
		}
		err = n.closeParts()
		n.log.Info("stopped")
	})
	return err
}

func (n *Node) closeParts() error {
	var errs []error
	var wg sync.WaitGroup
	for _, r := range n.localReplicas() {
		wg.Add(1)
		go func(r *slot.Replica) {
			defer wg.Done()
			r.TransferLeadership(3 * time.Second)
			if err := r.Close(); err != nil {
				n.log.Warn("closing slot replica", "error", err)
			}
		}(r)
	}
	wg.Wait()
	if n.meta != nil {
		if err := n.meta.Close(); err != nil {
			errs = append(errs, err)
		}
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
