package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestBadInputIsRejectedAndChangesNothing: every bad create answers 4xx
// with the contract's error body and creates nothing.
func TestBadInputIsRejectedAndChangesNothing(t *testing.T) {
	t.Parallel()
	s := shared(t)
	rcv := newReceiver(t)
	coll := s.newCollection(t, "valid", nil)
	route := uniq("validroute")
	mustStatus(t, "PUT route", s.Do(t, "PUT", "/v1/routes/"+route, map[string]any{"webhook_url": rcv.URL + "/r"}), http.StatusCreated)

	url := rcv.URL + "/hook"
	future := nowMs() + 3_600_000
	ok := func(id string) map[string]any {
		return map[string]any{"id": id, "trigger_time": future, "callback_url": url}
	}
	with := func(id string, kv ...any) map[string]any {
		m := ok(id)
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(m, kv[i].(string))
			} else {
				m[kv[i].(string)] = kv[i+1]
			}
		}
		return m
	}
	big := strings.Repeat("x", 65*1024)

	cases := []struct {
		name   string
		body   any // map, or string sent as is
		status int
		code   string
		id     string // must not exist afterwards
	}{
		{"malformed JSON", `{"id":"bad-json","trigger_time":` + fmt.Sprint(future) + `,`, 400, "invalid_argument", "bad-json"},
		{"empty body", "", 400, "invalid_argument", ""},
		{"JSON string body", `"job"`, 400, "invalid_argument", ""},
		{"no trigger", with("no-trigger", "trigger_time", nil), 400, "invalid_argument", "no-trigger"},
		{"trigger_time and delay", with("both-times", "delay", "10s"), 400, "invalid_argument", "both-times"},
		{"callback_url and route", with("both-targets", "route", route), 400, "invalid_argument", "both-targets"},
		{"no target", with("no-target", "callback_url", nil), 400, "invalid_argument", "no-target"},
		{"id with a space", ok("has space"), 400, "invalid_argument", ""},
		{"id with a slash", ok("a/b"), 400, "invalid_argument", ""},
		{"id of 256 bytes", ok(strings.Repeat("i", 256)), 400, "invalid_argument", ""},
		{"non-ASCII id", ok("h\u00e9llo"), 400, "invalid_argument", ""},
		{"id of dots", ok(".."), 400, "invalid_argument", ""},
		{"id a number", with("x", "id", 123), 400, "invalid_argument", ""},
		{"ftp URL", with("ftp-url", "callback_url", "ftp://example.com/hook"), 400, "invalid_argument", "ftp-url"},
		{"relative URL", with("rel-url", "callback_url", "/hook"), 400, "invalid_argument", "rel-url"},
		{"URL without scheme", with("noscheme-url", "callback_url", "example.com/hook"), 400, "invalid_argument", "noscheme-url"},
		{"URL with empty host", with("nohost-url", "callback_url", "http:///hook"), 400, "invalid_argument", "nohost-url"},
		{"URL http://", with("bare-url", "callback_url", "http://"), 400, "invalid_argument", "bare-url"},
		{"empty URL", with("empty-url", "callback_url", ""), 400, "invalid_argument", "empty-url"},
		{"URL a number", with("num-url", "callback_url", 42), 400, "invalid_argument", "num-url"},
		{"meta over 64 KiB", with("big-meta", "meta", map[string]any{"pad": big}), 413, "too_large", "big-meta"},
		{"unknown route", with("no-route", "callback_url", nil, "route", uniq("nosuchroute")), 404, "not_found", "no-route"},
		{"unknown field", with("typo", "trigger_tme", 5), 400, "invalid_argument", "typo"},
		{"camelCase field", with("camel", "callbackUrl", url), 400, "invalid_argument", "camel"},
		{"trigger_time not a time", with("bad-time", "trigger_time", "tomorrow"), 400, "invalid_argument", "bad-time"},
		{"trigger_time a boolean", with("bool-time", "trigger_time", true), 400, "invalid_argument", "bool-time"},
		{"trigger_time a fraction", with("frac-time", "trigger_time", 1.5), 400, "invalid_argument", "frac-time"},
		{"delay not a duration", with("bad-delay", "trigger_time", nil, "delay", "soon"), 400, "invalid_argument", "bad-delay"},
		{"delay negative", with("neg-delay", "trigger_time", nil, "delay", "-5s"), 400, "invalid_argument", "neg-delay"},
		{"delay a number", with("num-delay", "trigger_time", nil, "delay", 5), 400, "invalid_argument", "num-delay"},
		{"retry_policy a string", with("rp-str", "retry_policy", "fast"), 400, "invalid_argument", "rp-str"},
		{"max_attempts a string", with("rp-type", "retry_policy", map[string]any{"max_attempts": "5"}), 400, "invalid_argument", "rp-type"},
		{"retry_policy unknown field", with("rp-field", "retry_policy", map[string]any{"max_attempt": 5}), 400, "invalid_argument", "rp-field"},
		{"initial_interval not a duration", with("rp-dur", "retry_policy", map[string]any{"initial_interval": "1 second"}), 400, "invalid_argument", "rp-dur"},
		{"callback_timeout a number", with("cbt", "callback_timeout", 10), 400, "invalid_argument", "cbt"},
	}
	for _, c := range cases {
		r := s.Do(t, "POST", jobsPath(coll), c.body)
		if msg := checkError(r, c.status, c.code); msg != "" {
			t.Errorf("%s: %s", c.name, msg)
			continue
		}
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("%s: error with Content-Type %q", c.name, ct)
		}
		if c.id != "" {
			if _, found := s.getJob(t, coll, c.id); found {
				t.Errorf("%s: answered %d but created the job", c.name, r.Status)
			}
		}
	}

	// Unknown collection: 404, and no collection appears.
	nocoll := uniq("nosuchcoll")
	mustError(t, "POST to an unknown collection", s.Do(t, "POST", jobsPath(nocoll), ok("orphan")), 404, "not_found")
	mustError(t, "PUT in an unknown collection", s.Do(t, "PUT", jobPath(nocoll, "orphan"), ok("orphan")), 404, "not_found")
	mustError(t, "GET the unknown collection", s.Do(t, "GET", "/v1/collections/"+nocoll, nil), 404, "not_found")

	// Bad ids in the path of a PUT.
	putBody := map[string]any{"trigger_time": future, "callback_url": url}
	for _, p := range []string{"a%2Fb", "has%20space", strings.Repeat("p", 256), "h%C3%A9llo", "%2E%2E"} {
		r := s.Do(t, "PUT", jobPath(coll, p), putBody)
		if r.Status < 400 || r.Status > 499 {
			t.Errorf("PUT id %q: %s, want 4xx", p, r)
		} else if msg := checkError(r, r.Status, ""); msg != "" {
			t.Errorf("PUT id %q: %s", p, msg)
		}
	}
	// An id in the body of a PUT that differs from the path.
	r := s.Do(t, "PUT", jobPath(coll, "path-id"), ok("body-id"))
	if r.Status < 400 || r.Status > 499 {
		t.Errorf("PUT with a different id in the body: %s, want 4xx", r)
	}
	mustError(t, "PUT with an array body", s.Do(t, "PUT", jobPath(coll, "arr"), []any{ok("arr")}), 400, "invalid_argument")
	mustError(t, "PUT with a bad If-Match", s.Do(t, "PUT", jobPath(coll, "ifm"), putBody, "If-Match", "yesterday"), 400, "invalid_argument")

	// A batch over 1000: 413, nothing created.
	var huge []map[string]any
	for i := 0; i < 1001; i++ {
		huge = append(huge, ok(fmt.Sprintf("huge-%04d", i)))
	}
	mustError(t, "batch of 1001", s.Do(t, "POST", jobsPath(coll), huge), 413, "too_large")
	for _, id := range []string{"huge-0000", "huge-0500", "huge-1000"} {
		if _, found := s.getJob(t, coll, id); found {
			t.Errorf("batch of 1001 answered 413 but created %s", id)
		}
	}

	if jobs := s.listAll(t, coll, ""); len(jobs) != 0 {
		ids := []string{}
		for _, j := range jobs {
			ids = append(ids, j.ID)
		}
		t.Errorf("bad requests created jobs: %v", ids)
	}

	// A batch with one bad item: the others are created, the bad item's
	// result is 400 with the error body.
	batch := []map[string]any{ok("batch-good-1"), with("batch-bad", "trigger_time", nil), ok("batch-good-2"), ok("bad id")}
	res := s.createBatch(t, coll, batch)
	wantSt := []int{201, 400, 201, 400}
	for i, rr := range res {
		if rr.Status != wantSt[i] {
			t.Errorf("batch item %d (%v): status %d, want %d", i, batch[i]["id"], rr.Status, wantSt[i])
		}
		if wantSt[i] == 400 {
			var e struct{ Code, Message string }
			if err := json.Unmarshal(rr.Error, &e); err != nil || e.Code != "invalid_argument" || e.Message == "" {
				t.Errorf("batch item %d: error %s, want {\"code\":\"invalid_argument\",\"message\":…}", i, rr.Error)
			}
		} else if rr.Job == nil || rr.Job.ID != batch[i]["id"] {
			t.Errorf("batch item %d: job %+v", i, rr.Job)
		}
	}
	if res[0].ID != "batch-good-1" || res[2].ID != "batch-good-2" {
		t.Errorf("batch results out of order: %+v", res)
	}
	s.mustGetJob(t, coll, "batch-good-1")
	s.mustGetJob(t, coll, "batch-good-2")
	if _, found := s.getJob(t, coll, "batch-bad"); found {
		t.Errorf("the bad batch item was created")
	}
	if jobs := s.listAll(t, coll, ""); len(jobs) != 2 {
		t.Errorf("after the mixed batch the collection has %d jobs, want 2", len(jobs))
	}

	// The limits themselves are allowed.
	edge := s.newCollection(t, "edge", nil)
	s.createJob(t, edge, ok(strings.Repeat("i", 255)))
	s.createJob(t, edge, ok("A-Za-z0-9._:@~=+-"))
	s.createJob(t, edge, with("meta-60k", "meta", map[string]any{"pad": strings.Repeat("y", 60*1024)}))
	var full []map[string]any
	for i := 0; i < 1000; i++ {
		full = append(full, ok(fmt.Sprintf("full-%04d", i)))
	}
	for i, rr := range s.createBatch(t, edge, full) {
		if rr.Status != 201 {
			t.Fatalf("batch of 1000, item %d: %+v", i, rr)
		}
	}
	if n := len(s.listAll(t, edge, "")); n != 1003 {
		t.Errorf("edge collection has %d jobs, want 1003", n)
	}
}

// TestBadConfigIsRejected: collections and routes with bad input are 4xx
// with the error body and are not created.
func TestBadConfigIsRejected(t *testing.T) {
	t.Parallel()
	s := shared(t)
	short := "whsec_" + "c2hvcnQ=" // 5 bytes
	cases := []struct {
		name, path string
		body       any
	}{
		{"secret without prefix", "/v1/collections/" + uniq("c"), map[string]any{"signing_secret": "secret"}},
		{"secret too short", "/v1/collections/" + uniq("c"), map[string]any{"signing_secret": short}},
		{"secret not base64", "/v1/collections/" + uniq("c"), map[string]any{"signing_secret": "whsec_!!!!"}},
		{"collection unknown field", "/v1/collections/" + uniq("c"), map[string]any{"retension": "1h"}},
		{"collection bad retention", "/v1/collections/" + uniq("c"), map[string]any{"retention": "forever"}},
		{"collection bad policy", "/v1/collections/" + uniq("c"), map[string]any{"retry_policy": map[string]any{"multiplier": "two"}}},
		{"collection malformed", "/v1/collections/" + uniq("c"), `{"retention":`},
		{"collection bad name", "/v1/collections/bad%20name", map[string]any{}},
		{"route without URL", "/v1/routes/" + uniq("r"), map[string]any{"headers": map[string]string{"X-A": "1"}}},
		{"route ftp URL", "/v1/routes/" + uniq("r"), map[string]any{"webhook_url": "ftp://example.com/"}},
		{"route relative URL", "/v1/routes/" + uniq("r"), map[string]any{"webhook_url": "/hook"}},
		{"route reserved header", "/v1/routes/" + uniq("r"), map[string]any{"webhook_url": "http://example.com/", "headers": map[string]string{"Idempotency-Key": "x"}}},
		{"route header with newline", "/v1/routes/" + uniq("r"), map[string]any{"webhook_url": "http://example.com/", "headers": map[string]string{"X-A": "a\r\nX-B: b"}}},
		{"route bad secret", "/v1/routes/" + uniq("r"), map[string]any{"webhook_url": "http://example.com/", "signing_secret": short}},
		{"route unknown field", "/v1/routes/" + uniq("r"), map[string]any{"webhook_url": "http://example.com/", "url": "x"}},
	}
	for _, c := range cases {
		r := s.Do(t, "PUT", c.path, c.body)
		if msg := checkError(r, 400, "invalid_argument"); msg != "" {
			t.Errorf("%s: %s", c.name, msg)
			continue
		}
		if !strings.Contains(c.path, "%") {
			if g := s.Do(t, "GET", c.path, nil); g.Status != 404 {
				t.Errorf("%s: answered 400 but GET %s is %s", c.name, c.path, g)
			}
		}
	}
}
