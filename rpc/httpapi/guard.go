package httpapi

import (
	"bytes"
	"io"
	"mime"
	"net/netip"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/timemachine-db/timemachine/auth"
	"github.com/timemachine-db/timemachine/model"
)

// What every request passes before its handler runs (docs/api.md#security):
//
//  1. a browser's cross-site request is refused (foreign Origin: 403);
//  2. with an auth file, the token is checked (401) and then the role and
//     scope the route declares (403); a node that does not serve (taken
//     out of the cluster: Options.Serving) then answers 503, but for
//     /metrics and the API description;
//  3. a write must carry a JSON body (400 for text/plain, forms, …);
//  4. a body larger than MaxBodyBytes is refused before it is read (413).
//
// Only /healthz, /readyz and the console's static files (/, /ui/) skip
// all of it. The order matters: nothing of
// an unauthenticated request's body is read, and a refusal never reaches
// the backend, so a refused request changes nothing.

// scopeKind says what a route's permission is about.
type scopeKind uint8

const (
	// scopeOpen: no token needed, no browser check (/healthz, /readyz).
	scopeOpen scopeKind = iota
	// scopeCluster: a resource outside any collection (routes, the
	// cluster, /metrics, /v1/admin/*).
	scopeCluster
	// scopeCollection: the collection named by the first path parameter.
	scopeCollection
)

// access is the permission a route declares: the least role, and what the
// role must cover.
type access struct {
	role  auth.Role
	scope scopeKind
}

var (
	open           = access{scope: scopeOpen}
	readCluster    = access{auth.RoleReader, scopeCluster}
	adminCluster   = access{auth.RoleAdmin, scopeCluster}
	readColl       = access{auth.RoleReader, scopeCollection}
	writeColl      = access{auth.RoleWriter, scopeCollection}
	adminColl      = access{auth.RoleAdmin, scopeCollection}
	denyUndeclared = access{auth.RoleAdmin + 1, scopeCluster} // no token has it
)

// permissions is the permission of every route, by handler name. A route
// missing here is refused to everybody (and TestEveryRouteDeclaresAPermission
// fails), so a new endpoint is never open by accident.
var permissions = map[string]access{
	"GET /healthz": open,
	// The console's static files carry no data, and a browser must load
	// them before it can send a token: the console asks for one when the
	// API answers 401 (API.md §7). The API description is a GET like any
	// other (API.md §6: "reader: every GET", only /healthz and /readyz
	// open): it was open until 2026-11-27 (docs/api.md, the permission table).
	"GET /":                open,
	"GET /ui":              open,
	"GET /ui/{file}":       open,
	"GET /v1/openapi.json": readCluster,
	"GET /readyz":          open,
	"GET /metrics":         readCluster,

	"GET /v1/collections":                  readCluster, // lists only the collections in the token's scope
	"PUT /v1/collections/{c}":              adminColl,
	"GET /v1/collections/{c}":              readColl,
	"DELETE /v1/collections/{c}":           adminColl,
	"POST /v1/collections/{c}/jobs":        writeColl,
	"GET /v1/collections/{c}/jobs":         readColl,
	"PUT /v1/collections/{c}/jobs/{id}":    writeColl,
	"GET /v1/collections/{c}/jobs/{id}":    readColl,
	"DELETE /v1/collections/{c}/jobs/{id}": writeColl,
	"POST /v1/collections/{c}/redrive":     writeColl,

	"GET /v1/collections/{c}/schedules":         readColl,
	"PUT /v1/collections/{c}/schedules/{id}":    writeColl,
	"GET /v1/collections/{c}/schedules/{id}":    readColl,
	"DELETE /v1/collections/{c}/schedules/{id}": writeColl,

	"GET /v1/routes":        readCluster,
	"PUT /v1/routes/{r}":    adminCluster,
	"GET /v1/routes/{r}":    readCluster,
	"DELETE /v1/routes/{r}": adminCluster,

	"GET /v1/cluster":                   readCluster,
	"POST /v1/admin/rebalance":          adminCluster,
	"POST /v1/admin/compact":            adminCluster,
	"POST /v1/admin/slots/{n}/transfer": adminCluster,
	"POST /v1/admin/nodes/{id}/drain":   adminCluster,
	"DELETE /v1/admin/nodes/{id}":       adminCluster,
	"GET /v1/admin/gossip/keys":         adminCluster,
	"POST /v1/admin/gossip/keys":        adminCluster,
}

func permissionOf(name string) access {
	if a, ok := permissions[name]; ok {
		return a
	}
	return denyUndeclared
}

// guard runs the checks above; it answers and returns false when the
// request must not reach its handler. A refused request's body is never
// read, so its connection is closed after the answer.
func (s *Server) guard(r *request, h *handler) bool {
	ctx := r.ctx
	if h.perm.scope == scopeOpen {
		return true
	}
	if origin := ctx.Request.Header.Peek("Origin"); len(origin) > 0 {
		if !s.originAllowed(ctx, origin) {
			return refuse(ctx, 0, model.Errorf(model.KindPermissionDenied,
				"cross-site request refused: Origin %q is neither this server's origin nor in --allowed-origins", clip(string(origin))))
		}
		if _, ok := s.origins[string(origin)]; ok {
			s.corsHeaders(ctx, origin)
		}
	}
	if s.o.Auth != nil {
		p, err := s.o.Auth.Authenticate(ctx.Request.Header.Peek("Authorization"))
		if err != nil {
			ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="timemachine"`)
			return refuse(ctx, 0, model.Errorf(model.KindUnauthenticated, "%s", err.Error()))
		}
		coll := ""
		if h.perm.scope == scopeCollection {
			coll = r.params[0]
		}
		if !p.Can(h.perm.role, coll) {
			return refuse(ctx, 0, denied(p, h, coll))
		}
		r.who = p
	}
	if s.o.Serving != nil && h.name != "GET /metrics" && h.name != "GET /v1/openapi.json" {
		if err := s.o.Serving(); err != nil {
			return refuse(ctx, 0, model.Unavailable(time.Minute, "%s", err.Error()))
		}
	}
	if e := s.checkBodyShape(ctx); e != nil {
		// A body that is not JSON is 400 invalid_argument, the contract's
		// status for that code (API.md §3 "Errors"): it was 415 until
		// 2026-11-27 (docs/api.md, the error table).
		return refuse(ctx, 0, e)
	}
	if e := s.readBody(ctx); e != nil {
		return refuse(ctx, 0, e)
	}
	return true
}

// refuse answers e (under status, or the status of its kind when 0) and
// closes the connection afterwards: the request's body, if any, is unread.
func refuse(ctx *fasthttp.RequestCtx, status int, e *model.Error) bool {
	ctx.SetConnectionClose()
	if status == 0 {
		writeError(ctx, e)
	} else {
		writeErrorStatus(ctx, status, e)
	}
	return false
}

// denied says what the token lacks, naming neither the token nor its digest.
func denied(p *auth.Principal, h *handler, coll string) *model.Error {
	who := "this token"
	if p.Name != "" {
		who = "token " + quote(p.Name)
	}
	switch {
	case h.perm.role > auth.RoleAdmin:
		return model.Errorf(model.KindPermissionDenied, "%s has no permission declared; nobody may call it", h.name)
	case p.Role < h.perm.role:
		return model.Errorf(model.KindPermissionDenied, "%s needs the %s role; %s has %s", h.name, h.perm.role, who, p.Role)
	case coll != "":
		return model.Errorf(model.KindPermissionDenied, "%s is limited to other collections than %q", who, coll)
	}
	return model.Errorf(model.KindPermissionDenied, "%s needs a token that is not limited to some collections; %s is", h.name, who)
}

func quote(s string) string { return `"` + clip(s) + `"` }

// visible reports whether the request's principal may see collection c
// (lists across collections show only these).
func (r *request) visible(c string) bool { return r.who == nil || r.who.InScope(c) }

// checkBodyShape refuses a body that is not JSON or is too large, from
// the headers alone. A body with no Content-Type is accepted: browsers
// cannot send one without also sending Origin, which originAllowed checks,
// and older clients and scripts omit it.
func (s *Server) checkBodyShape(ctx *fasthttp.RequestCtx) *model.Error {
	cl := ctx.Request.Header.ContentLength() // -1: chunked; -2: none
	hasBody := cl > 0 || cl == -1
	if ctx.RequestBodyStream() == nil { // buffered: in-memory tests
		hasBody = len(ctx.PostBody()) > 0
	}
	if !hasBody {
		return nil
	}
	if ct := ctx.Request.Header.ContentType(); len(ct) > 0 && !isJSONType(ct) {
		return model.Invalid("Content-Type %q is not accepted: send the body as JSON with Content-Type: application/json", clip(string(ct)))
	}
	if cl > s.o.MaxBodyBytes {
		return model.TooLarge("request body is %d bytes, larger than the %d-byte limit (--max-body-bytes); split a batch into smaller ones or shrink the metas", cl, s.o.MaxBodyBytes)
	}
	return nil
}

// isJSONType accepts application/json and application/<anything>+json,
// with any parameters.
func isJSONType(ct []byte) bool {
	if string(ct) == "application/json" { // what nearly every client sends: no parse, no allocation
		return true
	}
	mt, _, err := mime.ParseMediaType(string(ct))
	if err != nil {
		return false
	}
	return mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

// readBody reads a streamed body whole, at most MaxBodyBytes of it. The
// server streams request bodies so that no buffer of the announced length
// is ever allocated up front: memory grows only with bytes that actually
// arrived (a client announcing 80 MiB and sending nothing costs nothing).
// A Content-Length over the limit was refused by checkBodyShape; a chunked
// body is cut at the limit here.
func (s *Server) readBody(ctx *fasthttp.RequestCtx) *model.Error {
	stream := ctx.RequestBodyStream()
	if stream == nil { // buffered (in-memory tests) or no body
		if n := len(ctx.PostBody()); n > s.o.MaxBodyBytes {
			return model.TooLarge("request body is %d bytes, larger than the %d-byte limit (--max-body-bytes)", n, s.o.MaxBodyBytes)
		}
		return nil
	}
	if cl := ctx.Request.Header.ContentLength(); cl > 0 && cl <= min(s.o.MaxBodyBytes, 64<<10) {
		// A small body (a single create): one exact allocation, no bigger
		// up front than the buffer below would grow to. (A bytes.Buffer
		// grown to the length reallocates on ReadFrom, which wants 512
		// bytes of room beyond it.)
		body := make([]byte, cl)
		if _, err := io.ReadFull(stream, body); err != nil {
			return model.Invalid("reading the request body failed: %v", err)
		}
		ctx.Request.SetBodyRaw(body)
		return nil
	}
	var buf bytes.Buffer
	if cl := ctx.Request.Header.ContentLength(); cl > 0 {
		buf.Grow(min(cl, 64<<10))
	}
	n, err := buf.ReadFrom(io.LimitReader(stream, int64(s.o.MaxBodyBytes)+1))
	if err != nil {
		return model.Invalid("reading the request body failed: %v", err)
	}
	if n > int64(s.o.MaxBodyBytes) {
		return model.TooLarge("request body is larger than the %d-byte limit (--max-body-bytes); split a batch into smaller ones or shrink the metas", s.o.MaxBodyBytes)
	}
	ctx.Request.SetBodyRaw(buf.Bytes())
	return nil
}

// originAllowed refuses cross-site browser requests. Browsers send Origin
// with every cross-origin request and every non-GET one; other clients
// usually send none. A request is same-site when its Origin is this very
// server as the browser addressed it (scheme://Host). Without an auth file
// that is trusted only for IP-literal or localhost hosts: a DNS-rebinding
// page (evil.example resolving to 127.0.0.1) is same-origin by this test
// and would otherwise drive an open node on a developer's machine.
func (s *Server) originAllowed(ctx *fasthttp.RequestCtx, origin []byte) bool {
	if _, ok := s.origins[string(origin)]; ok {
		return true
	}
	scheme := "http://"
	if ctx.IsTLS() {
		scheme = "https://"
	}
	host := ctx.Host()
	if len(origin) != len(scheme)+len(host) || !bytes.HasPrefix(origin, []byte(scheme)) || !bytes.EqualFold(origin[len(scheme):], host) {
		return false
	}
	return s.o.Auth != nil || literalOrLocalhost(string(host))
}

func literalOrLocalhost(host string) bool {
	h := host
	if ap, err := netip.ParseAddrPort(h); err == nil {
		return ap.Addr().IsValid()
	}
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[:i], ":") {
		h = h[:i]
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	return strings.EqualFold(h, "localhost")
}

// preflight answers a CORS preflight (OPTIONS with
// Access-Control-Request-Method) from an origin in --allowed-origins; it
// returns false for anything else, which is then routed as usual (405).
func (s *Server) preflight(ctx *fasthttp.RequestCtx) bool {
	if !ctx.IsOptions() || len(ctx.Request.Header.Peek("Access-Control-Request-Method")) == 0 {
		return false
	}
	origin := ctx.Request.Header.Peek("Origin")
	if _, ok := s.origins[string(origin)]; !ok {
		return false
	}
	s.corsHeaders(ctx, origin)
	ctx.Response.Header.Set("Access-Control-Allow-Methods", "GET, HEAD, POST, PUT, DELETE")
	ctx.Response.Header.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, If-Match")
	ctx.Response.Header.Set("Access-Control-Max-Age", "600")
	ctx.SetStatusCode(fasthttp.StatusNoContent)
	return true
}

// corsHeaders lets a page of an allowed origin read the answer.
func (s *Server) corsHeaders(ctx *fasthttp.RequestCtx, origin []byte) {
	ctx.Response.Header.SetBytesV("Access-Control-Allow-Origin", origin)
	ctx.Response.Header.Set("Access-Control-Expose-Headers", "ETag, Location, Retry-After")
	ctx.Response.Header.Add("Vary", "Origin")
}
