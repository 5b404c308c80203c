package httpapi

import (
	"bytes"

	"github.com/valyala/fasthttp"

	"github.com/timemachine-db/timemachine/model"
)

// The collection endpoints: /v1/collections[/{c}].

var collectionFields = newFieldSet(
	[]string{"retry_policy", "callback_timeout", "retention", "signing_secret"},
	[]string{"name", "signing_secret_set", "status", "created_at", "updated_at"},
)

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
	if e := noQuery(r, "the collection list"); e != nil {
		writeError(r.ctx, e)
		return
	}
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
		if c == nil || !r.visible(c.Name) { // a scoped token sees its collections only
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

// noQuery refuses any query parameter on a list that takes none: the
// job and schedule lists refuse unknown parameters, and a client sending
// ?limit=1 here would otherwise read the whole list as its first page.
func noQuery(r *request, what string) *model.Error {
	for k := range r.ctx.QueryArgs().All() {
		return model.Invalid("unknown query parameter %q: %s takes none (it is never paged)", clip(string(k)), what)
	}
	return nil
}
