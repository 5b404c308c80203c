package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/timemachine-db/timemachine/internal/testutil"
)

// Net is the network the nodes run on: loopback (Loopback) or the
// namespaces of package netfault.
type Net interface {
	// Prepare readies node i's network and returns the host it binds.
	Prepare(i int) (string, error)
	// Command prepares a process on node i's network.
	Command(i int, name string, args ...string) (*exec.Cmd, error)
	// DialContext connects from the clients' side.
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}

// Config describes the cluster to run.
type Config struct {
	Bin      string // the timemachine binary
	Dir      string // data directories and logs go under it
	Slots    int
	Replicas int
	// FixedPorts: every node uses 8080/7000/7946 on its own host (one
	// namespace per node); otherwise free loopback ports are picked.
	FixedPorts bool
	// ExtraArgs go to every node (e.g. --debug-faults).
	ExtraArgs []string
	Log       *slog.Logger
}

// The fixed ports of a node with its own network namespace.
const (
	HTTPPort = 8080
	BindPort = 7000
	SerfPort = 7946
)

// Cluster is the set of server processes of one run.
type Cluster struct {
	cfg  Config
	net  Net
	bin  string
	log  *slog.Logger
	http *http.Client // admin and /v1/cluster requests (short timeouts)

	mu    sync.Mutex
	nodes []*Node
}

// New prepares a cluster (no node yet). The binary is reached through a
// symlink with a name of its own under cfg.Dir, so that someone's `pkill
// timemachine` on the shared machine does not stop the run's servers.
func New(cfg Config, nw Net) (*Cluster, error) {
	if cfg.Slots == 0 {
		cfg.Slots = 12
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 3
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(cfg.Bin)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("timemachine binary: %w (run `make build`)", err)
	}
	bin := filepath.Join(cfg.Dir, "tm-nemesis-server")
	_ = os.Remove(bin)
	if err := os.Symlink(abs, bin); err != nil {
		bin = abs
	}
	c := &Cluster{cfg: cfg, net: nw, bin: bin, log: cfg.Log}
	c.http = c.Client(5 * time.Second)
	return c, nil
}

// Client is an HTTP client that reaches the nodes, with the given timeout
// per request. It never retries on its own.
func (c *Cluster) Client(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		DialContext:         c.net.DialContext,
		MaxIdleConnsPerHost: 32,
		DisableCompression:  true,
		IdleConnTimeout:     30 * time.Second,
	}}
}

// Config is the cluster's configuration.
func (c *Cluster) Config() Config { return c.cfg }

// AddNode prepares (does not start) the next node. bootstrapExpect > 0
// makes it one of the founders; join lists serf addresses to join.
func (c *Cluster) AddNode(bootstrapExpect int, join []string) (*Node, error) {
	c.mu.Lock()
	i := len(c.nodes)
	c.mu.Unlock()
	host, err := c.net.Prepare(i)
	if err != nil {
		return nil, fmt.Errorf("network of node %d: %w", i+1, err)
	}
	n := &Node{Index: i, ID: fmt.Sprintf("n%d", i+1), Host: host}
	dir := filepath.Join(c.cfg.Dir, n.ID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	n.DataDir, n.LogPath = filepath.Join(dir, "data"), filepath.Join(dir, "server.log")
	if c.cfg.FixedPorts {
		n.HTTPAddr = net.JoinHostPort(host, strconv.Itoa(HTTPPort))
		n.BindAddr = net.JoinHostPort(host, strconv.Itoa(BindPort))
		n.SerfAddr = net.JoinHostPort(host, strconv.Itoa(SerfPort))
	} else {
		for _, p := range []*string{&n.HTTPAddr, &n.BindAddr, &n.SerfAddr} {
			if *p, err = freeLoopbackPort(); err != nil {
				return nil, err
			}
		}
	}
	n.Args = []string{"--node-id", n.ID, "--slots", strconv.Itoa(c.cfg.Slots), "--replicas", strconv.Itoa(c.cfg.Replicas)}
	if bootstrapExpect > 0 {
		n.Args = append(n.Args, "--bootstrap-expect", strconv.Itoa(bootstrapExpect))
	}
	if len(join) > 0 {
		n.Args = append(n.Args, "--join", strings.Join(join, ","))
	}
	n.Args = append(n.Args, c.cfg.ExtraArgs...)
	n.start = func(n *Node) (*exec.Cmd, error) {
		args := append([]string{"server", "--data-dir", n.DataDir, "--http-addr", n.HTTPAddr,
			"--bind-addr", n.BindAddr, "--serf-addr", n.SerfAddr}, n.Args...)
		return c.net.Command(n.Index, c.bin, args...)
	}
	c.mu.Lock()
	c.nodes = append(c.nodes, n)
	c.mu.Unlock()
	return n, nil
}

// Nodes lists every node ever added.
func (c *Cluster) Nodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Node(nil), c.nodes...)
}

// Members lists the nodes not removed from the cluster.
func (c *Cluster) Members() []*Node {
	var out []*Node
	for _, n := range c.Nodes() {
		if !n.Removed() {
			out = append(out, n)
		}
	}
	return out
}

// Up lists the members whose processes run and are not paused.
func (c *Cluster) Up() []*Node {
	var out []*Node
	for _, n := range c.Members() {
		if n.Running() && !n.Paused() {
			out = append(out, n)
		}
	}
	return out
}

// ByID finds a node.
func (c *Cluster) ByID(id string) *Node {
	for _, n := range c.Nodes() {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// Stop kills every process still running.
func (c *Cluster) Stop() {
	for _, n := range c.Nodes() {
		if n.Paused() {
			_ = n.Resume()
		}
		_ = n.Kill()
	}
}

// Do sends one request to node n and reads the whole answer.
func (c *Cluster) Do(ctx context.Context, n *Node, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+n.HTTPAddr+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, b, err
}

// Ready reports whether n's /readyz answers 200 (with the reason if not).
func (c *Cluster) Ready(ctx context.Context, n *Node) error {
	st, b, err := c.Do(ctx, n, "GET", "/readyz", nil)
	if err != nil {
		return err
	}
	if st != http.StatusOK {
		return fmt.Errorf("/readyz %d: %s", st, bytes.TrimSpace(b))
	}
	return nil
}

// Info GETs /v1/cluster from n.
func (c *Cluster) Info(ctx context.Context, n *Node) (Info, error) {
	var ci Info
	st, b, err := c.Do(ctx, n, "GET", "/v1/cluster", nil)
	if err != nil {
		return ci, err
	}
	if st != http.StatusOK {
		return ci, fmt.Errorf("GET /v1/cluster via %s: %d %s", n.ID, st, bytes.TrimSpace(b))
	}
	if err := json.Unmarshal(b, &ci); err != nil {
		return ci, fmt.Errorf("GET /v1/cluster via %s: %w", n.ID, err)
	}
	return ci, nil
}

// AnyInfo GETs /v1/cluster from the first up member that answers.
func (c *Cluster) AnyInfo(ctx context.Context) (Info, *Node, error) {
	var errs []error
	for _, n := range c.Up() {
		ci, err := c.Info(ctx, n)
		if err == nil {
			return ci, n, nil
		}
		errs = append(errs, err)
	}
	return Info{}, nil, fmt.Errorf("no member answers /v1/cluster: %w", errors.Join(errs...))
}

// Healthy reports why the cluster is not healthy (nil: it is): every
// member running and ready, and /v1/cluster from each showing the member
// set alive, every slot led with its full replica set, healthy.
func (c *Cluster) Healthy(ctx context.Context) error {
	members := c.Members()
	ids, removed := map[string]bool{}, map[string]bool{}
	for _, n := range c.Nodes() {
		if n.Removed() {
			removed[n.ID] = true
		}
	}
	for _, n := range members {
		ids[n.ID] = true
		if !n.Running() {
			return fmt.Errorf("%s is not running", n.ID)
		}
		if n.Paused() {
			return fmt.Errorf("%s is paused", n.ID)
		}
	}
	for _, n := range members {
		if err := c.Ready(ctx, n); err != nil {
			return fmt.Errorf("%s not ready: %w", n.ID, err)
		}
		ci, err := c.Info(ctx, n)
		if err != nil {
			return err
		}
		if err := ci.CheckHealthy(ids, removed, c.cfg.Slots, c.cfg.Replicas); err != nil {
			return fmt.Errorf("via %s: %w", n.ID, err)
		}
	}
	return nil
}

// WaitHealthy polls Healthy every 100 ms until it holds or timeout passes;
// it returns how long it took and, on timeout, the last reason.
func (c *Cluster) WaitHealthy(ctx context.Context, timeout time.Duration) (time.Duration, error) {
	d, _, err := c.WaitHealthyTrace(ctx, timeout)
	return d, err
}

// WaitHealthyTrace is WaitHealthy that also returns why the cluster was not
// healthy meanwhile: each reason as it first appeared ("+1.2s: slot 3 led
// by \"\""), a new line only when the reason's head changes (the cluster
// summary a reason ends with changes on every poll). A slow recovery is
// read from it: which node's view, which slot, what state.
func (c *Cluster) WaitHealthyTrace(ctx context.Context, timeout time.Duration) (time.Duration, []string, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var trace []string
	last := ""
	for {
		rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
		err := c.Healthy(rctx)
		rcancel()
		if err == nil {
			return time.Since(start), trace, nil
		}
		if h := reasonHead(err.Error()); h != last {
			last = h
			msg := err.Error()
			if len(msg) > 400 {
				msg = msg[:400] + "…"
			}
			trace = append(trace, fmt.Sprintf("+%v: %s", time.Since(start).Round(10*time.Millisecond), msg))
		}
		select {
		case <-ctx.Done():
			return time.Since(start), trace, fmt.Errorf("not healthy after %v: %w", timeout, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// reasonHead is a Healthy error without the cluster summary it may end
// with (Info.Summary: "n1:alive:led=4 …").
func reasonHead(msg string) string {
	if i := strings.Index(msg, ":led="); i > 0 {
		if j := strings.LastIndex(msg[:i], ": "); j > 0 {
			return msg[:j]
		}
	}
	return msg
}

// SupportsFlag reports whether the binary's server command knows flag
// (hidden flags included): `server <flag> --help` exits 0 only then.
func SupportsFlag(bin, flag string) bool {
	cmd := exec.Command(bin, "server", flag, "--help")
	return cmd.Run() == nil
}

// Version is the binary's `version` output.
func Version(bin string) string {
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// freeLoopbackPort returns a 127.0.0.1 address free for TCP and UDP (serf
// uses both), below the ephemeral range so that a stopped node's port is
// not taken as a source port meanwhile, never the same twice
// (testutil.ClusterAddr).
func freeLoopbackPort() (string, error) { return testutil.ClusterAddr() }

// Loopback is the plain network: every node on 127.0.0.1 with its own
// ports, no network faults possible.
type Loopback struct{}

// Prepare implements Net.
func (Loopback) Prepare(int) (string, error) { return "127.0.0.1", nil }

// Command implements Net.
func (Loopback) Command(_ int, name string, args ...string) (*exec.Cmd, error) {
	return exec.Command(name, args...), nil
}

// DialContext implements Net.
func (Loopback) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return (&net.Dialer{}).DialContext(ctx, network, addr)
}
