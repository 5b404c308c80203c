package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Defaults of the options.
const (
	DefaultTimeout          = 10 * time.Second
	DefaultMaxConns         = 512
	DefaultMaxResponseBytes = 256 << 20
	DefaultUserAgent        = "timemachine-go-client"
)

// Environment variables read by WithEnv, the same the CLI reads.
const (
	EnvAddr   = "TIMEMACHINE_ADDR"    // comma-separated addresses, used when New gets none
	EnvToken  = "TIMEMACHINE_TOKEN"   // API token (Authorization: Bearer)
	EnvCACert = "TIMEMACHINE_CA_CERT" // PEM file of the CA that signed the server's certificate
)

// Client talks to a timemachine cluster over HTTP. It is safe for
// concurrent use; create one per process and reuse it, because it pools
// keep-alive connections per address.
type Client struct {
	bases   []string // "<scheme>://<host:port>[<path prefix>]" per address
	tr      transport
	next    atomic.Uint64
	timeout time.Duration
	retry   RetryConfig
	header  [][2]string // sent with every request
}

type options struct {
	timeout          time.Duration
	maxConns         int
	maxConnsSet      bool
	tlsConfig        *tls.Config
	caFile           string
	token            *string
	env              bool
	httpClient       *http.Client
	fast             bool
	retry            RetryConfig
	header           [][2]string
	userAgent        string
	maxResponseBytes int64
}

// Option configures New.
type Option func(*options)

// WithTimeout bounds each attempt of a request (connect, send, read the
// whole answer); a retried call may take several. A context deadline that
// is sooner wins. Default 10s.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithToken sends Authorization: Bearer <token> with every request (docs/api.md#security). Without it, and without WithEnv finding TIMEMACHINE_TOKEN, requests
// carry no token, which a server started with --auth-file refuses with
// unauthenticated.
func WithToken(token string) Option { return func(o *options) { o.token = &token } }

// WithEnv fills what the other options left unset from the environment, as
// the CLI does: the token from TIMEMACHINE_TOKEN, the CA file from
// TIMEMACHINE_CA_CERT, and the addresses from TIMEMACHINE_ADDR
// (comma-separated) when New is given none. Explicit options always win.
func WithEnv() Option { return func(o *options) { o.env = true } }

// WithCAFile trusts the CA certificate(s) in a PEM file, and only those,
// for HTTPS: the usual setup of a cluster with its own CA (--tls-cert).
// Addresses given as host:port then default to https.
func WithCAFile(path string) Option { return func(o *options) { o.caFile = path } }

// WithTLSConfig sets the TLS configuration for HTTPS (client certificates,
// a custom root pool, ...). It is cloned; WithCAFile, if also given, sets
// its RootCAs. Addresses given as host:port then default to https.
func WithTLSConfig(c *tls.Config) Option { return func(o *options) { o.tlsConfig = c } }

// WithHTTPClient sends every request through hc (a proxy, HTTP/2, tracing
// or a test transport). hc is used as it is: TLS and connection settings
// belong to it, so WithTLSConfig, WithCAFile, WithMaxConns and WithFastHTTP
// cannot be combined with it. Note that an http.Client follows redirects
// unless its CheckRedirect says otherwise; the default client of this
// package does not.
func WithHTTPClient(hc *http.Client) Option { return func(o *options) { o.httpClient = hc } }

// WithFastHTTP sends requests with valyala/fasthttp instead of net/http:
// 2–3× the request rate with a tenth of the allocations on loopback
// (BenchmarkDoLoopback), for load generators that share cores with the
// server they measure. It has no proxy or HTTP/2 support; prefer the
// default elsewhere.
func WithFastHTTP() Option { return func(o *options) { o.fast = true } }

// WithMaxConns caps the connections per address. A request that finds them
// all busy waits for one (up to the timeout) instead of failing. Default
// 512.
func WithMaxConns(n int) Option { return func(o *options) { o.maxConns, o.maxConnsSet = n, true } }

// WithRetry sets the retry policy; zero fields take their defaults. See
// RetryConfig and the package documentation for which calls are retried.
func WithRetry(r RetryConfig) Option { return func(o *options) { o.retry = r } }

// WithMaxAttempts bounds how many times one call is sent, over all
// addresses (1: never resend). Shorthand for the MaxAttempts of WithRetry.
func WithMaxAttempts(n int) Option { return func(o *options) { o.retry.MaxAttempts = n } }

// WithHeader adds a header to every request (e.g. for a gateway in front of
// the cluster). WithToken's Authorization wins over one set here.
func WithHeader(key, value string) Option {
	return func(o *options) { o.header = append(o.header, [2]string{key, value}) }
}

// WithUserAgent sets the User-Agent header. Default "timemachine-go-client".
func WithUserAgent(ua string) Option { return func(o *options) { o.userAgent = ua } }

// WithMaxResponseBytes bounds the size of an answer the client reads, so a
// wrong address cannot stream without end into memory. Default 256 MiB
// (a page of 1000 jobs with 64 KiB of meta each is 64 MiB).
func WithMaxResponseBytes(n int64) Option { return func(o *options) { o.maxResponseBytes = n } }

// New returns a client for the nodes at addrs. An address is "host:port"
// (http, or https when WithCAFile or WithTLSConfig is given) or a URL,
// "https://host:port", optionally with a path prefix for a gateway
// ("https://gw.example/timemachine"). Any node serves any request, so one
// address is enough; more give failover.
func New(addrs []string, opts ...Option) (*Client, error) {
	o := options{
		timeout:          DefaultTimeout,
		maxConns:         DefaultMaxConns,
		userAgent:        DefaultUserAgent,
		maxResponseBytes: DefaultMaxResponseBytes,
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.env {
		if len(addrs) == 0 {
			for a := range strings.SplitSeq(os.Getenv(EnvAddr), ",") {
				if a = strings.TrimSpace(a); a != "" {
					addrs = append(addrs, a)
				}
			}
		}
		if t, ok := os.LookupEnv(EnvToken); ok && o.token == nil {
			o.token = &t
		}
		if f := os.Getenv(EnvCACert); f != "" && o.caFile == "" && o.tlsConfig == nil && o.httpClient == nil {
			o.caFile = f
		}
	}
	if len(addrs) == 0 {
		return nil, argErrorf("timemachine client: no addresses")
	}
	if o.timeout <= 0 || o.maxConns <= 0 || o.maxResponseBytes <= 0 {
		return nil, argErrorf("timemachine client: timeout, max conns and max response bytes must be positive")
	}
	retry, err := o.retry.withDefaults()
	if err != nil {
		return nil, err
	}
	if o.httpClient != nil && (o.tlsConfig != nil || o.caFile != "" || o.fast || o.maxConnsSet) {
		return nil, argErrorf("timemachine client: WithHTTPClient cannot be combined with WithTLSConfig, WithCAFile, WithFastHTTP or WithMaxConns; configure the http.Client instead")
	}
	tlsCfg, err := o.tls()
	if err != nil {
		return nil, err
	}
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
	}
	c := &Client{timeout: o.timeout, retry: retry}
	var hostports []string
	var isTLS []bool
	for _, a := range addrs {
		base, hp, err := parseAddr(a, scheme)
		if err != nil {
			return nil, err
		}
		c.bases = append(c.bases, base)
		hostports = append(hostports, hp)
		isTLS = append(isTLS, strings.HasPrefix(base, "https:"))
	}
	c.header = append(c.header, [2]string{"User-Agent", o.userAgent}, [2]string{"Accept", "application/json"})
	c.header = append(c.header, o.header...)
	if o.token != nil {
		if strings.ContainsAny(*o.token, "\r\n") {
			return nil, argErrorf("timemachine client: the token contains a line break")
		}
		if t := strings.TrimSpace(*o.token); t != "" {
			c.header = append(c.header, [2]string{"Authorization", "Bearer " + t})
		}
	}
	switch {
	case o.fast:
		ft := &fastTransport{bases: c.bases, maxBody: o.maxResponseBytes}
		for i, hp := range hostports {
			ft.hosts = append(ft.hosts, &fasthttp.HostClient{
				Addr:      hp,
				Name:      o.userAgent,
				IsTLS:     isTLS[i],
				TLSConfig: tlsCfg,
				MaxConns:  o.maxConns,
				// Wait for a pooled connection rather than fail with
				// ErrNoFreeConns: callers over MaxConns are throttled.
				MaxConnWaitTimeout: o.timeout,
				// The retry loop owns every retry, so that a retry goes to
				// the next address and attempts stay bounded and counted.
				MaxIdemponentCallAttempts: 1,
				// Paths are escaped by this package; send them as they are.
				DisablePathNormalizing: true,
				MaxIdleConnDuration:    10 * time.Second,
				ReadBufferSize:         8 << 10,
				MaxResponseBodySize:    int(min(o.maxResponseBytes, int64(^uint(0)>>1))),
			})
		}
		c.tr = ft
	case o.httpClient != nil:
		c.tr = &stdTransport{bases: c.bases, hc: o.httpClient, maxBody: o.maxResponseBytes}
	default:
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = tlsCfg
		tr.MaxConnsPerHost = o.maxConns
		tr.MaxIdleConnsPerHost = o.maxConns
		tr.MaxIdleConns = o.maxConns * len(c.bases)
		tr.IdleConnTimeout = 30 * time.Second
		hc := &http.Client{
			Transport: tr,
			// A redirected POST turns into a GET; an API that redirects is
			// behind something else. The answer is reported instead.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
		c.tr = &stdTransport{bases: c.bases, hc: hc, maxBody: o.maxResponseBytes}
	}
	return c, nil
}

// tls builds the TLS configuration from WithTLSConfig and WithCAFile, or
// returns nil when neither was given.
func (o *options) tls() (*tls.Config, error) {
	if o.tlsConfig == nil && o.caFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.tlsConfig != nil {
		cfg = o.tlsConfig.Clone()
	}
	if o.caFile != "" {
		pem, err := os.ReadFile(o.caFile)
		if err != nil {
			return nil, argErrorf("timemachine client: CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, argErrorf("timemachine client: CA file %s holds no PEM certificate", o.caFile)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// parseAddr turns "host:port" or a URL into a base URL (no trailing slash)
// and the host:port to dial.
func parseAddr(a, scheme string) (base, hostport string, err error) {
	a = strings.TrimSpace(a)
	if !strings.Contains(a, "://") {
		if a == "" || strings.ContainsAny(a, "/?#@") {
			return "", "", argErrorf("timemachine client: address %q: want host:port or a URL such as https://host:port", a)
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return "", "", argErrorf("timemachine client: address %q: want host:port or a URL such as https://host:port: %w", a, err)
		}
		return scheme + "://" + a, a, nil
	}
	u, err := url.Parse(a)
	if err != nil {
		return "", "", argErrorf("timemachine client: address %q: %w", a, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", "", argErrorf("timemachine client: address %q: scheme %q, want http or https", a, u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return "", "", argErrorf("timemachine client: address %q has no host", a)
	case u.User != nil:
		return "", "", argErrorf("timemachine client: address %q: credentials in the URL are not sent; use WithToken", u.Redacted())
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return "", "", argErrorf("timemachine client: address %q: a base address has no query or fragment", a)
	case path.Base(strings.TrimRight(u.Path, "/")) == "v1":
		// A path is kept as a prefix (a proxy serving the API under
		// /timemachine, say); one ending in /v1 would ask for /v1/v1/….
		return "", "", argErrorf("timemachine client: address %q: give the server's root, without /v1 (the client adds it), such as %s://%s", a, u.Scheme, u.Host)
	}
	hostport = u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		hostport = net.JoinHostPort(u.Hostname(), port)
	}
	return u.Scheme + "://" + u.Host + strings.TrimRight(u.EscapedPath(), "/"), hostport, nil
}

// Addrs returns the base URLs of the addresses, e.g. "http://127.0.0.1:8080".
func (c *Client) Addrs() []string { return append([]string(nil), c.bases...) }

// Close releases idle connections. Calls in flight finish; the client must
// not be used for new calls afterwards.
func (c *Client) Close() { c.tr.closeIdle() }

// RawRequest is a request for Do: the escape hatch for endpoints this
// package does not wrap and for callers that build request bodies
// themselves (the load generator).
type RawRequest struct {
	Method string // GET, POST, PUT, DELETE
	// Path is the escaped path and query, e.g. "/v1/collections/c/jobs?limit=10".
	Path string
	Body []byte
	// Header holds extra request headers.
	Header map[string]string
	// Idempotent says the request may be resent after a 503/429 or a broken
	// connection: set it only for a POST that cannot do harm twice (a create
	// whose every job has an id). GET, PUT and DELETE always may.
	Idempotent bool
}

// Do sends a request with the client's failover and retry policy and
// returns the status and body of a 2xx answer. A non-2xx answer is an
// *Error (or a *ProtocolError when it is not the contract's error body).
// The body of a 2xx answer is returned as it is, whatever its type.
func (c *Client) Do(ctx context.Context, r RawRequest) (status int, body []byte, err error) {
	if !strings.HasPrefix(r.Path, "/") {
		return 0, nil, fmt.Errorf("timemachine client: path %q must start with /", r.Path)
	}
	cl := call{method: r.Method, path: r.Path, body: r.Body, retrySafe: r.Idempotent || idempotentMethod(r.Method), anyBody: true}
	for k, v := range r.Header {
		cl.header = append(cl.header, [2]string{k, v})
	}
	res, err := c.do(ctx, &cl)
	if err != nil {
		return 0, nil, err
	}
	return res.status, res.body, nil
}

func idempotentMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodPut || m == http.MethodDelete || m == http.MethodOptions
}
