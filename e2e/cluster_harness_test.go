package e2e

// The cluster harness: three server processes of the shared harness
// (Server: start, kill -9, SIGTERM, restart on the same data directory)
// formed into one cluster, GET /v1/cluster helpers, and a create workload
// that retries through failovers and records exactly what was
// acknowledged. Used by cluster_test.go and soak_test.go.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/timemachine-db/timemachine/internal/testutil"
)

const (
	clusterSlots    = 12
	clusterReplicas = 3
	// formTimeout bounds forming a 3-node cluster until every slot has a
	// leader and three healthy replicas.
	formTimeout = 60 * time.Second
	// failoverBound is the generous bound asserted on "kill -9 of a
	// leader → every slot led again / writable again" (the target is 3 s;
	// the figures are logged).
	failoverBound = 10 * time.Second
	// settleTimeout bounds a restarted node's catch-up and the leadership
	// spreading back (the controller moves a few leaderships every 3 s).
	settleTimeout = 60 * time.Second
)

// ---------------------------------------------------------------------------
// Ports

// freeClusterPort returns a loopback address free for TCP and UDP, from
// below the kernel's ephemeral range (testutil.ClusterAddr says why).
func freeClusterPort() (string, error) {
	if addr, err := testutil.ClusterAddr(); err == nil {
		return addr, nil
	}
	return freePort() // very unlikely: fall back to an ephemeral port
}

// ---------------------------------------------------------------------------
// The cluster

// Cluster is three (or more) server processes forming one cluster. Node i
// has the node id "n<i+1>".
type Cluster struct {
	t     testing.TB
	Nodes []*Server
	IDs   []string
}

// newCluster prepares (does not start) size nodes under t.TempDir(): each
// with --node-id, --bootstrap-expect size, and --join pointing at node 1's
// serf address (nodes 2..size).
func newCluster(t testing.TB, size int) *Cluster {
	t.Helper()
	root := t.TempDir()
	logDir := root
	if d := os.Getenv("TIMEMACHINE_E2E_LOGDIR"); d != "" {
		// Keep the node logs after the test (they are removed with the
		// temporary directory otherwise).
		logDir = filepath.Join(d, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())+"-"+time.Now().Format("150405"))
		if err := os.MkdirAll(logDir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Logf("node logs in %s", logDir)
	}
	c := &Cluster{t: t}
	for i := 0; i < size; i++ {
		id := fmt.Sprintf("n%d", i+1)
		dir := filepath.Join(root, id)
		s := &Server{
			DataDir: filepath.Join(dir, "data"),
			LogPath: filepath.Join(logDir, id+".log"),
			client:  harnessClient(15*time.Second, false),
		}
		for _, p := range []*string{&s.HTTPAddr, &s.BindAddr, &s.SerfAddr} {
			addr, err := freeClusterPort()
			if err != nil {
				t.Fatalf("ports: %v", err)
			}
			*p = addr
		}
		c.Nodes = append(c.Nodes, s)
		c.IDs = append(c.IDs, id)
	}
	for i, s := range c.Nodes {
		s.Args = []string{"--node-id", c.IDs[i], "--bootstrap-expect", strconv.Itoa(size)}
		if i > 0 {
			s.Args = append(s.Args, "--join", c.Nodes[0].SerfAddr)
		}
		if secureMode {
			s.makeSecure()
		}
	}
	t.Cleanup(func() {
		for _, s := range c.Nodes {
			if s.Running() {
				_ = s.Kill()
			}
			s.client.CloseIdleConnections()
		}
		if t.Failed() {
			c.dumpLogs(48 << 10)
		}
	})
	return c
}

// startCluster starts a 3-node cluster (all nodes at once) and waits until
// every node is ready and GET /v1/cluster on each shows 12 slots, each
// with a leader and 3 healthy replicas. extraArgs go to every node.
func startCluster(t testing.TB, extraArgs ...string) *Cluster {
	t.Helper()
	c := newCluster(t, 3)
	for _, s := range c.Nodes {
		s.Args = append(s.Args, extraArgs...)
	}
	start := time.Now()
	for i, s := range c.Nodes {
		if err := s.Start(); err != nil {
			t.Fatalf("start %s: %v", c.IDs[i], err)
		}
	}
	c.waitAllReady(formTimeout)
	c.waitCluster(formTimeout, "formed: 12 slots, each led with 3 healthy replicas, every node alive", c.allIdx(), checkHealthy(c.IDs))
	t.Logf("cluster of %d formed and healthy in %v (%s)", len(c.Nodes), time.Since(start).Round(time.Millisecond), c.describePorts())
	return c
}

func (c *Cluster) describePorts() string {
	var b []string
	for i, s := range c.Nodes {
		b = append(b, fmt.Sprintf("%s http %s bind %s serf %s", c.IDs[i], s.HTTPAddr, s.BindAddr, s.SerfAddr))
	}
	return strings.Join(b, "; ")
}

func (c *Cluster) allIdx() []int {
	out := make([]int, len(c.Nodes))
	for i := range out {
		out[i] = i
	}
	return out
}

// live returns the indexes of the nodes whose processes run.
func (c *Cluster) live() []int {
	var out []int
	for i, s := range c.Nodes {
		if s.Running() {
			out = append(out, i)
		}
	}
	return out
}

func (c *Cluster) others(i int) []int {
	var out []int
	for j := range c.Nodes {
		if j != i {
			out = append(out, j)
		}
	}
	return out
}

// waitAllReady waits until /readyz is 200 on every running node.
func (c *Cluster) waitAllReady(timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for _, i := range c.live() {
		if err := c.Nodes[i].WaitReady(time.Until(deadline)); err != nil {
			c.t.Fatalf("%s not ready: %v", c.IDs[i], err)
		}
	}
}

// dumpLogs prints the end of every node's log.
func (c *Cluster) dumpLogs(limit int) {
	for i, s := range c.Nodes {
		c.t.Logf("log of %s (%s):\n%s", c.IDs[i], s.LogPath, s.LogTail(0, limit))
	}
}

// ---------------------------------------------------------------------------
// GET /v1/cluster

type clusterNode struct {
	ID       string `json:"id"`
	HTTPAddr string `json:"http_addr"`
	Status   string `json:"status"`
	SlotsLed int    `json:"slots_led"`
	Replicas int    `json:"replicas"`
}

type clusterSlot struct {
	Slot     int      `json:"slot"`
	Leader   string   `json:"leader"`
	Replicas []string `json:"replicas"`
	State    string   `json:"state"`
}

type clusterInfo struct {
	SlotCount         int           `json:"slot_count"`
	ReplicationFactor int           `json:"replication_factor"`
	Nodes             []clusterNode `json:"nodes"`
	Slots             []clusterSlot `json:"slots"`
	Self              string        `json:"self"`
	MetaLeader        string        `json:"meta_leader"`
}

func (ci clusterInfo) node(id string) (clusterNode, bool) {
	for _, n := range ci.Nodes {
		if n.ID == id {
			return n, true
		}
	}
	return clusterNode{}, false
}

// leaders maps slot → leader ("" when none).
func (ci clusterInfo) leaders() map[int]string {
	out := map[int]string{}
	for _, s := range ci.Slots {
		out[s.Slot] = s.Leader
	}
	return out
}

// ledBy lists the slots id leads.
func (ci clusterInfo) ledBy(id string) []int {
	var out []int
	for _, s := range ci.Slots {
		if s.Leader == id {
			out = append(out, s.Slot)
		}
	}
	return out
}

// summary is a one-line description: node id:status:led and slot states.
func (ci clusterInfo) summary() string {
	var b strings.Builder
	for _, n := range ci.Nodes {
		fmt.Fprintf(&b, "%s:%s:led=%d:replicas=%d ", n.ID, n.Status, n.SlotsLed, n.Replicas)
	}
	b.WriteString("| slots")
	for _, s := range ci.Slots {
		fmt.Fprintf(&b, " %d=%s/%s/%s", s.Slot, orNone(s.Leader), strings.Join(s.Replicas, ","), s.State)
	}
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// info GETs /v1/cluster from node i (with a short timeout).
func (c *Cluster) info(i int) (clusterInfo, error) {
	var ci clusterInfo
	r, err := c.Nodes[i].TryDo("GET", "/v1/cluster", nil)
	if err != nil {
		return ci, err
	}
	if r.Status != http.StatusOK {
		return ci, fmt.Errorf("GET /v1/cluster: %s", r)
	}
	if err := json.Unmarshal(r.Body, &ci); err != nil {
		return ci, fmt.Errorf("GET /v1/cluster: decode %q: %v", r.Body, err)
	}
	return ci, nil
}

func (c *Cluster) mustInfo(i int) clusterInfo {
	c.t.Helper()
	ci, err := c.info(i)
	if err != nil {
		c.t.Fatalf("%s: %v", c.IDs[i], err)
	}
	return ci
}

// pollCluster polls /v1/cluster on the nodes from until cond holds on all
// of them; it returns the time it took, or the last error when the timeout
// passed.
func (c *Cluster) pollCluster(timeout time.Duration, from []int, cond func(ci clusterInfo) error) (time.Duration, error) {
	start := time.Now()
	err := testutil.Poll(timeout, func() error {
		for _, i := range from {
			ci, e := c.info(i)
			if e == nil {
				e = cond(ci)
			}
			if e != nil {
				return fmt.Errorf("from %s: %w", c.IDs[i], e)
			}
		}
		return nil
	})
	return time.Since(start), err
}

// waitCluster is pollCluster that fails the test on timeout.
func (c *Cluster) waitCluster(timeout time.Duration, what string, from []int, cond func(ci clusterInfo) error) time.Duration {
	c.t.Helper()
	d, err := c.pollCluster(timeout, from, cond)
	if err != nil {
		c.t.Fatalf("cluster not %s after %v: %v", what, timeout, err)
	}
	return d
}

// checkShape: 12 slots, replication factor 3, every node of ids listed.
func checkShape(ids []string) func(ci clusterInfo) error {
	return func(ci clusterInfo) error {
		if ci.SlotCount != clusterSlots || len(ci.Slots) != clusterSlots {
			return fmt.Errorf("slot_count %d with %d slots, want %d", ci.SlotCount, len(ci.Slots), clusterSlots)
		}
		if ci.ReplicationFactor != clusterReplicas {
			return fmt.Errorf("replication_factor %d, want %d", ci.ReplicationFactor, clusterReplicas)
		}
		for _, id := range ids {
			if _, ok := ci.node(id); !ok {
				return fmt.Errorf("node %s missing: %s", id, ci.summary())
			}
		}
		return nil
	}
}

// checkLed: every slot has a leader, none of them in dead.
func checkLed(dead ...string) func(ci clusterInfo) error {
	return func(ci clusterInfo) error {
		if len(ci.Slots) != clusterSlots {
			return fmt.Errorf("%d slots, want %d", len(ci.Slots), clusterSlots)
		}
		for _, s := range ci.Slots {
			if s.Leader == "" {
				return fmt.Errorf("slot %d has no leader: %s", s.Slot, ci.summary())
			}
			for _, d := range dead {
				if s.Leader == d {
					return fmt.Errorf("slot %d still led by the dead %s: %s", s.Slot, d, ci.summary())
				}
			}
		}
		return nil
	}
}

// checkHealthy: the shape, every node alive, every slot led and healthy
// with 3 replicas covering every node.
func checkHealthy(ids []string) func(ci clusterInfo) error {
	shape := checkShape(ids)
	led := checkLed()
	return func(ci clusterInfo) error {
		if err := shape(ci); err != nil {
			return err
		}
		if err := led(ci); err != nil {
			return err
		}
		for _, n := range ci.Nodes {
			if n.Status != "alive" {
				return fmt.Errorf("node %s is %s: %s", n.ID, n.Status, ci.summary())
			}
		}
		for _, s := range ci.Slots {
			if s.State != "healthy" || len(s.Replicas) != clusterReplicas {
				return fmt.Errorf("slot %d is %s with replicas %v: %s", s.Slot, s.State, s.Replicas, ci.summary())
			}
		}
		return nil
	}
}

// checkBalanced: healthy, and every node leads slots/nodes slots.
func checkBalanced(ids []string) func(ci clusterInfo) error {
	healthy := checkHealthy(ids)
	return func(ci clusterInfo) error {
		if err := healthy(ci); err != nil {
			return err
		}
		want := clusterSlots / len(ids)
		counts := map[string]int{}
		for _, s := range ci.Slots {
			counts[s.Leader]++
		}
		for _, id := range ids {
			if counts[id] != want {
				return fmt.Errorf("leadership not spread: %v, want %d each: %s", counts, want, ci.summary())
			}
		}
		return nil
	}
}

// mostLeader returns the index of the node (among candidates) that leads
// the most slots according to node from; ties go to the first candidate.
func (c *Cluster) mostLeader(from int, candidates []int) (int, clusterInfo) {
	c.t.Helper()
	ci := c.mustInfo(from)
	best, n := -1, -1
	for _, i := range candidates {
		if k := len(ci.ledBy(c.IDs[i])); k > n {
			best, n = i, k
		}
	}
	return best, ci
}

// ---------------------------------------------------------------------------
// Slots, computed as the contract defines them (docs/architecture.md#slots)

func slotOf(coll, id string) int {
	return int(xxhash.Sum64String(coll+"/"+id) % clusterSlots)
}

// idInSlot returns prefix-<n> for the first n ≥ 0 whose slot is s.
func idInSlot(coll, prefix string, s int) string {
	for n := 0; ; n++ {
		id := fmt.Sprintf("%s-%d", prefix, n)
		if slotOf(coll, id) == s {
			return id
		}
	}
}

// ---------------------------------------------------------------------------
// The create workload

// workload creates jobs through every live node, retrying what is not
// acknowledged (transport errors, 5xx, per-item 503 in a batch) with the
// same spec at the next live node, and records exactly which ids were
// acknowledged (201, or 200: "it exists with this spec").
type workload struct {
	c    *Cluster
	rcv  *Receiver
	coll string

	mu        sync.Mutex
	attempted map[string]int64 // id → trigger_time of every id ever sent
	acked     map[string]int64 // id → trigger_time of the acknowledged ones
	ackedAt   map[string]time.Time
	failures  map[string]int // what was retried, by kind
	errs      []string       // non-retryable answers (test failures)
	lastTrig  int64

	rr       atomic.Int64
	wg       sync.WaitGroup
	gaveUp   atomic.Int64
	retryFor time.Duration // how long one request keeps retrying
}

func newWorkload(c *Cluster, rcv *Receiver, coll string) *workload {
	return &workload{c: c, rcv: rcv, coll: coll,
		attempted: map[string]int64{}, acked: map[string]int64{}, ackedAt: map[string]time.Time{},
		failures: map[string]int{}, retryFor: 30 * time.Second}
}

// nextNode picks the next live node round-robin (-1 when none runs).
func (w *workload) nextNode() int {
	live := w.c.live()
	if len(live) == 0 {
		return -1
	}
	return live[int(w.rr.Add(1))%len(live)]
}

func (w *workload) fail(kind string) {
	w.mu.Lock()
	w.failures[kind]++
	w.mu.Unlock()
}

func (w *workload) ack(id string, trig int64) {
	w.mu.Lock()
	w.acked[id] = trig
	w.ackedAt[id] = time.Now()
	w.mu.Unlock()
}

func (w *workload) attempt(jobs []map[string]any) {
	w.mu.Lock()
	for _, j := range jobs {
		tr := j["trigger_time"].(int64)
		w.attempted[j["id"].(string)] = tr
		w.lastTrig = max(w.lastTrig, tr)
	}
	w.mu.Unlock()
}

func retryWait(r Resp) time.Duration {
	if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err == nil && s > 0 {
		return min(time.Duration(s)*time.Second, time.Second)
	}
	return 100 * time.Millisecond
}

// createSingle POSTs one job until it is acknowledged (201/200) or retryFor
// passes. It reports whether it was acknowledged.
func (w *workload) createSingle(job map[string]any) bool {
	w.attempt([]map[string]any{job})
	id, trig := job["id"].(string), job["trigger_time"].(int64)
	deadline := time.Now().Add(w.retryFor)
	for time.Now().Before(deadline) {
		i := w.nextNode()
		if i < 0 {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		r, err := w.c.Nodes[i].TryDo("POST", jobsPath(w.coll), job)
		switch {
		case err != nil:
			w.fail("transport error")
			time.Sleep(50 * time.Millisecond)
		case r.Status == http.StatusCreated || r.Status == http.StatusOK:
			w.ack(id, trig)
			return true
		case r.Status == http.StatusNotFound:
			// The collection exists: a 404 is a wrong answer (a node
			// whose meta state has not caught up). Record it as an error
			// and try another node.
			w.error(fmt.Sprintf("POST %s via %s: %s%s", id, w.c.IDs[i], r, w.readiness(i)))
			w.fail("single 404")
			time.Sleep(50 * time.Millisecond)
		case r.Status == http.StatusServiceUnavailable || r.Status == http.StatusTooManyRequests || r.Status >= 500:
			w.fail(fmt.Sprintf("single %d", r.Status))
			if r.Status == http.StatusServiceUnavailable && r.Header.Get("Retry-After") == "" {
				w.error(fmt.Sprintf("POST %s via %s: 503 without Retry-After: %s", id, w.c.IDs[i], r))
			}
			time.Sleep(retryWait(r))
		default:
			w.error(fmt.Sprintf("POST %s via %s: %s", id, w.c.IDs[i], r))
			return false
		}
	}
	w.gaveUp.Add(1)
	return false
}

// readiness describes node i's /readyz right now (for error messages).
func (w *workload) readiness(i int) string {
	r, err := w.c.Nodes[i].TryDo("GET", "/readyz", nil)
	if err != nil {
		return fmt.Sprintf(" [its /readyz: %v]", err)
	}
	return fmt.Sprintf(" [its /readyz right after: %s]", r)
}

func (w *workload) error(msg string) {
	w.mu.Lock()
	w.errs = append(w.errs, time.Now().Format("15:04:05.000")+" "+msg)
	w.mu.Unlock()
}

// createBatch POSTs an array of jobs, re-sending the items not yet
// acknowledged until all are or retryFor passes.
func (w *workload) createBatch(jobs []map[string]any) {
	w.attempt(jobs)
	deadline := time.Now().Add(w.retryFor)
	pending := jobs
	for len(pending) > 0 && time.Now().Before(deadline) {
		i := w.nextNode()
		if i < 0 {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		r, err := w.c.Nodes[i].TryDo("POST", jobsPath(w.coll), pending)
		if err != nil {
			w.fail("transport error")
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if r.Status != http.StatusOK {
			if r.Status == http.StatusNotFound { // see createSingle
				w.error(fmt.Sprintf("batch POST via %s: %s%s", w.c.IDs[i], r, w.readiness(i)))
				w.fail("batch 404")
				time.Sleep(50 * time.Millisecond)
				continue
			}
			if r.Status == http.StatusServiceUnavailable || r.Status == http.StatusTooManyRequests || r.Status >= 500 {
				w.fail(fmt.Sprintf("batch %d", r.Status))
				time.Sleep(retryWait(r))
				continue
			}
			w.error(fmt.Sprintf("batch POST via %s: %s", w.c.IDs[i], r))
			return
		}
		var out struct {
			Results []batchResult `json:"results"`
		}
		if err := json.Unmarshal(r.Body, &out); err != nil || len(out.Results) != len(pending) {
			w.error(fmt.Sprintf("batch POST via %s: %d results for %d jobs (%v): %.300s", w.c.IDs[i], len(out.Results), len(pending), err, r.Body))
			return
		}
		var again []map[string]any
		for k, res := range out.Results {
			j := pending[k]
			switch {
			case res.ID != j["id"]:
				w.error(fmt.Sprintf("batch result %d is for %q, want %q", k, res.ID, j["id"]))
			case res.Status == http.StatusCreated || res.Status == http.StatusOK:
				w.ack(res.ID, j["trigger_time"].(int64))
			case res.Status == http.StatusServiceUnavailable || res.Status == http.StatusTooManyRequests || res.Status >= 500:
				w.fail(fmt.Sprintf("batch item %d", res.Status))
				again = append(again, j)
			default:
				w.error(fmt.Sprintf("batch item %s via %s: status %d %s", res.ID, w.c.IDs[i], res.Status, res.Error))
			}
		}
		pending = again
		if len(pending) > 0 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if len(pending) > 0 {
		w.gaveUp.Add(int64(len(pending)))
	}
}

// streamConfig shapes a stream of creates.
type streamConfig struct {
	prefix  string
	tick    time.Duration // one batch (and the singles) per tick
	batch   int           // jobs per batch POST
	singles int           // single POSTs per tick
	minLead time.Duration // trigger_time = now + [minLead, maxLead)
	maxLead time.Duration
	ticks   int // stop after this many ticks (0: until stop is closed)
	seed    uint64
}

// stream creates jobs every tick in its own goroutines (so a request stuck
// in a failover does not hold the pace) until cfg.ticks or stop. It
// returns when every request has been acknowledged or given up.
func (w *workload) stream(cfg streamConfig, stop <-chan struct{}) {
	rng := rand.New(rand.NewPCG(cfg.seed, 0x5eed))
	t := time.NewTicker(cfg.tick)
	defer t.Stop()
	n := 0
	span := int64(cfg.maxLead - cfg.minLead)
	for tick := 0; cfg.ticks == 0 || tick < cfg.ticks; tick++ {
		now := nowMs()
		var jobs []map[string]any
		for k := 0; k < cfg.batch+cfg.singles; k++ {
			lead := int64(cfg.minLead)
			if span > 0 {
				lead += rng.Int64N(span)
			}
			id := fmt.Sprintf("%s-%06d", cfg.prefix, n)
			n++
			jobs = append(jobs, w.rcv.job(id, now+lead/int64(time.Millisecond)))
		}
		w.wg.Add(1)
		go func(b []map[string]any) { defer w.wg.Done(); w.createBatch(b) }(jobs[:cfg.batch])
		for _, j := range jobs[cfg.batch:] {
			w.wg.Add(1)
			go func(j map[string]any) { defer w.wg.Done(); w.createSingle(j) }(j)
		}
		select {
		case <-t.C:
		case <-stop:
			w.wg.Wait()
			return
		}
	}
	w.wg.Wait()
}

// probeSlots measures, after a failure at `since`, how long until a
// create of a new job in each of slots is acknowledged through one of the
// nodes via (round-robin), retrying every 50 ms. The probe jobs fire
// `lead` after their creation and are part of the workload. It returns,
// per slot, the time from since to the first acknowledgement (or -1).
func (w *workload) probeSlots(since time.Time, slots []int, via []int, prefix string, lead time.Duration, timeout time.Duration) map[int]time.Duration {
	out := map[int]time.Duration{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range slots {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			id := idInSlot(w.coll, fmt.Sprintf("%s-s%d", prefix, s), s)
			job := w.rcv.job(id, nowMs()+lead.Milliseconds())
			w.attempt([]map[string]any{job})
			cl := harnessClient(2*time.Second, secureMode)
			defer cl.CloseIdleConnections()
			body, _ := json.Marshal(job)
			deadline := time.Now().Add(timeout)
			for k := 0; time.Now().Before(deadline); k++ {
				n := w.c.Nodes[via[k%len(via)]]
				req, _ := http.NewRequest(http.MethodPost, n.url(jobsPath(w.coll)), strings.NewReader(string(body)))
				req.Header.Set("Content-Type", "application/json")
				if n.Token != "" {
					req.Header.Set("Authorization", "Bearer "+n.Token)
				}
				resp, err := cl.Do(req)
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusOK {
						w.ack(id, job["trigger_time"].(int64))
						mu.Lock()
						out[s] = time.Since(since)
						mu.Unlock()
						return
					}
				}
				time.Sleep(50 * time.Millisecond)
			}
			mu.Lock()
			out[s] = -1
			mu.Unlock()
		}(s)
	}
	wg.Wait()
	return out
}

func (w *workload) snapshot() (attempted, acked map[string]int64, failures map[string]int, errs []string, lastTrig int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	attempted = make(map[string]int64, len(w.attempted))
	for k, v := range w.attempted {
		attempted[k] = v
	}
	acked = make(map[string]int64, len(w.acked))
	for k, v := range w.acked {
		acked[k] = v
	}
	failures = map[string]int{}
	for k, v := range w.failures {
		failures[k] = v
	}
	return attempted, acked, failures, append([]string(nil), w.errs...), w.lastTrig
}

// deliveryReport is the outcome of checking the receiver against the
// acknowledged jobs.
type deliveryReport struct {
	Acked, Attempted    int
	Delivered           int // acknowledged jobs delivered at least once
	Deliveries          int // every delivery of the collection
	Duplicates          int // acknowledged jobs delivered more than once
	UnackedDelivered    int // sent, never acknowledged, delivered anyway (allowed)
	Lost, Early, BadKey []string
	Stray               int
	P50, P99, MaxLate   time.Duration
}

// waitDelivered waits until every acknowledged job has been delivered at
// least once or the deadline passes, then quiet more for repeats to show.
func (w *workload) waitDelivered(deadline time.Time, quiet time.Duration) {
	_, acked, _, _, _ := w.snapshot()
	for {
		missing := 0
		for id := range acked {
			if len(w.rcv.Of(w.coll, id)) == 0 {
				missing++
				break
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(quiet)
}

// check compares the receiver's deliveries with what was acknowledged.
func (w *workload) check() deliveryReport {
	attempted, acked, _, _, _ := w.snapshot()
	rep := deliveryReport{Acked: len(acked), Attempted: len(attempted)}
	var lateness []time.Duration
	for id, tr := range attempted {
		ds := w.rcv.Of(w.coll, id)
		_, isAcked := acked[id]
		if len(ds) == 0 {
			if isAcked {
				rep.Lost = append(rep.Lost, id)
			}
			continue
		}
		if !isAcked {
			rep.UnackedDelivered++
		} else {
			rep.Delivered++
			if len(ds) > 1 {
				rep.Duplicates++
			}
			lateness = append(lateness, ds[0].At.Sub(time.UnixMilli(tr)))
		}
		want := idemKey(w.coll, id, tr)
		for _, d := range ds {
			if d.AtMs() < tr {
				rep.Early = append(rep.Early, fmt.Sprintf("%s delivery #%d at %d, trigger_time %d (%d ms early)", id, d.N, d.AtMs(), tr, tr-d.AtMs()))
			}
			if k := d.Header.Get("Idempotency-Key"); k != want || d.Payload.TriggerTime != tr || d.Payload.ID != id {
				rep.BadKey = append(rep.BadKey, fmt.Sprintf("%s delivery #%d: Idempotency-Key %q (want %q), payload %.200s", id, d.N, k, want, d.Body))
			}
		}
	}
	for _, d := range w.rcv.All() {
		rep.Deliveries++
		if _, ok := attempted[strings.TrimPrefix(d.Key, w.coll+"/")]; !ok || !strings.HasPrefix(d.Key, w.coll+"/") {
			rep.Stray++
		}
	}
	sort.Strings(rep.Lost)
	sort.Strings(rep.Early)
	sort.Slice(lateness, func(i, j int) bool { return lateness[i] < lateness[j] })
	if n := len(lateness); n > 0 {
		rep.P50, rep.P99, rep.MaxLate = lateness[n/2], lateness[n*99/100], lateness[n-1]
	}
	return rep
}

func (r deliveryReport) String() string {
	return fmt.Sprintf("acked %d (of %d sent), delivered %d, deliveries %d, duplicates %d, lost %d, early %d, bad keys %d, stray %d, "+
		"sent-but-unacked delivered %d; first-delivery lateness p50 %v p99 %v max %v",
		r.Acked, r.Attempted, r.Delivered, r.Deliveries, r.Duplicates, len(r.Lost), len(r.Early), len(r.BadKey), r.Stray,
		r.UnackedDelivered, r.P50.Round(time.Millisecond), r.P99.Round(time.Millisecond), r.MaxLate.Round(time.Millisecond))
}

// verify fails the test for every lost, early or mis-keyed delivery, and
// for stray deliveries and non-retryable create answers.
func (w *workload) verify(t testing.TB, rep deliveryReport) {
	t.Helper()
	_, acked, _, errs, _ := w.snapshot()
	if len(errs) > 0 {
		kinds := map[string]int{}
		for _, e := range errs {
			k := "other"
			switch {
			case strings.Contains(e, ": 404 ") && strings.Contains(e, "/readyz right after: 200"):
				k = "404 from a ready node"
			case strings.Contains(e, ": 404 "):
				k = "404 from a node not ready"
			}
			kinds[k]++
		}
		t.Errorf("%d wrong answers to creates: %v", len(errs), kinds)
	}
	for i, e := range errs {
		if i == 10 {
			t.Errorf("… and %d more create errors", len(errs)-10)
			break
		}
		t.Errorf("create: %s", e)
	}
	if len(rep.Lost) > 0 {
		t.Errorf("LOST: %d acknowledged jobs never delivered", len(rep.Lost))
		for i, id := range rep.Lost {
			if i == 15 {
				break
			}
			w.mu.Lock()
			at := w.ackedAt[id]
			w.mu.Unlock()
			t.Errorf("  never delivered: %s (slot %d) trigger_time %d, acknowledged at %d", id, slotOf(w.coll, id), acked[id], at.UnixMilli())
		}
		// What the cluster says of a few of them.
		for k, id := range rep.Lost {
			if k == 5 {
				break
			}
			for _, i := range w.c.live() {
				r, err := w.c.Nodes[i].TryDo("GET", jobPath(w.coll, id), nil)
				t.Logf("  GET %s via %s: %v %v", id, w.c.IDs[i], r, err)
				break
			}
		}
	}
	for i, e := range rep.Early {
		if i == 15 {
			t.Errorf("… and %d more early deliveries", len(rep.Early)-15)
			break
		}
		t.Errorf("EARLY: %s", e)
	}
	for i, e := range rep.BadKey {
		if i == 15 {
			t.Errorf("… and %d more", len(rep.BadKey)-15)
			break
		}
		t.Errorf("repeat with another key or payload: %s", e)
	}
	if rep.Stray > 0 {
		t.Errorf("%d deliveries of jobs never created", rep.Stray)
	}
}

// failover is what measureFailover saw after a node went away.
type failover struct {
	LedAgain    time.Duration // until every slot had a leader other than the victim (survivors' /v1/cluster)
	LedErr      error         // set when that did not happen within the timeout
	Probes      map[int]time.Duration
	FirstWrite  time.Duration // first acknowledged create in one of the victim's slots
	AllWritable time.Duration // ... in all of them (-1: some never)
}

// measureFailover times, from at, how long until the survivors' /v1/cluster
// shows every slot led by someone other than victim, and how long until a
// create in each slot the victim led is acknowledged through a survivor.
func measureFailover(c *Cluster, w *workload, victim int, led []int, at time.Time, prefix string, timeout time.Duration) failover {
	probeDone := make(chan map[int]time.Duration, 1)
	survivors := c.others(victim)
	go func() { probeDone <- w.probeSlots(at, led, survivors, prefix, time.Second, timeout) }()
	var f failover
	pollStart := time.Now()
	d, err := c.pollCluster(timeout, survivors, checkLed(c.IDs[victim]))
	f.LedAgain, f.LedErr = d+pollStart.Sub(at), err
	f.Probes = <-probeDone
	f.FirstWrite, f.AllWritable = describeProbes(f.Probes)
	return f
}

// newCollection creates a fresh collection through node via and waits
// until every running node's GET /v1/collections/{c} finds it, so that a
// workload can use it through any node at once. (Creates through another
// node right after the PUT are tested on their own, in
// TestClusterNeverSays404ForExistingCollection.)
func (c *Cluster) newCollection(t testing.TB, via int, prefix string) string {
	t.Helper()
	name := c.Nodes[via].newCollection(t, prefix, nil)
	deadline := time.Now().Add(10 * time.Second)
	for _, i := range c.live() {
		for {
			r, err := c.Nodes[i].TryDo("GET", "/v1/collections/"+name, nil)
			if err == nil && r.Status == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("collection %s created through %s: GET through %s still answers %v %v", name, c.IDs[via], c.IDs[i], r, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return name
}
