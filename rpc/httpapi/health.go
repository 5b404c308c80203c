package httpapi

import (
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/timemachine-db/timemachine/model"
)

// The operational endpoints: /healthz, /readyz, /metrics.

// healthz is GET /healthz: 200 while the process runs, whatever the cluster.
func (s *Server) healthz(r *request) {
	writeJSON(r.ctx, fasthttp.StatusOK, []byte(`{"status":"ok"}`))
}

// readyz is GET /readyz: 200 when the backend is ready (in the cluster,
// every slot led), else 503 with the reason, so load balancers can route
// around a node that cannot serve.
func (s *Server) readyz(r *request) {
	err := s.b.Ready()
	if err == nil {
		writeJSON(r.ctx, fasthttp.StatusOK, []byte(`{"status":"ready"}`))
		return
	}
	msg, ra := err.Error(), time.Second
	var e *model.Error
	if errors.As(err, &e) {
		msg = e.Message
		if e.RetryAfter > 0 {
			ra = e.RetryAfter
		}
	}
	writeError(r.ctx, model.Unavailable(ra, "%s", msg))
}

// metrics is GET /metrics, served by Options.MetricsHandler.
func (s *Server) metrics(r *request) {
	if s.o.MetricsHandler == nil {
		writeError(r.ctx, model.NotFound("metrics are not enabled on this node"))
		return
	}
	s.o.MetricsHandler(r.ctx)
}
