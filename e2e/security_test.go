package e2e

// The attacks of issue 9, against real processes: a rogue node, raw
// bytes on the internal and gossip ports, cross-site requests, announced
// huge bodies, thousands of idle connections, credentials in URLs and
// SSRF targets. Each test passes in plain and in secure mode.

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/internal/testcerts"
	"github.com/timemachine-db/timemachine/internal/testutil"
)

// startSecureCluster starts a 3-node cluster with every security option
// on, whatever the mode.
func startSecureCluster(t *testing.T, extraArgs ...string) *Cluster {
	t.Helper()
	if _, err := secureMaterial(); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, 3)
	for _, s := range c.Nodes {
		if !s.Secure {
			s.makeSecure()
		}
		s.Args = append(s.Args, extraArgs...)
	}
	for i, s := range c.Nodes {
		if err := s.Start(); err != nil {
			t.Fatalf("start %s: %v", c.IDs[i], err)
		}
	}
	c.waitAllReady(formTimeout)
	c.waitCluster(formTimeout, "formed and healthy", c.allIdx(), checkHealthy(c.IDs))
	return c
}

// metric reads one sample from /metrics (sum of the series whose name and
// labels start with prefix); NaN if absent.
func (s *Server) metric(t *testing.T, prefix string) float64 {
	t.Helper()
	r := s.Do(t, "GET", "/metrics", nil)
	mustStatus(t, "GET /metrics", r, 200)
	sum, found := 0.0, false
	for _, line := range strings.Split(string(r.Body), "\n") {
		if strings.HasPrefix(line, prefix) {
			f := strings.Fields(line)
			if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
				sum += v
				found = true
			}
		}
	}
	if !found {
		return math.NaN()
	}
	return sum
}

// dialAPI opens a raw connection to the API (TLS for a secure server).
func (s *Server) dialAPI(t *testing.T) net.Conn {
	t.Helper()
	if s.Secure {
		c, err := tls.Dial("tcp", s.HTTPAddr, secure.clientTLS.Clone())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c, err := net.Dial("tcp", s.HTTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// errorLines counts log lines at level ERROR of the components that see
// attack traffic (gossip, the internal port, the HTTP API) written since
// off. (Raft's own lines about elections are not the attacker's doing.)
func (s *Server) errorLines(off int64) (int, string) {
	n, first := 0, ""
	for _, line := range strings.Split(s.LogTail(off, 64<<20), "\n") {
		if strings.Contains(line, "level=ERROR") && (strings.Contains(line, "component=serf") ||
			strings.Contains(line, "component=mux") || strings.Contains(line, "component=httpapi")) {
			if n == 0 {
				first = line
			}
			n++
		}
	}
	return n, first
}

// TestSecurityRogueNode: against a cluster with a gossip key and peer mTLS,
// a stranger's node that joins through the serf address is never
// admitted; raw proposals on the internal port (plain TCP, and TLS with a
// certificate of another CA) are refused before any byte reaches raft or
// the RPC decoder; 5,000 junk UDP datagrams and junk TCP on the serf port
// write no ERROR lines; the cluster stays healthy through all of it.
func TestSecurityRogueNode(t *testing.T) {
	c := startSecureCluster(t)
	n1 := c.Nodes[0]
	logOff := n1.LogSize()

	// The rogue: no gossip key, no certificates.
	rogue, err := newServerIn(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rogue.Secure, rogue.Token, rogue.client = false, "", harnessClient(5*time.Second, false)
	rogue.Args = []string{"--node-id", "rogue", "--join", n1.SerfAddr, "--bootstrap-expect", "1"}
	if err := rogue.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rogue.Kill() }()

	// Raw proposals on the internal port.
	refusedBefore := n1.metric(t, `timemachine_internal_connections_refused_total{reason="tls"}`)
	for i := 0; i < 20; i++ {
		conn, err := net.Dial("tcp", n1.BindAddr)
		if err != nil {
			t.Fatal(err)
		}
		// mux header: RPC, version 1, group 0, then a frame of garbage;
		// and a raft header for the meta group.
		hdr := []byte{2, 1, 0, 0}
		if i%2 == 1 {
			hdr = []byte{1, 1, 0xff, 0xff}
		}
		_, _ = conn.Write(append(hdr, []byte("\x00\x00\x00\x10delete-job-x....")...))
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.ReadAll(conn)
		conn.Close()
	}
	otherCA := testcerts.NewCA(t, t.TempDir(), "stranger")
	sp := otherCA.Issue(t, t.TempDir(), "stranger")
	cert, err := tls.LoadX509KeyPair(sp.CertFile, sp.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		conn, err := tls.Dial("tcp", n1.BindAddr, &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true})
		if err == nil {
			_, _ = conn.Write([]byte{2, 1, 0, 0, 0, 0, 0, 4, 'x', 'x', 'x', 'x'})
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = io.ReadAll(conn)
			conn.Close()
		}
		if err == nil {
			t.Log("the stranger's TLS connection ended without an error (closed by the server)")
		}
	}
	testutil.Eventually(t, 10*time.Second, "25 refusals counted", func() error {
		if got := n1.metric(t, `timemachine_internal_connections_refused_total{reason="tls"}`); got < refusedBefore+25 {
			return fmt.Errorf("refused %v", got-refusedBefore)
		}
		return nil
	})

	// Junk on the gossip port.
	sendJunkGossip(t, n1.SerfAddr)

	// The rogue never becomes a member, seen from any node, for as long
	// as its join loop keeps trying (it retries every second).
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		for i := range c.Nodes {
			ci := c.mustInfo(i)
			if _, ok := ci.node("rogue"); ok {
				t.Fatalf("the rogue node was admitted: %s", ci.summary())
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	if n, first := n1.errorLines(logOff); n > 0 {
		t.Errorf("%d ERROR lines in n1's log during the attacks; the first: %s", n, first)
	}
	if !strings.Contains(n1.LogTail(logOff, 64<<20), "dropped gossip traffic") {
		t.Error("no summary of the dropped gossip traffic in n1's log")
	}
	// Unauthenticated admin calls are refused.
	r := n1.Do(t, "POST", "/v1/admin/rebalance", nil, "Authorization", "")
	mustError(t, "rebalance without a token", r, 401, "unauthenticated")
	c.waitCluster(20*time.Second, "still healthy after the attacks", c.allIdx(), checkHealthy(c.IDs))
	t.Logf("refusals on n1's internal port: %v", n1.metric(t, "timemachine_internal_connections_refused_total")-refusedBefore)
}

// TestSecurityBrowserAndInputAttacks: the issue's CSRF request, a URL with
// credentials, SSRF targets and a callback to the node's own admin API are
// refused at create and change nothing.
func TestSecurityBrowserAndInputAttacks(t *testing.T) {
	t.Parallel()
	s := shared(t)
	coll := s.newCollection(t, "sec", nil)

	// CSRF: a page on another site POSTs text/plain.
	r := s.Do(t, "POST", jobsPath(coll), `{"id":"csrf","delay":"1h","callback_url":"http://127.0.0.1:9/"}`,
		"Content-Type", "text/plain", "Origin", "https://evil.example")
	mustError(t, "CSRF POST", r, 403, "permission_denied")
	r = s.Do(t, "POST", jobsPath(coll), `{"id":"csrf","delay":"1h","callback_url":"http://127.0.0.1:9/"}`, "Content-Type", "text/plain")
	mustError(t, "text/plain without Origin", r, 400, "invalid_argument")
	if _, ok := s.getJob(t, coll, "csrf"); ok {
		t.Fatal("the cross-site request created a job")
	}

	// Credentials in a URL are refused, and not repeated.
	r = s.Do(t, "POST", jobsPath(coll), map[string]any{"id": "creds", "delay": "1h", "callback_url": "http://user:s3cret@127.0.0.1:9/x"})
	mustError(t, "user:pass in callback_url", r, 400, "invalid_argument")
	if strings.Contains(string(r.Body), "s3cret") {
		t.Fatalf("the password is echoed: %s", r)
	}

	// SSRF: the default policy refuses metadata and link-local targets
	// in every spelling; the node's own listeners are refused too.
	for _, u := range []string{
		"http://169.254.169.254/latest/meta-data/",
		"http://[fd00:ec2::254]/latest/",
		"http://100.100.100.200/latest/",
		"http://metadata.google.internal/computeMetadata/v1/",
		"http://0xa9fea9fe/",
		"http://[::ffff:169.254.169.254]/",
		"http://0.0.0.0:" + portOf(s.HTTPAddr) + "/v1/admin/rebalance",
		"http://" + s.HTTPAddr + "/v1/admin/compact",
		"http://127.1:" + portOf(s.HTTPAddr) + "/v1/admin/nodes/x/drain",
		"http://2130706433:" + portOf(s.HTTPAddr) + "/v1/admin/compact",
	} {
		r = s.Do(t, "POST", jobsPath(coll), map[string]any{"delay": "1h", "callback_url": u})
		mustError(t, "callback_url "+u, r, 400, "invalid_argument")
		if !strings.Contains(string(r.Body), "egress policy") {
			t.Errorf("%s: the refusal does not name the policy: %s", u, r)
		}
		r = s.Do(t, "PUT", "/v1/routes/"+uniq("ssrf"), map[string]any{"webhook_url": u})
		mustError(t, "webhook_url "+u, r, 400, "invalid_argument")
	}
	// A host name is checked at the attempt (API.md §6), "localhost" too:
	// the node's own internal port through it fails the job there.
	r = s.Do(t, "POST", jobsPath(coll), map[string]any{"id": "own-port", "delay": "50ms", "callback_url": "http://localhost:" + portOf(s.BindAddr) + "/"})
	mustStatus(t, "callback_url to the own internal port by name", r, 201)
	if j := s.waitStatus(t, coll, "own-port", "failed", 10*time.Second); j.Attempts != 1 || !strings.Contains(j.LastError, "egress policy") {
		t.Errorf("the own internal port by name: attempts %d, last_error %q", j.Attempts, j.LastError)
	}
}

// sendJunkGossip sends 5,000 junk UDP datagrams and 20 junk TCP streams to
// a serf address.
func sendJunkGossip(t *testing.T, addr string) {
	t.Helper()
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	uc, err := net.DialUDP("udp", nil, ua)
	if err != nil {
		t.Fatal(err)
	}
	junk := []byte("\x01\x02 not a gossip packet \xff\xfe")
	for i := 0; i < 5000; i++ {
		_, _ = uc.Write(junk)
		if i%500 == 499 {
			time.Sleep(10 * time.Millisecond) // do not just overflow the socket buffer
		}
	}
	uc.Close()
	for i := 0; i < 20; i++ {
		if conn, err := net.Dial("tcp", addr); err == nil {
			_, _ = conn.Write([]byte("GET / HTTP/1.1\r\n\r\n\x00\x01\x02junk"))
			conn.Close()
		}
	}
}

// TestSecurityJunkGossip: on a node of this mode (no gossip key in plain
// mode), 5,000 junk datagrams and junk TCP on the serf port write no ERROR
// line (the issue saw 4,858), only a rate-limited summary; the node stays
// ready.
func TestSecurityJunkGossip(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	off := s.LogSize()
	sendJunkGossip(t, s.SerfAddr)
	testutil.Eventually(t, 10*time.Second, "the summary line", func() error {
		if !strings.Contains(s.LogTail(off, 64<<20), "dropped gossip traffic") {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	if n, first := s.errorLines(off); n > 0 {
		t.Fatalf("%d ERROR lines; the first: %s", n, first)
	}
	if err := s.WaitReady(5 * time.Second); err != nil {
		t.Fatal(err)
	}
}

func portOf(hostport string) string {
	_, p, _ := net.SplitHostPort(hostport)
	return p
}

// TestSecurityEgressNameRefusedAtFire: a callback host name is checked
// after resolution, on the attempt (API.md §6): a name that resolves to an
// address the policy denies — "localhost", and this machine's host name
// from /etc/hosts where it resolves to loopback — is accepted at create
// (201), then fails the job at its first attempt, without a retry, with a
// last_error that names the policy, and counts in the metric.
func TestSecurityEgressNameRefusedAtFire(t *testing.T) {
	t.Parallel()
	names := []string{"localhost"}
	if host, err := os.Hostname(); err == nil {
		if addrs, err := net.LookupHost(host); err == nil && len(addrs) > 0 && net.ParseIP(addrs[0]).IsLoopback() {
			names = append(names, host)
		} else {
			t.Logf("host name %q does not resolve to loopback here (%v %v): only localhost is tried", host, addrs, err)
		}
	}
	rcv := newReceiver(t)
	s := startServer(t, "--callback-deny", "169.254.0.0/16,fe80::/10,0.0.0.0/8,127.0.0.0/8,::1/128")
	coll := s.newCollection(t, "egress", map[string]any{"retry_policy": map[string]any{"max_attempts": 5, "initial_interval": "1s"}})
	for i, name := range names {
		id := fmt.Sprintf("byname-%d", i)
		u := strings.Replace(rcv.URL, "127.0.0.1", name, 1) + "/hook"
		r := s.Do(t, "POST", jobsPath(coll), map[string]any{"id": id, "delay": "100ms", "callback_url": u})
		mustStatus(t, "create with the host name "+name, r, 201)
		j := s.waitStatus(t, coll, id, "failed", 10*time.Second)
		if j.Attempts != 1 || !strings.Contains(j.LastError, "egress policy") || !strings.Contains(j.LastError, "127.0.0.0/8") {
			t.Fatalf("%s: job: attempts %d, last_error %q", name, j.Attempts, j.LastError)
		}
	}
	if n := len(rcv.All()); n != 0 {
		t.Fatalf("the receiver got %d callbacks", n)
	}
	if v := s.metric(t, "timemachine_callback_refused_total"); v < float64(len(names)) {
		t.Fatalf("refusals not counted: %v of %d", v, len(names))
	}
}

// TestSecurityHugeAnnouncedBodies: the issue's memory attack — connections
// that send only headers announcing 80 MiB (and the 16 MiB limit) — no
// longer raises the server's RSS; an 80 MiB body that is sent is refused
// with 413.
func TestSecurityHugeAnnouncedBodies(t *testing.T) {
	s := startServer(t)
	coll := s.newCollection(t, "big", nil)
	before := s.metric(t, "process_resident_memory_bytes")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	auth := ""
	if s.Token != "" {
		auth = "Authorization: Bearer " + s.Token + "\r\n"
	}
	for i := 0; i < 40; i++ {
		n := 16 << 20
		if i%2 == 0 {
			n = 80 << 20
		}
		c := s.dialAPI(t)
		conns = append(conns, c)
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", jobsPath(coll), s.HTTPAddr, auth, n)
	}
	// Give the server time to read every header and (wrongly) allocate.
	time.Sleep(time.Second)
	after := s.metric(t, "process_resident_memory_bytes")
	if grew := after - before; grew > 100<<20 {
		t.Fatalf("RSS grew by %.0f MiB with 40 header-only connections announcing 16-80 MiB", grew/(1<<20))
	}
	t.Logf("RSS %.0f MiB → %.0f MiB with 40 header-only connections", before/(1<<20), after/(1<<20))

	c := s.dialAPI(t)
	defer c.Close()
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", jobsPath(coll), s.HTTPAddr, auth, 80<<20)
	go func() { _, _ = c.Write(make([]byte, 1<<20)) }()
	_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 413 || !strings.Contains(string(b), "too_large") {
		t.Fatalf("80 MiB body: %d %s", resp.StatusCode, b)
	}
}

// TestSecurityIdleConnections: 5,000 idle connections from one client do
// not delay another client's creates or any fire.
func TestSecurityIdleConnections(t *testing.T) {
	s := startServer(t)
	rcv := newReceiver(t)
	coll := s.newCollection(t, "idle", nil)
	const idle = 5000
	conns := make([]net.Conn, 0, idle)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for len(conns) < idle {
		c, err := net.Dial("tcp", s.HTTPAddr) // a TLS server waits for the handshake: idle all the same
		if err != nil {
			t.Fatalf("after %d connections: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	testutil.Eventually(t, 10*time.Second, "the idle connections open on the server", func() error {
		if v := s.metric(t, "timemachine_http_connections_open"); v < idle {
			return fmt.Errorf("%v open", v)
		}
		return nil
	})
	trig := nowMs() + 2000
	var worst time.Duration
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			start := time.Now()
			r := s.Do(t, "POST", jobsPath(coll), rcv.job(fmt.Sprintf("idle-%d", i), trig))
			mustStatus(t, "create", r, 201)
			mu.Lock()
			worst = max(worst, time.Since(start))
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	if worst > time.Second {
		t.Errorf("a create took %v with %d idle connections open", worst, idle)
	}
	if got := rcv.WaitKeys(coll, 50, 2*time.Second+waitSlack); got != 50 {
		t.Fatalf("%d of 50 delivered", got)
	}
	var late time.Duration
	for _, d := range rcv.All() {
		if d.Payload.Collection != coll {
			continue
		}
		if msg := checkOnTime(d, trig); msg != "" {
			t.Error(msg)
		}
		late = max(late, time.Duration(d.AtMs()-trig)*time.Millisecond)
	}
	t.Logf("with %d idle connections: worst create %v, latest fire %v after its time", idle, worst.Round(time.Millisecond), late)
}
