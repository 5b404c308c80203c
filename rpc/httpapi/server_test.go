package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/internal/testutil"
	"github.com/timemachine-db/timemachine/model"
	"github.com/valyala/fasthttp"
)

func TestJobRendering(t *testing.T) {
	j := &model.Job{
		Collection: "orders", ID: "j1", Version: 3, Status: model.StatusScheduled,
		TriggerTime: 1767225600000, DueTime: 1767225660000, Attempts: 1, CreatedAt: 10, UpdatedAt: 20,
		CallbackURL: "https://example.com/hook?a=1&b=<2>", Meta: []byte(`{"any":"json"}`),
		Retry: model.RetryPolicy{MaxAttempts: 7}, LastError: "HTTP 503 \"busy\"\n",
	}
	coll := &model.Collection{Name: "orders", Retry: model.RetryPolicy{InitialIntervalMs: 250, MaxAttempts: 2}, CallbackTimeoutMs: 3000}
	got := string(appendJob(nil, j, coll, nil))
	want := `{"id":"j1","collection":"orders","trigger_time":1767225600000,"callback_url":"https://example.com/hook?a=1&b=<2>","meta":{"any":"json"},` +
		`"retry_policy":{"max_attempts":7,"initial_interval":"250ms","multiplier":2,"max_interval":"10m","max_age":"24h"},"callback_timeout":"3s",` +
		`"status":"scheduled","attempts":1,"last_error":"HTTP 503 \"busy\"\n","version":3,"created_at":10,"updated_at":20,"finished_at":0,"next_attempt_at":1767225660000}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	// Finished, routed, no meta, no collection config: defaults; no next_attempt_at.
	j2 := &model.Job{Collection: "c", ID: "j2", Status: model.StatusFailed, TriggerTime: 1, DueTime: 1, Route: "billing", FinishedAt: 30, CallbackTimeoutMs: 1500}
	got = string(appendJob(nil, j2, nil, &model.Route{Name: "billing", TimeoutMs: 500}))
	want = `{"id":"j2","collection":"c","trigger_time":1,"route":"billing","meta":{},"retry_policy":{"max_attempts":5,"initial_interval":"1s","multiplier":2,"max_interval":"10m","max_age":"24h"},` +
		`"callback_timeout":"1.5s","status":"failed","attempts":0,"last_error":"","version":0,"created_at":0,"updated_at":0,"finished_at":30}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	// Without a timeout of its own, a routed job takes its route's (as
	// the slot leader delivers it), before its collection's.
	j2.CallbackTimeoutMs = 0
	got = string(appendJob(nil, j2, &model.Collection{CallbackTimeoutMs: 3000}, &model.Route{Name: "billing", TimeoutMs: 500}))
	if !strings.Contains(got, `"callback_timeout":"500ms"`) {
		t.Fatalf("routed job without its own timeout: %s", got)
	}
	got = string(appendJob(nil, j2, &model.Collection{CallbackTimeoutMs: 3000}, &model.Route{Name: "billing"}))
	if !strings.Contains(got, `"callback_timeout":"3s"`) {
		t.Fatalf("routed job, route without a timeout: %s", got)
	}

	// Through the handler, the collection comes from LookupCollection, once.
	lookups := 0
	f := &fakeBackend{job: j}
	s := newTestServer(f, func(o *Options) {
		o.LookupCollection = func(name string) *model.Collection {
			lookups++
			if name == "orders" {
				return coll
			}
			return nil
		}
	})
	r := do(s.Handler(), "GET", "/v1/collections/orders/jobs/j1", "")
	if !strings.Contains(string(r.body), `"initial_interval":"250ms"`) || lookups != 1 {
		t.Fatalf("%d lookups: %s", lookups, r.body)
	}
	f.listJobs = []*model.Job{j, j, j}
	do(s.Handler(), "GET", "/v1/collections/orders/jobs", "")
	if lookups != 2 {
		t.Fatalf("%d lookups for a page", lookups)
	}
	s.SetCollectionLookup(nil)
	r = do(s.Handler(), "GET", "/v1/collections/orders/jobs/j1", "")
	if !strings.Contains(string(r.body), `"initial_interval":"1s"`) {
		t.Fatalf("%s", r.body)
	}
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", "quote\" back\\slash", "ctl\x00\x01\x1f\t\r\n", "utf8 é ✓ 𝄞", "bad \xff\xfe utf8", "ls\u2028ps\u2029", "<&>"} {
		got := appendString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%q → %s: %v", s, got, err)
		}
		want, _ := json.Marshal(s)
		var wantBack string
		_ = json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Fatalf("%q → %q, encoding/json gives %q", s, back, wantBack)
		}
	}
}

func TestRouting(t *testing.T) {
	f := &fakeBackend{}
	h := newTestServer(f).Handler()
	for _, uri := range []string{"/nope", "/ui/a/b", "/v1", "/v1/jobs", "/v2/collections", "/v1/collections/c/jobs/j/extra", "/v1/admin/nodes/n1/drain/now", "/a/b/c/d/e/f/g/h/i/j"} {
		r := do(h, "GET", uri, "")
		if r.status != 404 {
			t.Fatalf("%s: %d", uri, r.status)
		}
		if code, _ := r.errorBody(t); code != CodeNotFound {
			t.Fatalf("%s: %s", uri, code)
		}
	}
	for _, tc := range []struct{ method, uri, allow string }{
		{"POST", "/v1/collections/c", "PUT, GET, HEAD, DELETE"},
		{"PATCH", "/v1/collections/c/jobs/j", "PUT, GET, HEAD, DELETE"},
		{"DELETE", "/v1/collections/c/jobs", "POST, GET, HEAD"},
		{"GET", "/v1/admin/rebalance", "POST"},
		{"POST", "/healthz", "GET, HEAD"},
		{"GET", "/v1/admin/nodes/n1", "DELETE"},
	} {
		r := do(h, tc.method, tc.uri, "")
		if r.status != 405 || r.header["Allow"] != tc.allow {
			t.Fatalf("%s %s: %d Allow %q", tc.method, tc.uri, r.status, r.header["Allow"])
		}
		code, msg := r.errorBody(t)
		if code != CodeInvalidArgument || !strings.Contains(msg, tc.allow) {
			t.Fatalf("%s %q", code, msg)
		}
	}
	if len(f.called()) != 0 {
		t.Fatalf("backend called: %v", f.called())
	}
	// A trailing slash is tolerated; HEAD is GET without a body.
	if r := do(h, "GET", "/v1/collections/", ""); r.status != 200 {
		t.Fatalf("%d", r.status)
	}
	if r := do(h, "HEAD", "/healthz", ""); r.status != 200 {
		t.Fatalf("%d", r.status)
	}
}

func TestHealthAndReady(t *testing.T) {
	f := &fakeBackend{}
	h := newTestServer(f).Handler()
	if r := do(h, "GET", "/healthz", ""); r.status != 200 || string(r.body) != `{"status":"ok"}` {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if r := do(h, "GET", "/readyz", ""); r.status != 200 || string(r.body) != `{"status":"ready"}` {
		t.Fatalf("%d %s", r.status, r.body)
	}
	f.readyErr = errors.New("slot 4 has no leader")
	r := do(h, "GET", "/readyz", "")
	if r.status != 503 || r.header["Retry-After"] != "1" || r.header["Content-Type"] != "application/json" {
		t.Fatalf("%d %v", r.status, r.header)
	}
	if code, msg := r.errorBody(t); code != CodeUnavailable || msg != "slot 4 has no leader" {
		t.Fatalf("%s %q", code, msg)
	}
	f.readyErr = model.Unavailable(5*time.Second, "joining the cluster")
	r = do(h, "GET", "/readyz", "")
	if _, msg := r.errorBody(t); r.status != 503 || r.header["Retry-After"] != "5" || msg != "joining the cluster" {
		t.Fatalf("%d %v %q", r.status, r.header, msg)
	}
	// /healthz stays 200 whatever the cluster.
	if r := do(h, "GET", "/healthz", ""); r.status != 200 {
		t.Fatalf("%d", r.status)
	}
}

func TestErrorMapping(t *testing.T) {
	for _, tc := range []struct {
		err        error
		status     int
		code       string
		retryAfter string
	}{
		{model.Overloaded(1500*time.Millisecond, "slow down"), 429, CodeOverloaded, "2"},
		{model.Unavailable(100*time.Millisecond, "no quorum"), 503, CodeUnavailable, "1"},
		{&model.Error{Kind: model.KindUnavailable, Message: "no leader"}, 503, CodeUnavailable, "1"},
		{model.NotFound("nope"), 404, CodeNotFound, ""},
		{context.DeadlineExceeded, 503, CodeUnavailable, "1"},
		{errors.New("boom"), 500, CodeInternal, ""},
		{&model.Error{Kind: "x", Message: "an unknown kind"}, 500, CodeInternal, ""},
	} {
		f := &fakeBackend{err: tc.err}
		r := do(newTestServer(f).Handler(), "GET", "/v1/collections/c", "")
		if r.status != tc.status || r.header["Retry-After"] != tc.retryAfter {
			t.Fatalf("%v: %d Retry-After %q", tc.err, r.status, r.header["Retry-After"])
		}
		if code, _ := r.errorBody(t); code != tc.code {
			t.Fatalf("%v: %s", tc.err, code)
		}
	}
}

// Every kind of the contract has its status, as docs/api.md#errors lists
// them; this is the one mapping from domain errors to HTTP.
func TestEveryKindHasItsStatus(t *testing.T) {
	want := map[model.Kind]int{
		model.KindInvalidArgument: 400, model.KindUnauthenticated: 401, model.KindPermissionDenied: 403,
		model.KindNotFound: 404, model.KindConflict: 409, model.KindPreconditionFailed: 412,
		model.KindTooLarge: 413, model.KindOverloaded: 429, model.KindUnavailable: 503, model.KindInternal: 500,
	}
	for _, k := range model.Kinds {
		if got := StatusOf(k); got != want[k] || got == 0 {
			t.Errorf("%s: status %d, want %d", k, got, want[k])
		}
	}
	if len(want) != len(model.Kinds) {
		t.Errorf("the test knows %d kinds, model %d", len(want), len(model.Kinds))
	}
}

func TestAdmin(t *testing.T) {
	f := &fakeBackend{cluster: &model.ClusterInfo{SlotCount: 12, ReplicationFactor: 3, Slots: []model.SlotInfo{{Slot: 0, Leader: "n1"}}}}
	h := newTestServer(f).Handler()
	r := do(h, "GET", "/v1/cluster", "")
	var ci map[string]any
	mustJSON(t, r.body, &ci)
	if r.status != 200 || ci["slot_count"] != 12.0 || ci["nodes"] == nil || !strings.Contains(string(r.body), `"replicas":[]`) {
		t.Fatalf("%s", r.body)
	}

	r = do(h, "POST", "/v1/admin/rebalance?dry_run=true", "")
	if r.status != 200 || !f.dryRun || !strings.HasPrefix(string(r.body), `{"moves":[]`) {
		t.Fatalf("%d %v %s", r.status, f.dryRun, r.body)
	}
	f.moves = []model.Move{{Slot: 1, From: "n1", To: "n2"}}
	r = do(h, "POST", "/v1/admin/rebalance", "")
	if f.dryRun || !strings.Contains(string(r.body), `{"slot":1,"from":"n1","to":"n2"}`) {
		t.Fatalf("%s", r.body)
	}
	if r = do(h, "POST", "/v1/admin/rebalance?dry_run=maybe", ""); r.status != 400 {
		t.Fatalf("%d", r.status)
	}

	f.compactRes = []model.CompactResult{{Node: "n1", OK: true, Took: 1500 * time.Millisecond, Snapshot: 4}}
	r = do(h, "POST", "/v1/admin/compact", "")
	if r.status != 200 || !strings.Contains(string(r.body), `{"results":[{"node":"n1","ok":true,"took_ms":1500,"slots_snapshotted":4}]}`) {
		t.Fatalf("%s", r.body)
	}

	r = do(h, "POST", "/v1/admin/slots/3/transfer", `{"to":"n2"}`)
	if r.status != 200 || string(r.body) != `{"slot":3,"from":"n1","to":"n2","leader":"n2","preferred_leader":"n2"}` || f.transferN != 3 || f.transferTo != "n2" {
		t.Fatalf("%d %s %d %q", r.status, r.body, f.transferN, f.transferTo)
	}
	r = do(h, "POST", "/v1/admin/nodes/n3/drain", "")
	if r.status != 200 || f.nodeArg != "n3" || string(r.body) != `{"node":"n3","status":"draining","replicas":3,"slots_led":1}` {
		t.Fatalf("%d %s", r.status, r.body)
	}
	r = do(h, "DELETE", "/v1/admin/nodes/n4", "")
	if r.status != 204 || f.nodeArg != "n4" || f.force {
		t.Fatalf("%d", r.status)
	}
	if r = do(h, "DELETE", "/v1/admin/nodes/n4?force=true", ""); r.status != 204 || !f.force {
		t.Fatalf("%d force=%v", r.status, f.force)
	}
	if r = do(h, "DELETE", "/v1/admin/nodes/n4?force=perhaps", ""); r.status != 400 {
		t.Fatalf("force=perhaps: %d", r.status)
	}

	for _, tc := range []struct{ uri, body, msg string }{
		{"/v1/admin/slots/-1/transfer", `{"to":"n2"}`, "non-negative"},
		{"/v1/admin/slots/x/transfer", `{"to":"n2"}`, "non-negative"},
		{"/v1/admin/slots/+1/transfer", `{"to":"n2"}`, "non-negative"},
		{"/v1/admin/slots/1/transfer", ``, "to is missing"},
		{"/v1/admin/slots/1/transfer", `{}`, "to is missing"},
		{"/v1/admin/slots/1/transfer", `{"to":""}`, "node id"},
		{"/v1/admin/slots/1/transfer", `{"to":5}`, "must be a string"},
		{"/v1/admin/slots/1/transfer", `{"to":"n2","now":true}`, "unknown field"},
	} {
		f.calls = nil
		r := do(h, "POST", tc.uri, tc.body)
		if r.status != 400 {
			t.Fatalf("%s %s: %d", tc.uri, tc.body, r.status)
		}
		if _, msg := r.errorBody(t); !strings.Contains(msg, tc.msg) || len(f.called()) != 0 {
			t.Fatalf("%s %s: %q %v", tc.uri, tc.body, msg, f.called())
		}
	}
}

func TestMetricsAndObserve(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	f := &fakeBackend{}
	s := newTestServer(f, func(o *Options) {
		o.MetricsHandler = func(ctx *fasthttp.RequestCtx) {
			ctx.SetContentType("text/plain; version=0.0.4")
			ctx.SetBodyString("tm_up 1\n")
		}
		o.Observe = func(route string, status int, _ time.Duration) {
			mu.Lock()
			seen = append(seen, route+" "+strconv.Itoa(status))
			mu.Unlock()
		}
	})
	if r := do(s.Handler(), "GET", "/metrics", ""); r.status != 200 || string(r.body) != "tm_up 1\n" {
		t.Fatalf("%d %s", r.status, r.body)
	}
	do(s.Handler(), "GET", "/nope", "")
	do(s.Handler(), "POST", jobsURI, `{"delay":"1s","route":"r"}`)
	want := []string{"GET /metrics 200", "unmatched 404", "POST /v1/collections/{c}/jobs 201"}
	if strings.Join(seen, "|") != strings.Join(want, "|") {
		t.Fatalf("%v", seen)
	}
	if r := do(newTestServer(f).Handler(), "GET", "/metrics", ""); r.status != 404 {
		t.Fatalf("metrics without a handler: %d", r.status)
	}
}

func TestPanicIsInternal(t *testing.T) {
	f := &fakeBackend{createFn: func(string, []model.JobInput) ([]model.JobResult, error) { panic("bug") }}
	r := do(newTestServer(f).Handler(), "POST", jobsURI, `{"delay":"1s","route":"r"}`)
	if code, _ := r.errorBody(t); r.status != 500 || code != CodeInternal {
		t.Fatalf("%d %s", r.status, code)
	}
}

func TestContentEncodingRefused(t *testing.T) {
	f := &fakeBackend{}
	r := do(newTestServer(f).Handler(), "POST", jobsURI, "\x1f\x8b", "Content-Encoding", "gzip")
	if _, msg := r.errorBody(t); r.status != 400 || !strings.Contains(msg, "Content-Encoding") {
		t.Fatalf("%d %q", r.status, msg)
	}
}

// TestServeRealListener runs the API on a loopback socket and talks to it
// with a fasthttp client: the whole path, including the server options
// (body limit answered with the contract's error body) and Shutdown.
func TestServeRealListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeBackend{}
	s := newTestServer(f, func(o *Options) { o.MaxBodyBytes = 4096 })
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	base := "http://" + ln.Addr().String()
	c := &fasthttp.Client{}

	call := func(method, path, body string) (int, string, []byte) {
		req, res := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(res)
		req.Header.SetMethod(method)
		req.SetRequestURI(base + path)
		req.SetBodyString(body)
		req.Header.SetContentType("application/json")
		if err := c.DoTimeout(req, res, 10*time.Second); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return res.StatusCode(), string(res.Header.ContentType()), append([]byte(nil), res.Body()...)
	}

	status, ct, body := call("POST", jobsURI, `{"id":"live","trigger_time":1767225600000,"callback_url":"https://example.com/hook","meta":{"k":"v"}}`)
	if status != 201 || ct != "application/json" {
		t.Fatalf("%d %q %s", status, ct, body)
	}
	var j map[string]any
	mustJSON(t, body, &j)
	if j["id"] != "live" || j["meta"].(map[string]any)["k"] != "v" {
		t.Fatalf("%s", body)
	}
	// The spec kept by the backend does not alias fasthttp's reused buffers.
	call("POST", jobsURI, `{"id":"XXXX","trigger_time":1,"callback_url":"https://zzzzzzz.example.com/hook","meta":{"z":"zzzzzzz"}}`)
	status, _, body = call("POST", jobsURI, `{"id":"live","trigger_time":1767225600000,"callback_url":"https://example.com/hook","meta":{"k":"v"}}`)
	if status != 201 {
		t.Fatalf("%d %s", status, body)
	}
	keep := f.inputs()[0]
	call("GET", "/healthz", strings.Repeat(" ", 100))
	if keep.ID != "live" || string(keep.Spec.Meta) != `{"k":"v"}` || keep.Spec.CallbackURL != "https://example.com/hook" {
		t.Fatalf("kept input changed: %+v", keep)
	}

	status, ct, body = call("POST", jobsURI, `{"meta":"`+strings.Repeat("x", 5000)+`"}`)
	if status != 413 || ct != "application/json" || !strings.Contains(string(body), CodeTooLarge) {
		t.Fatalf("oversized body: %d %q %s", status, ct, body)
	}
	status, _, _ = call("GET", "/healthz", "")
	if status != 200 {
		t.Fatalf("healthz %d", status)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

// fasthttp's parse errors quote the offending header value and the whole
// read buffer; neither may reach the log or the answer (API.md §6: secrets
// are never echoed nor logged). Addresses stay.
func TestTransportTextHidesTheRequest(t *testing.T) {
	in := `error when serving connection "127.0.0.1:28500"<->"127.0.0.1:54900": error when reading request headers: invalid header value "Bearer tm_Secret\x01": buffer size=258, contents: "PUT /v1/routes/leak HTTP/1.1\r\nAuthorization: Bearer tm_SuperSecretToken123\r\n\r\n{\"signing_secret\":\"whsec_abc\"}"`
	got := transportText(in)
	for _, secret := range []string{"tm_Secret", "tm_SuperSecretToken123", "whsec_abc", "Authorization"} {
		if strings.Contains(got, secret) {
			t.Fatalf("transportText kept %q: %s", secret, got)
		}
	}
	for _, keep := range []string{`"127.0.0.1:28500"<->"127.0.0.1:54900"`, "invalid header value", "not shown"} {
		if !strings.Contains(got, keep) {
			t.Fatalf("transportText lost %q: %s", keep, got)
		}
	}
	// A value that looks like digits and colons is still a value.
	if got := transportText(`invalid header value "deadbeef:0123:4567"`); strings.Contains(got, "deadbeef") {
		t.Fatalf("a hex value kept: %s", got)
	}
	if got := transportText(`connection "[::1]:8080"`); !strings.Contains(got, `"[::1]:8080"`) {
		t.Fatalf("an IPv6 address lost: %s", got)
	}
	// An unterminated quote hides the rest.
	if got := transportText(`bad "Bearer x`); strings.Contains(got, "Bearer") {
		t.Fatalf("unterminated: %s", got)
	}
}

// The transport log keeps at most transportLogBurst lines a minute and
// says how many it left out.
func TestTransportLogIsThrottled(t *testing.T) {
	var buf testutil.SyncBuffer
	l := newFasthttpLogger(slog.New(slog.NewTextHandler(&buf, nil)))
	for i := 0; i < 100; i++ {
		l.Printf("error when serving connection %q: %v", "127.0.0.1:1", errors.New("x"))
	}
	if n := strings.Count(buf.String(), "\n"); n != transportLogBurst {
		t.Fatalf("%d lines logged for 100 errors, want %d", n, transportLogBurst)
	}
}
