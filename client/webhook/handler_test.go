package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

var testKey = func() Key {
	k, err := ParseSecret(vecSecret)
	if err != nil {
		panic(err)
	}
	return k
}()

// signedRequest builds a callback request as timemachine sends it.
func signedRequest(body string, extra map[string]string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	testKey.SignHeaders(r.Header, "c:j1:1767225600000", time.Now(), []byte(body))
	for k, v := range extra {
		r.Header.Set(k, v)
	}
	return r
}

const single = `{"id":"j1","collection":"c","trigger_time":1767225600000,"attempt":2,"meta":{"user":42,"big":12345678901234567890}}`

func TestReadSingle(t *testing.T) {
	v, _ := NewVerifier(vecSecret)
	d, err := Read(signedRequest(single, map[string]string{HeaderIdempotencyKey: "c:j1:1767225600000", HeaderAttempt: "2"}), v, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d.Batch || len(d.Callbacks) != 1 || d.WebhookID != "c:j1:1767225600000" || d.Timestamp.IsZero() {
		t.Fatalf("delivery = %+v", d)
	}
	cb := d.Callbacks[0]
	want := Callback{ID: "j1", Collection: "c", TriggerTime: 1767225600000, Attempt: 2,
		Meta: Meta(`{"user":42,"big":12345678901234567890}`), IdempotencyKey: "c:j1:1767225600000"}
	if !reflect.DeepEqual(cb, want) {
		t.Errorf("callback = %+v\nwant       %+v", cb, want)
	}
	if !cb.Time().Equal(time.UnixMilli(1767225600000)) {
		t.Errorf("Time = %v", cb.Time())
	}
	// Meta keeps large integers exact.
	var m struct {
		User int    `json:"user"`
		Big  uint64 `json:"big"`
	}
	if err := cb.Meta.Decode(&m); err != nil || m.User != 42 || m.Big != 12345678901234567890 {
		t.Errorf("meta = %+v, %v", m, err)
	}
}

func TestParseVariants(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		header map[string]string
		batch  bool
		want   []Callback
		err    error
	}{
		{
			name:   "schedule occurrence, idempotency key derived, attempt from header",
			body:   `{"id":"daily@1767225600000","collection":"c","trigger_time":1767225600000,"schedule":"daily"}`,
			header: map[string]string{HeaderAttempt: "3"},
			want: []Callback{{ID: "daily@1767225600000", Collection: "c", TriggerTime: 1767225600000, Attempt: 3,
				Schedule: "daily", IdempotencyKey: "c:daily@1767225600000:1767225600000"}},
		},
		{
			name:   "batch with header",
			body:   `{"jobs":[{"id":"a","collection":"c","trigger_time":1,"attempt":1,"idempotency_key":"c:a:1"},{"id":"b","collection":"d","trigger_time":2,"attempt":4,"meta":[1,2]}]}`,
			header: map[string]string{HeaderBatch: "2"},
			batch:  true,
			want: []Callback{
				{ID: "a", Collection: "c", TriggerTime: 1, Attempt: 1, IdempotencyKey: "c:a:1"},
				{ID: "b", Collection: "d", TriggerTime: 2, Attempt: 4, Meta: Meta(`[1,2]`), IdempotencyKey: "d:b:2"},
			},
		},
		{
			name:  "batch recognised without the header",
			body:  `{"jobs":[{"id":"a","collection":"c","trigger_time":1,"attempt":1}]}`,
			batch: true,
			want:  []Callback{{ID: "a", Collection: "c", TriggerTime: 1, Attempt: 1, IdempotencyKey: "c:a:1"}},
		},
		{name: "not JSON", body: `<html>`, err: ErrMalformed},
		{name: "JSON but not a callback", body: `{"hello":"world"}`, err: ErrMalformed},
		{name: "empty batch", body: `{"jobs":[]}`, header: map[string]string{HeaderBatch: "0"}, err: ErrMalformed},
		{name: "batch job without id", body: `{"jobs":[{"collection":"c"}]}`, header: map[string]string{HeaderBatch: "1"}, err: ErrMalformed},
		{name: "wrong types", body: `{"id":1,"collection":"c"}`, err: ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.header {
				h.Set(k, v)
			}
			d, err := Parse([]byte(tc.body), h)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Batch != tc.batch || !reflect.DeepEqual(d.Callbacks, tc.want) {
				t.Errorf("got batch=%v %+v\nwant batch=%v %+v", d.Batch, d.Callbacks, tc.batch, tc.want)
			}
		})
	}
}

func TestReadLimitsAndVerification(t *testing.T) {
	v, _ := NewVerifier(vecSecret)
	big := `{"id":"j1","collection":"c","meta":"` + strings.Repeat("x", 200) + `"}`
	if _, err := Read(signedRequest(big, nil), v, 100); !errors.Is(err, ErrBodyTooLarge) {
		t.Errorf("declared length over limit: %v", err)
	}
	r := signedRequest(big, nil)
	r.ContentLength = -1 // chunked: only the read can tell
	if _, err := Read(r, v, 100); !errors.Is(err, ErrBodyTooLarge) {
		t.Errorf("streamed body over limit: %v", err)
	}
	if _, err := Read(signedRequest(big, nil), v, int64(len(big))); err != nil {
		t.Errorf("body exactly at the limit: %v", err)
	}
	r = signedRequest(single, nil)
	r.Header.Set(HeaderWebhookSignature, vecWrongSig)
	if _, err := Read(r, v, 0); !errors.Is(err, ErrNoMatchingSignature) {
		t.Errorf("bad signature: %v", err)
	}
	// Without a verifier the signature is not looked at.
	r = signedRequest(single, nil)
	r.Header.Set(HeaderWebhookSignature, vecWrongSig)
	if d, err := Read(r, nil, 0); err != nil || d.WebhookID != "" {
		t.Errorf("unverified read: %+v, %v", d, err)
	}
}

type answer struct {
	status     int
	body       string
	retryAfter string
}

func serve(h http.Handler, r *http.Request) answer {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	b, _ := io.ReadAll(w.Result().Body)
	return answer{w.Code, strings.TrimSpace(string(b)), w.Header().Get("Retry-After")}
}

func TestHandlerSingleAnswers(t *testing.T) {
	v, _ := NewVerifier(vecSecret)
	at := time.UnixMilli(1767229200000)
	tests := []struct {
		name string
		resp Response
		want answer
	}{
		{"ok", OK(), answer{204, "", ""}},
		{"zero response is ok", Response{}, answer{204, "", ""}},
		{"reschedule in", RescheduleIn(90 * time.Second), answer{200, `{"reschedule_in":"1m30s"}`, ""}},
		{"reschedule in now", RescheduleIn(0), answer{200, `{"reschedule_in":"1ms"}`, ""}},
		{"reschedule at", RescheduleAt(at), answer{200, `{"reschedule_at":1767229200000}`, ""}},
		{"retry with wait rounds up", Retry(1500 * time.Millisecond), answer{503, "", "2"}},
		{"retry without wait", Retry(0), answer{503, "", ""}},
		{"fail", Fail("user 42 does not exist"), answer{422, "user 42 does not exist", ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got *Callback
			h := NewHandler(v, func(_ context.Context, cb *Callback) Response { got = cb; return tc.resp })
			if a := serve(h, signedRequest(single, nil)); a != tc.want {
				t.Errorf("answer = %+v, want %+v", a, tc.want)
			}
			if got == nil || got.ID != "j1" || got.Attempt != 2 {
				t.Errorf("callback = %+v", got)
			}
		})
	}
}

func TestHandlerRefusals(t *testing.T) {
	v, _ := NewVerifier(vecSecret)
	called := false
	fn := func(context.Context, *Callback) Response { called = true; return OK() }
	bad := signedRequest(single, nil)
	bad.Header.Set(HeaderWebhookSignature, vecWrongSig)
	tests := []struct {
		name   string
		h      *Handler
		r      *http.Request
		status int
	}{
		{"GET", NewHandler(v, fn), httptest.NewRequest(http.MethodGet, "/hook", nil), 405},
		{"bad signature", NewHandler(v, fn), bad, 401},
		{"unsigned", NewHandler(v, fn), httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader(single)), 401},
		{"too large", &Handler{Verifier: v, Callback: fn, MaxBodyBytes: 10}, signedRequest(single, nil), 413},
		{"not a callback", NewHandler(v, fn), signedRequest(`{"x":1}`, nil), 400},
		{"no verifier", NewHandler(nil, fn), signedRequest(single, nil), 500},
		{"no callback", &Handler{Verifier: v}, signedRequest(single, nil), 500},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			called = false
			if a := serve(tc.h, tc.r); a.status != tc.status {
				t.Errorf("status = %d (%s), want %d", a.status, a.body, tc.status)
			}
			if called {
				t.Error("the callback must not run for a refused request")
			}
		})
	}
	// InsecureSkipVerify accepts an unsigned callback.
	h := &Handler{InsecureSkipVerify: true, Callback: fn}
	if a := serve(h, httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader(single))); a.status != 204 || !called {
		t.Errorf("unsigned with InsecureSkipVerify: %+v called=%v", a, called)
	}
}

const batchBody = `{"jobs":[
	{"id":"a","collection":"c","trigger_time":1,"attempt":1,"idempotency_key":"c:a:1"},
	{"id":"b","collection":"c","trigger_time":2,"attempt":1,"idempotency_key":"c:b:2"},
	{"id":"c","collection":"c","trigger_time":3,"attempt":1,"idempotency_key":"c:c:3"}]}`

func TestHandlerBatch(t *testing.T) {
	v, _ := NewVerifier(vecSecret)
	at := time.UnixMilli(1767229200000)
	tests := []struct {
		name string
		rs   map[string]Response
		want answer
		res  string // results JSON, compared by value
	}{
		{"all ok: no body", map[string]Response{}, answer{200, "", ""}, ""},
		{"all retry, one wait: whole delivery 503 with it", map[string]Response{"a": Retry(3 * time.Second), "b": Retry(3 * time.Second), "c": Retry(3 * time.Second)}, answer{503, "", "3"}, ""},
		{"all retry, waits differ: per job", map[string]Response{"a": Retry(time.Second), "b": Retry(3 * time.Second), "c": Retry(0)}, answer{200, "", ""},
			`{"results":[{"id":"a","collection":"c","outcome":"retry","reschedule_in":"1s"},{"id":"b","collection":"c","outcome":"retry","reschedule_in":"3s"},{"id":"c","collection":"c","outcome":"retry"}]}`},
		{"mixed: per job", map[string]Response{"a": Fail("no"), "b": RescheduleIn(time.Minute), "c": RescheduleAt(at)}, answer{200, "", ""},
			`{"results":[{"id":"a","collection":"c","outcome":"fail"},{"id":"b","collection":"c","outcome":"ok","reschedule_in":"1m0s"},{"id":"c","collection":"c","outcome":"ok","reschedule_at":1767229200000}]}`},
		{"retry among others", map[string]Response{"b": Retry(time.Second)}, answer{200, "", ""},
			`{"results":[{"id":"a","collection":"c","outcome":"ok"},{"id":"b","collection":"c","outcome":"retry","reschedule_in":"1s"},{"id":"c","collection":"c","outcome":"ok"}]}`},
	}
	for _, tc := range tests {
		for _, mode := range []string{"per job", "batch func"} {
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				var seen []string
				h := NewHandler(v, func(_ context.Context, cb *Callback) Response {
					seen = append(seen, cb.ID+"="+cb.IdempotencyKey)
					return tc.rs[cb.ID]
				})
				if mode == "batch func" {
					h.Batch = func(_ context.Context, cbs []Callback) []Response {
						out := make([]Response, len(cbs))
						for i := range cbs {
							seen = append(seen, cbs[i].ID+"="+cbs[i].IdempotencyKey)
							out[i] = tc.rs[cbs[i].ID]
						}
						return out
					}
				}
				a := serve(h, signedRequest(batchBody, map[string]string{HeaderBatch: "3"}))
				if want := []string{"a=c:a:1", "b=c:b:2", "c=c:c:3"}; !reflect.DeepEqual(seen, want) {
					t.Errorf("handled %v, want %v", seen, want)
				}
				if tc.res != "" {
					var got, want any
					if err := json.Unmarshal([]byte(a.body), &got); err != nil {
						t.Fatalf("body %q: %v", a.body, err)
					}
					_ = json.Unmarshal([]byte(tc.res), &want)
					if !reflect.DeepEqual(got, want) {
						t.Errorf("results = %s\nwant      %s", a.body, tc.res)
					}
					a.body = ""
				}
				if a != tc.want {
					t.Errorf("answer = %+v, want %+v", a, tc.want)
				}
			})
		}
	}
	// A batch handler answering for the wrong number of jobs: 500, so
	// timemachine retries every job rather than losing some.
	h := &Handler{Verifier: v, Callback: func(context.Context, *Callback) Response { return OK() },
		Batch: func(context.Context, []Callback) []Response { return []Response{OK()} }}
	if a := serve(h, signedRequest(batchBody, map[string]string{HeaderBatch: "3"})); a.status != 500 {
		t.Errorf("short batch answer: %+v", a)
	}
}

func TestMeta(t *testing.T) {
	m := MustMeta(map[string]any{"user": 42})
	if m.String() != `{"user":42}` {
		t.Errorf("MustMeta = %s", m)
	}
	b, err := json.Marshal(struct {
		M Meta `json:"meta,omitempty"`
		N Meta `json:"none,omitempty"`
		Z Meta `json:"zero"`
	}{M: m})
	if err != nil || string(b) != `{"meta":{"user":42},"zero":null}` {
		t.Errorf("marshal = %s, %v", b, err)
	}
	if _, err := json.Marshal(struct{ M Meta }{Meta("{bad")}); err == nil {
		t.Error("invalid meta must fail to encode")
	}
	var back struct {
		M Meta `json:"meta"`
	}
	if err := json.Unmarshal([]byte(`{"meta":null}`), &back); err != nil || back.M != nil {
		t.Errorf("null meta = %q, %v", back.M, err)
	}
	var x struct{ A int }
	if err := Meta(nil).Decode(&x); err != nil {
		t.Errorf("empty meta decodes to nothing: %v", err)
	}
	if _, err := NewMeta(func() {}); err == nil {
		t.Error("NewMeta of a func must fail")
	}
}

func FuzzParse(f *testing.F) {
	f.Add(single, "")
	f.Add(batchBody, "3")
	f.Add(`{"jobs":null,"id":"x"}`, "")
	f.Fuzz(func(t *testing.T, body, batch string) {
		h := http.Header{}
		if batch != "" {
			h.Set(HeaderBatch, batch)
		}
		d, err := Parse([]byte(body), h)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not match ErrMalformed", err)
			}
			return
		}
		if len(d.Callbacks) == 0 {
			t.Fatal("a parsed delivery has no callbacks")
		}
		for _, cb := range d.Callbacks {
			if cb.ID == "" || cb.Collection == "" || cb.IdempotencyKey == "" {
				t.Fatalf("incomplete callback %+v", cb)
			}
			if !d.Batch && cb.IdempotencyKey != cb.Collection+":"+cb.ID+":"+strconv.FormatInt(cb.TriggerTime, 10) {
				t.Fatalf("derived key %q", cb.IdempotencyKey)
			}
		}
	})
}
