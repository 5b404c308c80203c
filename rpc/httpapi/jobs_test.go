package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/model"
	"github.com/valyala/fasthttp"
)

const jobsURI = "/v1/collections/orders/jobs"

const validSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // 24 bytes

func TestCreateJobValidation(t *testing.T) {
	big := `"` + strings.Repeat("x", 64<<10) + `"`
	cases := []struct {
		name, body string
		status     int
		code       string
		msg        string // a substring the message must contain
	}{
		{"empty body", ``, 400, CodeInvalidArgument, "empty"},
		{"malformed json", `{"trigger_time":`, 400, CodeInvalidArgument, "not valid JSON"},
		{"trailing garbage", `{"trigger_time":1,"callback_url":"http://x"} x`, 400, CodeInvalidArgument, "not valid JSON"},
		{"not an object", `"job"`, 400, CodeInvalidArgument, "JSON object"},
		{"number body", `42`, 400, CodeInvalidArgument, "JSON object"},
		{"unknown field typo", `{"trigger_tme":1,"callback_url":"http://x"}`, 400, CodeInvalidArgument, `unknown field "trigger_tme" in the request body (did you mean "trigger_time"?)`},
		{"unknown field", `{"trigger_time":1,"callback_url":"http://x","colour":"red"}`, 400, CodeInvalidArgument, `unknown field "colour"`},
		{"duplicate field", `{"id":"a","id":"b","trigger_time":1,"callback_url":"http://x"}`, 400, CodeInvalidArgument, `field "id" appears twice in the request body`},
		{"duplicate nested field", `{"trigger_time":1,"callback_url":"http://x","retry_policy":{"max_attempts":3,"max_attempts":9}}`, 400, CodeInvalidArgument, `field "retry_policy.max_attempts" appears twice in retry_policy`},
		{"case-different field", `{"Trigger_Time":1,"callback_url":"http://x"}`, 400, CodeInvalidArgument, `did you mean "trigger_time"`},
		{"neither trigger", `{"callback_url":"http://x"}`, 400, CodeInvalidArgument, "trigger_time is missing"},
		{"both triggers", `{"trigger_time":1,"delay":"1s","callback_url":"http://x"}`, 400, CodeInvalidArgument, "conflicting"},
		{"trigger garbage", `{"trigger_time":"abc","callback_url":"http://x"}`, 400, CodeInvalidArgument, `trigger_time: must be unix milliseconds or an RFC 3339 time (like 1767225600000 or "2026-01-01T00:00:00Z"), got "abc"`},
		{"trigger float", `{"trigger_time":1.5,"callback_url":"http://x"}`, 400, CodeInvalidArgument, "trigger_time"},
		{"trigger fraction in an exponent", `{"trigger_time":15e-1,"callback_url":"http://x"}`, 400, CodeInvalidArgument, "trigger_time"},
		{"trigger huge exponent", `{"trigger_time":1e999999999,"callback_url":"http://x"}`, 400, CodeInvalidArgument, "trigger_time"},
		{"trigger negative", `{"trigger_time":-1,"callback_url":"http://x"}`, 400, CodeInvalidArgument, "1970"},
		{"trigger year 10000", `{"trigger_time":253402300800000,"callback_url":"http://x"}`, 400, CodeInvalidArgument, "10000"},
		{"trigger overflow", `{"trigger_time":99999999999999999999,"callback_url":"http://x"}`, 400, CodeInvalidArgument, "trigger_time"},
		{"trigger bool", `{"trigger_time":true,"callback_url":"http://x"}`, 400, CodeInvalidArgument, "trigger_time"},
		{"trigger rfc3339 without zone", `{"trigger_time":"2026-01-01T00:00:00","callback_url":"http://x"}`, 400, CodeInvalidArgument, "RFC 3339"},
		{"trigger before 1970", `{"trigger_time":"1969-12-31T23:59:59Z","callback_url":"http://x"}`, 400, CodeInvalidArgument, "1970"},
		{"delay garbage", `{"delay":"soon","callback_url":"http://x"}`, 400, CodeInvalidArgument, "Go duration"},
		{"delay number", `{"delay":90,"callback_url":"http://x"}`, 400, CodeInvalidArgument, "Go duration"},
		{"delay negative", `{"delay":"-1s","callback_url":"http://x"}`, 400, CodeInvalidArgument, "negative"},
		{"neither target", `{"trigger_time":1}`, 400, CodeInvalidArgument, "callback_url is missing"},
		{"both targets", `{"trigger_time":1,"callback_url":"http://x","route":"r"}`, 400, CodeInvalidArgument, "conflicting"},
		{"url relative", `{"trigger_time":1,"callback_url":"/hook"}`, 400, CodeInvalidArgument, "absolute"},
		{"url ftp", `{"trigger_time":1,"callback_url":"ftp://x/hook"}`, 400, CodeInvalidArgument, "http or https"},
		{"url no host", `{"trigger_time":1,"callback_url":"http:///hook"}`, 400, CodeInvalidArgument, "host"},
		{"url opaque", `{"trigger_time":1,"callback_url":"http:hook"}`, 400, CodeInvalidArgument, "host"},
		{"url fragment", `{"trigger_time":1,"callback_url":"http://x/hook#frag"}`, 400, CodeInvalidArgument, "fragment"},
		{"url too long", `{"trigger_time":1,"callback_url":"http://x/` + strings.Repeat("a", 2048) + `"}`, 400, CodeInvalidArgument, "2048"},
		{"url bad port", `{"trigger_time":1,"callback_url":"http://x:99999/"}`, 400, CodeInvalidArgument, "port"},
		{"url space", `{"trigger_time":1,"callback_url":"http://x/a b"}`, 400, CodeInvalidArgument, "whitespace"},
		{"url unparseable", `{"trigger_time":1,"callback_url":"http://[::1/"}`, 400, CodeInvalidArgument, "not a valid URL"},
		{"url empty", `{"trigger_time":1,"callback_url":""}`, 400, CodeInvalidArgument, "empty"},
		{"url not string", `{"trigger_time":1,"callback_url":5}`, 400, CodeInvalidArgument, "must be a string"},
		{"route bad name", `{"trigger_time":1,"route":"a/b"}`, 400, CodeInvalidArgument, "route name"},
		{"route too long", `{"trigger_time":1,"route":"` + strings.Repeat("r", 65) + `"}`, 400, CodeInvalidArgument, "1 to 64"},
		{"id empty", `{"id":"","trigger_time":1,"callback_url":"http://x"}`, 400, CodeInvalidArgument, "generated"},
		{"id bad char", `{"id":"a b","trigger_time":1,"callback_url":"http://x"}`, 400, CodeInvalidArgument, "job id"},
		{"id slash", `{"id":"a/b","trigger_time":1,"callback_url":"http://x"}`, 400, CodeInvalidArgument, "job id"},
		{"id dotdot", `{"id":"..","trigger_time":1,"callback_url":"http://x"}`, 400, CodeInvalidArgument, `".."`},
		{"id too long", `{"id":"` + strings.Repeat("i", 256) + `","trigger_time":1,"callback_url":"http://x"}`, 400, CodeInvalidArgument, "255"},
		{"id number", `{"id":7,"trigger_time":1,"callback_url":"http://x"}`, 400, CodeInvalidArgument, "must be a string"},
		{"collection mismatch", `{"collection":"other","trigger_time":1,"callback_url":"http://x"}`, 400, CodeInvalidArgument, "path says"},
		{"retry not object", `{"trigger_time":1,"callback_url":"http://x","retry_policy":5}`, 400, CodeInvalidArgument, "retry_policy must be a JSON object"},
		{"retry unknown", `{"trigger_time":1,"callback_url":"http://x","retry_policy":{"max_attempt":3}}`, 400, CodeInvalidArgument, `unknown field "retry_policy.max_attempt"`},
		{"retry attempts zero", `{"trigger_time":1,"callback_url":"http://x","retry_policy":{"max_attempts":0}}`, 400, CodeInvalidArgument, "retry_policy.max_attempts: must be an integer from 1 to 1000, got 0"},
		{"retry attempts big", `{"trigger_time":1,"callback_url":"http://x","retry_policy":{"max_attempts":1001}}`, 400, CodeInvalidArgument, "1 to 1000"},
		{"retry attempts string", `{"trigger_time":1,"callback_url":"http://x","retry_policy":{"max_attempts":"3"}}`, 400, CodeInvalidArgument, "must be an integer"},
		{"retry attempts fraction", `{"trigger_time":1,"callback_url":"http://x","retry_policy":{"max_attempts":2.5}}`, 400, CodeInvalidArgument, "whole number"},
		{"retry multiplier small", `{"trigger_time":1,"callback_url":"http://x","retry_policy":{"multiplier":0.5}}`, 400, CodeInvalidArgument, "multiplier"},
		{"retry multiplier big", `{"trigger_time":1,"callback_url":"http://x","retry_policy":{"multiplier":101}}`, 400, CodeInvalidArgument, "multiplier"},
		{"retry interval garbage", `{"trigger_time":1,"callback_url":"http://x","retry_policy":{"initial_interval":"1 s"}}`, 400, CodeInvalidArgument, "retry_policy.initial_interval"},
		{"retry interval sub-ms", `{"trigger_time":1,"callback_url":"http://x","retry_policy":{"max_interval":"500us"}}`, 400, CodeInvalidArgument, "retry_policy.max_interval: must be from 1ms"},
		{"retry max_age zero", `{"trigger_time":1,"callback_url":"http://x","retry_policy":{"max_age":"0s"}}`, 400, CodeInvalidArgument, "retry_policy.max_age"},
		{"retry interval number", `{"trigger_time":1,"callback_url":"http://x","retry_policy":{"initial_interval":1000}}`, 400, CodeInvalidArgument, "Go duration"},
		{"timeout too long", `{"trigger_time":1,"callback_url":"http://x","callback_timeout":"2h"}`, 400, CodeInvalidArgument, "callback_timeout: must be from 1ms to 1h0m0s"},
		{"timeout zero", `{"trigger_time":1,"callback_url":"http://x","callback_timeout":"0s"}`, 400, CodeInvalidArgument, "callback_timeout"},
		{"timeout garbage", `{"trigger_time":1,"callback_url":"http://x","callback_timeout":"10"}`, 400, CodeInvalidArgument, "callback_timeout"},
		{"meta too large", `{"trigger_time":1,"callback_url":"http://x","meta":` + big + `}`, 413, CodeTooLarge, "meta"},
		{"meta too large beats nothing but 400s", `{"trigger_time":1,"meta":` + big + `}`, 400, CodeInvalidArgument, "callback_url is missing"},
		{"array of nothing", `[]`, 400, CodeInvalidArgument, "empty"},
		{"array malformed", `[{"trigger_time":1},`, 400, CodeInvalidArgument, "not valid JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeBackend{}
			r := do(newTestServer(f).Handler(), "POST", jobsURI, tc.body)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			code, msg := r.errorBody(t)
			if code != tc.code || !strings.Contains(msg, tc.msg) {
				t.Fatalf("got %s %q, want %s containing %q", code, msg, tc.code, tc.msg)
			}
			if r.header["Content-Type"] != "application/json" {
				t.Errorf("Content-Type %q", r.header["Content-Type"])
			}
			if c := f.called(); len(c) != 0 {
				t.Fatalf("backend was called: %v", c)
			}
		})
	}
}

func TestPathValidation(t *testing.T) {
	cases := []struct{ method, uri, body, msg string }{
		{"POST", "/v1/collections/a%20b/jobs", `{"trigger_time":1,"callback_url":"http://x"}`, "collection name"},
		{"POST", "/v1/collections/" + strings.Repeat("c", 65) + "/jobs", `{}`, "1 to 64"},
		{"GET", "/v1/collections/a:b/jobs", ``, "collection name"},
		{"GET", "/v1/collections/ok/jobs/a%20b", ``, "job id"},
		{"PUT", "/v1/collections/ok/jobs/a%20b", `{"trigger_time":1,"callback_url":"http://x"}`, "job id"},
		{"DELETE", "/v1/collections/ok/jobs/" + strings.Repeat("i", 256), ``, "255"},
		{"PUT", "/v1/collections/bad!", `{}`, "collection name"},
		{"GET", "/v1/collections/bad!", ``, "collection name"},
		{"DELETE", "/v1/collections/bad!", ``, "collection name"},
		{"PUT", "/v1/routes/bad!", `{"webhook_url":"http://x"}`, "route name"},
		{"GET", "/v1/routes/bad!", ``, "route name"},
		{"DELETE", "/v1/routes/bad!", ``, "route name"},
	}
	for _, tc := range cases {
		t.Run(tc.method+" "+tc.uri, func(t *testing.T) {
			f := &fakeBackend{}
			r := do(newTestServer(f).Handler(), tc.method, tc.uri, tc.body)
			if r.status != 400 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			if code, msg := r.errorBody(t); code != CodeInvalidArgument || !strings.Contains(msg, tc.msg) {
				t.Fatalf("got %s %q, want %q", code, msg, tc.msg)
			}
			if c := f.called(); len(c) != 0 {
				t.Fatalf("backend was called: %v", c)
			}
		})
	}
}

func TestCreateJob(t *testing.T) {
	f := &fakeBackend{}
	s := newTestServer(f)
	body := `{"id":"user-reminder-123","trigger_time":1767225600000,"callback_url":"https://example.com/hook",
		"meta": {"any" : [1, 2, "x y"]},"retry_policy":{"max_attempts":3,"initial_interval":"500ms"},"callback_timeout":"5s",
		"collection":"orders","status":"failed","attempts":9,"last_error":"x","version":7,"created_at":1,"updated_at":2,"finished_at":3,"next_attempt_at":4}`
	r := do(s.Handler(), "POST", jobsURI, body)
	if r.status != 201 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if f.createColl != "orders" || len(f.createIn) != 1 {
		t.Fatalf("backend got %q %v", f.createColl, f.createIn)
	}
	in := f.createIn[0]
	want := model.JobSpec{
		TriggerTime: 1767225600000, CallbackURL: "https://example.com/hook",
		Meta:              []byte(`{"any":[1,2,"x y"]}`),
		Retry:             model.RetryPolicy{MaxAttempts: 3, InitialIntervalMs: 500},
		CallbackTimeoutMs: 5000,
	}
	want.Hash = HashSpec(&want, "1767225600000")
	if in.ID != "user-reminder-123" || in.Err != nil || in.Spec.Hash != want.Hash || string(in.Spec.Meta) != string(want.Meta) ||
		in.Spec.Retry != want.Retry || in.Spec.TriggerTime != want.TriggerTime || in.Spec.CallbackTimeoutMs != 5000 {
		t.Fatalf("input %+v, want %+v", in, want)
	}
	if got := r.header["Location"]; got != "/v1/collections/orders/jobs/user-reminder-123" {
		t.Errorf("Location %q", got)
	}
	if got := r.header["Etag"] + r.header["ETag"]; got != `"1"` {
		t.Errorf("ETag %q", got)
	}
	var j map[string]any
	mustJSON(t, r.body, &j)
	if j["id"] != "user-reminder-123" || j["collection"] != "orders" || j["status"] != "scheduled" {
		t.Fatalf("job %s", r.body)
	}

	// The same body again hashes the same: a retried POST is recognised.
	r2 := do(s.Handler(), "POST", jobsURI, strings.ReplaceAll(strings.ReplaceAll(body, "\n\t\t", ""), `"any" : [1, 2,`, `"any":[1,2,`))
	if r2.status != 201 || f.createIn[0].Spec.Hash != want.Hash {
		t.Fatalf("retry hashed differently")
	}
}

func TestCreateJobOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		res    model.JobResult
		status int
		code   string
	}{
		{"created", model.JobResult{Code: model.CodeCreated}, 201, ""},
		{"exists", model.JobResult{Code: model.CodeExists}, 200, ""},
		{"conflict", model.JobResult{Code: model.CodeConflict}, 409, CodeConflict},
		{"route missing", model.JobResult{Err: model.NotFound("route %q does not exist", "r")}, 404, CodeNotFound},
		{"no leader", model.JobResult{Err: model.Unavailable(3*time.Second, "no leader")}, 503, CodeUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeBackend{createFn: func(coll string, in []model.JobInput) ([]model.JobResult, error) {
				res := tc.res
				res.ID = in[0].ID
				if res.Err == nil {
					res.Job = storedJob(coll, in[0].ID, in[0].Spec)
				}
				return []model.JobResult{res}, nil
			}}
			r := do(newTestServer(f).Handler(), "POST", jobsURI, `{"id":"a","delay":"90s","route":"r"}`)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			if tc.code != "" {
				if code, _ := r.errorBody(t); code != tc.code {
					t.Fatalf("code %s", code)
				}
				// A 409 carries the existing job next to the error
				// (docs/api.md "Idempotency"), as a batch item's does.
				var withJob struct {
					Job *struct {
						ID string `json:"id"`
					} `json:"job"`
				}
				if err := json.Unmarshal(r.body, &withJob); err != nil {
					t.Fatal(err)
				}
				if (withJob.Job != nil && withJob.Job.ID == "a") != (tc.status == 409) {
					t.Fatalf("job next to the error: %s", r.body)
				}
				return
			}
			var j struct {
				ID          string `json:"id"`
				TriggerTime int64  `json:"trigger_time"`
				Route       string `json:"route"`
			}
			mustJSON(t, r.body, &j)
			if j.ID != "a" || j.Route != "r" || j.TriggerTime != testNow.UnixMilli()+90_000 {
				t.Fatalf("job %s", r.body)
			}
			if h := f.createIn[0].Spec.Hash; h != HashSpec(&model.JobSpec{Route: "r"}, "delay:90s") {
				t.Fatalf("delay hash %x", h)
			}
		})
	}
}

func TestCreateJobBackendError(t *testing.T) {
	f := &fakeBackend{createFn: func(string, []model.JobInput) ([]model.JobResult, error) {
		return nil, fmt.Errorf("forwarding: %w", model.Unavailable(2500*time.Millisecond, "slot 3 has no leader"))
	}}
	r := do(newTestServer(f).Handler(), "POST", jobsURI, `{"trigger_time":1,"callback_url":"http://x"}`)
	if r.status != 503 || r.header["Retry-After"] != "3" {
		t.Fatalf("status %d Retry-After %q", r.status, r.header["Retry-After"])
	}
	if code, msg := r.errorBody(t); code != CodeUnavailable || msg != "slot 3 has no leader" {
		t.Fatalf("%s %q", code, msg)
	}

	// An unexpected error's text stays in the log: it may name files (a
	// full disk once answered 500 with the raft log's path).
	f.createFn = func(string, []model.JobInput) ([]model.JobResult, error) {
		return nil, fmt.Errorf("write /var/lib/timemachine/raft/slots.db: no space left on device")
	}
	r = do(newTestServer(f).Handler(), "POST", jobsURI, `{"trigger_time":1,"callback_url":"http://x"}`)
	if code, msg := r.errorBody(t); r.status != 500 || code != CodeInternal || strings.Contains(msg, "/var/lib") {
		t.Fatalf("%d %s %q", r.status, code, msg)
	}
}

// A write whose outcome is unknown gets no answer at all (the connection
// is closed): every error of the contract would claim that nothing
// changed, and the nemesis found such 503s that had taken effect.
func TestUnknownOutcomeClosesTheConnection(t *testing.T) {
	f := &fakeBackend{createFn: func(string, []model.JobInput) ([]model.JobResult, error) {
		return nil, fmt.Errorf("slot 3: %w", model.ErrOutcomeUnknown)
	}}
	s := newTestServer(f)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	resp, err := http.Post("http://"+ln.Addr().String()+jobsURI, "application/json", strings.NewReader(`{"trigger_time":1,"callback_url":"http://x"}`))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a write of unknown outcome was answered %d", resp.StatusCode)
	}
}

func TestGeneratedIDs(t *testing.T) {
	f := &fakeBackend{}
	s := newTestServer(f)
	r := do(s.Handler(), "POST", jobsURI, `{"trigger_time":"2026-01-01T00:00:00.0001Z","callback_url":"http://x"}`)
	if r.status != 201 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	id := f.createIn[0].ID
	if len(id) != 26 || !validID(id) {
		t.Fatalf("generated id %q", id)
	}
	// RFC 3339 with a sub-millisecond part rounds up: never fire early.
	if got := f.createIn[0].Spec.TriggerTime; got != testNow.UnixMilli()+1 {
		t.Fatalf("trigger %d", got)
	}
	ids := newIDs(testNow, 100)
	later := newIDs(testNow.Add(time.Millisecond), 1)[0]
	seen := map[string]bool{}
	for _, x := range ids {
		if seen[x] || !validID(x) || x >= later || x[:10] != ids[0][:10] {
			t.Fatalf("id %q (later %q)", x, later)
		}
		seen[x] = true
	}
	// The timestamp part is the ULID encoding of the milliseconds.
	if got := encodeID(time.UnixMilli(1), make([]byte, 10)); got != "00000000010000000000000000" {
		t.Fatalf("encodeID(1ms) = %s", got)
	}
	if got := encodeID(time.UnixMilli(1<<48-1), []byte{255, 255, 255, 255, 255, 255, 255, 255, 255, 255}); got != "7ZZZZZZZZZZZZZZZZZZZZZZZZZ" {
		t.Fatalf("encodeID(max) = %s", got)
	}
}

func TestBatch(t *testing.T) {
	f := &fakeBackend{createFn: func(coll string, in []model.JobInput) ([]model.JobResult, error) {
		out := make([]model.JobResult, len(in))
		for i, x := range in {
			switch {
			case x.Err != nil:
				out[i] = model.JobResult{ID: x.ID, Err: x.Err}
			case x.ID == "dup":
				out[i] = model.JobResult{ID: x.ID, Code: model.CodeConflict, Job: storedJob(coll, x.ID, model.JobSpec{TriggerTime: 5, CallbackURL: "http://old"})}
			case x.ID == "same":
				out[i] = model.JobResult{ID: x.ID, Code: model.CodeExists, Job: storedJob(coll, x.ID, x.Spec)}
			case x.ID == "noroute":
				out[i] = model.JobResult{ID: x.ID, Err: model.NotFound("route %q does not exist", x.Spec.Route)}
			default:
				out[i] = model.JobResult{ID: x.ID, Code: model.CodeCreated, Job: storedJob(coll, x.ID, x.Spec)}
			}
		}
		return out, nil
	}}
	body := `[
		{"id":"a","trigger_time":1,"callback_url":"http://x"},
		{"id":"b","trigger_tme":1,"callback_url":"http://x"},
		7,
		{"trigger_time":2,"route":"r"},
		{"id":"dup","trigger_time":1,"callback_url":"http://x"},
		{"id":"same","trigger_time":1,"callback_url":"http://x"},
		{"id":"big","trigger_time":1,"callback_url":"http://x","meta":"` + strings.Repeat("m", 100) + `"},
		{"id":"noroute","trigger_time":1,"route":"nope"},
		{"id":"bad id!","trigger_time":1,"callback_url":"http://x"},
		{"id":"badurl","trigger_time":1,"callback_url":"ftp://x"},
		{"id":"emptyurl","trigger_time":1,"callback_url":""},
		{"id":"b2","trigger_time":1,"callback_url":"http://x"}
	]`
	s := newTestServer(f, func(o *Options) { o.MaxMetaBytes = 50 })
	r := do(s.Handler(), "POST", jobsURI, body)
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var out struct {
		Results []struct {
			ID     string          `json:"id"`
			Status int             `json:"status"`
			Job    json.RawMessage `json:"job"`
			Error  *struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		} `json:"results"`
	}
	mustJSON(t, r.body, &out)
	want := []struct {
		id     string
		status int
		code   string
		job    bool
	}{
		{"a", 201, "", true},
		{"b", 400, CodeInvalidArgument, false},
		{"", 400, CodeInvalidArgument, false},
		{"*", 201, "", true},
		{"dup", 409, CodeConflict, true},
		{"same", 200, "", true},
		{"big", 400, CodeInvalidArgument, false},     // 413 for a single create
		{"noroute", 400, CodeInvalidArgument, false}, // 404 for a single create
		{"bad id!", 400, CodeInvalidArgument, false},
		{"badurl", 400, CodeInvalidArgument, false},
		{"emptyurl", 400, CodeInvalidArgument, false},
		{"b2", 201, "", true},
	}
	if len(out.Results) != len(want) {
		t.Fatalf("%d results: %s", len(out.Results), r.body)
	}
	for i, w := range want {
		g := out.Results[i]
		if w.id == "*" {
			if len(g.ID) != 26 {
				t.Errorf("result %d: generated id %q", i, g.ID)
			}
		} else if g.ID != w.id {
			t.Errorf("result %d: id %q, want %q", i, g.ID, w.id)
		}
		if g.Status != w.status || (g.Job != nil) != w.job || (w.code == "") != (g.Error == nil) || (g.Error != nil && g.Error.Code != w.code) {
			t.Errorf("result %d: %+v, want %+v", i, g, w)
		}
	}
	if !strings.Contains(string(out.Results[4].Job), `"callback_url":"http://old"`) {
		t.Errorf("conflict should show the existing job: %s", out.Results[4].Job)
	}
	if !strings.Contains(out.Results[1].Error.Message, `did you mean "trigger_time"`) {
		t.Errorf("message %q", out.Results[1].Error.Message)
	}
	// Every item went to the backend, in order, with Err on the invalid ones.
	if len(f.createIn) != len(want) {
		t.Fatalf("backend got %d inputs", len(f.createIn))
	}
	for i, w := range want {
		// (A missing route is the backend's finding, not the parser's.)
		if invalid := w.status == 400 && w.id != "noroute"; invalid != (f.createIn[i].Err != nil) {
			t.Errorf("input %d: Err %v", i, f.createIn[i].Err)
		}
	}
	if f.createIn[3].ID != out.Results[3].ID {
		t.Errorf("generated id differs: %q vs %q", f.createIn[3].ID, out.Results[3].ID)
	}
}

func TestBatchLimits(t *testing.T) {
	item := `{"trigger_time":1,"callback_url":"http://x"}`
	for _, tc := range []struct {
		n      int
		status int
	}{{1000, 200}, {1001, 413}} {
		f := &fakeBackend{}
		body := "[" + strings.TrimSuffix(strings.Repeat(item+",", tc.n), ",") + "]"
		r := do(newTestServer(f).Handler(), "POST", jobsURI, body)
		if r.status != tc.status {
			t.Fatalf("%d items: status %d", tc.n, r.status)
		}
		if tc.status == 413 {
			if code, _ := r.errorBody(t); code != CodeTooLarge || len(f.called()) != 0 {
				t.Fatalf("code %s, calls %v", code, f.called())
			}
			continue
		}
		var out struct{ Results []struct{ ID string } }
		mustJSON(t, r.body, &out)
		seen := map[string]bool{}
		for _, x := range out.Results {
			seen[x.ID] = true
		}
		if len(out.Results) != 1000 || len(seen) != 1000 {
			t.Fatalf("%d results, %d distinct ids", len(out.Results), len(seen))
		}
	}
}

func TestBatchBackendMiscount(t *testing.T) {
	f := &fakeBackend{createFn: func(string, []model.JobInput) ([]model.JobResult, error) { return nil, nil }}
	r := do(newTestServer(f).Handler(), "POST", jobsURI, `[{"trigger_time":1,"callback_url":"http://x"}]`)
	if r.status != 500 {
		t.Fatalf("%d", r.status)
	}
}

func TestUpsert(t *testing.T) {
	uri := "/v1/collections/orders/jobs/j1"
	body := `{"trigger_time":"2026-01-01T00:00:00Z","callback_url":"http://x"}`
	cases := []struct {
		name    string
		ifMatch string
		body    string
		res     model.Result
		status  int
		code    string
		want    uint64
		called  bool
	}{
		{"create", "", body, model.Result{Code: model.CodeCreated}, 201, "", 0, true},
		{"replace", "3", body, model.Result{Code: model.CodeOK}, 200, "", 3, true},
		{"quoted", `"3"`, body, model.Result{Code: model.CodeOK}, 200, "", 3, true},
		{"weak", `W/"12"`, body, model.Result{Code: model.CodeOK}, 200, "", 12, true},
		{"spaces", ` 4 `, body, model.Result{Code: model.CodeOK}, 200, "", 4, true},
		{"stale", "3", body, model.Result{Code: model.CodePreconditionFailed, Job: &model.Job{Version: 4}}, 412, CodePreconditionFailed, 3, true},
		{"if-match on missing job", "3", body, model.Result{Code: model.CodeNotFound}, 412, CodePreconditionFailed, 3, true},
		{"garbage", "abc", body, model.Result{}, 400, CodeInvalidArgument, 0, false},
		{"star", "*", body, model.Result{}, 400, CodeInvalidArgument, 0, false},
		{"zero", "0", body, model.Result{}, 400, CodeInvalidArgument, 0, false},
		{"negative", "-1", body, model.Result{}, 400, CodeInvalidArgument, 0, false},
		{"list", "1, 2", body, model.Result{}, 400, CodeInvalidArgument, 0, false},
		{"half quoted", `"3`, body, model.Result{}, 400, CodeInvalidArgument, 0, false},
		{"id differs", "", `{"id":"j2","trigger_time":1,"callback_url":"http://x"}`, model.Result{}, 400, CodeInvalidArgument, 0, false},
		{"id same", "", `{"id":"j1","trigger_time":1,"callback_url":"http://x"}`, model.Result{Code: model.CodeCreated}, 201, "", 0, true},
		{"empty body", "", ``, model.Result{}, 400, CodeInvalidArgument, 0, false},
		{"invalid spec", "", `{"trigger_time":1}`, model.Result{}, 400, CodeInvalidArgument, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeBackend{upsertFn: func() (model.Result, error) { return tc.res, nil }}
			var hdr []string
			if tc.ifMatch != "" {
				hdr = []string{"If-Match", tc.ifMatch}
			}
			r := do(newTestServer(f).Handler(), "PUT", uri, tc.body, hdr...)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			if tc.code != "" {
				if code, _ := r.errorBody(t); code != tc.code {
					t.Fatalf("code %s", code)
				}
			}
			if called := len(f.called()) > 0; called != tc.called {
				t.Fatalf("backend called: %v", f.called())
			}
			if tc.called && (f.upsertIfMatch != tc.want || f.upsertColl != "orders" || f.upsertID != "j1") {
				t.Fatalf("backend got %q %q ifMatch %d", f.upsertColl, f.upsertID, f.upsertIfMatch)
			}
		})
	}
}

func TestUpsertRoundTripsGet(t *testing.T) {
	// A client can GET a job and PUT the answer back unchanged.
	f := &fakeBackend{job: &model.Job{
		Collection: "orders", ID: "j1", Version: 4, Status: model.StatusFailed, TriggerTime: 5, DueTime: 5,
		CallbackURL: "http://x", Meta: []byte(`{"a":1}`), Attempts: 5, LastError: "HTTP 500", CreatedAt: 1, UpdatedAt: 2, FinishedAt: 3,
	}}
	s := newTestServer(f)
	got := do(s.Handler(), "GET", "/v1/collections/orders/jobs/j1", "")
	if got.status != 200 {
		t.Fatalf("%d", got.status)
	}
	r := do(s.Handler(), "PUT", "/v1/collections/orders/jobs/j1", string(got.body), "If-Match", got.header["Etag"]+got.header["ETag"])
	if r.status != 201 || f.upsertIfMatch != 4 || string(f.upsertSpec.Meta) != `{"a":1}` ||
		f.upsertSpec.Retry != model.DefaultRetryPolicy {
		t.Fatalf("%d %s; spec %+v ifMatch %d", r.status, r.body, f.upsertSpec, f.upsertIfMatch)
	}
}

func TestGetDeleteJob(t *testing.T) {
	f := &fakeBackend{}
	s := newTestServer(f)
	r := do(s.Handler(), "GET", "/v1/collections/orders/jobs/nope", "")
	if code, _ := r.errorBody(t); r.status != 404 || code != CodeNotFound {
		t.Fatalf("%d %s", r.status, code)
	}
	r = do(s.Handler(), "DELETE", "/v1/collections/orders/jobs/j:1@x+y=z~w", "")
	if r.status != 204 || len(r.body) != 0 || f.deletedJob != [2]string{"orders", "j:1@x+y=z~w"} {
		t.Fatalf("%d %q %v", r.status, r.body, f.deletedJob)
	}
	f.err = model.NotFound("job %q does not exist", "j")
	r = do(s.Handler(), "DELETE", "/v1/collections/orders/jobs/j", "")
	if code, _ := r.errorBody(t); r.status != 404 || code != CodeNotFound {
		t.Fatalf("%d %s", r.status, code)
	}
}

// A DELETE or PUT of a job whose callback has started answers 409
// conflict with the job, status firing (docs/api.md#jobs).
func TestDeleteAndPutOfAFiringJob(t *testing.T) {
	f := &fakeBackend{}
	s := newTestServer(f)
	f.err = model.Firing(&model.Job{Collection: "orders", ID: "j", Version: 3, Status: model.StatusFiring, TriggerTime: 5, DueTime: 5, CallbackURL: "https://example.com/h"})
	f.upsertFn = func() (model.Result, error) { return model.Result{Code: model.CodeFiring}, f.err }
	for _, req := range [][3]string{
		{"DELETE", "/v1/collections/orders/jobs/j", ""},
		{"PUT", "/v1/collections/orders/jobs/j", `{"trigger_time":9,"callback_url":"https://example.com/h"}`},
	} {
		r := do(s.Handler(), req[0], req[1], req[2])
		var body struct {
			Error struct{ Code string } `json:"error"`
			Job   struct {
				ID      string `json:"id"`
				Status  string `json:"status"`
				Version uint64 `json:"version"`
			} `json:"job"`
		}
		mustJSON(t, r.body, &body)
		if r.status != 409 || body.Error.Code != CodeConflict || body.Job.ID != "j" || body.Job.Status != "firing" || body.Job.Version != 3 {
			t.Fatalf("%s: %d %s", req[0], r.status, r.body)
		}
	}
}

func TestListQuery(t *testing.T) {
	cur := encodeCursor(&model.ListPos{Trigger: 1767225600000, ID: "job-9"})
	cases := []struct {
		query string
		want  model.ListQuery
		msg   string // non-empty: a 400 containing this
	}{
		{"", model.ListQuery{Coll: "c", From: math.MinInt64, To: math.MaxInt64, Limit: 100}, ""},
		{"status=failed&limit=1000", model.ListQuery{Coll: "c", Status: model.StatusFailed, From: math.MinInt64, To: math.MaxInt64, Limit: 1000}, ""},
		{"from=5&to=2026-01-01T00:00:00Z&limit=1", model.ListQuery{Coll: "c", From: 5, To: 1767225600000, Limit: 1}, ""},
		{"to=2026-01-01T01:00:00%2B01:00", model.ListQuery{Coll: "c", From: math.MinInt64, To: 1767225600000, Limit: 100}, ""},
		{"to=2026-01-01T01:00:00+01:00", model.ListQuery{Coll: "c", From: math.MinInt64, To: 1767225600000, Limit: 100}, ""},
		{"cursor=" + cur, model.ListQuery{Coll: "c", From: math.MinInt64, To: math.MaxInt64, Limit: 100, After: &model.ListPos{Trigger: 1767225600000, ID: "job-9"}}, ""},
		{"status=done", model.ListQuery{}, "status"},
		{"limit=0", model.ListQuery{}, "limit"},
		{"limit=1001", model.ListQuery{}, "limit"},
		{"limit=ten", model.ListQuery{}, "limit"},
		{"from=yesterday", model.ListQuery{}, "from"},
		{"to=1.5", model.ListQuery{}, "to"},
		{"from=10&to=5", model.ListQuery{}, "after"},
		{"cursor=!!!", model.ListQuery{}, "cursor"},
		{"cursor=AgE", model.ListQuery{}, "cursor"},
		{"cursor=AQ", model.ListQuery{}, "cursor"},
		{"cursor=" + cur + "A", model.ListQuery{}, "cursor"},
		{"limt=5", model.ListQuery{}, `did you mean "limit"`},
		{"order=desc", model.ListQuery{}, "unknown query parameter"},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			f := &fakeBackend{}
			r := do(newTestServer(f).Handler(), "GET", "/v1/collections/c/jobs?"+tc.query, "")
			if tc.msg != "" {
				if r.status != 400 {
					t.Fatalf("status %d", r.status)
				}
				if _, msg := r.errorBody(t); !strings.Contains(msg, tc.msg) {
					t.Fatalf("message %q", msg)
				}
				if len(f.called()) != 0 {
					t.Fatal("backend called")
				}
				return
			}
			if r.status != 200 {
				t.Fatalf("status %d %s", r.status, r.body)
			}
			g := f.listQ
			if g.Coll != tc.want.Coll || g.Status != tc.want.Status || g.From != tc.want.From || g.To != tc.want.To ||
				g.Limit != tc.want.Limit || (g.After == nil) != (tc.want.After == nil) || (g.After != nil && *g.After != *tc.want.After) {
				t.Fatalf("query %+v, want %+v", g, tc.want)
			}
		})
	}
}

func TestListJobsAnswer(t *testing.T) {
	f := &fakeBackend{
		listJobs: []*model.Job{
			{Collection: "c", ID: "a", Status: model.StatusScheduled, TriggerTime: 1, DueTime: 1, CallbackURL: "http://x"},
			{Collection: "c", ID: "b", Status: model.StatusSucceeded, TriggerTime: 2, DueTime: 2, Route: "r"},
		},
		listNext: &model.ListPos{Trigger: 2, ID: "b"},
	}
	s := newTestServer(f)
	r := do(s.Handler(), "GET", "/v1/collections/c/jobs", "")
	var out struct {
		Jobs       []map[string]any `json:"jobs"`
		NextCursor string           `json:"next_cursor"`
	}
	mustJSON(t, r.body, &out)
	if len(out.Jobs) != 2 || out.Jobs[1]["id"] != "b" || out.NextCursor == "" {
		t.Fatalf("%s", r.body)
	}
	// The cursor comes back as the position it encodes.
	do(s.Handler(), "GET", "/v1/collections/c/jobs?cursor="+out.NextCursor, "")
	if f.listQ.After == nil || *f.listQ.After != *f.listNext {
		t.Fatalf("after %+v", f.listQ.After)
	}
	// The end: an empty cursor and an empty list, never null.
	f.listJobs, f.listNext = nil, nil
	r = do(s.Handler(), "GET", "/v1/collections/c/jobs", "")
	if string(r.body) != `{"jobs":[],"next_cursor":""}` {
		t.Fatalf("%s", r.body)
	}
}

func TestCursorRoundTrip(t *testing.T) {
	for _, p := range []model.ListPos{
		{Trigger: 0, ID: "a"}, {Trigger: -1, ID: ""}, {Trigger: math.MaxInt64, ID: strings.Repeat("z", 255)},
		{Trigger: math.MinInt64, ID: "x:y@z~=+-._"}, {Trigger: 1767225600000, ID: "01JGQ3ZK1M0000000000000000"},
	} {
		c := encodeCursor(&p)
		if strings.ContainsAny(c, "+/=") {
			t.Fatalf("cursor %q is not unpadded base64url", c)
		}
		got, err := decodeCursor(c)
		if err != nil || *got != p {
			t.Fatalf("%+v → %q → %+v, %v", p, c, got, err)
		}
	}
	if encodeCursor(nil) != "" {
		t.Fatal("nil cursor")
	}
}

func FuzzDecodeCursor(f *testing.F) {
	f.Add(encodeCursor(&model.ListPos{Trigger: 5, ID: "a"}))
	f.Add("")
	f.Add("AQ")
	f.Add("AYCAgICAgICAgIAB")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := decodeCursor(s)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to itself: one spelling per position.
		if again := encodeCursor(p); again != s {
			t.Fatalf("%q decodes to %+v which encodes to %q", s, p, again)
		}
	})
}

// A DELETE with If-Match is refused before it reaches the backend: the
// delete is unconditional, and ignoring the header would delete a job or
// schedule the client meant to keep if it had changed.
func TestDeleteRefusesIfMatch(t *testing.T) {
	for _, uri := range []string{jobsURI + "/j", "/v1/collections/orders/schedules/s"} {
		f := &fakeBackend{}
		h := newTestServer(f).Handler()
		r := do(h, "DELETE", uri, "", "If-Match", "3")
		if r.status != 400 {
			t.Fatalf("DELETE %s with If-Match: %d %s", uri, r.status, r.body)
		}
		if code, msg := r.errorBody(t); code != CodeInvalidArgument || !strings.Contains(msg, "If-Match") {
			t.Fatalf("DELETE %s: %s %s", uri, code, msg)
		}
		if len(f.calls) != 0 {
			t.Fatalf("DELETE %s with If-Match reached the backend: %v", uri, f.calls)
		}
		if r := do(h, "DELETE", uri, ""); r.status != 204 {
			t.Fatalf("DELETE %s: %d %s", uri, r.status, r.body)
		}
	}
}

// A precondition header on a write that would not honour it is refused
// before the write reaches the backend: ignoring it made the write
// unconditional behind the client's back (a black-box review: If-Match on
// a collection's or a route's PUT, If-None-Match on a job's PUT).
func TestWritesRefuseUnhonouredPreconditions(t *testing.T) {
	for _, c := range []struct{ method, uri, header string }{
		{"PUT", "/v1/collections/orders", "If-Match"},
		{"DELETE", "/v1/collections/orders", "If-Match"},
		{"PUT", "/v1/routes/r", "If-Match"},
		{"DELETE", "/v1/routes/r", "If-Match"},
		{"POST", jobsURI, "If-Match"},
		{"POST", "/v1/collections/orders/redrive", "If-Match"},
		{"POST", "/v1/admin/rebalance", "If-Match"},
		{"PUT", jobsURI + "/j", "If-None-Match"},
		{"POST", jobsURI, "If-None-Match"},
		{"PUT", "/v1/collections/orders/schedules/s", "If-None-Match"},
		{"DELETE", jobsURI + "/j", "If-None-Match"},
	} {
		f := &fakeBackend{}
		r := do(newTestServer(f).Handler(), c.method, c.uri, `{}`, c.header, "*")
		if r.status != 400 {
			t.Fatalf("%s %s with %s: %d %s", c.method, c.uri, c.header, r.status, r.body)
		}
		if code, msg := r.errorBody(t); code != CodeInvalidArgument || !strings.Contains(msg, c.header) {
			t.Fatalf("%s %s with %s: %s %s", c.method, c.uri, c.header, code, msg)
		}
		if len(f.calls) != 0 {
			t.Fatalf("%s %s with %s reached the backend: %v", c.method, c.uri, c.header, f.calls)
		}
	}
	// Reads are left alone.
	if r := do(newTestServer(&fakeBackend{}).Handler(), "GET", "/v1/collections/orders", "", "If-None-Match", `"1"`); r.status == 400 {
		t.Fatalf("GET with If-None-Match: %d %s", r.status, r.body)
	}
}

// A batch item without an id that the backend refuses (its route does
// not exist, say) answers with an empty id: the id made up for it names
// no job (a black-box review found a fresh id on a 400 item).
func TestBatchRefusedItemKeepsNoMadeUpID(t *testing.T) {
	f := &fakeBackend{createFn: func(coll string, in []model.JobInput) ([]model.JobResult, error) {
		out := []model.JobResult{
			{ID: in[0].ID, Code: model.CodeCreated, Job: storedJob(coll, in[0].ID, in[0].Spec)},
			{ID: in[1].ID, Err: model.Invalid("route %q does not exist", "nope")},
		}
		return out, nil
	}}
	r := do(newTestServer(f).Handler(), "POST", jobsURI, `[{"trigger_time":1,"callback_url":"http://x"},{"trigger_time":1,"route":"nope"}]`)
	var out struct {
		Results []struct {
			ID     string
			Status int
		}
	}
	mustJSON(t, r.body, &out)
	if r.status != 200 || len(out.Results) != 2 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if out.Results[0].ID == "" || out.Results[0].Status != 201 {
		t.Fatalf("the created item: %+v", out.Results[0])
	}
	if out.Results[1].ID != "" || out.Results[1].Status != 400 {
		t.Fatalf("the refused item: %+v, want status 400 and no id", out.Results[1])
	}
}

// A path segment is only ever a segment: an id of ".." (plain or
// percent-encoded) or one holding an encoded '/' reaches its handler as
// that id and is refused, never resolved into the collection or route it
// would climb to. Before, fasthttp's normalised path did that, and a
// DELETE of job ".." deleted the collection with all its jobs (a
// black-box review).
func TestDotSegmentsNeverClimb(t *testing.T) {
	for _, c := range []struct {
		method, uri string
		status      int
	}{
		{"DELETE", jobsURI + "/..", 400},
		{"DELETE", jobsURI + "/%2E%2E", 400},
		{"DELETE", jobsURI + "/%2e%2e", 400},
		{"DELETE", jobsURI + "/.", 400},
		{"DELETE", jobsURI + "/a%2F..%2F..", 400},
		{"GET", jobsURI + "/..", 400},
		{"GET", jobsURI + "/a%2Fb", 400},
		{"PUT", jobsURI + "/%2E%2E", 400},
		{"DELETE", "/v1/collections/orders/schedules/..", 400},
		{"PUT", "/v1/collections/orders/schedules/%2E%2E", 400},
		{"DELETE", "/v1/collections/orders/jobs/%2E%2E/%2E%2E/%2E%2E/routes/r", 404},
		{"DELETE", "/v1/collections/orders/jobs/../../../routes/r", 404},
		{"DELETE", "/v1/routes/x/..", 404},
		{"DELETE", "/v1/collections/..", 400},
	} {
		f := &fakeBackend{}
		r := do(newTestServer(f).Handler(), c.method, c.uri, `{}`)
		if r.status != c.status {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.uri, r.status, r.body, c.status)
			continue
		}
		r.errorBody(t)
		if calls := f.called(); len(calls) != 0 {
			t.Errorf("%s %s reached the backend: %v", c.method, c.uri, calls)
		}
	}
	// Repeated and trailing slashes still reach their endpoint.
	for _, uri := range []string{"/v1//collections/orders/jobs/j/", "/v1/collections/orders//jobs/j//"} {
		f := &fakeBackend{}
		do(newTestServer(f).Handler(), "DELETE", uri, "")
		if f.deletedJob != [2]string{"orders", "j"} {
			t.Errorf("DELETE %s: backend saw %v", uri, f.deletedJob)
		}
	}
	if r := do(newTestServer(&fakeBackend{}).Handler(), "GET", "/", ""); r.status != 302 {
		t.Errorf("GET /: %d", r.status)
	}
	// What percent-encoding may spell still arrives decoded, once.
	f := &fakeBackend{}
	h := newTestServer(f).Handler()
	do(h, "DELETE", jobsURI+"/a%40b%2B1%3Ax", "")
	if f.deletedJob != [2]string{"orders", "a@b+1:x"} {
		t.Fatalf("DELETE of an encoded id: backend saw %v", f.deletedJob)
	}
}

// An empty If-Match, or two, is a 400 that reaches nothing: taken as
// absent, the PUT went through unconditionally (a black-box review: a
// client sending an unset version replaced the job, or created it).
func TestEmptyOrRepeatedIfMatchRefused(t *testing.T) {
	for _, uri := range []string{jobsURI + "/j", "/v1/collections/orders/schedules/s"} {
		for _, vals := range [][]string{{""}, {"  "}, {"1", "2"}} {
			f := &fakeBackend{}
			var req fasthttp.Request
			req.Header.SetMethod("PUT")
			req.SetRequestURI(uri)
			req.SetBodyString(`{"every":"1s","callback_url":"http://127.0.0.1:9/x"}`)
			if strings.Contains(uri, "/jobs/") {
				req.SetBodyString(`{"delay":"1h","callback_url":"http://127.0.0.1:9/x"}`)
			}
			for _, v := range vals {
				req.Header.Add("If-Match", v)
			}
			var ctx fasthttp.RequestCtx
			ctx.Init(&req, nil, nil)
			newTestServer(f).Handler()(&ctx)
			if st := ctx.Response.StatusCode(); st != 400 || !strings.Contains(string(ctx.Response.Body()), "If-Match") {
				t.Errorf("PUT %s with If-Match %q: %d %s", uri, vals, st, ctx.Response.Body())
			}
			if len(f.calls) != 0 {
				t.Errorf("PUT %s with If-Match %q reached the backend: %v", uri, vals, f.calls)
			}
		}
	}
}

// A list parameter given twice is a 400 on both lists: the first value won
// silently.
func TestListParameterGivenTwice(t *testing.T) {
	for _, uri := range []string{jobsURI + "?status=failed&status=scheduled", jobsURI + "?limit=1&limit=2", "/v1/collections/orders/schedules?limit=1&limit=2"} {
		f := &fakeBackend{}
		r := do(newTestServer(f).Handler(), "GET", uri, "")
		if r.status != 400 {
			t.Fatalf("GET %s: %d %s", uri, r.status, r.body)
		}
		if _, msg := r.errorBody(t); !strings.Contains(msg, "more than once") {
			t.Fatalf("GET %s: %s", uri, msg)
		}
		if len(f.calls) != 0 {
			t.Fatalf("GET %s reached the backend: %v", uri, f.calls)
		}
	}
}
