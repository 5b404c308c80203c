package node

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/auth"
	"github.com/timemachine-db/timemachine/internal/testcerts"
	"github.com/timemachine-db/timemachine/internal/testutil"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/rpc/webhook"
)

const (
	testSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	testBearer    = "Bearer sekrit-route-token-4711"
	adminToken    = "tm_admin_token_for_tests"
	writerToken   = "tm_writer_token_for_tests"
	readerToken   = "tm_reader_token_for_tests"
	testGossipKey = "kX1HUu6ZwqlNVC9mB7eQzw==" // 16 bytes
)

func writeAuthFile(t *testing.T, dir string) string {
	t.Helper()
	f := auth.File{Tokens: []auth.Entry{
		auth.NewEntry("admin", auth.RoleAdmin, nil, adminToken),
		auth.NewEntry("writer", auth.RoleWriter, []string{"billing"}, writerToken),
		auth.NewEntry("reader", auth.RoleReader, nil, readerToken),
	}}
	b, _ := json.Marshal(f)
	p := filepath.Join(dir, "auth.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeSecretsKey(t *testing.T, dir string) string {
	t.Helper()
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	p := filepath.Join(dir, "secrets.key")
	if err := os.WriteFile(p, []byte(base64.StdEncoding.EncodeToString(k)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// apiClient talks HTTPS to the nodes, trusting the test CA.
type apiClient struct {
	t  *testing.T
	hc *http.Client
}

func newAPIClient(t *testing.T, ca *testcerts.CA) *apiClient {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	t.Cleanup(hc.CloseIdleConnections)
	return &apiClient{t: t, hc: hc}
}

func (c *apiClient) do(method, url, token, body string) (int, string) {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A 3-node cluster with every security option on: HTTPS, tokens, mutual
// TLS between nodes, encrypted gossip and secrets sealed at rest. It forms,
// forwards writes (a create through a node that leads no slot of the job
// reaches the leader over mTLS), fires a signed callback with the route's
// sealed Authorization header opened, refuses what the tokens do not
// allow, and refuses a plain-TCP peer on the internal port.
func TestSecureClusterInProcess(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, dir, "cluster")
	authFile := writeAuthFile(t, dir)
	keyFile := writeSecretsKey(t, dir)
	tc := startCluster(t, 3, func(i int, c *Config) {
		p := ca.Issue(t, dir, c.NodeID)
		c.MuxDialer, c.PeerDialer = nil, nil // the TLS dialers
		c.TLSCert, c.TLSKey = p.CertFile, p.KeyFile
		c.PeerTLSCert, c.PeerTLSKey, c.PeerTLSCA = p.CertFile, p.KeyFile, ca.CertFile
		c.GossipKey = testGossipKey
		c.AuthFile = authFile
		c.SecretsKeyFile = keyFile
	})
	api := newAPIClient(t, ca)
	base := func(i int) string { return "https://" + tc.nodes[i].HTTPAddr() }

	var mu sync.Mutex
	var got []*http.Request
	var bodies [][]byte
	rl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got, bodies = append(got, r), append(bodies, b)
		mu.Unlock()
	})}
	go func() { _ = rs.Serve(rl) }()
	defer rs.Close()

	if s, b := api.do("GET", base(0)+"/v1/cluster", "", ""); s != 401 || !strings.Contains(b, "unauthenticated") {
		t.Fatalf("no token: %d %s", s, b)
	}
	if s, b := api.do("GET", base(0)+"/readyz", "", ""); s != 200 {
		t.Fatalf("readyz is open: %d %s", s, b)
	}
	if s, b := api.do("PUT", base(1)+"/v1/collections/billing", adminToken, `{"signing_secret":"`+testSecret+`"}`); s != 201 {
		t.Fatalf("put collection: %d %s", s, b)
	}
	if s, b := api.do("PUT", base(2)+"/v1/routes/pay", adminToken, `{"webhook_url":"http://`+rl.Addr().String()+`/hook","headers":{"Authorization":"`+testBearer+`"}}`); s != 201 || strings.Contains(b, "sekrit") {
		t.Fatalf("put route: %d %s", s, b)
	}
	if s, b := api.do("PUT", base(2)+"/v1/routes/x", writerToken, `{"webhook_url":"http://127.0.0.1:9/"}`); s != 403 {
		t.Fatalf("writer puts a route: %d %s", s, b)
	}
	if s, b := api.do("POST", base(0)+"/v1/collections/billing/jobs", readerToken, `{"delay":"1s","route":"pay"}`); s != 403 {
		t.Fatalf("reader creates a job: %d %s", s, b)
	}
	if s, b := api.do("POST", base(0)+"/v1/collections/default/jobs", writerToken, `{"delay":"1s","route":"pay"}`); s != 403 {
		t.Fatalf("writer out of scope: %d %s", s, b)
	}
	// The node's own admin API is no callback target.
	self := "http://" + tc.nodes[0].HTTPAddr() + "/v1/admin/rebalance"
	if s, b := api.do("POST", base(0)+"/v1/collections/billing/jobs", writerToken, `{"delay":"1s","callback_url":"`+self+`"}`); s != 400 || !strings.Contains(b, "own listeners") {
		t.Fatalf("callback to the node itself: %d %s", s, b)
	}
	// Creates through every node: most jobs are forwarded over mTLS.
	var ids []string
	for i := 0; i < 12; i++ {
		id := "sec-" + strconv.Itoa(i)
		ids = append(ids, id)
		if s, b := api.do("POST", base(i%3)+"/v1/collections/billing/jobs", writerToken, `{"id":"`+id+`","delay":"500ms","route":"pay"}`); s != 201 {
			t.Fatalf("create %s: %d %s", id, s, b)
		}
	}
	testutil.Eventually(t, 20*time.Second, "12 callbacks", func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(got) < 12 {
			return fmt.Errorf("%d callbacks", len(got))
		}
		return nil
	})
	key, _ := webhook.ParseSecret(testSecret)
	mu.Lock()
	for i, r := range got {
		if a := r.Header.Get("Authorization"); a != testBearer {
			t.Errorf("callback %d: Authorization %q", i, a)
		}
		ts, _ := strconv.ParseInt(r.Header.Get("webhook-timestamp"), 10, 64)
		if !webhook.Verify(key, r.Header.Get("webhook-id"), ts, bodies[i], r.Header.Get("webhook-signature")) {
			t.Errorf("callback %d: signature does not verify", i)
		}
	}
	mu.Unlock()
	// A job's read shows no secret either.
	if s, b := api.do("GET", base(1)+"/v1/routes/pay", readerToken, ""); s != 200 || strings.Contains(b, "sekrit") || strings.Contains(b, "tmsec") {
		t.Fatalf("route read: %d %s", s, b)
	}

	// A plain-TCP stranger on the internal port is refused and counted.
	c, err := net.Dial("tcp", tc.nodes[0].BindAddr())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.Write([]byte{2, 1, 0, 0, 'h', 'i'})
	_, _ = io.ReadAll(c)
	c.Close()
	testutil.Eventually(t, 5*time.Second, "plain peer refused", func() error {
		if tc.nodes[0].mux.Refused()["tls"] == 0 {
			return fmt.Errorf("%v", tc.nodes[0].mux.Refused())
		}
		return nil
	})
	if s, b := api.do("GET", base(0)+"/metrics", readerToken, ""); s != 200 || !strings.Contains(b, `timemachine_internal_connections_refused_total{reason="tls"}`) {
		t.Fatalf("metrics: %d", s)
	}
	tc.waitReady(10 * time.Second)
}

// Secrets at rest: with --secrets-key-file no file under the data
// directory holds a collection's signing secret or a route's bearer
// header in clear; without it, the raft log does (which is what the
// threat model says, and what makes this check able to fail).
func TestSecretsSealedAtRest(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two nodes")
	}
	for _, sealed := range []bool{true, false} {
		t.Run(fmt.Sprintf("sealed=%v", sealed), func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig(filepath.Join(dir, "data"))
			if sealed {
				cfg.SecretsKeyFile = writeSecretsKey(t, dir)
			}
			n := startReady(t, cfg)
			ctx := context.Background()
			if _, err := n.svc.PutCollection(ctx, collectionWithSecret("billing", testSecret)); err != nil {
				t.Fatal(err)
			}
			if _, err := n.svc.PutRoute(ctx, routeWithHeader("pay", testBearer)); err != nil {
				t.Fatal(err)
			}
			// Snapshots too: compact writes them.
			if _, err := n.svc.Compact(ctx); err != nil {
				t.Fatal(err)
			}
			if err := n.Close(); err != nil {
				t.Fatal(err)
			}
			var found []string
			needles := [][]byte{[]byte(testSecret[6:]), []byte("sekrit-route-token")}
			_ = filepath.WalkDir(cfg.DataDir, func(path string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return nil
				}
				b, err := os.ReadFile(path)
				if err != nil {
					return nil
				}
				for _, nd := range needles {
					if bytes.Contains(b, nd) {
						found = append(found, filepath.Base(path))
					}
				}
				return nil
			})
			if sealed && len(found) > 0 {
				t.Fatalf("secrets in clear in %v", found)
			}
			if !sealed && len(found) == 0 {
				t.Fatal("without a key the secrets should be found in clear (is the check blind?)")
			}
		})
	}
}

func collectionWithSecret(name, secret string) model.Collection {
	return model.Collection{Name: name, SigningSecret: secret}
}

func routeWithHeader(name, bearer string) model.Route {
	return model.Route{Name: name, WebhookURL: "http://127.0.0.1:9/hook", Headers: map[string]string{"Authorization": bearer, "X-Plain": "visible"}}
}

// --max-collections and --max-routes: a new one past the limit is a 409
// conflict that says so; replacing an existing one is always allowed.
func TestMetaLimits(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.MaxCollections, cfg.MaxRoutes = 3, 1
	cfg.SecretsKeyFile = writeSecretsKey(t, t.TempDir())
	n := startReady(t, cfg)
	defer n.Close()
	ctx := context.Background()
	for i := 1; i <= 3; i++ {
		if _, err := n.svc.PutCollection(ctx, model.Collection{Name: fmt.Sprintf("c%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := n.svc.PutCollection(ctx, model.Collection{Name: "c4"})
	if e, ok := model.AsError(err); !ok || e.Kind != model.KindConflict || !strings.Contains(e.Message, "--max-collections") {
		t.Fatalf("fourth collection: %v", err)
	}
	if _, err := n.svc.PutCollection(ctx, model.Collection{Name: "c1", RetentionMs: 60_000}); err != nil {
		t.Fatalf("replacing an existing collection: %v", err)
	}
	if _, err := n.svc.PutRoute(ctx, routeWithHeader("r1", testBearer)); err != nil {
		t.Fatal(err)
	}
	if _, err := n.svc.PutRoute(ctx, routeWithHeader("r2", testBearer)); !model.IsKind(err, model.KindConflict) {
		t.Fatalf("second route: %v", err)
	}
	// A sensitive header too long to be stored sealed is a 400, not a
	// raft entry replicas could not decode.
	_, err = n.svc.PutRoute(ctx, routeWithHeader("r1", "Bearer "+strings.Repeat("x", model.MaxHeaderValueLen-10)))
	if e, ok := model.AsError(err); !ok || e.Kind != model.KindInvalidArgument || !strings.Contains(e.Message, "encrypted") {
		t.Fatalf("oversized sealed header: %v", err)
	}
}
