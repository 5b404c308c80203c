package httpapi

import (
	"bytes"

	"github.com/valyala/fasthttp"

	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/rpc/console"
	"github.com/timemachine-db/timemachine/rpc/openapi"
)

// The web console (/ui/) and the API description (/v1/openapi.json): static
// files embedded in the binary. The console's are readable without a token,
// the description with a reader's (guard.go).

// consoleCSP allows the console's own files and nothing else: no inline
// script or style, no framing, no foreign connections.
const consoleCSP = "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// consoleHeaders are the security headers of every /ui/ answer.
func consoleHeaders(ctx *fasthttp.RequestCtx) {
	h := &ctx.Response.Header
	h.Set("Content-Security-Policy", consoleCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
}

// root is GET /: the console.
func (s *Server) root(r *request) {
	consoleHeaders(r.ctx)
	r.ctx.Response.Header.Set("Location", "/ui/")
	r.ctx.SetStatusCode(fasthttp.StatusFound)
}

// consoleIndex is GET /ui/ (and /ui, redirected to /ui/ so that the page's
// relative links resolve under /ui/).
func (s *Server) consoleIndex(r *request) {
	if !bytes.HasSuffix(r.ctx.Path(), []byte("/")) {
		consoleHeaders(r.ctx)
		r.ctx.Response.Header.Set("Location", "/ui/")
		r.ctx.SetStatusCode(fasthttp.StatusMovedPermanently)
		return
	}
	s.serveConsole(r, console.Index)
}

// consoleFile is GET /ui/{file}.
func (s *Server) consoleFile(r *request) { s.serveConsole(r, r.params[0]) }

func (s *Server) serveConsole(r *request, name string) {
	consoleHeaders(r.ctx)
	body, ct, ok := console.File(name)
	if !ok {
		writeError(r.ctx, model.NotFound("no such console file: %q", clip(name)))
		return
	}
	tag := console.ETag(name)
	r.ctx.Response.Header.Set("ETag", tag)
	if inm := r.ctx.Request.Header.Peek("If-None-Match"); len(inm) > 0 && string(inm) == tag {
		r.ctx.SetStatusCode(fasthttp.StatusNotModified)
		return
	}
	r.ctx.SetStatusCode(fasthttp.StatusOK)
	r.ctx.SetContentType(ct)
	r.ctx.SetBody(body)
}

// openAPI is GET /v1/openapi.json.
func (s *Server) openAPI(r *request) {
	r.ctx.Response.Header.Set("X-Content-Type-Options", "nosniff")
	r.ctx.Response.Header.Set("Cache-Control", "no-cache")
	writeJSON(r.ctx, fasthttp.StatusOK, openapi.JSON())
}
