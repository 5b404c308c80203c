package httpapi

import (
	"strings"
	"testing"

	"github.com/timemachine-db/timemachine/model"
)

func TestPutScheduleValidates(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"cron":"*/5 * * * *","every":"1s","callback_url":"http://h/x"}`, "conflicting"},
		{`{"callback_url":"http://h/x"}`, "cron is missing"},
		{`{"every":"500ms","callback_url":"http://h/x"}`, "every"},
		{`{"cron":"61 * * * *","callback_url":"http://h/x"}`, "cron"},
		{`{"cron":"* * * * *","timezone":"Mars/Base","callback_url":"http://h/x"}`, "timezone"},
		{`{"cron":"* * * * *"}`, "callback_url is missing"},
		{`{"cron":"* * * * *","callback_url":"http://h/x","route":"r"}`, "conflicting"},
		{`{"cron":"* * * * *","callback_url":"http://h/x","start_at":20,"end_at":10}`, "end_at is before start_at"},
		{`{"cron":"* * * * *","callback_url":"http://h/x","paused":"yes"}`, "paused"},
		{`{"cron":"* * * * *","callback_url":"http://h/x","trigger_time":1}`, "trigger_time"},
	} {
		f := &fakeBackend{}
		r := do(newTestServer(f).Handler(), "PUT", "/v1/collections/c/schedules/s", tc.body)
		if r.status != 400 {
			t.Errorf("%s: status %d %s", tc.body, r.status, r.body)
			continue
		}
		if _, msg := r.errorBody(t); !strings.Contains(msg, tc.want) {
			t.Errorf("%s: message %q does not mention %q", tc.body, msg, tc.want)
		}
	}
	// An id too long for its occurrence ids.
	r := do(newTestServer(&fakeBackend{}).Handler(), "PUT", "/v1/collections/c/schedules/"+strings.Repeat("a", 240), `{"every":"1s","callback_url":"http://h/x"}`)
	if r.status != 400 {
		t.Fatalf("long id: %d", r.status)
	}
}

func TestPutScheduleRoundTrip(t *testing.T) {
	f := &fakeBackend{created: true}
	h := newTestServer(f).Handler()
	r := do(h, "PUT", "/v1/collections/c/schedules/daily", `{"cron":"0 9 * * *","timezone":"Europe/Berlin","route":"billing","meta":{"a": 1},"start_at":"2026-01-01T00:00:00Z"}`)
	if r.status != 201 {
		t.Fatalf("status %d %s", r.status, r.body)
	}
	sp := f.sf.putSpec
	if sp.Cron != "0 9 * * *" || sp.Timezone != "Europe/Berlin" || sp.Route != "billing" || string(sp.Meta) != `{"a":1}` || sp.StartAt != 1767225600000 || sp.Hash == 0 {
		t.Fatalf("spec %+v", sp)
	}
	for _, want := range []string{`"id":"daily"`, `"cron":"0 9 * * *"`, `"timezone":"Europe/Berlin"`, `"next_fire_at":1767225600000`, `"paused":false`, `"version":1`} {
		if !strings.Contains(string(r.body), want) {
			t.Fatalf("answer lacks %s: %s", want, r.body)
		}
	}
	// What a GET shows can be PUT back.
	g := do(h, "GET", "/v1/collections/c/schedules/daily", "")
	if g.status != 200 || !strings.Contains(string(g.body), `"last_status":"succeeded"`) {
		t.Fatalf("get: %d %s", g.status, g.body)
	}
	if r := do(h, "PUT", "/v1/collections/c/schedules/daily", string(g.body)); r.status != 201 {
		t.Fatalf("put back: %d %s", r.status, r.body)
	}
	if f.sf.putSpec.Hash != sp.Hash {
		t.Fatal("the same spec put back hashes differently")
	}
	l := do(h, "GET", "/v1/collections/c/schedules?limit=1", "")
	if l.status != 200 || !strings.Contains(string(l.body), `"next_cursor":"`+encodeScheduleCursor("a")+`"`) || !strings.Contains(string(l.body), `"every":"1s"`) {
		t.Fatalf("list: %d %s", l.status, l.body)
	}
	// The cursor is opaque: what the list answered is taken back, and what
	// it cannot have answered — a bare id, garbage — is a 400.
	if l := do(h, "GET", "/v1/collections/c/schedules?cursor="+encodeScheduleCursor("a"), ""); l.status != 200 || f.sf.listAfter != "a" {
		t.Fatalf("list after the cursor: %d %s (after %q)", l.status, l.body, f.sf.listAfter)
	}
	for _, bad := range []string{"a", "zzz", "AAAA", encodeCursor(&model.ListPos{Trigger: 1, ID: "a"}), "!!"} {
		if l := do(h, "GET", "/v1/collections/c/schedules?cursor="+bad, ""); l.status != 400 {
			t.Fatalf("list with cursor %q: %d %s", bad, l.status, l.body)
		}
	}
	// Empty parameters are parameters not given, as in the job list.
	if l := do(h, "GET", "/v1/collections/c/schedules?limit=&cursor=", ""); l.status != 200 {
		t.Fatalf("list with empty parameters: %d %s", l.status, l.body)
	}
	if l := do(h, "GET", "/v1/collections/c/schedules?limit=0", ""); l.status != 400 {
		t.Fatalf("list with limit 0: %d %s", l.status, l.body)
	}
	if d := do(h, "DELETE", "/v1/collections/c/schedules/daily", ""); d.status != 204 {
		t.Fatalf("delete: %d", d.status)
	}
}

func TestRedrive(t *testing.T) {
	f := &fakeBackend{}
	h := newTestServer(f).Handler()
	r := do(h, "POST", "/v1/collections/c/redrive", `{"ids":["a","b"]}`)
	if r.status != 200 || string(r.body) != `{"redriven":2}` {
		t.Fatalf("%d %s", r.status, r.body)
	}
	r = do(h, "POST", "/v1/collections/c/redrive", `{"from":10,"to":"2026-01-01T00:00:00Z"}`)
	if r.status != 200 || f.sf.redriveRange != [2]int64{10, 1767225600000} {
		t.Fatalf("%d %s %v", r.status, r.body, f.sf.redriveRange)
	}
	for _, bad := range []string{`{}`, `{"ids":["a"],"from":1}`, `{"ids":[]}`, `{"ids":["bad id"]}`, `{"from":20,"to":10}`, `{"idz":[]}`} {
		if r := do(h, "POST", "/v1/collections/c/redrive", bad); r.status != 400 {
			t.Errorf("%s: %d %s", bad, r.status, r.body)
		}
	}
}

// A schedule PUT passes If-Match on (as a job PUT does); a bad one is a 400
// that names the schedule, and nothing is written.
func TestPutScheduleIfMatch(t *testing.T) {
	f := &fakeBackend{}
	h := newTestServer(f).Handler()
	body := `{"every":"10s","callback_url":"http://127.0.0.1:1/x"}`
	for _, tc := range []struct {
		header string
		want   uint64
	}{{"", 0}, {"3", 3}, {`"4"`, 4}, {`W/"5"`, 5}} {
		var r resp
		if tc.header == "" {
			r = do(h, "PUT", "/v1/collections/c/schedules/s", body)
		} else {
			r = do(h, "PUT", "/v1/collections/c/schedules/s", body, "If-Match", tc.header)
		}
		if r.status != 200 || f.sf.putIfMatch != tc.want {
			t.Fatalf("If-Match %q: %d %s, backend got %d", tc.header, r.status, r.body, f.sf.putIfMatch)
		}
	}
	f.sf.putIfMatch = 99
	r := do(h, "PUT", "/v1/collections/c/schedules/s", body, "If-Match", "nope")
	if r.status != 400 || !strings.Contains(string(r.body), "the schedule's version") || f.sf.putIfMatch != 99 {
		t.Fatalf("bad If-Match: %d %s", r.status, r.body)
	}
}

// What GET renders for a default is the same spec as leaving it out, and a
// meta written another way is the same meta: a PUT back of a GET's answer
// must not count as a change (it would restart an "every" schedule's count
// and drop the occurrence created ahead; a black-box review).
func TestScheduleSpecHashIgnoresSpelling(t *testing.T) {
	s := newTestServer(&fakeBackend{})
	hash := func(body string) uint64 {
		t.Helper()
		o, e := decodeObject("body", []byte(body))
		if e != nil {
			t.Fatal(e)
		}
		spec, e := s.parseSchedule("c", o)
		if e != nil {
			t.Fatalf("%s: %v", body, e)
		}
		return spec.Hash
	}
	base := hash(`{"every":"1h","callback_url":"http://127.0.0.1:9/x"}`)
	for _, same := range []string{
		`{"every":"1h","callback_url":"http://127.0.0.1:9/x","timezone":"UTC"}`,
		`{"every":"1h","callback_url":"http://127.0.0.1:9/x","meta":{}}`,
		`{"every":"60m","callback_url":"http://127.0.0.1:9/x","timezone":"UTC","meta":{},"paused":false}`,
	} {
		if hash(same) != base {
			t.Errorf("%s hashes differently from the spec without its defaults", same)
		}
	}
	if hash(`{"every":"1h","callback_url":"http://127.0.0.1:9/x","meta":{"a":1,"b":[1.0]}}`) != hash(`{"every":"1h","callback_url":"http://127.0.0.1:9/x","meta":{"b":[1],"a":1}}`) {
		t.Error("the same meta written another way hashes differently")
	}
	for _, other := range []string{
		`{"every":"1h","callback_url":"http://127.0.0.1:9/x","timezone":"Europe/Berlin"}`,
		`{"every":"1h","callback_url":"http://127.0.0.1:9/x","meta":{"a":1}}`,
		`{"every":"1h","callback_url":"http://127.0.0.1:9/x","paused":true}`,
		`{"every":"2h","callback_url":"http://127.0.0.1:9/x"}`,
	} {
		if hash(other) == base {
			t.Errorf("%s hashes as the spec without it", other)
		}
	}
}
