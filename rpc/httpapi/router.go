package httpapi

import (
	"bytes"
	"strings"

	"github.com/valyala/fasthttp"
)

// handler is one method of one endpoint.
type handler struct {
	method string
	name   string // "POST /v1/collections/{c}/jobs", for Observe and logs
	fn     func(*Server, *request)
	perm   access // who may call it (guard.go)
}

// endpoint is one path pattern and its methods. A segment in braces
// matches any one path segment and becomes a parameter, in order.
type endpoint struct {
	pattern  string
	segs     []string
	handlers []handler
	allow    string // the Allow header of a 405
}

// routes is the whole API. Order does not matter: no two patterns overlap.
// Every route is described in the OpenAPI document (rpc/openapi), which
// TestOpenAPIMatchesRouter keeps true in both directions.
var routes = buildRoutes([]struct {
	method, pattern string
	fn              func(*Server, *request)
}{
	{"GET", "/", (*Server).root},
	{"GET", "/ui", (*Server).consoleIndex},
	{"GET", "/ui/{file}", (*Server).consoleFile},
	{"GET", "/v1/openapi.json", (*Server).openAPI},

	{"GET", "/healthz", (*Server).healthz},
	{"GET", "/readyz", (*Server).readyz},
	{"GET", "/metrics", (*Server).metrics},

	{"GET", "/v1/collections", (*Server).listCollections},
	{"PUT", "/v1/collections/{c}", (*Server).putCollection},
	{"GET", "/v1/collections/{c}", (*Server).getCollection},
	{"DELETE", "/v1/collections/{c}", (*Server).deleteCollection},

	{"POST", "/v1/collections/{c}/jobs", (*Server).createJobs},
	{"GET", "/v1/collections/{c}/jobs", (*Server).listJobs},
	{"PUT", "/v1/collections/{c}/jobs/{id}", (*Server).upsertJob},
	{"GET", "/v1/collections/{c}/jobs/{id}", (*Server).getJob},
	{"DELETE", "/v1/collections/{c}/jobs/{id}", (*Server).deleteJob},
	{"POST", "/v1/collections/{c}/redrive", (*Server).redrive},

	{"GET", "/v1/collections/{c}/schedules", (*Server).listSchedules},
	{"PUT", "/v1/collections/{c}/schedules/{id}", (*Server).putSchedule},
	{"GET", "/v1/collections/{c}/schedules/{id}", (*Server).getSchedule},
	{"DELETE", "/v1/collections/{c}/schedules/{id}", (*Server).deleteSchedule},

	{"GET", "/v1/routes", (*Server).listRoutes},
	{"PUT", "/v1/routes/{r}", (*Server).putRoute},
	{"GET", "/v1/routes/{r}", (*Server).getRoute},
	{"DELETE", "/v1/routes/{r}", (*Server).deleteRoute},

	{"GET", "/v1/cluster", (*Server).cluster},
	{"POST", "/v1/admin/rebalance", (*Server).rebalance},
	{"POST", "/v1/admin/compact", (*Server).compact},
	{"POST", "/v1/admin/slots/{n}/transfer", (*Server).transferSlot},
	{"POST", "/v1/admin/nodes/{id}/drain", (*Server).drainNode},
	{"DELETE", "/v1/admin/nodes/{id}", (*Server).removeNode},
	{"GET", "/v1/admin/gossip/keys", (*Server).gossipKeys},
	{"POST", "/v1/admin/gossip/keys", (*Server).changeGossipKeys},
})

func buildRoutes(defs []struct {
	method, pattern string
	fn              func(*Server, *request)
}) []*endpoint {
	var eps []*endpoint
	byPattern := map[string]*endpoint{}
	for _, d := range defs {
		ep := byPattern[d.pattern]
		if ep == nil {
			ep = &endpoint{pattern: d.pattern, segs: strings.Split(strings.TrimPrefix(d.pattern, "/"), "/")}
			byPattern[d.pattern] = ep
			eps = append(eps, ep)
		}
		name := d.method + " " + d.pattern
		ep.handlers = append(ep.handlers, handler{method: d.method, name: name, fn: d.fn, perm: permissionOf(name)})
	}
	for _, ep := range eps {
		var allow []string
		for _, h := range ep.handlers {
			allow = append(allow, h.method)
			if h.method == "GET" {
				allow = append(allow, "HEAD")
			}
		}
		ep.allow = strings.Join(allow, ", ")
	}
	return eps
}

const maxSegs = 8

// match finds the endpoint of the request's path and the handler of its
// method. It returns a nil endpoint for an unknown path and a nil handler
// for a known path with a wrong method. Repeated and trailing slashes are
// tolerated.
//
// It splits the path as the client sent it (fasthttp's PathOriginal) and
// percent-decodes each segment on its own, never the path as a whole:
// fasthttp's Path() is decoded and then normalised, which resolves dot
// segments — a DELETE of job ".." (or "%2E%2E", or "a%2F..%2F..") would
// address the collection itself and delete it with all its jobs. Here a
// segment is only ever a segment: ".." or "a/b" reaches the handler as
// the id it names, which refuses it (400), and no request can climb out
// of the endpoint its path spells. The parameters are copies.
func match(ctx *fasthttp.RequestCtx) (*endpoint, *handler, [2]string) {
	var params [2]string
	path := ctx.URI().PathOriginal()
	if len(path) == 0 || path[0] != '/' {
		return nil, nil, params
	}
	// Split at '/', skipping empty segments: "//v1/cluster" (a base URL
	// with a trailing slash joined to a path) and a trailing slash reach
	// the same endpoint, as they did when fasthttp's normalised path was
	// routed. The root "/" is one empty segment, as its pattern is.
	var segs [maxSegs][]byte
	n := 0
	for {
		for len(path) > 0 && path[0] == '/' {
			path = path[1:]
		}
		if len(path) == 0 {
			break
		}
		if n == maxSegs {
			return nil, nil, params
		}
		seg := path
		if i := bytes.IndexByte(path, '/'); i >= 0 {
			seg, path = path[:i], path[i:]
		} else {
			path = nil
		}
		segs[n] = seg
		n++
	}
	if n == 0 {
		n = 1 // "/"
	}
	method := ctx.Method()
	for _, ep := range routes {
		if len(ep.segs) != n || !segsMatch(ep.segs, segs[:n]) {
			continue
		}
		p := 0
		for i, s := range ep.segs {
			if isParam(s) {
				params[p] = unescapeSeg(segs[i]) // copies
				p++
			}
		}
		for i := range ep.handlers {
			h := &ep.handlers[i]
			if string(method) == h.method || (h.method == "GET" && string(method) == "HEAD") {
				return ep, h, params
			}
		}
		return ep, nil, params
	}
	return nil, nil, params
}

// unescapeSeg percent-decodes one path segment. A '%' not followed by two
// hex digits is kept as it is (as fasthttp does; no id or name may hold
// one, so the handler refuses it by name). '+' stays '+': it is a plain
// character in a path, and ids may contain it.
func unescapeSeg(b []byte) string {
	if bytes.IndexByte(b, '%') < 0 {
		return string(b)
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] == '%' && i+2 < len(b) && isHex(b[i+1]) && isHex(b[i+2]) {
			out = append(out, unhex(b[i+1])<<4|unhex(b[i+2]))
			i += 2
			continue
		}
		out = append(out, b[i])
	}
	return string(out)
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

func segsMatch(pattern []string, segs [][]byte) bool {
	for i, s := range pattern {
		if isParam(s) {
			continue
		}
		if s != string(segs[i]) {
			return false
		}
	}
	return true
}

// isParam reports whether a pattern segment is a parameter ("{c}"). The
// root pattern "/" has one empty segment.
func isParam(seg string) bool { return len(seg) > 0 && seg[0] == '{' }
