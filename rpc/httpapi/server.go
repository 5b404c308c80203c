package httpapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/timemachine-db/timemachine/auth"
	"github.com/timemachine-db/timemachine/model"
	"github.com/valyala/fasthttp"
)

// Defaults of Options.
const (
	DefaultMaxMetaBytes   = model.DefaultMaxMetaBytes
	DefaultMaxBodyBytes   = 16 << 20 // API.md §6
	DefaultBackendTimeout = 30 * time.Second
)

// Server timeouts. A slow or idle client holds a connection (and a file
// descriptor) for at most these: the request line and headers must arrive
// within headerTimeout of the request's first byte (of the connection, for
// a new one); the body then gets bodyTimeout, generous because it may be a
// 16 MiB batch on a slow link. Answers may be a 1000-job page with large
// metas.
const (
	headerTimeout  = 10 * time.Second
	bodyTimeout    = 60 * time.Second
	writeTimeout   = 60 * time.Second
	idleTimeout    = 90 * time.Second
	readBufferSize = 16 << 10 // bounds the request line + headers
)

// Options configures a Server. Zero values take the defaults.
type Options struct {
	// Clock is the time source for "delay" and generated ids (time.Now).
	Clock func() time.Time
	// MaxMetaBytes bounds a job's compacted meta (64 KiB); more is 413.
	MaxMetaBytes int
	// MaxBodyBytes bounds a request body (--max-body-bytes, 16 MiB). A
	// larger one is answered 413 before any of it is read; bodies are
	// streamed, so no buffer of the announced length is allocated first.
	MaxBodyBytes int
	// MaxConns caps the connections open at once (0: no cap); see
	// guardedListener. MaxConnsPerIP caps them per client address (0: none;
	// off by default because a load balancer or NAT puts many clients
	// behind one address).
	MaxConns      int
	MaxConnsPerIP int
	// Auth, when set, requires a token on every request but /healthz and
	// /readyz and checks each route's declared permission (guard.go). Nil:
	// the API is open.
	Auth *auth.Store
	// AllowedOrigins are browser origins ("https://console.example.com")
	// allowed to call the API cross-site (--allowed-origins); any other
	// foreign Origin is refused.
	AllowedOrigins []string
	// TLSConfig, when set, serves HTTPS.
	TLSConfig *tls.Config
	// CheckTarget, when set, vets every callback_url and webhook_url at
	// create (the callback egress policy: a literal address the policy
	// refuses is a 400). It returns nil or the reason.
	CheckTarget func(field, rawURL string) *model.Error
	// BackendTimeout bounds each Backend call (30 s).
	BackendTimeout time.Duration
	Logger         *slog.Logger
	// MetricsHandler is served at GET /metrics when non-nil.
	MetricsHandler fasthttp.RequestHandler
	// Observe, when set, is called after every request with the route
	// pattern ("POST /v1/collections/{c}/jobs"; "unmatched" for unknown
	// paths), the status and the time taken. It must be cheap.
	Observe func(route string, status int, d time.Duration)
	// Serving, when set, says whether this node serves the API: an
	// error (a node taken out with admin remove: it holds nothing, and its
	// own picture of the cluster stopped at its removal) answers every
	// request 503 unavailable with its message, but for the open routes,
	// GET /metrics and the API description. Nil: always serves.
	Serving func() error
	// LookupCollection returns a collection's configuration (nil: use the
	// defaults). Rendering a job shows its effective retry policy and
	// callback timeout, which need the collection; asking the Backend per
	// rendered job would cost a call per job of a 1000-job page, so the node
	// hands over its local, lock-free view of the meta state instead. It can
	// also be set later with SetCollectionLookup.
	LookupCollection func(name string) *model.Collection
	// LookupRoute returns a route's configuration (nil: unknown). A job
	// that names a route and no callback_timeout of its own is delivered
	// with the route's timeout (then the collection's), so the rendered
	// effective callback_timeout needs it too; like LookupCollection it
	// must be a cheap local read.
	LookupRoute func(name string) *model.Route
	// DebugClock, when set (the hidden --debug-faults), serves
	// POST /v1/debug/clock {"offset":"2s"}: it shifts this process's wall
	// clock (204). Unset, the endpoint does not exist (404). It is not part
	// of the API and not in its description.
	DebugClock func(offset time.Duration) error
}

// Server is the public HTTP API over a Backend.
type Server struct {
	b       Backend
	o       Options
	log     *slog.Logger
	srv     *fasthttp.Server
	lookup  atomic.Pointer[func(string) *model.Collection]
	origins map[string]struct{}
	ln      atomic.Pointer[guardedListener]
}

// New returns a Server answering through b.
func New(b Backend, o Options) *Server {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.MaxMetaBytes <= 0 {
		o.MaxMetaBytes = DefaultMaxMetaBytes
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.BackendTimeout <= 0 {
		o.BackendTimeout = DefaultBackendTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := &Server{b: b, o: o, log: o.Logger.With("component", "httpapi"), origins: map[string]struct{}{}}
	for _, org := range o.AllowedOrigins {
		s.origins[strings.TrimSuffix(org, "/")] = struct{}{}
	}
	if o.LookupCollection != nil {
		s.SetCollectionLookup(o.LookupCollection)
	}
	s.srv = &fasthttp.Server{
		Handler:                      s.Handler(),
		ErrorHandler:                 s.transportError,
		Name:                         "timemachine",
		ReadTimeout:                  headerTimeout,
		WriteTimeout:                 writeTimeout,
		IdleTimeout:                  idleTimeout,
		HeaderReceived:               s.headerReceived,
		ExpectHandler:                s.expect,
		MaxRequestBodySize:           o.MaxBodyBytes,
		StreamRequestBody:            true,
		ReadBufferSize:               readBufferSize,
		NoDefaultContentType:         true,
		CloseOnShutdown:              true,
		DisablePreParseMultipartForm: true,
		Logger:                       newFasthttpLogger(s.log),
	}
	return s
}

// SetCollectionLookup replaces Options.LookupCollection; safe to call while
// serving (the node may only have its meta state after the API is up).
func (s *Server) SetCollectionLookup(fn func(name string) *model.Collection) {
	if fn == nil {
		s.lookup.Store(nil)
		return
	}
	s.lookup.Store(&fn)
}

func (s *Server) collection(name string) *model.Collection {
	if fn := s.lookup.Load(); fn != nil {
		return (*fn)(name)
	}
	return nil
}

// Handler returns the API's request handler, for use with a fasthttp
// server of the caller's own or with an in-memory RequestCtx in tests.
func (s *Server) Handler() fasthttp.RequestHandler { return s.serve }

// headerReceived gives the body its own, longer deadline once the headers
// are in (fasthttp applies ReadTimeout to the headers).
//
// A body announced larger than the limit gets 413 at once, before any of
// it is read or waited for (API.md §6). fasthttp reads the first 8 KiB of
// a body before it calls a handler, so a client that announced 100 MB and
// sent a few bytes sat out the read timeout and got 408. The one request
// fasthttp does not pre-read is one that expects "100 Continue": the
// oversized request is marked so, and expect refuses it with 413 before
// anything is read (and the connection is closed: the client may be
// sending its body).
func (s *Server) headerReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	if h.ContentLength() > s.o.MaxBodyBytes {
		h.Set(fasthttp.HeaderExpect, "100-continue")
	}
	return fasthttp.RequestConfig{ReadTimeout: bodyTimeout, MaxRequestBodySize: s.o.MaxBodyBytes}
}

// expect answers a request that expects "100 Continue": 413 with the
// contract's body when its announced body is over the limit (a client's
// own Expect, or headerReceived's mark), else 100 and the body is read.
func (s *Server) expect(ctx *fasthttp.RequestCtx) int {
	if cl := ctx.Request.Header.ContentLength(); cl > s.o.MaxBodyBytes {
		writeError(ctx, model.TooLarge("request body is %d bytes, larger than the %d-byte limit (--max-body-bytes); split a batch into smaller ones or shrink the metas", cl, s.o.MaxBodyBytes))
		return fasthttp.StatusRequestEntityTooLarge
	}
	return fasthttp.StatusContinue
}

// Serve answers requests on ln until Shutdown: over TLS when
// Options.TLSConfig is set, behind the connection cap and an accept loop
// that survives accept errors (guardedListener).
func (s *Server) Serve(ln net.Listener) error {
	gl := newGuardedListener(ln, s.o.MaxConns, s.o.MaxConnsPerIP, s.o.TLSConfig != nil, s.log)
	s.ln.Store(gl)
	var served net.Listener = gl
	if s.o.TLSConfig != nil {
		served = tls.NewListener(gl, s.o.TLSConfig)
	}
	if err := s.srv.Serve(served); err != nil {
		return fmt.Errorf("httpapi: serve %s: %w", ln.Addr(), err)
	}
	return nil
}

// OpenConns is the number of API connections open now (a metric).
func (s *Server) OpenConns() int64 {
	if l := s.ln.Load(); l != nil {
		return l.Open()
	}
	return 0
}

// RefusedConns counts connections turned away at the cap (a metric).
func (s *Server) RefusedConns() uint64 {
	if l := s.ln.Load(); l != nil {
		return l.refused.Load()
	}
	return 0
}

// Shutdown stops accepting connections and waits for in-flight requests,
// up to ctx's deadline.
func (s *Server) Shutdown(ctx context.Context) error {
	if err := s.srv.ShutdownWithContext(ctx); err != nil {
		return fmt.Errorf("httpapi: shutdown: %w", err)
	}
	return nil
}

// fasthttpLogger passes fasthttp's own messages (a connection it could
// not serve: a malformed request, a broken connection) to the log, with
// the request's bytes taken out (transportText) and at most
// transportLogBurst lines a minute: anyone who can open a connection can
// make one, so unthrottled they let a client fill the disk (a black-box
// review: 300 malformed requests in 0.1 s wrote 207 KB).
type fasthttpLogger struct {
	l  *slog.Logger
	mu *sync.Mutex
	st *transportLogState
}

type transportLogState struct {
	window     time.Time
	n          int
	suppressed int
}

const transportLogBurst = 10

func newFasthttpLogger(l *slog.Logger) fasthttpLogger {
	return fasthttpLogger{l: l, mu: &sync.Mutex{}, st: &transportLogState{}}
}

func (f fasthttpLogger) Printf(format string, args ...any) {
	now := time.Now()
	f.mu.Lock()
	if now.Sub(f.st.window) >= time.Minute {
		f.st.window, f.st.n = now, 0
	}
	f.st.n++
	if f.st.n > transportLogBurst {
		f.st.suppressed++
		f.mu.Unlock()
		return
	}
	suppressed := f.st.suppressed
	f.st.suppressed = 0
	f.mu.Unlock()
	msg := "fasthttp: " + transportText(fmt.Sprintf(format, args...))
	if suppressed > 0 {
		f.l.Warn(msg, "suppressed_before", suppressed)
		return
	}
	f.l.Warn(msg)
}

// transportText is a fasthttp error's text without the request's bytes:
// fasthttp quotes the offending header value and the whole read buffer
// ("buffer size=…, contents: …"), which held the client's token and the
// body's secrets, and both went to the log and into the 400's message (a
// black-box review; API.md §6: secrets are never echoed nor logged). The
// buffer is cut, and every quoted string but an address is blanked.
func transportText(s string) string {
	low := strings.ToLower(s)
	if i := strings.Index(low, "buffer size="); i >= 0 {
		s = strings.TrimRight(s[:i], " :,;") + " (the request's bytes are not shown)"
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '"' {
			b.WriteByte(s[i])
			continue
		}
		j := i + 1
		for j < len(s) && s[j] != '"' {
			if s[j] == '\\' {
				j++
			}
			j++
		}
		if j >= len(s) {
			b.WriteString(`"…"`)
			break
		}
		if q := s[i+1 : j]; isAddrText(q) {
			b.WriteString(s[i : j+1])
		} else {
			b.WriteString(`"…"`)
		}
		i = j
	}
	return b.String()
}

// isAddrText: an address as fasthttp quotes a connection's ends
// ("127.0.0.1:8080", "[::1]:8080"). A parse, not a character class: a
// header value of hex digits and colons would pass the one.
func isAddrText(q string) bool {
	_, err := netip.ParseAddrPort(q)
	return err == nil
}

// transportError answers requests fasthttp could not even parse (body over
// MaxBodyBytes, oversized headers, timeouts) with the contract's error body
// instead of fasthttp's plain text.
func (s *Server) transportError(ctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		writeError(ctx, model.TooLarge("request body is larger than the %d-byte limit; split a batch into smaller ones or shrink the metas", s.o.MaxBodyBytes))
	case errors.As(err, &small):
		writeErrorStatus(ctx, fasthttp.StatusRequestHeaderFieldsTooLarge,
			model.TooLarge("request line and headers are larger than %d bytes", readBufferSize))
	default:
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			writeErrorStatus(ctx, fasthttp.StatusRequestTimeout, model.Invalid("timed out reading the request"))
		} else {
			writeError(ctx, model.Invalid("malformed HTTP request: %s", transportText(err.Error())))
		}
	}
}

// request is one request being handled: the matched route and its path
// parameters (copied out of fasthttp's buffers).
type request struct {
	ctx    *fasthttp.RequestCtx
	params [2]string
	who    *auth.Principal // nil when the API is open
}

// backendCtx is the context of a Backend call. It is detached from the
// connection: fasthttp gives no cancellation signal, and an abandoned write
// must still be allowed to finish committing.
func (s *Server) backendCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.o.BackendTimeout)
}

// serve is the fasthttp handler: route, dispatch, recover, observe.
func (s *Server) serve(ctx *fasthttp.RequestCtx) {
	start := time.Now()
	routeName := "unmatched"
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic in handler", "route", routeName, "panic", p)
			ctx.Response.Reset()
			writeError(ctx, model.Internal("internal error while handling %s", routeName))
		}
		if s.o.Observe != nil {
			s.o.Observe(routeName, ctx.Response.StatusCode(), time.Since(start))
		}
	}()
	if s.preflight(ctx) {
		return
	}
	if s.o.DebugClock != nil && string(ctx.Path()) == "/v1/debug/clock" {
		// Hidden fault injection (--debug-faults): outside the router, so
		// outside the OpenAPI document, but behind the admin permission.
		routeName = "POST /v1/debug/clock"
		if s.guard(&request{ctx: ctx}, &handler{method: "POST", name: routeName, perm: adminCluster}) {
			s.debugClock(ctx)
		}
		return
	}
	ep, h, params := match(ctx)
	if ep == nil {
		writeError(ctx, model.NotFound("no such endpoint: %s %s; GET /v1/openapi.json lists the endpoints", ctx.Method(), clip(string(ctx.URI().PathOriginal()))))
		return
	}
	if h == nil {
		ctx.Response.Header.Set("Allow", ep.allow)
		writeErrorStatus(ctx, fasthttp.StatusMethodNotAllowed, model.Invalid(
			"method %s is not allowed on %s; allowed: %s", clip(string(ctx.Method())), ep.pattern, ep.allow))
		return
	}
	routeName = h.name
	r := &request{ctx: ctx, params: params}
	if !s.guard(r, h) {
		return
	}
	if e := unconditional(h, ctx); e != nil {
		writeError(ctx, e)
		return
	}
	h.fn(s, r)
}

// honoursIfMatch are the writes that take If-Match (a version). The
// DELETEs of a job and a schedule refuse it with their own message
// (noIfMatch).
var honoursIfMatch = map[string]bool{
	"PUT /v1/collections/{c}/jobs/{id}":         true,
	"PUT /v1/collections/{c}/schedules/{id}":    true,
	"DELETE /v1/collections/{c}/jobs/{id}":      true,
	"DELETE /v1/collections/{c}/schedules/{id}": true,
}

// unconditional refuses a precondition header on a write that would not
// honour it: a client that sent If-Match to a collection's or a route's
// PUT, or If-None-Match to any write, believes its write is conditional,
// and ignoring the header would make it unconditional behind its back.
// Reads are left alone (the console's files answer If-None-Match).
func unconditional(h *handler, ctx *fasthttp.RequestCtx) *model.Error {
	if h.method == "GET" {
		return nil
	}
	if hasHeader(ctx, "If-None-Match") {
		return model.Invalid("%s does not take If-None-Match; to create a job only when its id is new, POST it (a POST of an id that exists answers 200 for the same spec, 409 for another)", h.name)
	}
	if !honoursIfMatch[h.name] && hasHeader(ctx, "If-Match") {
		return model.Invalid("%s does not take If-Match: it writes whatever is there; only a PUT of a job or a schedule is conditional", h.name)
	}
	return nil
}

// hasHeader reports whether the request carries the header at all, even
// empty: an empty precondition is a mistake to answer, not an absent one
// (a client sending an unset version variable would lose its optimistic
// lock silently).
func hasHeader(ctx *fasthttp.RequestCtx, name string) bool {
	return len(ctx.Request.Header.PeekAll(name)) > 0
}

// debugClock is POST /v1/debug/clock {"offset":"2s"} (--debug-faults).
func (s *Server) debugClock(ctx *fasthttp.RequestCtx) {
	if !ctx.IsPost() {
		ctx.Response.Header.Set("Allow", "POST")
		writeErrorStatus(ctx, fasthttp.StatusMethodNotAllowed, model.Invalid("use POST"))
		return
	}
	var body struct {
		Offset *string `json:"offset"`
	}
	dec := json.NewDecoder(bytes.NewReader(ctx.PostBody()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || body.Offset == nil {
		writeError(ctx, model.Invalid(`the body is {"offset":"<Go duration>"}, e.g. {"offset":"-2s"}`))
		return
	}
	str := *body.Offset
	d, err := time.ParseDuration(str)
	if err != nil {
		writeError(ctx, model.Invalid("offset %q: %v", str, err))
		return
	}
	if err := s.o.DebugClock(d); err != nil {
		writeError(ctx, model.Invalid("%v", err))
		return
	}
	writeEmpty(ctx)
}

// --- answers ---

func setJSON(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.SetContentTypeBytes(contentTypeJSON)
}

var contentTypeJSON = []byte("application/json")

// writeJSON answers with a JSON body.
func writeJSON(ctx *fasthttp.RequestCtx, status int, body []byte) {
	ctx.SetStatusCode(status)
	setJSON(ctx)
	ctx.SetBody(body)
}

// writeEmpty answers 204 without a body.
func writeEmpty(ctx *fasthttp.RequestCtx) {
	ctx.SetStatusCode(fasthttp.StatusNoContent)
	ctx.ResetBody()
}

// writeError answers with the contract's error body and the status of the
// error's kind.
func writeError(ctx *fasthttp.RequestCtx, e *model.Error) {
	status := statusOf(e.Kind)
	if status == 0 {
		e, status = model.Internal("%s", e.Message), fasthttp.StatusInternalServerError
	}
	writeErrorStatus(ctx, status, e)
}

// writeErrorStatus answers with the contract's error body under a status
// chosen by the HTTP layer itself (405, 408, 431: failures of the HTTP
// exchange rather than of the request's content).
func writeErrorStatus(ctx *fasthttp.RequestCtx, status int, e *model.Error) {
	// The contract promises Retry-After on 503 (and 429); a backend error
	// that forgot it still gets the smallest useful one.
	if ra := e.RetryAfter; ra > 0 || status == fasthttp.StatusServiceUnavailable || status == fasthttp.StatusTooManyRequests {
		ctx.Response.Header.Set("Retry-After", strconv.FormatInt(retryAfterSeconds(ra), 10))
	}
	writeJSON(ctx, status, appendErrorBody(make([]byte, 0, 64+len(e.Message)), e))
}

// retryAfterSeconds rounds up to whole seconds, at least 1.
func retryAfterSeconds(d time.Duration) int64 {
	return max(int64((d+time.Second-1)/time.Second), 1)
}

// noAnswer closes the connection without an answer: the write's outcome
// is unknown (model.ErrOutcomeUnknown), and every answer the contract has
// would claim to know it — an error says "nothing changed". An HTTP client
// sees the request fail in transport, which it already treats as unknown.
func (s *Server) noAnswer(r *request) {
	s.log.Warn("closing the connection without an answer: the write's outcome could not be established",
		"method", string(r.ctx.Method()), "path", string(r.ctx.Path()))
	r.ctx.HijackSetNoResponse(true)
	r.ctx.Hijack(func(c net.Conn) { _ = c.Close() })
}

// fail answers with err (from the backend) and logs server-side failures.
// An error about a job (a 409 firing) carries the job next to it.
func (s *Server) fail(r *request, err error) {
	if errors.Is(err, model.ErrOutcomeUnknown) {
		s.noAnswer(r)
		return
	}
	e := asError(err)
	if statusOf(e.Kind) >= 500 {
		s.log.Warn("request failed", "method", string(r.ctx.Method()), "path", string(r.ctx.Path()), "status", statusOf(e.Kind), "err", err)
	}
	if e.Job != nil && statusOf(e.Kind) != 0 {
		rd := jobRenderer{s: s}
		b := append(make([]byte, 0, 512), `{"error":`...)
		b = appendErrorObject(b, e)
		b = append(b, `,"job":`...)
		b = rd.append(b, e.Job)
		writeJSON(r.ctx, statusOf(e.Kind), append(b, '}'))
		return
	}
	writeError(r.ctx, e)
}
