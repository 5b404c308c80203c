package e2e

// Secure mode: with TIMEMACHINE_E2E_SECURE=1 every server the harness
// starts runs with every security option on — HTTPS (--tls-cert), API
// tokens (--auth-file), mutual TLS on the internal port (--peer-tls-*),
// encrypted gossip (--gossip-key) and secrets sealed at rest
// (--secrets-key-file) — and every request the harness makes (and every
// CLI call) goes over HTTPS with an admin token. The whole suite then runs
// unchanged against secure clusters:
//
//	TIMEMACHINE_E2E_SECURE=1 go test ./e2e/...
//
// The security tests (security_test.go) start secure servers whatever the
// mode, with secureArgs.

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/timemachine-db/timemachine/auth"
	"github.com/timemachine-db/timemachine/internal/testcerts"
)

// secureMode is set by TIMEMACHINE_E2E_SECURE=1.
var secureMode = os.Getenv("TIMEMACHINE_E2E_SECURE") == "1"

// Tokens of the secure setup's auth file.
const (
	e2eAdminToken  = "tm_e2e_admin_0123456789abcdefghijklmnopqrstuvwxyz"
	e2eWriterToken = "tm_e2e_writer_0123456789abcdefghijklmnopqrstuvwxyz"
	e2eReaderToken = "tm_e2e_reader_0123456789abcdefghijklmnopqrstuvwxyz"
)

// secureSetup is the material of a secure cluster, made once per run.
type secureSetup struct {
	dir        string
	ca         *testcerts.CA
	node       testcerts.Pair // one certificate for every node (valid for loopback)
	authFile   string
	secretsKey string
	gossipKey  string
	clientTLS  *tls.Config
}

var secure *secureSetup

// mainTB lets testcerts report from TestMain.
type mainTB struct{}

func (mainTB) Helper()           {}
func (mainTB) Fatal(args ...any) { panic(fmt.Sprint(args...)) }

// setupSecure makes the CA, the node certificate, the auth file, the
// secrets key and the gossip key under a fresh directory.
func setupSecure() (*secureSetup, error) {
	dir, err := os.MkdirTemp("", "tm-e2e-secure-")
	if err != nil {
		return nil, err
	}
	ss := &secureSetup{dir: dir}
	ss.ca = testcerts.NewCA(mainTB{}, dir, "cluster")
	ss.node = ss.ca.Issue(mainTB{}, dir, "node")
	f := auth.File{Tokens: []auth.Entry{
		auth.NewEntry("e2e-admin", auth.RoleAdmin, nil, e2eAdminToken),
		auth.NewEntry("e2e-writer", auth.RoleWriter, nil, e2eWriterToken),
		auth.NewEntry("e2e-reader", auth.RoleReader, nil, e2eReaderToken),
	}}
	b, _ := json.Marshal(f)
	ss.authFile = filepath.Join(dir, "auth.json")
	if err := os.WriteFile(ss.authFile, b, 0o600); err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	ss.secretsKey = filepath.Join(dir, "secrets.key")
	if err := os.WriteFile(ss.secretsKey, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		return nil, err
	}
	g := make([]byte, 32)
	if _, err := rand.Read(g); err != nil {
		return nil, err
	}
	ss.gossipKey = base64.StdEncoding.EncodeToString(g)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ss.ca.CertPEM)
	ss.clientTLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return ss, nil
}

// secureArgs are the server flags of a secure node.
func (ss *secureSetup) args() []string {
	return []string{
		"--tls-cert", ss.node.CertFile, "--tls-key", ss.node.KeyFile,
		"--peer-tls-cert", ss.node.CertFile, "--peer-tls-key", ss.node.KeyFile, "--peer-tls-ca", ss.ca.CertFile,
		"--gossip-key", ss.gossipKey,
		"--auth-file", ss.authFile,
		"--secrets-key-file", ss.secretsKey,
	}
}

// secureMaterial returns the run's secure setup, making it on first use
// (the security tests need it in plain mode too).
func secureMaterial() (*secureSetup, error) {
	secureOnce.Do(func() {
		if secure == nil {
			secure, secureErr = setupSecure()
		}
	})
	return secure, secureErr
}

// harnessClient is the HTTP client of a server: plain, or in secure mode
// trusting the test CA.
func harnessClient(timeout time.Duration, secureServer bool) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
	if secureServer && secure != nil {
		tr.TLSClientConfig = secure.clientTLS.Clone()
	}
	return &http.Client{Timeout: timeout, Transport: tr}
}

// makeSecure turns a prepared server into a secure one: its flags, its
// client, its scheme and the admin token on every request.
func (s *Server) makeSecure() {
	s.Args = append(s.Args, secure.args()...)
	s.Secure = true
	s.Token = e2eAdminToken
	s.client = harnessClient(15*time.Second, true)
}

// url is the server's API address with path.
func (s *Server) url(path string) string {
	if s.Secure {
		return "https://" + s.HTTPAddr + path
	}
	return "http://" + s.HTTPAddr + path
}

// cliEnv is the environment of CLI calls in secure mode.
func cliEnv() []string {
	if !secureMode || secure == nil {
		return nil
	}
	return append(os.Environ(), "TIMEMACHINE_TOKEN="+e2eAdminToken, "TIMEMACHINE_CA_CERT="+secure.ca.CertFile)
}
