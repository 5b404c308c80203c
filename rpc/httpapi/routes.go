package httpapi

import (
	"maps"

	"github.com/valyala/fasthttp"

	"github.com/timemachine-db/timemachine/model"
)

// The route endpoints: /v1/routes[/{r}].

var routeFields = newFieldSet(
	[]string{"webhook_url", "headers", "signing_secret", "timeout", "rate_limit", "max_in_flight", "batch", "pipeline"},
	[]string{"name", "signing_secret_set", "created_at", "updated_at"},
)

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
	if e := parseDelivery(o, &rt); e != nil {
		return rt, e
	}
	return rt, nil
}

var (
	rateLimitFields = newFieldSet([]string{"per_second", "burst"}, nil)
	batchFields     = newFieldSet([]string{"max_jobs", "max_wait"}, nil)
)

// parseDelivery reads a route's delivery control: rate_limit,
// max_in_flight, batch and pipeline (docs/api.md#route-delivery-control).
// null is the same as leaving a field out.
func parseDelivery(o object, rt *model.Route) *model.Error {
	if raw, ok := o.field("rate_limit"); ok && !isNull(raw) {
		ro, e := decodeObject("rate_limit", raw)
		if e != nil {
			return e
		}
		if e := rateLimitFields.check("rate_limit.", ro); e != nil {
			return e
		}
		ps, ok := ro.field("per_second")
		if !ok {
			return model.Invalid("rate_limit.per_second is missing: say how many deliveries per second the route takes, cluster-wide")
		}
		if rt.RateLimit.PerSecond, e = number("rate_limit.per_second", ps, model.MinRatePerSecond, model.MaxRatePerSecond); e != nil {
			return e
		}
		if b, ok := ro.field("burst"); ok && !isNull(b) {
			if rt.RateLimit.Burst, e = integer("rate_limit.burst", b, 1, model.MaxRateBurst); e != nil {
				return e
			}
		}
	}
	if raw, ok := o.field("max_in_flight"); ok && !isNull(raw) {
		var e *model.Error
		if rt.MaxInFlight, e = integer("max_in_flight", raw, 1, model.MaxRouteInFlight); e != nil {
			return e
		}
	}
	if raw, ok := o.field("batch"); ok && !isNull(raw) {
		bo, e := decodeObject("batch", raw)
		if e != nil {
			return e
		}
		if e := batchFields.check("batch.", bo); e != nil {
			return e
		}
		rt.Batch.MaxJobs = model.DefaultBatchJobs
		if n, ok := bo.field("max_jobs"); ok && !isNull(n) {
			if rt.Batch.MaxJobs, e = integer("batch.max_jobs", n, 1, model.MaxBatchJobs); e != nil {
				return e
			}
		}
		if w, ok := bo.field("max_wait"); ok && !isNull(w) {
			if rt.Batch.MaxWaitMs, e = parseDurationMs("batch.max_wait", w, 0, model.MaxBatchWait); e != nil {
				return e
			}
		}
	}
	if raw, ok := o.field("pipeline"); ok {
		switch string(raw) {
		case "true":
			rt.Pipeline = true
		case "false":
		default:
			return model.Invalid("pipeline: must be true or false, got %s %s", jsonKind(raw), shown(raw))
		}
	}
	if rt.Pipeline && rt.Batch.Set() {
		return model.Invalid("pipeline and batch do not combine: a batched route already sends one request for many jobs; leave one of them out")
	}
	return nil
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
	if e == nil && s.o.CheckTarget != nil {
		e = s.o.CheckTarget("webhook_url", rt.WebhookURL)
	}
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
		a.TimeoutMs == b.TimeoutMs && maps.Equal(a.Headers, b.Headers) &&
		a.RateLimit == b.RateLimit && a.MaxInFlight == b.MaxInFlight && a.Batch == b.Batch &&
		a.Pipeline == b.Pipeline
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
	if e := noQuery(r, "the route list"); e != nil {
		writeError(r.ctx, e)
		return
	}
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
