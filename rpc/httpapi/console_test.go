package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/rpc/console"
	"github.com/timemachine-db/timemachine/rpc/openapi"
)

var paramSeg = regexp.MustCompile(`\{[^}/]+\}`)

// routeKey is a route as both sides can spell it: parameters unnamed
// ("{}"), no trailing slash (the router tolerates one: /ui and /ui/ are
// one endpoint).
func routeKey(method, path string) string {
	p := paramSeg.ReplaceAllString(path, "{}")
	if len(p) > 1 {
		p = strings.TrimSuffix(p, "/")
	}
	return strings.ToUpper(method) + " " + p
}

var httpMethods = map[string]bool{"get": true, "put": true, "post": true, "delete": true, "patch": true, "head": true, "options": true, "trace": true}

// TestOpenAPIMatchesRouter: every route of the router is described in the
// OpenAPI document, and the document describes nothing the router does not
// serve. HEAD is implied by GET on both sides.
func TestOpenAPIMatchesRouter(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openapi.JSON(), &doc); err != nil {
		t.Fatalf("rpc/openapi/openapi.json: %v", err)
	}
	documented := map[string]string{} // key → as written in the document
	for path, item := range doc.Paths {
		for method := range item {
			if httpMethods[method] {
				documented[routeKey(method, path)] = strings.ToUpper(method) + " " + path
			}
		}
	}
	served := map[string]string{}
	for _, ep := range routes {
		for _, h := range ep.handlers {
			served[routeKey(h.method, ep.pattern)] = h.name
		}
	}
	var missing, extra []string
	for k, name := range served {
		if _, ok := documented[k]; !ok {
			missing = append(missing, name)
		}
	}
	for k, name := range documented {
		if _, ok := served[k]; !ok {
			extra = append(extra, name)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	planned := plannedRoutes(t)
	for _, m := range missing {
		hint := "add its path item under \"paths\""
		method, path, _ := strings.Cut(m, " ")
		if p, ok := planned[routeKey(method, path)]; ok {
			hint = "its description is ready in rpc/openapi/planned.json (" + p + "): move it into openapi.json"
		}
		t.Errorf("%s is served (rpc/httpapi/router.go) but not described in rpc/openapi/openapi.json: %s", m, hint)
	}
	for _, e := range extra {
		t.Errorf("%s is described in rpc/openapi/openapi.json but the router does not serve it (rpc/httpapi/router.go): remove it or add the route", e)
	}
	if len(served) < 25 || len(documented) < 25 {
		t.Fatalf("only %d routes served and %d documented: the comparison is broken", len(served), len(documented))
	}
}

// plannedRoutes reads rpc/openapi/planned.json: API.md endpoints described
// ahead of the server.
func plannedRoutes(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "openapi", "planned.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("rpc/openapi/planned.json: %v", err)
	}
	out := map[string]string{}
	for path, item := range doc.Paths {
		for method := range item {
			if httpMethods[method] {
				out[routeKey(method, path)] = strings.ToUpper(method) + " " + path
			}
		}
	}
	return out
}

func TestRouteKey(t *testing.T) {
	for _, tc := range [][3]string{
		{"get", "/v1/collections/{c}/jobs/{id}", "GET /v1/collections/{}/jobs/{}"},
		{"GET", "/ui/", "GET /ui"},
		{"GET", "/ui", "GET /ui"},
		{"GET", "/", "GET /"},
		{"delete", "/v1/admin/nodes/{node}", "DELETE /v1/admin/nodes/{}"},
	} {
		if got := routeKey(tc[0], tc[1]); got != tc[2] {
			t.Errorf("routeKey(%s, %s) = %s, want %s", tc[0], tc[1], got, tc[2])
		}
	}
}

// The console is served without a token even with an auth file, under its
// security headers; / and /ui lead to /ui/.
func TestConsoleServing(t *testing.T) {
	s := newTestServer(&fakeBackend{}, func(o *Options) { o.Auth = testAuthStore(t) })
	h := s.Handler()
	checkHeaders := func(what string, r resp) {
		t.Helper()
		csp := r.header["Content-Security-Policy"]
		for _, want := range []string{"default-src 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: Content-Security-Policy %q lacks %s", what, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("%s: Content-Security-Policy %q allows inline code", what, csp)
		}
		if r.header["X-Content-Type-Options"] != "nosniff" {
			t.Errorf("%s: X-Content-Type-Options = %q", what, r.header["X-Content-Type-Options"])
		}
	}
	for _, tc := range []struct{ path, location string }{{"/", "/ui/"}, {"/ui", "/ui/"}} {
		r := do(h, "GET", tc.path, "")
		if r.status/100 != 3 || r.header["Location"] != tc.location {
			t.Errorf("GET %s: %d Location %q, want a redirect to %s", tc.path, r.status, r.header["Location"], tc.location)
		}
		checkHeaders("GET "+tc.path, r)
	}
	r := do(h, "GET", "/ui/", "")
	if r.status != 200 || !strings.HasPrefix(r.header["Content-Type"], "text/html") || !bytes.Contains(r.body, []byte("<html")) {
		t.Fatalf("GET /ui/: %d %s %.100s", r.status, r.header["Content-Type"], r.body)
	}
	checkHeaders("GET /ui/", r)
	names := console.Names()
	if len(names) < 3 {
		t.Fatalf("console files: %v", names)
	}
	for _, name := range names {
		r := do(h, "GET", "/ui/"+name, "")
		want, _, _ := console.File(name)
		if r.status != 200 || !bytes.Equal(r.body, want) {
			t.Errorf("GET /ui/%s: %d, %d bytes", name, r.status, len(r.body))
		}
		if ct := r.header["Content-Type"]; ct == "" || ct == "application/octet-stream" {
			t.Errorf("GET /ui/%s: Content-Type %q", name, ct)
		}
		checkHeaders("GET /ui/"+name, r)
		// Revalidation: the same tag is 304 without a body; another is 200.
		tag := r.header["Etag"]
		if tag == "" {
			t.Errorf("GET /ui/%s: no ETag", name)
			continue
		}
		if r := do(h, "GET", "/ui/"+name, "", "If-None-Match", tag); r.status != 304 || len(r.body) != 0 {
			t.Errorf("GET /ui/%s If-None-Match its tag: %d, %d bytes", name, r.status, len(r.body))
		}
		if r := do(h, "GET", "/ui/"+name, "", "If-None-Match", `"other"`); r.status != 200 {
			t.Errorf("GET /ui/%s If-None-Match another tag: %d", name, r.status)
		}
	}
	for _, bad := range []string{"/ui/nope.js", "/ui/..%2fgo.mod", "/ui/.hidden"} {
		r := do(h, "GET", bad, "")
		if r.status != 404 {
			t.Errorf("GET %s: %d, want 404", bad, r.status)
		}
		r.errorBody(t)
	}
	// No inline script or style in the page: the CSP would block it.
	page, _, _ := console.File(console.Index)
	for _, re := range []*regexp.Regexp{
		regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`),
		regexp.MustCompile(`\son[a-z]+\s*=`),
		regexp.MustCompile(`<style`),
		regexp.MustCompile(`\sstyle\s*=`),
		regexp.MustCompile(`https?://`),
	} {
		if m := re.Find(page); m != nil {
			t.Errorf("index.html has %q: inline code, inline style or an external address", m)
		}
	}
	for _, tag := range regexp.MustCompile(`<script[^>]*>`).FindAll(page, -1) {
		if !bytes.Contains(tag, []byte(" src=")) {
			t.Errorf("index.html has an inline script: %s", tag)
		}
	}
	// The API itself still wants a token.
	if r := do(h, "GET", "/v1/cluster", ""); r.status != 401 {
		t.Errorf("GET /v1/cluster without a token: %d, want 401", r.status)
	}
}

// With an auth file the API description is a GET like the others
// (API.md §6: only /healthz and /readyz are open): any reader, even one
// limited to some collections, reads it; no token is a 401.
func TestOpenAPIServed(t *testing.T) {
	s := newTestServer(&fakeBackend{}, func(o *Options) { o.Auth = testAuthStore(t) })
	for _, token := range []string{"tm_reader", "tm_reader_c", "tm_admin"} {
		r := do(s.Handler(), "GET", "/v1/openapi.json", "", "Authorization", "Bearer "+token)
		if r.status != 200 || !strings.HasPrefix(r.header["Content-Type"], "application/json") || !bytes.Equal(r.body, openapi.JSON()) {
			t.Fatalf("GET /v1/openapi.json with %s: %d %s", token, r.status, r.header["Content-Type"])
		}
	}
	if r := do(s.Handler(), "GET", "/v1/openapi.json", ""); r.status != 401 || !strings.Contains(string(r.body), `"unauthenticated"`) {
		t.Fatalf("GET /v1/openapi.json without a token: %d %s, want 401 unauthenticated", r.status, r.body)
	}
	open := newTestServer(&fakeBackend{})
	if r := do(open.Handler(), "GET", "/v1/openapi.json", ""); r.status != 200 || !bytes.Equal(r.body, openapi.JSON()) {
		t.Fatalf("GET /v1/openapi.json without an auth file: %d", r.status)
	}
}

// What the server really answers validates against the document: against
// the response the document gives the operation for the status the server
// answered (an undocumented status fails), and against a named component
// schema where the row gives one. The document's examples are checked in
// rpc/openapi; this keeps the schemas and status codes honest about the
// rendering.
func TestAnswersMatchTheSchemas(t *testing.T) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(openapi.JSON()))
	if err != nil {
		t.Fatal(err)
	}
	doc := v.(map[string]any)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("openapi.json", v); err != nil {
		t.Fatal(err)
	}
	coll := &model.Collection{Name: "c", Retry: model.RetryPolicy{MaxAttempts: 3, InitialIntervalMs: 1000, Multiplier: 2, MaxIntervalMs: 60000, MaxAgeMs: 3600000},
		CallbackTimeoutMs: 5000, RetentionMs: 3600000, SigningSecret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", CreatedAt: 1, UpdatedAt: 2}
	failed := &model.Job{Collection: "c", ID: "j1", Version: 3, Status: model.StatusFailed, TriggerTime: 1000, DueTime: 1000,
		CallbackURL: "http://127.0.0.1:9/x", Meta: []byte(`{"a":1}`), Attempts: 2, LastError: "refused", CreatedAt: 1, UpdatedAt: 2, FinishedAt: 2}
	f := &fakeBackend{
		job: failed, listJobs: []*model.Job{failed}, coll: coll, colls: []*model.Collection{coll},
		route:  &model.Route{Name: "r1", WebhookURL: "http://127.0.0.1:9/h", Headers: map[string]string{"Authorization": "Bearer x", "X-A": "b"}, TimeoutMs: 1000, Pipeline: true, CreatedAt: 1, UpdatedAt: 1},
		routes: []*model.Route{{Name: "r1", WebhookURL: "http://127.0.0.1:9/h"}},
		// Every slot state, every node status, a move under way.
		cluster: &model.ClusterInfo{SlotCount: 4, ReplicationFactor: 2, Self: "n1", MetaLeader: "n1",
			Nodes: []model.NodeInfo{
				{ID: "n1", HTTPAddr: "127.0.0.1:8080", BindAddr: "127.0.0.1:7000", Status: "alive", SlotsLed: 2, Replicas: 4},
				{ID: "n2", HTTPAddr: "127.0.0.1:8081", Status: "draining", SlotsLed: 0, Replicas: 3},
				{ID: "n3", HTTPAddr: "127.0.0.1:8082", Status: "unreachable", SlotsLed: 0, Replicas: 0},
				{ID: "n4", HTTPAddr: "127.0.0.1:8083", Status: "alive", SlotsLed: 1, Replicas: 1},
				{ID: "n5", HTTPAddr: "127.0.0.1:8084", Status: "failed"},
				{ID: "n6", HTTPAddr: "127.0.0.1:8085", Status: "left"},
			},
			Slots: []model.SlotInfo{
				{Slot: 0, Leader: "n1", Replicas: []string{"n1", "n2"}, State: "healthy", Pending: 3},
				{Slot: 1, Leader: "n4", Replicas: []string{"n1", "n4"}, State: "degraded", PreferredLeader: "n4"},
				{Slot: 2, Leader: "n1", Replicas: []string{"n1", "n2"}, Nonvoters: []string{"n4"}, State: "moving", Target: []string{"n1", "n4"}},
				{Slot: 3, Replicas: []string{"n1", "n2"}, State: "no_leader", Target: []string{"n1", "n4"}},
			},
			Moves: &model.MoveProgress{Pending: 2, Active: 1, Done: 1, Total: 3, StartedAt: 1000},
		},
		moves: []model.Move{{Slot: 1, From: "n1", To: "n2", Kind: "replica"}, {Slot: 1, From: "n1", To: "n2", Kind: "leader"},
			{Slot: 3, From: "n4", Kind: "leader"}},
		compactRes: []model.CompactResult{{Node: "n1", OK: true, TookMs: 3}, {Node: "n2", Error: "unreachable"}},
	}
	failing := func(err error) *fakeBackend { return &fakeBackend{err: err} }
	jsonType := []string{"Content-Type", "application/json"}
	for _, tc := range []struct {
		method, uri, body, schema string
		status                    int
		b                         *fakeBackend // nil: f
	}{
		{"GET", "/v1/collections/c/jobs/j1", "", "Job", 200, nil},
		{"GET", "/v1/collections/c/jobs?status=failed", "", "JobList", 200, nil},
		{"POST", "/v1/collections/c/jobs", `{"id":"n1","delay":"1m","callback_url":"http://127.0.0.1:9/x","meta":{"k":[1]}}`, "Job", 201, nil},
		{"POST", "/v1/collections/c/jobs", `[{"id":"n2","callback_url":"http://127.0.0.1:9/x"},{"id":"bad id"}]`, "BatchResult", 200, nil},
		{"GET", "/v1/collections/c", "", "Collection", 200, nil},
		{"GET", "/v1/collections", "", "CollectionList", 200, nil},
		{"GET", "/v1/routes/r1", "", "Route", 200, nil},
		{"GET", "/v1/routes", "", "RouteList", 200, nil},
		{"GET", "/v1/cluster", "", "Cluster", 200, nil},
		{"GET", "/v1/cluster", "", "Error", 503, failing(model.Unavailable(time.Second, "the meta group has no leader"))},
		{"POST", "/v1/admin/rebalance?dry_run=true", "", "Moves", 200, nil},
		{"POST", "/v1/admin/rebalance", "", "Moves", 200, &fakeBackend{}},
		{"POST", "/v1/admin/rebalance?dry_run=maybe", "", "Error", 400, nil},
		{"POST", "/v1/admin/rebalance", "", "Error", 409, failing(model.Conflict("the placement changed while the rebalance was planned; run it again"))},
		{"POST", "/v1/admin/compact", "", "CompactResults", 200, nil},
		{"POST", "/v1/admin/slots/5/transfer", `{"to":"n2"}`, "TransferResult", 200, nil},
		{"POST", "/v1/admin/slots/5/transfer", `{"to":"n3"}`, "Error", 400, failing(model.Invalid("node %q holds no replica of slot 5", "n3"))},
		{"POST", "/v1/admin/slots/40/transfer", `{"to":"n2"}`, "Error", 404, failing(model.NotFound("slot 40 does not exist"))},
		{"POST", "/v1/admin/slots/5/transfer", `{"to":"n2"}`, "Error", 409, failing(model.Conflict("slot 5's replicas changed meanwhile; try again"))},
		{"POST", "/v1/admin/nodes/n2/drain", "", "DrainResult", 200, nil},
		{"POST", "/v1/admin/nodes/n9/drain", "", "Error", 404, failing(model.NotFound("node %q is not a member of this cluster", "n9"))},
		{"DELETE", "/v1/admin/nodes/n2", "", "", 204, nil},
		{"DELETE", "/v1/admin/nodes/n2?force=true", "", "", 204, nil},
		{"DELETE", "/v1/admin/nodes/n2?force=perhaps", "", "Error", 400, nil},
		{"DELETE", "/v1/admin/nodes/n2", "", "Error", 409, failing(model.Conflict("node %q still holds 3 replicas; drain it first", "n2"))},
		{"DELETE", "/v1/admin/nodes/n9", "", "Error", 404, failing(model.NotFound("node %q was already removed from this cluster", "n9"))},
		{"GET", "/v1/admin/gossip/keys", "", "GossipKeyring", 200, nil},
		{"GET", "/healthz", "", "Status", 200, nil},
		{"GET", "/v1/nope", "", "Error", 404, nil},
		{"POST", "/v1/collections/c/jobs", `{"trigger_time":"abc"}`, "Error", 400, nil},
	} {
		var hdr []string
		if tc.body != "" {
			hdr = jsonType
		}
		b := f
		if tc.b != nil {
			b = tc.b
		}
		r := do(newTestServer(b).Handler(), tc.method, tc.uri, tc.body, hdr...)
		what := fmt.Sprintf("%s %s", tc.method, tc.uri)
		if r.status != tc.status {
			t.Errorf("%s: %d %s, want %d", what, r.status, r.body, tc.status)
			continue
		}
		var pointers []string
		if tc.schema != "" {
			pointers = append(pointers, "#/components/schemas/"+tc.schema)
		}
		if op, ok := documentedResponse(doc, tc.method, tc.uri, r.status); !ok {
			t.Errorf("%s answers %d, which the document does not list for %s", what, r.status, op)
			continue
		} else if op != "" {
			if _, ok := resolve(doc, op)["content"]; ok {
				pointers = append(pointers, op+"/content/application~1json/schema")
			} else if len(r.body) != 0 {
				t.Errorf("%s answers %d with a body %q; the document says none", what, r.status, r.body)
			}
		}
		if len(pointers) == 0 {
			if len(r.body) != 0 {
				t.Errorf("%s answers %d with a body %q, want none", what, r.status, r.body)
			}
			continue
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(r.body))
		if err != nil {
			t.Fatalf("%s: %v: %s", what, err, r.body)
		}
		for _, p := range pointers {
			sch, err := c.Compile("openapi.json" + p)
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if err := sch.Validate(v); err != nil {
				t.Errorf("%s answers %s, which does not match %s:\n%v", what, r.body, p, err)
			}
		}
	}
}

// documentedResponse finds the operation of the document that serves
// method uri and returns the JSON pointer of its response for status
// (following a $ref to components/responses). ok is false when the
// operation does not list the status; op is "" when no path matches (an
// unknown route).
func documentedResponse(doc map[string]any, method, uri string, status int) (op string, ok bool) {
	path, _, _ := strings.Cut(uri, "?")
	paths, _ := doc["paths"].(map[string]any)
	for tmpl, item := range paths {
		// Parameters become a placeholder before quoting, then a segment.
		quoted := regexp.QuoteMeta(paramSeg.ReplaceAllString(tmpl, "\x00"))
		if !regexp.MustCompile("^" + strings.ReplaceAll(quoted, "\x00", "[^/]+") + "$").MatchString(path) {
			continue
		}
		o, _ := item.(map[string]any)[strings.ToLower(method)].(map[string]any)
		if o == nil {
			continue
		}
		at := "#/paths/" + escapePointer(tmpl) + "/" + strings.ToLower(method) + "/responses/" + fmt.Sprint(status)
		r, ok := o["responses"].(map[string]any)[fmt.Sprint(status)].(map[string]any)
		if !ok {
			return strings.ToUpper(method) + " " + tmpl, false
		}
		if ref, ok := r["$ref"].(string); ok {
			at = ref
		}
		return at, true
	}
	return "", true
}

// resolve returns the object at a "#/…" JSON pointer of doc (nil if none).
func resolve(doc map[string]any, pointer string) map[string]any {
	var cur any = doc
	for _, seg := range strings.Split(strings.TrimPrefix(pointer, "#/"), "/") {
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[seg]
	}
	m, _ := cur.(map[string]any)
	return m
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
