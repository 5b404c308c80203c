package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// Defaults of the options.
const (
	DefaultTimeout      = 10 * time.Second
	DefaultMaxConns     = 512
	DefaultMaxAttempts  = 5
	DefaultMaxRetryWait = 2 * time.Second
)

// firstBackoff is the wait before a retry that has no Retry-After and has
// already tried every address once; it doubles per further attempt up to
// the MaxRetryWait cap.
const firstBackoff = 25 * time.Millisecond

// Client talks to a timemachine cluster over HTTP. It is safe for
// concurrent use; create one per process and reuse it, because it pools
// keep-alive connections per address.
type Client struct {
	addrs []string
	hosts []*fasthttp.HostClient
	base  []string // "<scheme>://<addr>" per address
	next  atomic.Uint64

	timeout      time.Duration
	maxAttempts  int
	maxRetryWait time.Duration
	headers      [][2]string
}

type options struct {
	timeout      time.Duration
	maxConns     int
	scheme       string
	tlsConfig    *tls.Config
	maxAttempts  int
	maxRetryWait time.Duration
	headers      [][2]string
	userAgent    string
}

// Option configures New.
type Option func(*options)

// WithTimeout bounds each attempt of a request (connect, write, wait for the
// whole answer). A context deadline that is sooner wins. Default 10s.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithMaxConns caps the keep-alive connections per address. A request that
// finds them all busy waits for one (up to the timeout) instead of failing.
// Default 512.
func WithMaxConns(n int) Option { return func(o *options) { o.maxConns = n } }

// WithScheme selects "http" (default) or "https".
func WithScheme(s string) Option { return func(o *options) { o.scheme = s } }

// WithTLSConfig sets the TLS configuration used with the https scheme.
func WithTLSConfig(c *tls.Config) Option { return func(o *options) { o.tlsConfig = c } }

// WithMaxAttempts bounds how many times one call is sent, over all
// addresses, when nodes are unreachable or answer 503/429. Default 5.
func WithMaxAttempts(n int) Option { return func(o *options) { o.maxAttempts = n } }

// WithMaxRetryWait caps the wait between attempts, including a server's
// Retry-After, so a misconfigured server cannot park a caller for minutes.
// Default 2s.
func WithMaxRetryWait(d time.Duration) Option { return func(o *options) { o.maxRetryWait = d } }

// WithHeader adds a header to every request (e.g. an Authorization header
// in front of a gateway).
func WithHeader(key, value string) Option {
	return func(o *options) { o.headers = append(o.headers, [2]string{key, value}) }
}

// WithUserAgent sets the User-Agent header. Default "timemachine-go-client".
func WithUserAgent(ua string) Option { return func(o *options) { o.userAgent = ua } }

// New returns a client for the nodes at addrs ("host:port" HTTP addresses).
// Any node serves any request, so one address is enough; more give failover.
func New(addrs []string, opts ...Option) (*Client, error) {
	o := options{
		timeout:      DefaultTimeout,
		maxConns:     DefaultMaxConns,
		scheme:       "http",
		maxAttempts:  DefaultMaxAttempts,
		maxRetryWait: DefaultMaxRetryWait,
		userAgent:    "timemachine-go-client",
	}
	for _, opt := range opts {
		opt(&o)
	}
	if len(addrs) == 0 {
		return nil, errors.New("timemachine client: no addresses")
	}
	if o.scheme != "http" && o.scheme != "https" {
		return nil, fmt.Errorf("timemachine client: scheme %q: want http or https", o.scheme)
	}
	if o.timeout <= 0 || o.maxConns <= 0 || o.maxAttempts <= 0 || o.maxRetryWait < 0 {
		return nil, errors.New("timemachine client: timeout, max conns and max attempts must be positive")
	}
	c := &Client{
		timeout:      o.timeout,
		maxAttempts:  o.maxAttempts,
		maxRetryWait: o.maxRetryWait,
		headers:      o.headers,
	}
	for _, a := range addrs {
		a = strings.TrimSpace(a)
		if a == "" || strings.Contains(a, "/") {
			return nil, fmt.Errorf("timemachine client: address %q: want host:port", a)
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, fmt.Errorf("timemachine client: address %q: %w", a, err)
		}
		c.addrs = append(c.addrs, a)
		c.base = append(c.base, o.scheme+"://"+a)
		c.hosts = append(c.hosts, &fasthttp.HostClient{
			Addr:      a,
			Name:      o.userAgent,
			IsTLS:     o.scheme == "https",
			TLSConfig: o.tlsConfig,
			MaxConns:  o.maxConns,
			// Wait for a pooled connection rather than fail with
			// ErrNoFreeConns: callers that exceed MaxConns are throttled,
			// not errored.
			MaxConnWaitTimeout: o.timeout,
			// The retry loop below owns every retry, so that a retry goes
			// to the next address and attempts stay bounded and countable.
			MaxIdemponentCallAttempts: 1,
			// Paths are escaped by this package; send them as they are.
			DisablePathNormalizing: true,
			MaxIdleConnDuration:    10 * time.Second,
			ReadBufferSize:         8 << 10,
		})
	}
	return c, nil
}

// Addrs returns the addresses the client was created with.
func (c *Client) Addrs() []string { return append([]string(nil), c.addrs...) }

// Close releases idle connections. The client must not be used afterwards.
func (c *Client) Close() {
	for _, h := range c.hosts {
		h.CloseIdleConnections()
	}
}

// RawRequest is a request for Do: the escape hatch for endpoints this
// package does not wrap (e.g. /metrics) and for callers that build request
// bodies themselves (the load generator).
type RawRequest struct {
	Method string // GET, POST, PUT, DELETE
	// Path is the escaped path and query, e.g. "/v1/collections/c/jobs?limit=10".
	Path string
	Body []byte
	// Header holds extra request headers.
	Header map[string]string
	// Idempotent says the request may be resent after an ambiguous failure
	// (the connection broke after it was written). GET, PUT and DELETE are
	// always treated as idempotent.
	Idempotent bool
}

// Do sends a request with the client's failover and retry policy and returns
// the status and a copy of the body of a 2xx answer. A non-2xx answer is an
// *APIError.
func (c *Client) Do(ctx context.Context, r RawRequest) (status int, body []byte, err error) {
	if !strings.HasPrefix(r.Path, "/") {
		return 0, nil, fmt.Errorf("timemachine client: path %q must start with /", r.Path)
	}
	cl := call{method: r.Method, path: r.Path, body: r.Body, retrySafe: r.Idempotent}
	for k, v := range r.Header {
		cl.header = append(cl.header, [2]string{k, v})
	}
	return c.do(ctx, &cl)
}

// call is one logical request; it may be sent several times.
type call struct {
	method string
	path   string // escaped path and query
	body   []byte
	header [][2]string
	// retrySafe: resending after an ambiguous transport failure cannot do
	// harm twice. GET, PUT and DELETE are always retry-safe.
	retrySafe bool
	// single: send to this address index only, once (per-node checks).
	single bool
	addr   int
}

// result is the outcome of one attempt.
type result struct {
	status     int
	body       []byte
	retryAfter time.Duration
	err        error
}

// do runs the retry loop: round-robin start, next address on a connection
// failure or a 503/429, Retry-After honoured up to maxRetryWait, at most
// maxAttempts sends.
func (c *Client) do(ctx context.Context, cl *call) (int, []byte, error) {
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	safe := cl.retrySafe || cl.method == fasthttp.MethodGet || cl.method == fasthttp.MethodPut ||
		cl.method == fasthttp.MethodDelete || cl.method == fasthttp.MethodHead
	n := len(c.hosts)
	start := 0
	attempts := c.maxAttempts
	if cl.single {
		start, attempts = cl.addr, 1
	} else {
		start = int(c.next.Add(1)-1) % n
	}
	var last error
	for i := 0; i < attempts; i++ {
		idx := (start + i) % n
		r := c.attempt(ctx, idx, cl)
		var wait time.Duration
		switch {
		case r.err != nil:
			if ctxErr := ctx.Err(); ctxErr != nil {
				return 0, nil, fmt.Errorf("timemachine client: %s %s: %w", cl.method, cl.path, ctxErr)
			}
			last = fmt.Errorf("timemachine client: %s %s via %s: %w", cl.method, cl.path, c.addrs[idx], r.err)
			if !safe && !notSent(r.err) {
				return 0, nil, last
			}
			if i+1 >= n {
				wait = c.backoff(i + 1 - n)
			}
		case r.status >= 200 && r.status < 300:
			return r.status, r.body, nil
		case r.status == fasthttp.StatusServiceUnavailable || r.status == fasthttp.StatusTooManyRequests:
			// The contract: a request that gets an error changed nothing,
			// so these are always safe to resend.
			apiErr := decodeError(r.status, r.body, r.retryAfter)
			last = apiErr
			wait = r.retryAfter
			if wait == 0 && i+1 >= n {
				wait = c.backoff(i + 1 - n)
			}
		default:
			return r.status, nil, decodeError(r.status, r.body, r.retryAfter)
		}
		if i+1 >= attempts {
			break
		}
		if wait > c.maxRetryWait {
			wait = c.maxRetryWait
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return 0, nil, fmt.Errorf("timemachine client: %s %s: %w", cl.method, cl.path, ctx.Err())
			case <-t.C:
			}
		}
	}
	return 0, nil, last
}

func (c *Client) backoff(k int) time.Duration {
	if k > 16 {
		k = 16
	}
	d := firstBackoff << k
	if d > c.maxRetryWait {
		d = c.maxRetryWait
	}
	return d
}

// attempt sends cl once to address idx. The request is fully built (its
// body copied into fasthttp's buffer) before it is handed to another
// goroutine, so the caller may reuse cl.body as soon as do returns, even
// when it returns early because ctx was cancelled.
func (c *Client) attempt(ctx context.Context, idx int, cl *call) result {
	req := fasthttp.AcquireRequest()
	req.SetRequestURI(c.base[idx] + cl.path)
	req.Header.SetMethod(cl.method)
	for _, h := range c.headers {
		req.Header.Set(h[0], h[1])
	}
	for _, h := range cl.header {
		req.Header.Set(h[0], h[1])
	}
	if cl.body != nil {
		req.Header.SetContentType("application/json")
		req.SetBody(cl.body)
	}
	deadline := time.Now().Add(c.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	hc := c.hosts[idx]
	run := func() result {
		resp := fasthttp.AcquireResponse()
		defer fasthttp.ReleaseResponse(resp)
		defer fasthttp.ReleaseRequest(req)
		if err := hc.DoDeadline(req, resp, deadline); err != nil {
			return result{err: err}
		}
		r := result{status: resp.StatusCode()}
		// fasthttp reuses the response buffer after release: copy.
		r.body = append([]byte(nil), resp.Body()...)
		if r.status == fasthttp.StatusServiceUnavailable || r.status == fasthttp.StatusTooManyRequests {
			r.retryAfter = parseRetryAfter(resp.Header.Peek("Retry-After"), time.Now())
		}
		return r
	}
	if ctx.Done() == nil {
		return run()
	}
	// fasthttp has no context support: run the attempt aside so that a
	// cancelled ctx returns at once. The abandoned attempt still ends by its
	// deadline and releases its own request and response.
	ch := make(chan result, 1)
	go func() { ch <- run() }()
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		return result{err: ctx.Err()}
	}
}

// notSent reports whether err proves the request never reached a server
// (no connection could be made), so that resending cannot do harm twice.
func notSent(err error) bool {
	if errors.Is(err, fasthttp.ErrNoFreeConns) || errors.Is(err, fasthttp.ErrDialTimeout) ||
		errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
