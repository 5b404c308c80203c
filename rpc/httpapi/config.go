package httpapi

import (
	"bytes"
	"maps"

	"github.com/timemachine-db/timemachine/model"
	"github.com/valyala/fasthttp"
)

var collectionFields = newFieldSet(
	[]string{"retry_policy", "callback_timeout", "retention", "signing_secret"},
	[]string{"name", "signing_secret_set", "status", "created_at", "updated_at"},
)

var routeFields = newFieldSet(
	[]string{"webhook_url", "headers", "signing_secret", "timeout"},
	[]string{"name", "signing_secret_set", "created_at", "updated_at"},
)

// checkBodyName refuses a "name" member that contradicts the path.
func checkBodyName(o object, name string) *model.Error {
	raw, ok := o.field("name")
	if !ok {
		return nil
	}
	n, e := str("name", raw)
	if e != nil {
		return e
	}
	if n != name {
		return model.Invalid("name: the body says %q but the path says %q; the path decides, so leave it out or make them match", clip(n), name)
	}
	return nil
}

// secretField reads an optional signing_secret ("" or null: none).
func secretField(o object) (string, *model.Error) {
	raw, ok := o.field("signing_secret")
	if !ok {
		return "", nil
	}
	sec, e := str("signing_secret", raw)
	if e != nil || sec == "" {
		return "", e
	}
	return sec, checkSecret("signing_secret", sec)
}

// parseCollection validates a PUT /v1/collections/{c} body. An empty body
// is an empty object: a collection with every default.
func parseCollection(name string, b []byte) (model.Collection, *model.Error) {
	c := model.Collection{Name: name}
	if len(bytes.TrimSpace(b)) == 0 {
		return c, nil
	}
	o, e := decodeObject("request body", b)
	if e != nil {
		return c, e
	}
	if e := collectionFields.check("", o); e != nil {
		return c, e
	}
	if e := checkBodyName(o, name); e != nil {
		return c, e
	}
	if raw, ok := o.field("retry_policy"); ok {
		if c.Retry, e = retryPolicy("retry_policy", raw); e != nil {
			return c, e
		}
	}
	if raw, ok := o.field("callback_timeout"); ok {
		if c.CallbackTimeoutMs, e = parseDurationMs("callback_timeout", raw, minCallbackTimeout, maxCallbackTimeout); e != nil {
			return c, e
		}
	}
	if raw, ok := o.field("retention"); ok {
		if c.RetentionMs, e = parseDurationMs("retention", raw, minRetention, maxRetention); e != nil {
			return c, e
		}
	}
	if c.SigningSecret, e = secretField(o); e != nil {
		return c, e
	}
	return c, nil
}

// parseRoute validates a PUT /v1/routes/{r} body.
func parseRoute(name string, b []byte) (model.Route, *model.Error) {
	rt := model.Route{Name: name}
	o, e := decodeObject("request body", b)
	if e != nil {
		return rt, e
	}
	if e := routeFields.check("", o); e != nil {
		return rt, e
	}
	if e := checkBodyName(o, name); e != nil {
		return rt, e
	}
	raw, ok := o.field("webhook_url")
	if !ok {
		return rt, model.Invalid("webhook_url is missing: a route needs the absolute http or https URL its jobs are delivered to")
	}
	if rt.WebhookURL, e = str("webhook_url", raw); e != nil {
		return rt, e
	}
	if e := checkURL("webhook_url", rt.WebhookURL); e != nil {
		return rt, e
	}
	if raw, ok := o.field("headers"); ok {
		if rt.Headers, e = stringMap("headers", raw); e != nil {
			return rt, e
		}
		if e := checkHeaders(rt.Headers); e != nil {
			return rt, e
		}
		if len(rt.Headers) == 0 {
			rt.Headers = nil
		}
	}
	if raw, ok := o.field("timeout"); ok {
		if rt.TimeoutMs, e = parseDurationMs("timeout", raw, minCallbackTimeout, maxCallbackTimeout); e != nil {
			return rt, e
		}
	}
	if rt.SigningSecret, e = secretField(o); e != nil {
		return rt, e
	}
	return rt, nil
}

func createdStatus(created bool) int {
	if created {
		return fasthttp.StatusCreated
	}
	return fasthttp.StatusOK
}

// putCollection is PUT /v1/collections/{c}.
func (s *Server) putCollection(r *request) {
	name := r.params[0]
	if e := checkName("collection name", name); e != nil {
		writeError(r.ctx, e)
		return
	}
	b, e := body(r.ctx)
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	c, e := parseCollection(name, b)
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	ctx, cancel := s.backendCtx()
	defer cancel()
	created, err := s.b.PutCollection(ctx, c)
	if err != nil {
		s.fail(r, err)
		return
	}
	// Answer with the stored collection (it has the timestamps) when this
	// node's view already shows the write; otherwise with what was written.
	now := s.o.Clock().UnixMilli()
	shown := c
	shown.CreatedAt, shown.UpdatedAt = now, now
	if got, err := s.b.GetCollection(ctx, name); err == nil && got != nil {
		if sameCollection(got, &c) {
			shown = *got
		} else if !created {
			shown.CreatedAt = got.CreatedAt
		}
	}
	writeJSON(r.ctx, createdStatus(created), appendCollection(make([]byte, 0, 256), &shown))
}

func sameCollection(a, b *model.Collection) bool {
	return a.Retry == b.Retry && a.CallbackTimeoutMs == b.CallbackTimeoutMs &&
		a.RetentionMs == b.RetentionMs && a.SigningSecret == b.SigningSecret && !a.Deleting
}

// getCollection is GET /v1/collections/{c}.
func (s *Server) getCollection(r *request) {
	name := r.params[0]
	if e := checkName("collection name", name); e != nil {
		writeError(r.ctx, e)
		return
	}
	ctx, cancel := s.backendCtx()
	c, err := s.b.GetCollection(ctx, name)
	cancel()
	if err != nil {
		s.fail(r, err)
		return
	}
	if c == nil {
		writeError(r.ctx, model.NotFound("collection %q does not exist; create it with PUT /v1/collections/%s", name, name))
		return
	}
	writeJSON(r.ctx, fasthttp.StatusOK, appendCollection(make([]byte, 0, 256), c))
}

// listCollections is GET /v1/collections.
func (s *Server) listCollections(r *request) {
	ctx, cancel := s.backendCtx()
	cs, err := s.b.ListCollections(ctx)
	cancel()
	if err != nil {
		s.fail(r, err)
		return
	}
	out := append(make([]byte, 0, 64+len(cs)*256), `{"collections":[`...)
	first := true
	for _, c := range cs {
		if c == nil {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = appendCollection(out, c)
	}
	writeJSON(r.ctx, fasthttp.StatusOK, append(out, "]}"...))
}

// deleteCollection is DELETE /v1/collections/{c}.
func (s *Server) deleteCollection(r *request) {
	name := r.params[0]
	if e := checkName("collection name", name); e != nil {
		writeError(r.ctx, e)
		return
	}
	ctx, cancel := s.backendCtx()
	err := s.b.DeleteCollection(ctx, name)
	cancel()
	if err != nil {
		s.fail(r, err)
		return
	}
	writeEmpty(r.ctx)
}

// putRoute is PUT /v1/routes/{r}.
func (s *Server) putRoute(r *request) {
	name := r.params[0]
	if e := checkName("route name", name); e != nil {
		writeError(r.ctx, e)
		return
	}
	b, e := body(r.ctx)
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	rt, e := parseRoute(name, b)
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	ctx, cancel := s.backendCtx()
	defer cancel()
	created, err := s.b.PutRoute(ctx, rt)
	if err != nil {
		s.fail(r, err)
		return
	}
	now := s.o.Clock().UnixMilli()
	shown := rt
	shown.CreatedAt, shown.UpdatedAt = now, now
	if got, err := s.b.GetRoute(ctx, name); err == nil && got != nil {
		if sameRoute(got, &rt) {
			shown = *got
		} else if !created {
			shown.CreatedAt = got.CreatedAt
		}
	}
	writeJSON(r.ctx, createdStatus(created), appendRoute(make([]byte, 0, 256), &shown))
}

func sameRoute(a, b *model.Route) bool {
	return a.WebhookURL == b.WebhookURL && a.SigningSecret == b.SigningSecret &&
		a.TimeoutMs == b.TimeoutMs && maps.Equal(a.Headers, b.Headers)
}

// getRoute is GET /v1/routes/{r}.
func (s *Server) getRoute(r *request) {
	name := r.params[0]
	if e := checkName("route name", name); e != nil {
		writeError(r.ctx, e)
		return
	}
	ctx, cancel := s.backendCtx()
	rt, err := s.b.GetRoute(ctx, name)
	cancel()
	if err != nil {
		s.fail(r, err)
		return
	}
	if rt == nil {
		writeError(r.ctx, model.NotFound("route %q does not exist; create it with PUT /v1/routes/%s", name, name))
		return
	}
	writeJSON(r.ctx, fasthttp.StatusOK, appendRoute(make([]byte, 0, 256), rt))
}

// listRoutes is GET /v1/routes.
func (s *Server) listRoutes(r *request) {
	ctx, cancel := s.backendCtx()
	rs, err := s.b.ListRoutes(ctx)
	cancel()
	if err != nil {
		s.fail(r, err)
		return
	}
	out := append(make([]byte, 0, 64+len(rs)*256), `{"routes":[`...)
	first := true
	for _, rt := range rs {
		if rt == nil {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = appendRoute(out, rt)
	}
	writeJSON(r.ctx, fasthttp.StatusOK, append(out, "]}"...))
}

// deleteRoute is DELETE /v1/routes/{r}.
func (s *Server) deleteRoute(r *request) {
	name := r.params[0]
	if e := checkName("route name", name); e != nil {
		writeError(r.ctx, e)
		return
	}
	ctx, cancel := s.backendCtx()
	err := s.b.DeleteRoute(ctx, name)
	cancel()
	if err != nil {
		s.fail(r, err)
		return
	}
	writeEmpty(r.ctx)
}
