package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/timemachine-db/timemachine/dht"
	"github.com/timemachine-db/timemachine/liveness"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftgroup"
	"github.com/timemachine-db/timemachine/slot"
	"github.com/timemachine-db/timemachine/storage"
)

// Config is a node's configuration (docs/operations.md#running-a-node).
type Config struct {
	NodeID          string
	DataDir         string
	HTTPAddr        string
	BindAddr        string
	SerfAddr        string
	Join            []string
	BootstrapExpect int
	Slots           int
	// Replicas is the replication factor; 0 means min(3, nodes).
	Replicas int

	Logger       *slog.Logger
	RaftLogLevel string
	// FireConcurrency bounds the callbacks in flight on this node.
	FireConcurrency int
	// FirePerTarget bounds the callbacks in flight to one target
	// (host:port), so one slow receiver cannot take the whole pool
	// (default max(8, FireConcurrency/4)).
	FirePerTarget int
	// MaxMetaBytes bounds a job's meta (default 64 KiB).
	MaxMetaBytes int
	// CacheBytes is Pebble's block cache (default 128 MiB).
	CacheBytes int64
	// Timing overrides the raft timeouts (tests).
	Timing raftgroup.Timing
	// Clock replaces time.Now (tests).
	Clock func() time.Time
	// OnFatal, if set, also hears what Node.Fatal delivers, from the
	// moment Start begins: a storage failure while Start opens the
	// stores (a full disk, a corrupt file) leaves Start blocked inside
	// Pebble, before the caller holds the node to read Fatal.
	OnFatal func(error)
	// MaintenanceInterval paces retention cleanup (default 30s).
	MaintenanceInterval time.Duration
	// FailureGrace is how long a failed node keeps its replicas before they
	// are re-created on other nodes (default 30s).
	FailureGrace time.Duration
	// MoveConcurrency bounds how many slots change membership at once
	// (default cluster.DefaultMaxMoves).
	MoveConcurrency int
	// ReplicaWarnAfter is how long a replica may stay unreachable or
	// behind before the meta leader logs a warning (default 30s).
	ReplicaWarnAfter time.Duration
	// FastGossip uses memberlist's local-network timings (tests).
	FastGossip bool
	// MuxDialer and PeerDialer replace the TCP dials of the raft transports
	// and of node-to-node RPC (fault-injection tests).
	MuxDialer  func(addr string, proto byte, group uint16, timeout time.Duration) (net.Conn, error)
	PeerDialer func(addr string, timeout time.Duration) (net.Conn, error)
	// PprofAddr, when set, serves net/http/pprof there (profiling).
	PprofAddr string
	// Version is reported by /v1/cluster.
	Version string

	// Security (docs/threat-model.md; security.go loads them).
	//
	// AuthFile requires API tokens (--auth-file).
	AuthFile string
	// TLSCert and TLSKey serve HTTPS on HTTPAddr.
	TLSCert, TLSKey string
	// PeerTLSCert, PeerTLSKey and PeerTLSCA put mutual TLS on BindAddr.
	PeerTLSCert, PeerTLSKey, PeerTLSCA string
	// GossipKey (base64 of 16, 24 or 32 bytes) encrypts gossip.
	GossipKey string
	// CallbackDeny and CallbackAllow are the callback egress policy (nil
	// CallbackDeny: webhook.DefaultDeny; an empty, non-nil one denies
	// nothing).
	CallbackDeny, CallbackAllow []string
	// AllowedOrigins are browser origins allowed to call the API.
	AllowedOrigins []string
	// MaxBodyBytes bounds request bodies (default 16 MiB).
	MaxBodyBytes int
	// MaxConns caps open API connections (0: sized from the file
	// descriptor limit, DefaultMaxConns); MaxConnsPerIP per client
	// address (0: no cap).
	MaxConns, MaxConnsPerIP int
	// MaxCollections and MaxRoutes bound the meta state (0: defaults).
	MaxCollections, MaxRoutes int
	// SecretsKeyFile encrypts secrets at rest.
	SecretsKeyFile string
	// MaxClockOffset is --max-clock-offset: how far this node's clock may
	// be from the cluster majority's before it gives up its slot
	// leaderships (default 250ms).
	MaxClockOffset time.Duration
	// DebugFaults (hidden --debug-faults) enables POST /v1/debug/clock,
	// which shifts this process's wall clock (the nemesis's clock faults).
	DebugFaults bool
}

// Defaults (docs/operations.md#running-a-node).
const (
	DefaultDataDir  = "./data"
	DefaultHTTPAddr = "127.0.0.1:8080"
	DefaultBindAddr = "127.0.0.1:7000"
	DefaultSerfAddr = "127.0.0.1:7946"
)

var nodeIDRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func (c *Config) setDefaults() {
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if c.HTTPAddr == "" {
		c.HTTPAddr = DefaultHTTPAddr
	}
	if c.BindAddr == "" {
		c.BindAddr = DefaultBindAddr
	}
	if c.SerfAddr == "" {
		c.SerfAddr = DefaultSerfAddr
	}
	if c.BootstrapExpect <= 0 {
		c.BootstrapExpect = 1
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.FireConcurrency <= 0 {
		c.FireConcurrency = 1024
	}
	if c.FirePerTarget <= 0 {
		c.FirePerTarget = slot.DefaultPerTarget(c.FireConcurrency)
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.MaxMetaBytes <= 0 {
		c.MaxMetaBytes = model.DefaultMaxMetaBytes
	}
	if c.FailureGrace <= 0 {
		c.FailureGrace = 30 * time.Second
	}
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns(c.FireConcurrency)
	}
	if c.MaxClockOffset <= 0 {
		c.MaxClockOffset = liveness.DefaultMaxOffset
	}
}

// ConfigError is a Config that cannot work whatever the machine (a flag
// out of range, flags that go together given apart): the command line's
// mistake, which the CLI reports as a usage error (exit 2).
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// validate checks what can be checked before touching the disk.
func (c *Config) validate() error {
	if c.NodeID != "" && !nodeIDRe.MatchString(c.NodeID) {
		return fmt.Errorf("--node-id %q: use 1-64 characters of [A-Za-z0-9._-], starting with a letter or digit", c.NodeID)
	}
	if c.Slots < 0 || c.Slots > storage.MaxSlots-1 {
		return fmt.Errorf("--slots %d: must be between 1 and %d", c.Slots, storage.MaxSlots-1)
	}
	if c.MaxMetaBytes > model.MaxMetaBytesLimit {
		return fmt.Errorf("--max-meta-bytes %d: must be at most %d (16 MiB)", c.MaxMetaBytes, model.MaxMetaBytesLimit)
	}
	if c.MoveConcurrency < 0 {
		return fmt.Errorf("--move-concurrency %d: must be at least 1 (0 means the default)", c.MoveConcurrency)
	}
	if c.Replicas < 0 || c.Replicas > 7 {
		return fmt.Errorf("--replicas %d: must be between 1 and 7 (0 means min(3, nodes))", c.Replicas)
	}
	return c.validateSecurity()
}

// identity is what a data directory remembers about its node and cluster:
// a restarted node must come back as the same member with the same slot
// count, whatever its flags say.
type identity struct {
	NodeID    string `json:"node_id"`
	SlotCount int    `json:"slot_count"`
	Replicas  int    `json:"replicas"`
	CreatedAt int64  `json:"created_at"`
	Format    int    `json:"format"`
}

const identityFile = "node.json"

// loadIdentity reads the data directory's identity, or makes one for a new
// directory from the flags.
func loadIdentity(c *Config) (*identity, error) {
	path := filepath.Join(c.DataDir, identityFile)
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		id := &identity{NodeID: c.NodeID, SlotCount: c.Slots, Replicas: c.Replicas, CreatedAt: time.Now().UnixMilli(), Format: 1}
		if id.NodeID == "" {
			id.NodeID = defaultNodeID()
		}
		if id.SlotCount == 0 {
			id.SlotCount = dht.DefaultSlots
		}
		if err := writeFileAtomic(path, id); err != nil {
			return nil, err
		}
		return id, nil
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var id identity
	if err := json.Unmarshal(b, &id); err != nil || id.NodeID == "" || id.SlotCount <= 0 {
		return nil, fmt.Errorf("%s is corrupt (%v); if this data directory is not needed, remove it, otherwise restore the file from a backup", path, err)
	}
	if c.NodeID != "" && c.NodeID != id.NodeID {
		return nil, fmt.Errorf("data directory %s belongs to node %q, not %q: start with --node-id %s or use another --data-dir", c.DataDir, id.NodeID, c.NodeID, id.NodeID)
	}
	if c.Slots != 0 && c.Slots != id.SlotCount {
		return nil, fmt.Errorf("the slot count is fixed when the cluster forms: this data directory has %d slots, --slots says %d; drop --slots or set it to %d", id.SlotCount, c.Slots, id.SlotCount)
	}
	return &id, nil
}

func defaultNodeID() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "node"
	}
	h = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return '-'
	}, h)
	if len(h) > 64 {
		h = h[:64]
	}
	return strings.Trim(h, ".-_")
}

func writeFileAtomic(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// lockDataDir takes an exclusive lock on the data directory so two
// processes never share one.
func lockDataDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create data directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, "LOCK")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("data directory %s is in use by another timemachine process (lock %s): stop it or use another --data-dir", dir, path)
	}
	return f, nil
}
