package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// call is one logical request; the retry loop may send it several times.
type call struct {
	method string
	path   string // escaped path and query, starting with "/"
	body   []byte
	header [][2]string
	// retrySafe: sending it twice cannot do harm twice, so it may be resent
	// after a 503/429 or after a connection that broke once the request
	// was (maybe) written. See the retry table in doc.go.
	retrySafe bool
	// single: send to address addr only, once (per-node checks).
	single bool
	addr   int
	// anyBody: a 2xx answer's body is not decoded as JSON (health checks,
	// metrics, raw Do), so its content type is not checked.
	anyBody bool
}

// result is the outcome of one attempt.
type result struct {
	base        string // the address it went to
	url         string
	method      string
	status      int
	contentType string
	body        []byte
	retryAfter  time.Duration
	location    string // of a redirect
	err         error
	// notSent: err proves no byte of the request reached a server (the
	// connection could not be made), so sending it elsewhere is not a
	// resend.
	notSent bool
	// permanent: err will not go away by trying again (a certificate the
	// client does not trust), so the loop stops at once.
	permanent bool
}

func (r *result) protocolError(err error) *ProtocolError {
	return &ProtocolError{Method: r.method, URL: r.url, Base: r.base, HTTPStatus: r.status,
		ContentType: r.contentType, Snippet: snippet(r.body), Err: err}
}

// transport sends one attempt of a call to the address with index idx. It
// must honour ctx and the deadline, and copy the body it returns.
type transport interface {
	roundTrip(ctx context.Context, idx int, cl *call, header [][2]string, deadline time.Time) result
	closeIdle()
}

// stdTransport is net/http: the default, and the one a custom http.Client
// plugs into (proxies, HTTP/2, instrumentation).
type stdTransport struct {
	bases   []string
	hc      *http.Client
	maxBody int64
}

func (t *stdTransport) roundTrip(ctx context.Context, idx int, cl *call, header [][2]string, deadline time.Time) result {
	u := t.bases[idx] + cl.path
	res := result{base: t.bases[idx], url: u, method: cl.method}
	actx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var body io.Reader
	if cl.body != nil {
		body = bytes.NewReader(cl.body)
	}
	req, err := http.NewRequestWithContext(actx, cl.method, u, body)
	if err != nil {
		res.err, res.permanent = err, true
		return res
	}
	for _, h := range header {
		req.Header.Set(h[0], h[1])
	}
	if cl.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := t.hc.Do(req)
	if err != nil {
		res.err, res.notSent, res.permanent = err, notSent(err), permanentErr(err)
		if ctx.Err() == nil && actx.Err() != nil {
			res.err = fmt.Errorf("no answer within the attempt timeout: %w", err)
		}
		return res
	}
	defer resp.Body.Close()
	res.status = resp.StatusCode
	res.contentType = resp.Header.Get("Content-Type")
	res.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	b, err := io.ReadAll(io.LimitReader(resp.Body, t.maxBody+1))
	switch {
	case err != nil:
		res.err = fmt.Errorf("reading the answer (HTTP %d): %w", resp.StatusCode, err)
	case int64(len(b)) > t.maxBody:
		res.err, res.permanent = fmt.Errorf("the answer is larger than %d bytes (see WithMaxResponseBytes)", t.maxBody), true
	}
	res.body = b
	res.location = resp.Header.Get("Location")
	return res
}

func (t *stdTransport) closeIdle() { t.hc.CloseIdleConnections() }

// fastTransport is valyala/fasthttp: 2–3× net/http's request rate with a
// tenth of its allocations on loopback (BenchmarkDoLoopback), which matters
// to the load generator sharing cores with the server it measures.
type fastTransport struct {
	bases   []string
	hosts   []*fasthttp.HostClient
	maxBody int64
}

func (t *fastTransport) roundTrip(ctx context.Context, idx int, cl *call, header [][2]string, deadline time.Time) result {
	u := t.bases[idx] + cl.path
	res := result{base: t.bases[idx], url: u, method: cl.method}
	req := fasthttp.AcquireRequest()
	req.SetRequestURI(u)
	req.Header.SetMethod(cl.method)
	for _, h := range header {
		req.Header.Set(h[0], h[1])
	}
	if cl.body != nil {
		req.Header.SetContentType("application/json")
		req.SetBody(cl.body)
	}
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	hc := t.hosts[idx]
	// The request is fully built (its body copied) before it may be handed
	// to another goroutine, so the caller may reuse cl.body as soon as this
	// returns, even when it returns early because ctx was cancelled.
	base := res // the goroutine below reads its own copy; res is written on cancel
	run := func() result {
		resp := fasthttp.AcquireResponse()
		defer fasthttp.ReleaseResponse(resp)
		defer fasthttp.ReleaseRequest(req)
		r := base
		if err := hc.DoDeadline(req, resp, deadline); err != nil {
			r.err, r.notSent, r.permanent = err, notSent(err), permanentErr(err)
			if errors.Is(err, fasthttp.ErrBodyTooLarge) {
				r.err, r.permanent = fmt.Errorf("the answer is larger than %d bytes (see WithMaxResponseBytes)", t.maxBody), true
			}
			return r
		}
		r.status = resp.StatusCode()
		r.contentType = string(resp.Header.ContentType())
		r.retryAfter = parseRetryAfter(string(resp.Header.Peek("Retry-After")), time.Now())
		r.location = string(resp.Header.Peek("Location"))
		if int64(len(resp.Body())) > t.maxBody {
			r.err, r.permanent = fmt.Errorf("the answer is larger than %d bytes (see WithMaxResponseBytes)", t.maxBody), true
			return r
		}
		// fasthttp reuses the response buffer after release: copy.
		r.body = append([]byte(nil), resp.Body()...)
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
		res.err = ctx.Err()
		return res
	}
}

func (t *fastTransport) closeIdle() {
	for _, h := range t.hosts {
		h.CloseIdleConnections()
	}
}

// notSent reports whether err proves the request never reached a server
// (no connection could be made), so that sending it to another address
// cannot do anything twice.
func notSent(err error) bool {
	if errors.Is(err, fasthttp.ErrNoFreeConns) || errors.Is(err, fasthttp.ErrDialTimeout) ||
		errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// permanentErr reports errors that another attempt will not fix: the
// server's certificate is not trusted, or the TLS configurations do not
// match. Failing at once gives the actionable message without retries.
func permanentErr(err error) bool {
	var (
		unknownCA *x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		verify    *tls.CertificateVerificationError
		rhe       tls.RecordHeaderError
	)
	return errors.As(err, &unknownCA) || errors.As(err, &hostname) || errors.As(err, &invalid) ||
		errors.As(err, &verify) || errors.As(err, &rhe) ||
		strings.Contains(err.Error(), "server gave HTTP response to HTTPS client")
}
