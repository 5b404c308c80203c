package httpapi

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/timemachine-db/timemachine/auth"
	"github.com/timemachine-db/timemachine/model"
)

// wantAccess is the contract of API.md §6, written out independently of
// the permissions table: reader every GET and /metrics; writer also job
// and schedule writes in its collections; admin everything. Cluster-wide
// writes need an unscoped admin.
var wantAccess = map[string]struct {
	role auth.Role // 0: open
	coll bool      // about the collection in the path
}{
	"GET /healthz": {0, false},
	"GET /readyz":  {0, false},
	// The console's files carry no data, and a browser loads them before
	// it can send a token (§7); the API description is a GET (§6).
	"GET /":                {0, false},
	"GET /ui":              {0, false},
	"GET /ui/{file}":       {0, false},
	"GET /v1/openapi.json": {auth.RoleReader, false},
	"GET /metrics":         {auth.RoleReader, false},

	"GET /v1/collections":                  {auth.RoleReader, false},
	"PUT /v1/collections/{c}":              {auth.RoleAdmin, true},
	"GET /v1/collections/{c}":              {auth.RoleReader, true},
	"DELETE /v1/collections/{c}":           {auth.RoleAdmin, true},
	"POST /v1/collections/{c}/jobs":        {auth.RoleWriter, true},
	"GET /v1/collections/{c}/jobs":         {auth.RoleReader, true},
	"PUT /v1/collections/{c}/jobs/{id}":    {auth.RoleWriter, true},
	"GET /v1/collections/{c}/jobs/{id}":    {auth.RoleReader, true},
	"DELETE /v1/collections/{c}/jobs/{id}": {auth.RoleWriter, true},
	"POST /v1/collections/{c}/redrive":     {auth.RoleWriter, true},

	"GET /v1/collections/{c}/schedules":         {auth.RoleReader, true},
	"PUT /v1/collections/{c}/schedules/{id}":    {auth.RoleWriter, true},
	"GET /v1/collections/{c}/schedules/{id}":    {auth.RoleReader, true},
	"DELETE /v1/collections/{c}/schedules/{id}": {auth.RoleWriter, true},

	"GET /v1/routes":        {auth.RoleReader, false},
	"PUT /v1/routes/{r}":    {auth.RoleAdmin, false},
	"GET /v1/routes/{r}":    {auth.RoleReader, false},
	"DELETE /v1/routes/{r}": {auth.RoleAdmin, false},

	"GET /v1/cluster":                   {auth.RoleReader, false},
	"POST /v1/admin/rebalance":          {auth.RoleAdmin, false},
	"POST /v1/admin/compact":            {auth.RoleAdmin, false},
	"POST /v1/admin/slots/{n}/transfer": {auth.RoleAdmin, false},
	"POST /v1/admin/nodes/{id}/drain":   {auth.RoleAdmin, false},
	"DELETE /v1/admin/nodes/{id}":       {auth.RoleAdmin, false},
	"GET /v1/admin/gossip/keys":         {auth.RoleAdmin, false},
	"POST /v1/admin/gossip/keys":        {auth.RoleAdmin, false},
}

// A route added without a permission is refused to everybody; this test
// makes sure that never ships: every route of the router has a declared
// permission, the one the contract gives it, and no permission names a
// route that does not exist.
func TestEveryRouteDeclaresAPermission(t *testing.T) {
	seen := map[string]bool{}
	for _, ep := range routes {
		for _, h := range ep.handlers {
			seen[h.name] = true
			got, ok := permissions[h.name]
			if !ok {
				t.Errorf("%s has no entry in permissions (guard.go): declare who may call it", h.name)
				continue
			}
			want, ok := wantAccess[h.name]
			if !ok {
				t.Errorf("%s is not in this test's wantAccess: add what API.md §6 says about it", h.name)
				continue
			}
			if want.role == 0 {
				if got.scope != scopeOpen {
					t.Errorf("%s: should be open", h.name)
				}
				continue
			}
			wantScope := scopeCluster
			if want.coll {
				wantScope = scopeCollection
			}
			if got.role != want.role || got.scope != wantScope {
				t.Errorf("%s: declared %v/%d, the contract says %v/%d", h.name, got.role, got.scope, want.role, wantScope)
			}
		}
	}
	for name := range permissions {
		if !seen[name] {
			t.Errorf("permissions names %s, which is no route", name)
		}
	}
}

// tokens of the role × endpoint table.
var testTokens = []struct {
	token string
	entry auth.Entry
}{
	{"tm_reader", auth.NewEntry("reader", auth.RoleReader, nil, "tm_reader")},
	{"tm_reader_c", auth.NewEntry("reader-c", auth.RoleReader, []string{"c"}, "tm_reader_c")},
	{"tm_writer", auth.NewEntry("writer", auth.RoleWriter, nil, "tm_writer")},
	{"tm_writer_c", auth.NewEntry("writer-c", auth.RoleWriter, []string{"c"}, "tm_writer_c")},
	{"tm_admin", auth.NewEntry("admin", auth.RoleAdmin, nil, "tm_admin")},
	{"tm_admin_c", auth.NewEntry("admin-c", auth.RoleAdmin, []string{"c"}, "tm_admin_c")},
}

func testAuthStore(t *testing.T) *auth.Store {
	t.Helper()
	var f auth.File
	for _, tk := range testTokens {
		f.Tokens = append(f.Tokens, tk.entry)
	}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := auth.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return auth.NewStore(tab)
}

func uriOf(pattern, coll string) string {
	r := strings.NewReplacer("{c}", coll, "{id}", "j1", "{r}", "r1", "{n}", "1")
	return r.Replace(pattern)
}

// TestRoleByEndpoint calls every route of the router with no token, an
// unknown token and every role (unscoped, and scoped to collection "c"),
// on collection "c" and on "other": 401 without a valid token, 403 without
// the right, and otherwise the backend is reached. A refused request never
// reaches the backend.
func TestRoleByEndpoint(t *testing.T) {
	store := testAuthStore(t)
	type caller struct {
		name  string
		token string
		p     *auth.Principal
	}
	callers := []caller{{"no token", "", nil}, {"unknown token", "tm_unknown", nil}}
	for _, tk := range testTokens {
		callers = append(callers, caller{tk.entry.Name, tk.token, store.Table().Lookup([]byte(tk.token))})
	}
	n := 0
	for _, ep := range routes {
		for _, h := range ep.handlers {
			want := wantAccess[h.name]
			for _, coll := range []string{"c", "other"} {
				for _, c := range callers {
					f := &fakeBackend{}
					s := newTestServer(f, func(o *Options) { o.Auth = store })
					var hdr []string
					if c.token != "" {
						hdr = append(hdr, "Authorization", "Bearer "+c.token)
					}
					body := ""
					if h.method == "POST" || h.method == "PUT" {
						body = "{}"
						hdr = append(hdr, "Content-Type", "application/json")
					}
					r := do(s.Handler(), h.method, uriOf(ep.pattern, coll), body, hdr...)
					n++
					var wantStatus int
					switch {
					case want.role == 0:
					case c.p == nil:
						wantStatus = 401
					default:
						scope := ""
						if want.coll {
							scope = coll
						}
						if !c.p.Can(want.role, scope) {
							wantStatus = 403
						}
					}
					what := h.name + " on " + coll + " as " + c.name
					switch wantStatus {
					case 0:
						if r.status == 401 || r.status == 403 {
							t.Errorf("%s: refused %d %s", what, r.status, r.body)
						}
					default:
						if r.status != wantStatus {
							t.Errorf("%s: got %d %s, want %d", what, r.status, r.body, wantStatus)
							continue
						}
						code, msg := r.errorBody(t)
						wantCode := string(model.KindUnauthenticated)
						if wantStatus == 403 {
							wantCode = string(model.KindPermissionDenied)
						}
						if code != wantCode {
							t.Errorf("%s: code %s, want %s", what, code, wantCode)
						}
						if strings.Contains(msg, c.token) && c.token != "" {
							t.Errorf("%s: the message echoes the token: %s", what, msg)
						}
						if wantStatus == 401 && r.header["Www-Authenticate"] == "" {
							t.Errorf("%s: 401 without WWW-Authenticate", what)
						}
						if calls := f.called(); len(calls) != 0 {
							t.Errorf("%s: refused, but the backend was called: %v", what, calls)
						}
					}
				}
			}
		}
	}
	if n < 300 {
		t.Fatalf("only %d combinations ran", n)
	}
}

// Without an auth file the API is open to every route.
func TestOpenWithoutAuthFile(t *testing.T) {
	for _, ep := range routes {
		for _, h := range ep.handlers {
			f := &fakeBackend{}
			body, hdr := "", []string(nil)
			if h.method == "POST" || h.method == "PUT" {
				body, hdr = "{}", []string{"Content-Type", "application/json"}
			}
			if r := do(newTestServer(f).Handler(), h.method, uriOf(ep.pattern, "c"), body, hdr...); r.status == 401 || r.status == 403 {
				t.Errorf("%s: %d %s", h.name, r.status, r.body)
			}
		}
	}
}

func TestScopedTokenListsItsCollectionsOnly(t *testing.T) {
	f := &fakeBackend{colls: []*model.Collection{{Name: "a"}, {Name: "c"}, {Name: "default"}}}
	s := newTestServer(f, func(o *Options) { o.Auth = testAuthStore(t) })
	names := func(token string) []string {
		r := do(s.Handler(), "GET", "/v1/collections", "", "Authorization", "Bearer "+token)
		var out struct {
			Collections []struct{ Name string } `json:"collections"`
		}
		mustJSON(t, r.body, &out)
		var ns []string
		for _, c := range out.Collections {
			ns = append(ns, c.Name)
		}
		return ns
	}
	if got := strings.Join(names("tm_reader_c"), ","); got != "c" {
		t.Fatalf("scoped reader sees %q", got)
	}
	if got := strings.Join(names("tm_reader"), ","); got != "a,c,default" {
		t.Fatalf("reader sees %q", got)
	}
}

// The CSRF case: a page on another site POSTs text/plain with its
// Origin. Neither that nor any other foreign-origin request reaches the
// backend; the server's own origin, and origins in AllowedOrigins, do.
func TestBrowserRequestsRefused(t *testing.T) {
	job := `{"id":"x","delay":"1m","callback_url":"https://example.com/h"}`
	cases := []struct {
		name   string
		method string
		hdr    []string
		body   string
		status int
		auth   bool
	}{
		{"CSRF text/plain with foreign Origin", "POST", []string{"Content-Type", "text/plain", "Origin", "https://evil.example"}, job, 403, false},
		{"foreign Origin with JSON", "POST", []string{"Content-Type", "application/json", "Origin", "https://evil.example"}, job, 403, false},
		{"foreign Origin GET", "GET", []string{"Origin", "https://evil.example"}, "", 403, false},
		{"Origin null", "POST", []string{"Content-Type", "application/json", "Origin", "null"}, job, 403, false},
		{"text/plain without Origin", "POST", []string{"Content-Type", "text/plain"}, job, 400, false},
		{"form without Origin", "POST", []string{"Content-Type", "application/x-www-form-urlencoded"}, job, 400, false},
		{"multipart", "POST", []string{"Content-Type", "multipart/form-data; boundary=x"}, job, 400, false},
		{"same origin loopback", "POST", []string{"Content-Type", "application/json", "Origin", "http://127.0.0.1:8080", "Host", "127.0.0.1:8080"}, job, 201, false},
		{"same origin localhost", "POST", []string{"Content-Type", "application/json", "Origin", "http://localhost:8080", "Host", "localhost:8080"}, job, 201, false},
		{"DNS rebinding on an open node", "POST", []string{"Content-Type", "application/json", "Origin", "http://rebind.example:8080", "Host", "rebind.example:8080"}, job, 403, false},
		{"same origin by name with auth", "POST", []string{"Content-Type", "application/json", "Origin", "http://tm.example:8080", "Host", "tm.example:8080", "Authorization", "Bearer tm_admin"}, job, 201, true},
		{"allowed origin", "POST", []string{"Content-Type", "application/json", "Origin", "https://console.example"}, job, 201, false},
		{"JSON with charset", "POST", []string{"Content-Type", "application/json; charset=utf-8"}, job, 201, false},
		{"+json", "POST", []string{"Content-Type", "application/merge-patch+json"}, job, 201, false},
		{"no Content-Type", "POST", nil, job, 201, false},
		{"healthz with foreign Origin", "GET", []string{"Origin", "https://evil.example"}, "", 200, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeBackend{}
			s := newTestServer(f, func(o *Options) {
				o.AllowedOrigins = []string{"https://console.example/"}
				if c.auth {
					o.Auth = testAuthStore(t)
				}
			})
			uri := jobsURI
			if strings.Contains(c.name, "healthz") {
				uri = "/healthz"
			}
			r := do(s.Handler(), c.method, uri, c.body, c.hdr...)
			if r.status != c.status {
				t.Fatalf("%d %s, want %d", r.status, r.body, c.status)
			}
			if c.status >= 400 {
				r.errorBody(t)
				if len(f.called()) != 0 {
					t.Fatalf("refused but the backend was called: %v", f.called())
				}
			}
			if c.name == "allowed origin" && r.header["Access-Control-Allow-Origin"] != "https://console.example" {
				t.Fatalf("no CORS header for an allowed origin: %v", r.header)
			}
		})
	}
}

func TestPreflight(t *testing.T) {
	s := newTestServer(&fakeBackend{}, func(o *Options) { o.AllowedOrigins = []string{"https://console.example"} })
	r := do(s.Handler(), "OPTIONS", jobsURI, "", "Origin", "https://console.example", "Access-Control-Request-Method", "POST")
	if r.status != 204 || r.header["Access-Control-Allow-Origin"] != "https://console.example" || !strings.Contains(r.header["Access-Control-Allow-Headers"], "Authorization") {
		t.Fatalf("%d %v", r.status, r.header)
	}
	r = do(s.Handler(), "OPTIONS", jobsURI, "", "Origin", "https://evil.example", "Access-Control-Request-Method", "POST")
	if r.status != 405 || r.header["Access-Control-Allow-Origin"] != "" {
		t.Fatalf("foreign preflight: %d %v", r.status, r.header)
	}
}

func TestBodyLimitInMemory(t *testing.T) {
	f := &fakeBackend{}
	s := newTestServer(f, func(o *Options) { o.MaxBodyBytes = 100 })
	r := do(s.Handler(), "POST", jobsURI, `{"meta":"`+strings.Repeat("x", 200)+`"}`, "Content-Type", "application/json")
	if code, _ := r.errorBody(t); r.status != 413 || code != CodeTooLarge {
		t.Fatalf("%d %s", r.status, code)
	}
	if len(f.called()) != 0 {
		t.Fatal("backend called")
	}
}

func TestCheckTargetAtCreate(t *testing.T) {
	f := &fakeBackend{}
	s := newTestServer(f, func(o *Options) {
		o.CheckTarget = func(field, u string) *model.Error {
			if strings.Contains(u, "169.254.169.254") {
				return model.Invalid("%s: refused by the callback policy", field)
			}
			return nil
		}
	})
	r := do(s.Handler(), "POST", jobsURI, `{"delay":"1m","callback_url":"http://169.254.169.254/latest"}`, "Content-Type", "application/json")
	if _, msg := r.errorBody(t); r.status != 400 || !strings.Contains(msg, "callback policy") {
		t.Fatalf("%d %s", r.status, msg)
	}
	r = do(s.Handler(), "PUT", "/v1/routes/r1", `{"webhook_url":"http://169.254.169.254/latest"}`, "Content-Type", "application/json")
	if _, msg := r.errorBody(t); r.status != 400 || !strings.Contains(msg, "webhook_url") {
		t.Fatalf("%d %s", r.status, msg)
	}
	if len(f.called()) != 0 {
		t.Fatalf("backend called: %v", f.called())
	}
}

// isJSONType's fast path (the exact "application/json") answers as the
// media-type parse does.
func TestIsJSONType(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/json":                true,
		"application/json; charset=utf-8": true,
		"APPLICATION/JSON":                true,
		"application/merge-patch+json":    true,
		"application/jsonx":               false,
		"application/json5":               false,
		"text/plain":                      false,
		"":                                false,
		"application/json;":               true,
	} {
		if got := isJSONType([]byte(ct)); got != want {
			t.Errorf("isJSONType(%q) = %v, want %v", ct, got, want)
		}
	}
}

// A node that does not serve (taken out of the cluster) answers every
// request 503 unavailable with the reason, but /healthz, /readyz, /metrics
// and the API description; nothing reaches the backend.
func TestNotServingRefusesEveryRequest(t *testing.T) {
	for _, ep := range routes {
		for _, h := range ep.handlers {
			f := &fakeBackend{}
			s := newTestServer(f, func(o *Options) {
				o.Serving = func() error { return errors.New("this node was removed from the cluster") }
			})
			body, hdr := "", []string(nil)
			if h.method == "POST" || h.method == "PUT" {
				body, hdr = "{}", []string{"Content-Type", "application/json"}
			}
			r := do(s.Handler(), h.method, uriOf(ep.pattern, "c"), body, hdr...)
			served := h.perm.scope == scopeOpen || h.name == "GET /metrics" || h.name == "GET /v1/openapi.json"
			switch {
			case served && r.status == 503 && strings.Contains(string(r.body), "removed"):
				t.Errorf("%s: refused: %d %s", h.name, r.status, r.body)
			case !served && (r.status != 503 || !strings.Contains(string(r.body), CodeUnavailable) || !strings.Contains(string(r.body), "removed from the cluster")):
				t.Errorf("%s: %d %s", h.name, r.status, r.body)
			case !served && len(f.calls) > 0:
				t.Errorf("%s: the backend was called", h.name)
			}
		}
	}
}
