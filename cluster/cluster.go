package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/timemachine-db/timemachine/forward"
	"github.com/timemachine-db/timemachine/meta"
	"github.com/timemachine-db/timemachine/rpc/peer"
	"github.com/timemachine-db/timemachine/slot"
)

// Config wires a Cluster. The node supplies everything that is its own:
// the data directory's identity (slot count, and writing it back), how to
// open a slot replica and whether one has data on disk, how to compact
// the node's storage.
type Config struct {
	NodeID   string
	HTTPAddr string // the API's address, as other nodes should reach it
	BindAddr string // the internal port's address

	// Gossip: --serf-addr, --join, --bootstrap-expect; the serf snapshot
	// lives in SerfDir. FastGossip uses memberlist's local-network timings
	// (tests).
	SerfAddr        string
	SerfDir         string
	Join            []string
	BootstrapExpect int
	FastGossip      bool
	// GossipKey, when set, encrypts and authenticates gossip (keyring.go).
	GossipKey []byte

	// SlotCount is the slot count the data directory records (the flag's,
	// for a new one); Replicas the configured replication factor (0: auto).
	SlotCount int
	Replicas  int
	// FailureGrace is how long a failed node keeps its replicas before
	// they are re-created on other nodes.
	FailureGrace time.Duration
	Clock        func() time.Time
	Logger       *slog.Logger

	Meta    *meta.Replica
	Slots   *slot.Registry
	Forward *forward.Forwarder
	Client  *peer.Client

	// OpenSlot opens this node's replica of slot s (not yet registered).
	OpenSlot func(s int) (*slot.Replica, error)
	// HasSlotData reports whether this node holds data of slot s on disk.
	HasSlotData func(s int) bool
	// AdoptSlotCount records the cluster's slot count in the data
	// directory the first time this node sees it.
	AdoptSlotCount func(count int) error
	// CompactStorage compacts the node's whole storage.
	CompactStorage func(ctx context.Context) error

	// MaxMoves bounds the slots whose membership moves at once (default
	// DefaultMaxMoves).
	MaxMoves int
	// Hears reports whether this node's liveness check hears node id now
	// (it answers the node connection's pings). Gossip that still calls
	// such a node failed is joined to it again (rejoinHeard). Nil: never.
	Hears func(id string) bool
	// Unreachable reports whether this node's liveness check has found
	// node id unreachable (refused, or silent past its verdict time; a
	// peer not yet pinged is not). An alive node it finds unreachable and
	// that votes in no slot gets no replicas (eligible). Nil: none is.
	Unreachable func(id string) bool

	// ReplicaWarnAfter is how long a replica may stay unreachable or
	// behind, while it is supposed to be in its slot's configuration,
	// before the controller logs a warning (default DefaultReplicaWarnAfter).
	ReplicaWarnAfter time.Duration
}

// Cluster is this node's part in the cluster's control plane: gossip
// membership, formation of the meta group, the controller (while this node
// leads the meta group), the reconciler of local replicas, the view of
// what every node reports, readiness and the admin operations.
type Cluster struct {
	cfg       Config
	log       *slog.Logger
	slotCount atomic.Int64

	serf       *serf.Serf
	serfMu     sync.Mutex // orders Leave against Shutdown
	serfDown   bool
	serfEvents chan serf.Event
	joinDone   chan struct{} // closed when the --join loop ended (nil: none)
	kick       chan struct{} // wakes the reconciler
	ctrlKick   chan struct{} // wakes the controller

	view  viewCache
	moves moveTracker  // the meta leader's record of slot moves
	watch replicaWatch // the meta leader's watch on replicas

	startedAt      int64                // process start, published in gossip (unix ms)
	removedAt      atomic.Int64         // when this node was removed from the cluster (0: it was not)
	removedNoticed map[string]time.Time // controller only: removed nodes last told or pruned
	rejoined       map[string]time.Time // reconciler only: failed members last joined again (rejoinHeard)
	rejoining      sync.Map             // member id → struct{}: a join to it runs (rejoinHeard)

	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

// New returns a Cluster; Register its peer handlers, then Start it.
func New(cfg Config) *Cluster {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	c := &Cluster{
		cfg: cfg, log: cfg.Logger,
		serfEvents: make(chan serf.Event, 256), kick: make(chan struct{}, 1), ctrlKick: make(chan struct{}, 1),
		stop: make(chan struct{}), startedAt: time.Now().UnixMilli(), removedNoticed: map[string]time.Time{},
		rejoined: map[string]time.Time{},
	}
	c.slotCount.Store(int64(cfg.SlotCount))
	return c
}

// Start joins the gossip, opens the replicas this node already holds (at
// once, in parallel with the meta group's election, instead of waiting for
// the meta state) and starts the background loops.
func (c *Cluster) Start() error {
	if err := c.startSerf(); err != nil {
		return err
	}
	c.openExisting()
	c.goLoop(c.bootstrapLoop)
	c.goLoop(c.reconcileLoop)
	c.goLoop(c.viewLoop)
	c.goLoop(c.serfEventLoop)
	return nil
}

func (c *Cluster) goLoop(f func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
}

// Stopping is closed once StopLoops was called.
func (c *Cluster) Stopping() <-chan struct{} { return c.stop }

// StopLoops stops the background loops and waits for them. Gossip keeps
// running (LeaveGossip ends it) so the node stays visible while it hands
// its leaderships away.
func (c *Cluster) StopLoops() {
	c.stopOnce.Do(func() { close(c.stop) })
	c.wg.Wait()
}

// LeaveGossip leaves the gossip gracefully (others see the node as left,
// not failed) when graceful is set, and shuts serf down.
func (c *Cluster) LeaveGossip(graceful bool) {
	if c.serf == nil {
		return
	}
	if graceful {
		c.leaveSerf()
	}
	c.serfMu.Lock()
	c.serfDown = true
	_ = c.serf.Shutdown()
	c.serfMu.Unlock()
	if c.joinDone != nil {
		c.stopOnce.Do(func() { close(c.stop) })
		<-c.joinDone
	}
}

// leaveSerf leaves the gossip gracefully, unless serf was shut down
// (serf panics on a Leave after Shutdown).
func (c *Cluster) leaveSerf() {
	c.serfMu.Lock()
	defer c.serfMu.Unlock()
	if c.serfDown {
		return
	}
	if err := c.serf.Leave(); err != nil {
		c.log.Debug("serf leave", "error", err)
	}
}

// KickReconcile wakes the reconciler (the meta state changed), and the
// controller, which waits up to controllerIdle between passes while
// nothing changes. It never blocks.
func (c *Cluster) KickReconcile() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
	c.kickController()
}

func (c *Cluster) kickController() {
	select {
	case c.ctrlKick <- struct{}{}:
	default:
	}
}

func (c *Cluster) now() int64 { return c.cfg.Clock().UnixMilli() }

// SlotCount is the cluster's slot count.
func (c *Cluster) SlotCount() int {
	if st := c.cfg.Meta.State(); st.Formed() {
		return st.SlotCount
	}
	return int(c.slotCount.Load())
}

// AddrOf returns a node's internal address ("" when unknown): its entry in
// the node table, else what gossip says.
func (c *Cluster) AddrOf(id string) string {
	if id == c.cfg.NodeID {
		return c.cfg.BindAddr
	}
	if nd, ok := c.cfg.Meta.State().Nodes[id]; ok && nd.BindAddr != "" {
		return nd.BindAddr
	}
	for _, m := range c.members() {
		if m.ID == id {
			return m.BindAddr
		}
	}
	return ""
}

// WaitReady blocks until Ready reports nil or ctx ends.
func (c *Cluster) WaitReady(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		err := c.Ready()
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
