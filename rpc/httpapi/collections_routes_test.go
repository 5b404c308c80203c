package httpapi

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/timemachine-db/timemachine/model"
)

func TestCollectionValidation(t *testing.T) {
	cases := []struct{ name, body, msg string }{
		{"unknown field", `{"retension":"1h"}`, `did you mean "retention"`},
		{"not object", `[1]`, "JSON object"},
		{"malformed", `{"retention":`, "not valid JSON"},
		{"retention short", `{"retention":"500ms"}`, "retention: must be from 1s"},
		{"retention long", `{"retention":"87601h"}`, "retention"},
		{"retention number", `{"retention":3600}`, "Go duration"},
		{"timeout", `{"callback_timeout":"61m"}`, "callback_timeout"},
		{"retry", `{"retry_policy":{"multiplier":"2"}}`, "retry_policy.multiplier: must be a number"},
		{"secret prefix", `{"signing_secret":"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}`, `"whsec_"`},
		{"secret base64", `{"signing_secret":"whsec_not*base64"}`, "base64"},
		{"secret unpadded", `{"signing_secret":"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2La"}`, "base64"},
		{"secret short", `{"signing_secret":"whsec_c2hvcnQ="}`, "decodes to 5 bytes"},
		{"secret long", `{"signing_secret":"whsec_` + b64(65) + `"}`, "decodes to 65 bytes"},
		{"secret type", `{"signing_secret":true}`, "must be a string"},
		{"name mismatch", `{"name":"other"}`, "path says"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeBackend{}
			r := do(newTestServer(f).Handler(), "PUT", "/v1/collections/orders", tc.body)
			if r.status != 400 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			code, msg := r.errorBody(t)
			if code != CodeInvalidArgument || !strings.Contains(msg, tc.msg) {
				t.Fatalf("%s %q, want %q", code, msg, tc.msg)
			}
			if strings.Contains(msg, "MfKQ9r8G") {
				t.Fatalf("message echoes the secret: %q", msg)
			}
			if len(f.called()) != 0 {
				t.Fatal("backend called")
			}
		})
	}
}

// b64 is the standard base64 of n zero bytes.
func b64(n int) string { return base64.StdEncoding.EncodeToString(make([]byte, n)) }

func TestPutCollection(t *testing.T) {
	for _, tc := range []struct {
		body    string
		created bool
		status  int
		want    model.Collection
	}{
		{``, true, 201, model.Collection{Name: "orders"}},
		{`{}`, false, 200, model.Collection{Name: "orders"}},
		{`{"retry_policy":{"max_attempts":7,"max_age":"1h"},"callback_timeout":"3s","retention":"48h","signing_secret":"` + validSecret + `",
		   "name":"orders","signing_secret_set":true,"status":"active","created_at":1,"updated_at":2}`, true, 201,
			model.Collection{Name: "orders", Retry: model.RetryPolicy{MaxAttempts: 7, MaxAgeMs: 3600_000}, CallbackTimeoutMs: 3000, RetentionMs: 48 * 3600_000, SigningSecret: validSecret}},
		{`{"signing_secret":""}`, true, 201, model.Collection{Name: "orders"}},
	} {
		f := &fakeBackend{created: tc.created}
		r := do(newTestServer(f).Handler(), "PUT", "/v1/collections/orders", tc.body)
		if r.status != tc.status {
			t.Fatalf("%q: status %d %s", tc.body, r.status, r.body)
		}
		if f.putColl != tc.want {
			t.Fatalf("%q: backend got %+v", tc.body, f.putColl)
		}
		if strings.Contains(string(r.body), "whsec_") {
			t.Fatalf("secret echoed: %s", r.body)
		}
		var c map[string]any
		mustJSON(t, r.body, &c)
		if c["name"] != "orders" || c["signing_secret_set"] != (tc.want.SigningSecret != "") {
			t.Fatalf("%s", r.body)
		}
	}
}

func TestPutCollectionShowsStored(t *testing.T) {
	// When this node already sees the write, the stored timestamps show.
	f := &fakeBackend{coll: &model.Collection{Name: "orders", RetentionMs: 3600_000, CreatedAt: 11, UpdatedAt: 22}}
	r := do(newTestServer(f).Handler(), "PUT", "/v1/collections/orders", `{"retention":"1h"}`)
	var c struct{ CreatedAt, UpdatedAt int64 }
	mustJSON(t, r.body, &struct {
		CreatedAt *int64 `json:"created_at"`
		UpdatedAt *int64 `json:"updated_at"`
	}{&c.CreatedAt, &c.UpdatedAt})
	if c.CreatedAt != 11 || c.UpdatedAt != 22 {
		t.Fatalf("%s", r.body)
	}
	// A lagging view (different config) is not shown as the new state.
	r = do(newTestServer(f).Handler(), "PUT", "/v1/collections/orders", `{"retention":"2h"}`)
	if !strings.Contains(string(r.body), `"retention":"2h"`) || !strings.Contains(string(r.body), `"created_at":11,`) {
		t.Fatalf("%s", r.body)
	}
}

func TestCollectionRendering(t *testing.T) {
	c := &model.Collection{Name: "orders", Retry: model.RetryPolicy{MaxAttempts: 9}, RetentionMs: 1000, SigningSecret: validSecret, Deleting: true, CreatedAt: 5, UpdatedAt: 6}
	got := string(appendCollection(nil, c))
	want := `{"name":"orders","retry_policy":{"max_attempts":9,"initial_interval":"1s","multiplier":2,"max_interval":"10m","max_age":"24h"},"callback_timeout":"10s","retention":"1s","signing_secret_set":true,"status":"deleting","created_at":5,"updated_at":6}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	f := &fakeBackend{colls: []*model.Collection{{Name: "default"}, c}}
	r := do(newTestServer(f).Handler(), "GET", "/v1/collections", "")
	if r.status != 200 || !strings.HasPrefix(string(r.body), `{"collections":[{"name":"default",`) || strings.Contains(string(r.body), "whsec_") {
		t.Fatalf("%s", r.body)
	}
	f.colls = nil
	if r := do(newTestServer(f).Handler(), "GET", "/v1/collections", ""); string(r.body) != `{"collections":[]}` {
		t.Fatalf("%s", r.body)
	}
	f.coll = c
	if r := do(newTestServer(f).Handler(), "GET", "/v1/collections/orders", ""); string(r.body) != want {
		t.Fatalf("%s", r.body)
	}
	r = do(newTestServer(f).Handler(), "DELETE", "/v1/collections/orders", "")
	if r.status != 204 || f.deletedColl != "orders" {
		t.Fatalf("%d", r.status)
	}
}

func TestRouteValidation(t *testing.T) {
	cases := []struct{ name, body, msg string }{
		{"no url", `{}`, "webhook_url is missing"},
		{"empty body", ``, "empty"},
		{"bad url", `{"webhook_url":"example.com/hook"}`, "absolute"},
		{"unknown", `{"webhook_url":"http://x","header":{}}`, `did you mean "headers"`},
		{"headers not object", `{"webhook_url":"http://x","headers":["a"]}`, "headers must be a JSON object"},
		{"header value not string", `{"webhook_url":"http://x","headers":{"X-A":1}}`, `headers["X-A"]: must be a string`},
		{"header bad name", `{"webhook_url":"http://x","headers":{"X A":"1"}}`, "not a valid HTTP header name"},
		{"header name colon", `{"webhook_url":"http://x","headers":{"X-A:":"1"}}`, "not a valid HTTP header name"},
		{"header empty name", `{"webhook_url":"http://x","headers":{"":"1"}}`, "header names"},
		{"header crlf", `{"webhook_url":"http://x","headers":{"X-A":"1\r\nX-B: 2"}}`, "CR or LF"},
		{"header nul", `{"webhook_url":"http://x","headers":{"X-A":"1\u0000"}}`, "control"},
		{"content-type", `{"webhook_url":"http://x","headers":{"content-type":"text/plain"}}`, "callback protocol"},
		{"host", `{"webhook_url":"http://x","headers":{"Host":"y"}}`, "callback protocol"},
		{"idempotency", `{"webhook_url":"http://x","headers":{"IDEMPOTENCY-KEY":"y"}}`, "callback protocol"},
		{"attempt", `{"webhook_url":"http://x","headers":{"X-Timemachine-Attempt":"y"}}`, "callback protocol"},
		{"webhook-id", `{"webhook_url":"http://x","headers":{"Webhook-Id":"y"}}`, "callback protocol"},
		{"webhook-timestamp", `{"webhook_url":"http://x","headers":{"webhook-timestamp":"y"}}`, "callback protocol"},
		{"webhook-signature", `{"webhook_url":"http://x","headers":{"webhook-signature":"y"}}`, "callback protocol"},
		{"content-length", `{"webhook_url":"http://x","headers":{"Content-Length":"1"}}`, "callback protocol"},
		{"duplicate", `{"webhook_url":"http://x","headers":{"X-A":"1","x-a":"2"}}`, "same header"},
		{"model.Redacted placeholder", `{"webhook_url":"http://x","headers":{"Authorization":"REDACTED"}}`, "placeholder"},
		{"too many", `{"webhook_url":"http://x","headers":{` + manyHeaders(65) + `}}`, "at most 64"},
		{"timeout", `{"webhook_url":"http://x","timeout":"0s"}`, "timeout"},
		{"secret", `{"webhook_url":"http://x","signing_secret":"whsec_abc"}`, "base64"},
		{"name mismatch", `{"webhook_url":"http://x","name":"other"}`, "path says"},
		{"rate not object", `{"webhook_url":"http://x","rate_limit":5}`, "rate_limit"},
		{"rate missing", `{"webhook_url":"http://x","rate_limit":{"burst":5}}`, "rate_limit.per_second is missing"},
		{"rate zero", `{"webhook_url":"http://x","rate_limit":{"per_second":0}}`, "rate_limit.per_second: must be a number from"},
		{"rate negative", `{"webhook_url":"http://x","rate_limit":{"per_second":-1}}`, "rate_limit.per_second"},
		{"rate huge", `{"webhook_url":"http://x","rate_limit":{"per_second":1e7}}`, "rate_limit.per_second"},
		{"rate string", `{"webhook_url":"http://x","rate_limit":{"per_second":"100"}}`, "must be a number"},
		{"burst zero", `{"webhook_url":"http://x","rate_limit":{"per_second":10,"burst":0}}`, "rate_limit.burst: must be an integer from 1"},
		{"burst fraction", `{"webhook_url":"http://x","rate_limit":{"per_second":10,"burst":1.5}}`, "rate_limit.burst"},
		{"rate unknown", `{"webhook_url":"http://x","rate_limit":{"per_second":10,"brust":2}}`, `did you mean "burst"`},
		{"in flight zero", `{"webhook_url":"http://x","max_in_flight":0}`, "max_in_flight: must be an integer from 1"},
		{"in flight huge", `{"webhook_url":"http://x","max_in_flight":100001}`, "max_in_flight"},
		{"batch jobs zero", `{"webhook_url":"http://x","batch":{"max_jobs":0}}`, "batch.max_jobs: must be an integer from 1 to 1000"},
		{"batch jobs huge", `{"webhook_url":"http://x","batch":{"max_jobs":1001}}`, "batch.max_jobs"},
		{"batch wait long", `{"webhook_url":"http://x","batch":{"max_jobs":10,"max_wait":"11s"}}`, "batch.max_wait: must be from"},
		{"batch wait number", `{"webhook_url":"http://x","batch":{"max_jobs":10,"max_wait":20}}`, "Go duration"},
		{"batch unknown", `{"webhook_url":"http://x","batch":{"max_job":10}}`, `did you mean "max_jobs"`},
		{"pipeline string", `{"webhook_url":"http://x","pipeline":"true"}`, `pipeline: must be true or false, got a string "true"`},
		{"pipeline number", `{"webhook_url":"http://x","pipeline":1}`, "pipeline: must be true or false, got a number 1"},
		{"pipeline object", `{"webhook_url":"http://x","pipeline":{}}`, "pipeline: must be true or false"},
		{"pipeline misspelt", `{"webhook_url":"http://x","pipelined":true}`, `did you mean "pipeline"`},
		{"pipeline with batch", `{"webhook_url":"http://x","pipeline":true,"batch":{"max_jobs":10}}`, "pipeline and batch do not combine"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeBackend{}
			r := do(newTestServer(f).Handler(), "PUT", "/v1/routes/billing", tc.body)
			if r.status != 400 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			if code, msg := r.errorBody(t); code != CodeInvalidArgument || !strings.Contains(msg, tc.msg) {
				t.Fatalf("%s %q, want %q", code, msg, tc.msg)
			}
			if len(f.called()) != 0 {
				t.Fatal("backend called")
			}
		})
	}
}

// TestRouteDeliveryControl: rate_limit, max_in_flight, batch and pipeline
// reach the backend and come back in GET, with defaults filled in
// (pipeline shown only when true).
func TestRouteDeliveryControl(t *testing.T) {
	for _, tc := range []struct {
		body string
		want model.Route
		echo string
	}{
		{`{"webhook_url":"http://x","rate_limit":{"per_second":100,"burst":20},"max_in_flight":10,"batch":{"max_jobs":50,"max_wait":"20ms"}}`,
			model.Route{RateLimit: model.RateLimit{PerSecond: 100, Burst: 20}, MaxInFlight: 10, Batch: model.BatchPolicy{MaxJobs: 50, MaxWaitMs: 20}},
			`"timeout":"2s","rate_limit":{"per_second":100,"burst":20},"max_in_flight":10,"batch":{"max_jobs":50,"max_wait":"20ms"},"signing_secret_set":false`},
		{`{"webhook_url":"http://x","rate_limit":{"per_second":0.5},"batch":{}}`,
			model.Route{RateLimit: model.RateLimit{PerSecond: 0.5}, Batch: model.BatchPolicy{MaxJobs: 100}},
			`"timeout":"2s","rate_limit":{"per_second":0.5,"burst":1},"batch":{"max_jobs":100,"max_wait":"0s"},"signing_secret_set":false`},
		{`{"webhook_url":"http://x","rate_limit":null,"max_in_flight":null,"batch":null,"pipeline":null}`,
			model.Route{}, `"timeout":"2s","signing_secret_set":false`},
		{`{"webhook_url":"http://x", "pipeline" : true }`,
			model.Route{Pipeline: true}, `"timeout":"2s","pipeline":true,"signing_secret_set":false`},
		{`{"webhook_url":"http://x","pipeline":false}`,
			model.Route{}, `"timeout":"2s","signing_secret_set":false`},
		{`{"webhook_url":"http://x","max_in_flight":8,"rate_limit":{"per_second":10},"pipeline":true}`,
			model.Route{MaxInFlight: 8, RateLimit: model.RateLimit{PerSecond: 10}, Pipeline: true},
			`"timeout":"2s","rate_limit":{"per_second":10,"burst":1},"max_in_flight":8,"pipeline":true,"signing_secret_set":false`},
	} {
		f := &fakeBackend{created: true}
		r := do(newTestServer(f).Handler(), "PUT", "/v1/routes/billing", strings.Replace(tc.body, "{", `{"timeout":"2s",`, 1))
		if r.status != 201 {
			t.Fatalf("%s: %d %s", tc.body, r.status, r.body)
		}
		got := f.putRoute
		if got.RateLimit != tc.want.RateLimit || got.MaxInFlight != tc.want.MaxInFlight || got.Batch != tc.want.Batch ||
			got.Pipeline != tc.want.Pipeline {
			t.Fatalf("%s: backend got %+v", tc.body, got)
		}
		if !strings.Contains(string(appendRoute(nil, &got)), tc.echo) {
			t.Fatalf("%s: rendered %s, want %s", tc.body, appendRoute(nil, &got), tc.echo)
		}
		if !strings.Contains(string(r.body), tc.echo) {
			t.Fatalf("%s: PUT answered %s, want %s", tc.body, r.body, tc.echo)
		}
	}
}

func manyHeaders(n int) string {
	var parts []string
	for i := 0; i < n; i++ {
		parts = append(parts, `"X-H`+strings.Repeat("a", i)+`":"v"`)
	}
	return strings.Join(parts, ",")
}

func TestPutRouteAndRendering(t *testing.T) {
	f := &fakeBackend{created: true}
	body := `{"webhook_url":"https://billing.example.com/hook","headers":{"Authorization":"Bearer s3cr3t","X-Api-Key":"k3y","X-Team":"billing","Cookie":"c00kie"},
		"signing_secret":"` + validSecret + `","timeout":"15s","signing_secret_set":false,"created_at":0}`
	r := do(newTestServer(f).Handler(), "PUT", "/v1/routes/billing", body)
	if r.status != 201 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if f.putRoute.WebhookURL != "https://billing.example.com/hook" || f.putRoute.Headers["Authorization"] != "Bearer s3cr3t" ||
		f.putRoute.SigningSecret != validSecret || f.putRoute.TimeoutMs != 15000 || f.putRoute.Name != "billing" {
		t.Fatalf("backend got %+v", f.putRoute)
	}
	for _, secret := range []string{"s3cr3t", "k3y", "c00kie", "whsec_"} {
		if strings.Contains(string(r.body), secret) {
			t.Fatalf("answer leaks %q: %s", secret, r.body)
		}
	}
	rt := f.putRoute
	rt.CreatedAt, rt.UpdatedAt = 7, 8
	want := `{"name":"billing","webhook_url":"https://billing.example.com/hook","headers":{"Authorization":"REDACTED","Cookie":"REDACTED","X-Api-Key":"REDACTED","X-Team":"billing"},"timeout":"15s","signing_secret_set":true,"created_at":7,"updated_at":8}`
	if got := string(appendRoute(nil, &rt)); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	f.route = &rt
	if r := do(newTestServer(f).Handler(), "GET", "/v1/routes/billing", ""); string(r.body) != want {
		t.Fatalf("%s", r.body)
	}
	f.routes = []*model.Route{&rt}
	if r := do(newTestServer(f).Handler(), "GET", "/v1/routes", ""); string(r.body) != `{"routes":[`+want+`]}` {
		t.Fatalf("%s", r.body)
	}
	f.routes = nil
	if r := do(newTestServer(f).Handler(), "GET", "/v1/routes", ""); string(r.body) != `{"routes":[]}` {
		t.Fatalf("%s", r.body)
	}
	if r := do(newTestServer(f).Handler(), "DELETE", "/v1/routes/billing", ""); r.status != 204 {
		t.Fatalf("%d", r.status)
	}
	// A route without timeout or headers.
	bare := model.Route{Name: "r", WebhookURL: "http://x"}
	if got := string(appendRoute(nil, &bare)); got != `{"name":"r","webhook_url":"http://x","headers":{},"signing_secret_set":false,"created_at":0,"updated_at":0}` {
		t.Fatalf("%s", got)
	}
	f.route = nil
	if r := do(newTestServer(f).Handler(), "GET", "/v1/routes/none", ""); r.status != 404 {
		t.Fatalf("%d", r.status)
	}
}

func TestSensitiveHeader(t *testing.T) {
	for name, want := range map[string]bool{
		"Authorization": true, "proxy-authorization": true, "Cookie": true, "X-Auth-Token": true,
		"X-Api-Key": true, "X-Client-Secret": true, "X-Password": true, "X-Signature": true,
		"X-Team": false, "Accept": false, "User-Agent": false,
	} {
		if got := model.SensitiveHeader(name); got != want {
			t.Errorf("%s: %v", name, got)
		}
	}
}

// The collection and route lists take no parameter: one is a 400, as on
// the job and schedule lists, not a silently whole list (?limit=1 read as
// a first page).
func TestUnpagedListsRefuseParameters(t *testing.T) {
	for _, uri := range []string{"/v1/collections", "/v1/routes"} {
		f := &fakeBackend{}
		h := newTestServer(f).Handler()
		r := do(h, "GET", uri+"?limit=1", "")
		if r.status != 400 {
			t.Fatalf("GET %s?limit=1: %d %s", uri, r.status, r.body)
		}
		if code, msg := r.errorBody(t); code != CodeInvalidArgument || !strings.Contains(msg, `"limit"`) {
			t.Fatalf("GET %s?limit=1: %s %s", uri, code, msg)
		}
		if len(f.calls) != 0 {
			t.Fatalf("GET %s?limit=1 reached the backend: %v", uri, f.calls)
		}
		if r := do(h, "GET", uri, ""); r.status != 200 {
			t.Fatalf("GET %s: %d %s", uri, r.status, r.body)
		}
	}
}
