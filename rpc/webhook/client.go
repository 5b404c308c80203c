package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Defaults for Options and Request fields left zero.
const (
	DefaultMaxConnsPerHost     = 1024
	DefaultMaxResponseBodySize = 64 << 10
	DefaultUserAgent           = "timemachine-webhook/1"
	DefaultDialTimeout         = 5 * time.Second
	DefaultMaxIdleConnDuration = 10 * time.Second
	// DefaultStaleCheckAfter is far below any receiver's idle timeout and
	// far above the reuse interval of a connection under load.
	DefaultStaleCheckAfter = 100 * time.Millisecond
	// DefaultTimeout applies when Request.Timeout is zero. It matches the
	// contract's default callback_timeout; a request without any deadline
	// could hold a connection and a goroutine forever on a silent receiver.
	DefaultTimeout = 10 * time.Second
)

const (
	// backstopTimeout bounds fasthttp's client-wide read/write/conn-wait
	// timeouts. Every request carries its own deadline (DoDeadline), which is
	// the real limit; the client-wide values exist only to cap a code path
	// that somehow lacks one. They are set far above any sane callback
	// timeout so they can never silently cut a long callback_timeout short
	// and report the receiver as slow when it was not.
	backstopTimeout = time.Hour

	// readBufferSize also caps the response header size. fasthttp's 4 KiB
	// default is small enough that a receiver behind a CDN or proxy (large
	// Set-Cookie, tracing headers) would turn a successful 200 into a
	// transport error and a needless retry. Buffers are pooled per request,
	// not per connection, so this costs little.
	readBufferSize = 16 << 10
)

var (
	// ErrInvalidRequest wraps every error about the Request itself (bad URL,
	// malformed route header). Retrying such a delivery cannot succeed, so
	// callers may want to fail the job at once; that choice is theirs.
	ErrInvalidRequest = errors.New("webhook: invalid request")
	// ErrClosed is returned for deliveries attempted after Close.
	ErrClosed = errors.New("webhook: client closed")
)

// Request is one callback to send.
type Request struct {
	URL string // absolute http(s) URL
	// Headers are extra headers from a route. They are set before the
	// protocol headers, which win: see CheckRouteHeader.
	Headers map[string]string
	Payload Payload
	// IdempotencyKey is "{collection}:{id}:{trigger_time}", sent as
	// Idempotency-Key and, when signing, as webhook-id. When empty it is
	// derived from Payload with IdempotencyKey, since the format is part of
	// the wire contract.
	IdempotencyKey string
	SigningKey     []byte        // decoded HMAC key; nil or empty means do not sign
	Timeout        time.Duration // whole-request timeout; DefaultTimeout when zero
	// Now stamps webhook-timestamp and anchors an HTTP-date Retry-After.
	// It is an input rather than time.Now() so a caller can sign with the
	// clock it used to decide to fire, and so tests are deterministic.
	// Zero means the time Deliver is called.
	Now time.Time
	// Pipeline sends the request HTTP/1.1-pipelined (pipeline.go): on a
	// connection that may already carry requests waiting for answers.
	Pipeline bool
}

// Result is what happened to one delivery. It reports; it does not judge.
type Result struct {
	StatusCode    int           // 0 when no HTTP response was received
	Err           error         // transport error, timeout, or bad request; nil when a response arrived
	TimedOut      bool          // Err is a timeout (connect, TLS handshake, or waiting for the answer)
	RetryAfter    time.Duration // from Retry-After (delta-seconds, or HTTP-date relative to Request.Now); valid when HasRetryAfter
	HasRetryAfter bool
	// From a 2xx answer whose body is a JSON object with "reschedule_at"
	// (integer unix ms, or RFC 3339 string) or "reschedule_in" (Go duration).
	RescheduleAt  int64         // unix ms; 0 when absent
	RescheduleIn  time.Duration // 0 when absent
	RescheduleErr error         // a 2xx body asked to reschedule but the value is unusable (unparseable, not positive, both fields, or the body was cut short)
	BodySnippet   string        // first <= SnippetMax bytes of the body, valid UTF-8
	Latency       time.Duration // from Deliver being called to the end of the answer (or the error)
}

// IdempotencyKey returns the contract's "{collection}:{id}:{trigger_time}".
func IdempotencyKey(collection, id string, triggerTime int64) string {
	b := make([]byte, 0, len(collection)+len(id)+22)
	b = append(b, collection...)
	b = append(b, ':')
	b = append(b, id...)
	b = append(b, ':')
	b = strconv.AppendInt(b, triggerTime, 10)
	return string(b)
}

// Options configures a Client. Zero fields take the Default* values.
type Options struct {
	// MaxConnsPerHost bounds connections to one receiver host. Requests
	// beyond it wait for a free connection within their own deadline rather
	// than failing at once, so a burst of timers for one host is smoothed
	// instead of being turned into a burst of spurious failures.
	MaxConnsPerHost int
	// MaxResponseBodySize is how much of a response body is read. A larger
	// body is truncated: its status still counts, its reschedule fields are
	// not read, and its connection is closed instead of drained.
	MaxResponseBodySize int
	UserAgent           string
	// DialTimeout bounds TCP connect plus TLS handshake, and is further
	// capped by the request's own deadline.
	DialTimeout time.Duration
	// MaxIdleConnDuration is how long an unused keep-alive connection is
	// kept. Long enough that a busy receiver stays on warm connections (a TLS
	// handshake costs far more than a callback), short enough to stay under
	// the idle limits of NATs and load balancers, which drop connections
	// silently and would turn the next callback into a timeout.
	MaxIdleConnDuration time.Duration
	// TLSConfig is cloned for https receivers; nil means system roots and
	// TLS 1.2 or newer. Mainly for tests and private CAs.
	TLSConfig *tls.Config
	// Egress, when set, decides which addresses callbacks may reach
	// (egress.go); every connection is made through it.
	Egress *Policy
	// StaleCheckAfter: a pooled connection that carried an answer less
	// than this long ago is reused without first peeking at its socket
	// for a close by the receiver (staleCheckConn). Zero means
	// DefaultStaleCheckAfter; negative means peek before every request.
	StaleCheckAfter time.Duration
}

func (o Options) withDefaults() Options {
	if o.MaxConnsPerHost <= 0 {
		o.MaxConnsPerHost = DefaultMaxConnsPerHost
	}
	if o.MaxResponseBodySize <= 0 {
		o.MaxResponseBodySize = DefaultMaxResponseBodySize
	}
	if o.UserAgent == "" {
		o.UserAgent = DefaultUserAgent
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.MaxIdleConnDuration <= 0 {
		o.MaxIdleConnDuration = DefaultMaxIdleConnDuration
	}
	switch {
	case o.StaleCheckAfter == 0:
		o.StaleCheckAfter = DefaultStaleCheckAfter
	case o.StaleCheckAfter < 0:
		o.StaleCheckAfter = 0
	}
	return o
}

// Client sends callbacks. It is safe for concurrent use; create one per
// process and share it, since the connection pools live in it.
type Client struct {
	hc          *fasthttp.Client
	dialer      *fasthttp.TCPDialer
	egress      *Policy
	tlsConfig   *tls.Config
	dialTimeout time.Duration
	maxBody     int
	userAgent   string
	staleAfter  time.Duration // Options.StaleCheckAfter (0: peek always)
	closed      atomic.Bool
	bodyBufs    sync.Pool // *[]byte, scratch for response bodies
	// goodURLs remembers URLs that passed checkURL: a deployment fires at
	// a handful of receivers, and parsing the same URL 20,000 times a
	// second was 5% of the fire path's CPU.
	goodURLs  sync.Map // string → struct{}
	goodCount atomic.Int32

	// pipes holds the pipelined connections per receiver (pipeline.go):
	// "scheme://host:port" → *pipeHost.
	pipes    sync.Map
	maxConns int           // Options.MaxConnsPerHost
	idleConn time.Duration // Options.MaxIdleConnDuration
	// pipeStall is pipeStall, a field so that tests can make it long.
	pipeStall time.Duration
	// popped, when set (tests only), runs in a pipelined connection's
	// reader right after a failed read took its request off the
	// connection and before the connection is shut.
	popped    func()
	pipeStats pipeCounters
}

// maxGoodURLs bounds the validated-URL cache; past it the cache starts over.
const maxGoodURLs = 4096

func (c *Client) validURL(u string) error {
	if _, ok := c.goodURLs.Load(u); ok {
		return nil
	}
	if err := checkURL(u); err != nil {
		return err
	}
	if c.goodCount.Add(1) > maxGoodURLs {
		c.goodURLs.Clear()
		c.goodCount.Store(1)
	}
	c.goodURLs.Store(u, struct{}{})
	return nil
}

// New returns a Client.
func New(o Options) *Client {
	o = o.withDefaults()
	var tlsConfig *tls.Config
	if o.TLSConfig != nil {
		tlsConfig = o.TLSConfig.Clone()
	} else {
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if tlsConfig.ClientSessionCache == nil {
		// Resumed sessions make reconnecting to a receiver after an idle
		// close nearly as cheap as reusing the connection.
		tlsConfig.ClientSessionCache = tls.NewLRUClientSessionCache(0)
	}
	c := &Client{
		// Dual-stack and no concurrency cap: receivers may be IPv6-only, and
		// the number of dials is already bounded by MaxConnsPerHost.
		dialer:      &fasthttp.TCPDialer{},
		egress:      o.Egress,
		tlsConfig:   tlsConfig,
		dialTimeout: o.DialTimeout,
		maxBody:     o.MaxResponseBodySize,
		userAgent:   o.UserAgent,
		staleAfter:  o.StaleCheckAfter,
		maxConns:    o.MaxConnsPerHost,
		idleConn:    o.MaxIdleConnDuration,
		pipeStall:   pipeStall,
	}
	c.hc = &fasthttp.Client{
		NoDefaultUserAgentHeader: true,
		MaxConnsPerHost:          o.MaxConnsPerHost,
		MaxConnWaitTimeout:       backstopTimeout,
		MaxIdleConnDuration:      o.MaxIdleConnDuration,
		ReadTimeout:              backstopTimeout,
		WriteTimeout:             backstopTimeout,
		ReadBufferSize:           readBufferSize,
		MaxResponseBodySize:      o.MaxResponseBodySize,
		// Streaming lets us keep the status and the first bytes of an
		// oversized body; in buffered mode fasthttp fails the whole exchange
		// with ErrBodyTooLarge, which would turn a receiver's 200 into a
		// retry.
		StreamResponseBody: true,
		// Callback URLs are sent exactly as configured. Path normalization
		// would rewrite percent-encoding and break pre-signed URLs.
		DisablePathNormalizing: true,
		// LIFO hands out the most recently used connection, the one least
		// likely to have been closed by the receiver meanwhile, and lets the
		// surplus after a burst go idle and be reaped.
		ConnPoolStrategy: fasthttp.LIFO,
		// fasthttp never replays a POST on its own; see replayOnStaleConn.
		// Every connection the pool can hold may be stale at once (a burst,
		// then the receiver's idle timeout on all of them): each is refused
		// before the request is written, so the request may try them all
		// and then a fresh one.
		MaxIdemponentCallAttempts: o.MaxConnsPerHost + 1,
		RetryIfErr:                replayOnStaleConn,
		DialTimeout:               c.dialPlain,
		ConfigureClient:           c.configureHost,
		// Only a fallback: configureHost replaces the TLS dial for every
		// https host, but fasthttp should never see a different config.
		TLSConfig: tlsConfig,
	}
	return c
}

// Close releases idle connections. Deliveries in flight finish normally;
// later ones fail with ErrClosed.
func (c *Client) Close() {
	c.closed.Store(true)
	c.hc.CloseIdleConnections()
	c.closeIdlePipes()
}

// replayOnStaleConn lets fasthttp send a request again when it was refused
// before any byte left this process: the pooled keep-alive connection it
// was about to use had been closed by the receiver while it idled (Node and
// uvicorn close idle connections after 5s, gunicorn after 2s) — as often as
// that happens, since each refusal takes one stale connection out of the
// pool (a single replay let a second stale one fail the attempt: a job in
// the nemesis failed its 4 attempts without the receiver seeing one). staleCheckConn detects that with a peek at the socket right before
// the request is written. Any other failure — EOF, a reset or a timeout
// after the request was (possibly) written — is never replayed: the
// receiver may have seen the request, and an attempt must count as one
// attempt, not reach the receiver twice with the same attempt number.
func replayOnStaleConn(_ *fasthttp.Request, _ int, err error) (resetTimeout, retry bool) {
	return false, errors.Is(err, errStaleConn)
}

// clampDial returns the time allowed for connect plus handshake: the
// configured DialTimeout, but never past the request's remaining time
// (fasthttp passes 0 when it dials on behalf of a queued request).
func (c *Client) clampDial(remaining time.Duration) time.Duration {
	if remaining <= 0 || remaining > c.dialTimeout {
		return c.dialTimeout
	}
	return remaining
}

func (c *Client) dialPlain(addr string, timeout time.Duration) (net.Conn, error) {
	return c.dialTCP(addr, c.clampDial(timeout))
}

// dialTCP connects through the egress policy when there is one. The
// connection is wrapped so that a pooled connection the receiver closed is
// noticed before a request is written to it (staleCheckConn).
func (c *Client) dialTCP(addr string, timeout time.Duration) (net.Conn, error) {
	var conn net.Conn
	var err error
	if c.egress != nil {
		conn, err = c.egress.Dial(addr, timeout)
	} else {
		conn, err = c.dialer.DialDualStackTimeout(addr, timeout)
	}
	if err != nil {
		return nil, err
	}
	return &staleCheckConn{Conn: conn, fresh: c.staleAfter}, nil
}

// configureHost gives each https host a dialer that does the TLS handshake
// itself. fasthttp's own handshake is bounded only by the client-wide
// WriteTimeout, not by the request's deadline, so a receiver that accepts TCP
// and then stalls the handshake would hold a callback far past its Timeout.
func (c *Client) configureHost(hc *fasthttp.HostClient) error {
	if !hc.IsTLS {
		return nil
	}
	cfg := c.tlsConfigFor(hc.Addr)
	hc.DialTimeout = func(addr string, timeout time.Duration) (net.Conn, error) {
		return c.dialTLS(addr, cfg, c.clampDial(timeout))
	}
	return nil
}

// tlsConfigFor is the client's TLS config for one receiver host.
func (c *Client) tlsConfigFor(addr string) *tls.Config {
	cfg := c.tlsConfig.Clone()
	if cfg.ServerName == "" {
		host := addr
		if h, _, err := net.SplitHostPort(addr); err == nil {
			host = h
		}
		cfg.ServerName = host
	}
	return cfg
}

// dialTLS connects and completes the TLS handshake within d.
func (c *Client) dialTLS(addr string, cfg *tls.Config, d time.Duration) (net.Conn, error) {
	deadline := time.Now().Add(d)
	conn, err := c.dialTCP(addr, d)
	if err != nil {
		return nil, err
	}
	// conn is a staleCheckConn (dialTCP): the check sits under TLS
	// and peeks at the raw socket.
	tc := tls.Client(conn, cfg)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	err = tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		conn.Close()
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("%w: %w", fasthttp.ErrTLSHandshakeTimeout, err)
		}
		return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
	}
	return tc, nil
}

// Deliver sends one callback and reports what happened.
//
// It never follows redirects: a 3xx is reported as such, because following
// one would re-send the (possibly signed) body to a URL nobody configured.
//
// fasthttp has no context support, so when ctx can be cancelled the exchange
// runs in its own goroutine and Deliver returns as soon as ctx is done. The
// abandoned exchange still runs to its own deadline (at most Timeout) before
// its connection and buffers are released; the receiver may therefore still
// get the callback, which at-least-once delivery allows.
func (c *Client) Deliver(ctx context.Context, r *Request) Result {
	start := time.Now()
	if r == nil {
		return Result{Err: fmt.Errorf("%w: nil request", ErrInvalidRequest)}
	}
	if c.closed.Load() {
		return Result{Err: ErrClosed}
	}
	if ctx.Err() != nil {
		return abandoned(ctx, start)
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	deadline := start.Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	now := r.Now
	if now.IsZero() {
		now = start
	}

	// Everything the exchange needs is copied out of r here, so a caller
	// that reuses r after an early (cancelled) return cannot race with it.
	req := fasthttp.AcquireRequest()
	if err := c.buildRequest(req, r, now); err != nil {
		fasthttp.ReleaseRequest(req)
		return Result{Err: err, Latency: time.Since(start)}
	}

	exchange := c.exchange
	if r.Pipeline {
		exchange = c.pipelined
	}
	if secrets := headerSecrets(r.Headers); secrets != nil {
		plain := exchange
		exchange = func(req *fasthttp.Request, now, start, deadline time.Time) Result {
			res := plain(req, now, start, deadline)
			res.BodySnippet = redact(res.BodySnippet, secrets)
			return res
		}
	}
	if ctx.Done() == nil {
		return exchange(req, now, start, deadline)
	}
	done := make(chan Result, 1)
	go func() { done <- exchange(req, now, start, deadline) }()
	select {
	case res := <-done:
		return res
	case <-ctx.Done():
		return abandoned(ctx, start)
	}
}

func abandoned(ctx context.Context, start time.Time) Result {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		err = fmt.Errorf("%w: %w", err, cause)
	}
	return Result{
		Err:      fmt.Errorf("webhook: delivery abandoned: %w", err),
		TimedOut: errors.Is(err, context.DeadlineExceeded),
		Latency:  time.Since(start),
	}
}

// startRequest checks url, starts a POST to it and copies the route's
// headers, refusing invalid ones and skipping the reserved ones (and
// alsoReserved, when set): shared by single and batched callbacks.
func (c *Client) startRequest(req *fasthttp.Request, url string, headers map[string]string, alsoReserved string) error {
	if err := c.validURL(url); err != nil {
		return err
	}
	// Send header names exactly as written (webhook-id stays lower-case,
	// route headers keep the case the user chose). Response headers are
	// still normalized, so Peek("Retry-After") matches any spelling.
	req.Header.DisableNormalizing()
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI(url)
	// Sent exactly as configured on the pipelined path too, which writes
	// the request itself (fasthttp.Client sets this per host).
	req.URI().DisablePathNormalizing = true
	for k, v := range headers {
		if err := checkHeaderName(k); err != nil {
			return fmt.Errorf("%w: route header: %w", ErrInvalidRequest, err)
		}
		if err := checkHeaderValue(k, v); err != nil {
			return fmt.Errorf("%w: route header: %w", ErrInvalidRequest, err)
		}
		if isReservedHeader(k) || (alsoReserved != "" && k == alsoReserved) {
			continue
		}
		req.Header.Set(k, v)
	}
	return nil
}

func (c *Client) buildRequest(req *fasthttp.Request, r *Request, now time.Time) error {
	if err := c.startRequest(req, r.URL, r.Headers, ""); err != nil {
		return err
	}

	key := r.IdempotencyKey
	if key == "" {
		key = IdempotencyKey(r.Payload.Collection, r.Payload.ID, r.Payload.TriggerTime)
	}
	var num [20]byte
	req.Header.SetContentType("application/json")
	req.Header.Set(HeaderIdempotencyKey, key)
	req.Header.SetBytesV(HeaderAttempt, strconv.AppendInt(num[:0], int64(r.Payload.Attempt), 10))
	req.Header.SetUserAgent(c.userAgent)

	// Encode straight into the pooled request's own body buffer.
	body := r.Payload.AppendJSON(req.SwapBody(nil)[:0])
	if len(r.SigningKey) > 0 {
		ts := now.Unix()
		var sig [64]byte
		req.Header.Set(HeaderWebhookID, key)
		req.Header.SetBytesV(HeaderWebhookTimestamp, strconv.AppendInt(num[:0], ts, 10))
		req.Header.SetBytesV(HeaderWebhookSignature, appendSignature(sig[:0], r.SigningKey, key, ts, body))
	}
	req.SwapBody(body)
	return nil
}

// checkURL rejects what cannot be a callback target before anything is sent,
// with a message the job's owner can act on. The URL itself is left out of
// the messages: it may carry a token, and the caller knows which URL it was.
func checkURL(s string) error {
	if s == "" {
		return fmt.Errorf("%w: callback URL is empty", ErrInvalidRequest)
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] == 0x7f {
			return fmt.Errorf("%w: callback URL contains a space or control character at byte %d; percent-encode it", ErrInvalidRequest, i)
		}
	}
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("%w: callback URL does not parse: %v", ErrInvalidRequest, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		if u.Scheme == "" {
			return fmt.Errorf("%w: callback URL must be absolute, like https://example.com/hook", ErrInvalidRequest)
		}
		return fmt.Errorf("%w: callback URL scheme must be http or https, not %q", ErrInvalidRequest, u.Scheme)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("%w: callback URL has no host; it must look like https://example.com/hook", ErrInvalidRequest)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%w: callback URL port %q is not between 1 and 65535", ErrInvalidRequest, p)
		}
	}
	return nil
}

// exchange performs the HTTP exchange and copies everything the Result needs
// out of fasthttp's pooled objects before releasing them.
func (c *Client) exchange(req *fasthttp.Request, now, start, deadline time.Time) (res Result) {
	defer fasthttp.ReleaseRequest(req)
	return c.exchangeKeep(req, now, start, deadline)
}

// exchangeKeep is exchange without releasing req.
func (c *Client) exchangeKeep(req *fasthttp.Request, now, start, deadline time.Time) (res Result) {
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)

	if err := c.hc.DoDeadline(req, resp, deadline); err != nil {
		res.Err, res.TimedOut = describeError(err, deadline.Sub(start))
		res.Latency = time.Since(start)
		return res
	}
	bp := c.getBodyBuf()
	body, complete, readErr := c.readBody(resp, *bp)
	// Closing before release matters: a body not read to the end closes the
	// connection instead of returning it to the pool mid-response.
	_ = resp.CloseBodyStream()
	res = c.answer(resp, body, complete, readErr, now, start)
	*bp = body[:0]
	c.bodyBufs.Put(bp)
	return res
}

// answer is the Result of a response that arrived, body being what was
// read of its body (complete: all of it; readErr: why not).
func (c *Client) answer(resp *fasthttp.Response, body []byte, complete bool, readErr error, now, start time.Time) (res Result) {
	res.StatusCode = resp.StatusCode()
	if v := resp.Header.Peek("Retry-After"); len(v) > 0 {
		res.RetryAfter, res.HasRetryAfter = parseRetryAfter(v, now)
	}
	res.Latency = time.Since(start)
	res.BodySnippet = snippet(body)
	if res.StatusCode >= 200 && res.StatusCode <= 299 {
		res.RescheduleAt, res.RescheduleIn, res.RescheduleErr = parseReschedule(body, complete, readErr, c.maxBody)
	}
	return res
}

func (c *Client) getBodyBuf() *[]byte {
	if bp, ok := c.bodyBufs.Get().(*[]byte); ok {
		return bp
	}
	b := make([]byte, 0, 1024)
	return &b
}

// readBody reads at most maxBody bytes of the response into buf. complete
// reports whether that was the whole body. A read error after the status line
// is returned separately: a response did arrive, and its status stands.
func (c *Client) readBody(resp *fasthttp.Response, buf []byte) (body []byte, complete bool, err error) {
	return readBodyLimit(resp, buf, c.maxBody)
}

// readBodyLimit is readBody with its own limit (a batch answer is longer).
func readBodyLimit(resp *fasthttp.Response, buf []byte, limit int) (body []byte, complete bool, err error) {
	buf = buf[:0]
	stream := resp.BodyStream()
	if stream == nil { // no body (204, 304) or buffered by fasthttp
		b := resp.Body()
		if len(b) > limit {
			return append(buf, b[:limit]...), false, nil
		}
		return append(buf, b...), true, nil
	}
	for len(buf) < limit {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := stream.Read(buf[len(buf):min(cap(buf), limit)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, true, nil
		}
		if err != nil {
			return buf, false, err
		}
	}
	// Exactly at the limit: the body is complete only if nothing follows.
	var one [1]byte
	n, err := stream.Read(one[:])
	return buf, n == 0 && err == io.EOF, nil
}

// describeError turns a fasthttp error into one a person reading last_error
// can act on, and says whether it was a timeout.
func describeError(err error, budget time.Duration) (error, bool) {
	var ne net.Error
	switch {
	case errors.Is(err, fasthttp.ErrDialTimeout), errors.Is(err, fasthttp.ErrTLSHandshakeTimeout):
		return fmt.Errorf("webhook: timed out connecting to the receiver: %w", err), true
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("webhook: no response within %v: %w", budget.Round(time.Millisecond), err), true
	case errors.Is(err, fasthttp.ErrConnectionClosed), errors.Is(err, io.EOF):
		return fmt.Errorf("webhook: the receiver closed the connection without answering: %w", err), false
	case errors.Is(err, fasthttp.ErrNoFreeConns):
		return fmt.Errorf("webhook: too many callbacks in flight to this host: %w", err), false
	}
	return fmt.Errorf("webhook: %w", err), false
}
