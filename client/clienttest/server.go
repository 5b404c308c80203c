package clienttest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Server is the fake. Its methods are safe for concurrent use.
type Server struct {
	srv *httptest.Server

	mu          sync.Mutex
	now         func() time.Time
	seq         int
	jobs        map[string]map[string]*job // collection → id → job
	schedules   map[string]map[string]*schedule
	collections map[string]*collection
	routes      map[string]*route
	tokens      map[string]token
	cluster     json.RawMessage
	failures    []failure
	requests    int
}

type token struct {
	role        string
	collections []string
}

type failure struct {
	status     int
	retryAfter time.Duration
}

// NewServer starts a fake on a loopback port.
func NewServer() *Server {
	s := &Server{
		now:         time.Now,
		jobs:        map[string]map[string]*job{},
		schedules:   map[string]map[string]*schedule{},
		collections: map[string]*collection{},
		routes:      map[string]*route{},
	}
	s.collections["default"] = &collection{Name: "default"}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.SetCluster(nil)
	return s
}

// URL is the fake's base URL ("http://127.0.0.1:port").
func (s *Server) URL() string { return s.srv.URL }

// Addr is the fake's host:port.
func (s *Server) Addr() string { return strings.TrimPrefix(s.srv.URL, "http://") }

// Close stops the fake.
func (s *Server) Close() { s.srv.Close() }

// Requests counts the requests the fake has answered.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// SetNow replaces the fake's clock (created_at, delay, every-schedules).
func (s *Server) SetNow(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// SetToken turns authentication on (docs/api.md#security) and adds a token with a role
// ("reader", "writer" or "admin") limited to collections (none: all).
func (s *Server) SetToken(tok, role string, collections ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tokens == nil {
		s.tokens = map[string]token{}
	}
	s.tokens[tok] = token{role: role, collections: collections}
}

// SetCluster sets the answer of GET /v1/cluster (any value that encodes to
// the contract's shape); nil is one healthy node "n1" leading 12 slots.
func (s *Server) SetCluster(v any) {
	if v == nil {
		slots := make([]map[string]any, 12)
		for i := range slots {
			slots[i] = map[string]any{"slot": i, "leader": "n1", "replicas": []string{"n1"}, "state": "healthy"}
		}
		v = map[string]any{"slot_count": 12, "replication_factor": 1,
			"nodes": []map[string]any{{"id": "n1", "http_addr": s.Addr(), "status": "alive", "slots_led": 12, "replicas": 12}},
			"slots": slots}
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("clienttest: SetCluster: %v", err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cluster = b
}

// FailNext makes the next n requests answer status (503 unavailable or 429
// overloaded) with Retry-After (none when 0), changing nothing.
func (s *Server) FailNext(n, status int, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.failures = append(s.failures, failure{status, retryAfter})
	}
}

// Fail marks a scheduled job failed (a dead letter) with lastError, as if
// its retries ran out. It reports whether the job exists.
func (s *Server) Fail(coll, id, lastError string) bool {
	return s.finish(coll, id, "failed", lastError)
}

// Succeed marks a scheduled job succeeded, as if its callback got a 2xx.
func (s *Server) Succeed(coll, id string) bool { return s.finish(coll, id, "succeeded", "") }

func (s *Server) finish(coll, id, status, lastError string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[coll][id]
	if j == nil {
		return false
	}
	now := s.now().UnixMilli()
	j.Status, j.LastError, j.FinishedAt, j.UpdatedAt = status, lastError, now, now
	j.Attempts = max(j.Attempts, 1)
	j.Version++
	return true
}

// Occur creates the occurrence of schedule id at unix ms at, as the server
// would when it fires: a job "{id}@{at}" with the schedule's target.
func (s *Server) Occur(coll, id string, at int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := s.schedules[coll][id]
	if sc == nil {
		return false
	}
	now := s.now().UnixMilli()
	jid := id + "@" + strconv.FormatInt(at, 10)
	s.jobsOf(coll)[jid] = &job{
		ID: jid, Collection: coll, TriggerTime: at, CallbackURL: sc.CallbackURL, Route: sc.Route,
		Meta: sc.Meta, RetryPolicy: sc.RetryPolicy, CallbackTimeout: sc.CallbackTimeout,
		Status: "scheduled", Version: 1, CreatedAt: now, UpdatedAt: now, Schedule: id,
	}
	sc.LastFireAt = at
	return true
}

func (s *Server) jobsOf(coll string) map[string]*job {
	m := s.jobs[coll]
	if m == nil {
		m = map[string]*job{}
		s.jobs[coll] = m
	}
	return m
}

// apiError is the contract's error.
type apiError struct {
	status     int
	code       string
	msg        string
	retryAfter time.Duration
	job        *job
}

func errf(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

func invalid(format string, args ...any) *apiError {
	return errf(400, "invalid_argument", format, args...)
}

func notFound(format string, args ...any) *apiError { return errf(404, "not_found", format, args...) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = 500, []byte(`{"error":{"code":"internal","message":"encoding the answer"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(int64((e.retryAfter+time.Second-1)/time.Second), 10))
	}
	body := map[string]any{"error": map[string]string{"code": e.code, "message": e.msg}}
	if e.job != nil {
		body["job"] = e.job
	}
	writeJSON(w, e.status, body)
}

// request is one request being served.
type request struct {
	w      http.ResponseWriter
	r      *http.Request
	body   []byte
	params []string
}

// maxBody is the fake's --max-body-bytes.
const maxBody = 16 << 20

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	if len(s.failures) > 0 && r.URL.Path != "/healthz" && r.URL.Path != "/readyz" {
		f := s.failures[0]
		s.failures = s.failures[1:]
		code := "unavailable"
		if f.status == http.StatusTooManyRequests {
			code = "overloaded"
		}
		writeError(w, &apiError{status: f.status, code: code, msg: "injected by clienttest.FailNext", retryAfter: f.retryAfter})
		return
	}
	var body []byte
	if r.Body != nil {
		b := make([]byte, 0, 512)
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Body.Read(buf)
			b = append(b, buf[:n]...)
			if len(b) > maxBody {
				writeError(w, errf(413, "too_large", "the request body is over %d bytes", maxBody))
				return
			}
			if err != nil {
				break
			}
		}
		body = b
	}
	ep, params, e := match(r.Method, r.URL.EscapedPath())
	if e != nil {
		writeError(w, e)
		return
	}
	if e := s.authorize(r, ep, params); e != nil {
		writeError(w, e)
		return
	}
	req := &request{w: w, r: r, body: body, params: params}
	if e := ep.fn(s, req); e != nil {
		writeError(w, e)
	}
}

// endpoint is one method and path pattern of the API.
type endpoint struct {
	method  string
	pattern string
	// access is what a token needs: "open", "read", "write" (job and
	// schedule writes in the collection of params[0]) or "admin".
	access string
	fn     func(*Server, *request) *apiError
}

// endpoints is the API; set in init because openapi lists it.
var endpoints []endpoint

func init() {
	endpoints = []endpoint{
		{"GET", "/healthz", "open", (*Server).healthz},
		{"GET", "/readyz", "open", (*Server).healthz},
		{"GET", "/metrics", "read", (*Server).metrics},
		{"GET", "/v1/openapi.json", "open", (*Server).openapi},
		{"GET", "/v1/collections", "read", (*Server).listCollections},
		{"PUT", "/v1/collections/{c}", "admin", (*Server).putCollection},
		{"GET", "/v1/collections/{c}", "read", (*Server).getCollection},
		{"DELETE", "/v1/collections/{c}", "admin", (*Server).deleteCollection},
		{"POST", "/v1/collections/{c}/jobs", "write", (*Server).createJobs},
		{"GET", "/v1/collections/{c}/jobs", "read", (*Server).listJobs},
		{"PUT", "/v1/collections/{c}/jobs/{id}", "write", (*Server).putJob},
		{"GET", "/v1/collections/{c}/jobs/{id}", "read", (*Server).getJob},
		{"DELETE", "/v1/collections/{c}/jobs/{id}", "write", (*Server).deleteJob},
		{"POST", "/v1/collections/{c}/redrive", "write", (*Server).redrive},
		{"GET", "/v1/collections/{c}/schedules", "read", (*Server).listSchedules},
		{"PUT", "/v1/collections/{c}/schedules/{id}", "write", (*Server).putSchedule},
		{"GET", "/v1/collections/{c}/schedules/{id}", "read", (*Server).getSchedule},
		{"DELETE", "/v1/collections/{c}/schedules/{id}", "write", (*Server).deleteSchedule},
		{"GET", "/v1/routes", "read", (*Server).listRoutes},
		{"PUT", "/v1/routes/{r}", "admin", (*Server).putRoute},
		{"GET", "/v1/routes/{r}", "read", (*Server).getRoute},
		{"DELETE", "/v1/routes/{r}", "admin", (*Server).deleteRoute},
		{"GET", "/v1/cluster", "read", (*Server).getCluster},
		{"POST", "/v1/admin/rebalance", "admin", (*Server).rebalance},
		{"POST", "/v1/admin/compact", "admin", (*Server).compact},
		{"POST", "/v1/admin/slots/{n}/transfer", "admin", (*Server).transfer},
		{"POST", "/v1/admin/nodes/{id}/drain", "admin", (*Server).drain},
		{"DELETE", "/v1/admin/nodes/{id}", "admin", (*Server).removeNode},
	}
}

// match finds the endpoint of a request; path parameters are unescaped.
func match(method, path string) (*endpoint, []string, *apiError) {
	if len(path) > 1 {
		path = strings.TrimSuffix(path, "/")
	}
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	known := false
	for i := range endpoints {
		ep := &endpoints[i]
		ps := strings.Split(strings.TrimPrefix(ep.pattern, "/"), "/")
		if len(ps) != len(segs) {
			continue
		}
		var params []string
		ok := true
		for k, p := range ps {
			if strings.HasPrefix(p, "{") {
				v, err := url.PathUnescape(segs[k])
				if err != nil || v == "" {
					ok = false
					break
				}
				params = append(params, v)
			} else if p != segs[k] {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		known = true
		if ep.method == method || (ep.method == "GET" && method == "HEAD") {
			return ep, params, nil
		}
	}
	if known {
		return nil, nil, errf(405, "invalid_argument", "method %s is not allowed on %s", method, path)
	}
	return nil, nil, notFound("no endpoint %s %s (see docs/api.md)", method, path)
}

func (s *Server) authorize(r *http.Request, ep *endpoint, params []string) *apiError {
	if s.tokens == nil || ep.access == "open" {
		return nil
	}
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	t, known := s.tokens[strings.TrimSpace(tok)]
	if !ok || !known {
		return errf(401, "unauthenticated", "send Authorization: Bearer <token> with a known token")
	}
	inScope := func() bool {
		if len(t.collections) == 0 || len(params) == 0 || !strings.HasPrefix(ep.pattern, "/v1/collections/") {
			return true
		}
		for _, c := range t.collections {
			if c == params[0] {
				return true
			}
		}
		return false
	}
	allowed := false
	switch t.role {
	case "admin":
		allowed = true
	case "writer":
		allowed = (ep.access == "read" || ep.access == "write") && inScope()
	case "reader":
		allowed = ep.access == "read" && inScope()
	}
	if !allowed {
		return errf(403, "permission_denied", "token role %s may not %s %s", t.role, r.Method, r.URL.Path)
	}
	return nil
}

func (s *Server) healthz(r *request) *apiError {
	writeJSON(r.w, 200, map[string]string{"status": "ok"})
	return nil
}

func (s *Server) metrics(r *request) *apiError {
	r.w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	_, _ = fmt.Fprintf(r.w, "# HELP timemachine_fake_requests_total Requests the fake answered.\n# TYPE timemachine_fake_requests_total counter\ntimemachine_fake_requests_total %d\n", s.requests)
	return nil
}

func (s *Server) openapi(r *request) *apiError {
	paths := map[string]map[string]any{}
	for _, ep := range endpoints {
		if paths[ep.pattern] == nil {
			paths[ep.pattern] = map[string]any{}
		}
		paths[ep.pattern][strings.ToLower(ep.method)] = map[string]any{"responses": map[string]any{"default": map[string]string{"description": "see docs/api.md"}}}
	}
	writeJSON(r.w, 200, map[string]any{"openapi": "3.1.0", "info": map[string]string{"title": "timemachine (clienttest fake)", "version": "0"}, "paths": paths})
	return nil
}

// cursor encodes a list position: the (trigger_time or name, id) of the
// last item returned.
func encodeCursor(key string) string { return base64.RawURLEncoding.EncodeToString([]byte(key)) }

func decodeCursor(c string) (string, *apiError) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", invalid("cursor: not a next_cursor of this server; pass it unchanged")
	}
	return string(b), nil
}

// limit reads ?limit= (1–1000, default 100).
func limit(r *http.Request) (int, *apiError) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return 100, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1000 {
		return 0, invalid("limit: want 1 to 1000, got %q", v)
	}
	return n, nil
}

// page cuts a sorted list of keys after cursor.
func page(keys []string, cursor string, n int) (out []string, next string) {
	i := sort.SearchStrings(keys, cursor)
	if cursor != "" && i < len(keys) && keys[i] == cursor {
		i++
	}
	end := min(i+n, len(keys))
	if end < len(keys) {
		next = encodeCursor(keys[end-1])
	}
	return keys[i:end], next
}

func (s *Server) getCluster(r *request) *apiError {
	r.w.Header().Set("Content-Type", "application/json")
	_, _ = r.w.Write(s.cluster)
	return nil
}

func (s *Server) rebalance(r *request) *apiError {
	dry := r.r.URL.Query().Get("dry_run")
	writeJSON(r.w, 200, map[string]any{"moves": []any{}, "dry_run": dry == "true" || dry == "1"})
	return nil
}

func (s *Server) compact(r *request) *apiError {
	writeJSON(r.w, 200, map[string]any{"results": []map[string]any{{"node": "n1", "ok": true, "took_ms": 1, "slots_snapshotted": 12}}})
	return nil
}

func (s *Server) transfer(r *request) *apiError {
	n, err := strconv.Atoi(r.params[0])
	if err != nil || n < 0 {
		return invalid("slot: must be a non-negative integer, got %q", r.params[0])
	}
	var in struct {
		To string `json:"to"`
	}
	if err := json.Unmarshal(r.body, &in); err != nil || in.To == "" {
		return invalid(`to is missing: send {"to":"<node id>"}`)
	}
	if !strings.Contains(string(s.cluster), `"id":"`+in.To+`"`) {
		return notFound("node %q is not in the cluster", in.To)
	}
	writeJSON(r.w, 200, map[string]any{"slot": n, "from": "", "to": in.To, "leader": in.To, "preferred_leader": in.To})
	return nil
}

func (s *Server) drain(r *request) *apiError {
	if !strings.Contains(string(s.cluster), `"id":"`+r.params[0]+`"`) {
		return notFound("node %q is not in the cluster", r.params[0])
	}
	writeJSON(r.w, 200, map[string]any{"node": r.params[0], "status": "draining", "replicas": 0, "slots_led": 0})
	return nil
}

func (s *Server) removeNode(r *request) *apiError {
	var ci struct {
		Nodes []map[string]any `json:"nodes"`
	}
	_ = json.Unmarshal(s.cluster, &ci)
	for i, n := range ci.Nodes {
		if n["id"] != r.params[0] {
			continue
		}
		if reps, _ := n["replicas"].(float64); reps > 0 && r.r.URL.Query().Get("force") != "true" {
			return errf(409, "conflict", "node %q still holds %v replicas; drain it first, or force=true for a dead node", r.params[0], reps)
		}
		ci.Nodes = append(ci.Nodes[:i], ci.Nodes[i+1:]...)
		var all map[string]any
		_ = json.Unmarshal(s.cluster, &all)
		all["nodes"] = ci.Nodes
		s.cluster, _ = json.Marshal(all)
		r.w.WriteHeader(204)
		return nil
	}
	return notFound("node %q is not in the cluster", r.params[0])
}
