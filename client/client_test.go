package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorded is one request as the fake server saw it.
type recorded struct {
	Method string
	URI    string // raw request URI, escaping preserved
	Header http.Header
	Body   []byte
}

// fakeServer is an in-process HTTP server on 127.0.0.1:0 that records every
// request and answers with handler (default: 200 {}).
type fakeServer struct {
	t   *testing.T
	srv *httptest.Server

	mu      sync.Mutex
	reqs    []recorded
	handler func(w http.ResponseWriter, r *http.Request, body []byte)
}

func newFake(t *testing.T, h func(w http.ResponseWriter, r *http.Request, body []byte)) *fakeServer {
	t.Helper()
	f := &fakeServer{t: t, handler: h}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, recorded{Method: r.Method, URI: r.RequestURI, Header: r.Header.Clone(), Body: body})
		h := f.handler
		f.mu.Unlock()
		if h == nil {
			reply(w, 200, `{}`)
			return
		}
		h(w, r, body)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeServer) addr() string { return strings.TrimPrefix(f.srv.URL, "http://") }

func (f *fakeServer) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

func (f *fakeServer) setHandler(h func(w http.ResponseWriter, r *http.Request, body []byte)) {
	f.mu.Lock()
	f.handler = h
	f.mu.Unlock()
}

func reply(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func fixed(status int, body string) func(http.ResponseWriter, *http.Request, []byte) {
	return func(w http.ResponseWriter, _ *http.Request, _ []byte) { reply(w, status, body) }
}

func newClient(t *testing.T, addrs []string, opts ...Option) *Client {
	t.Helper()
	c, err := New(addrs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// jsonEq compares two JSON texts by value.
func jsonEq(t *testing.T, got []byte, want string) {
	t.Helper()
	if want == "" {
		if len(got) != 0 {
			t.Errorf("body = %s, want none", got)
		}
		return
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("request body %q is not JSON: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want %q: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("body = %s\nwant   %s", got, want)
	}
}

func ptr[T any](v T) *T { return &v }

const jobAnswer = `{"id":"j1","trigger_time":1767225600000,"callback_url":"http://h/x","meta":{"a":1},
	"collection":"c","status":"scheduled","attempts":0,"version":3,"created_at":5,"updated_at":6}`

func TestRequestShapes(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name       string
		status     int
		answer     string
		call       func(c *Client) (any, error)
		wantMethod string
		wantURI    string
		wantBody   string
		wantHeader map[string]string // "" value: header must be absent
		want       any
	}{
		{
			name:   "create job sends only writable fields",
			status: 201, answer: jobAnswer,
			call: func(c *Client) (any, error) {
				j, created, err := c.CreateJob(ctx, "c", Job{
					ID: "j1", TriggerTime: 1767225600000, CallbackURL: "http://h/x",
					Meta:            json.RawMessage(`{"a":1}`),
					RetryPolicy:     &RetryPolicy{MaxAttempts: ptr(3), InitialInterval: "2s"},
					CallbackTimeout: "5s",
					Status:          "succeeded", Version: 9, Attempts: 4, // read-only: not sent
				})
				return []any{j.ID, j.Version, j.Status, created}, err
			},
			wantMethod: "POST", wantURI: "/v1/collections/c/jobs",
			wantBody: `{"id":"j1","trigger_time":1767225600000,"callback_url":"http://h/x","meta":{"a":1},
				"retry_policy":{"max_attempts":3,"initial_interval":"2s"},"callback_timeout":"5s"}`,
			wantHeader: map[string]string{"Content-Type": "application/json"},
			want:       []any{"j1", int64(3), "scheduled", true},
		},
		{
			name:   "create job that already existed",
			status: 200, answer: jobAnswer,
			call: func(c *Client) (any, error) {
				_, created, err := c.CreateJob(ctx, "c", Job{Delay: "90s", Route: "billing"})
				return created, err
			},
			wantMethod: "POST", wantURI: "/v1/collections/c/jobs",
			wantBody: `{"delay":"90s","route":"billing"}`,
			want:     false,
		},
		{
			name:   "put job with If-Match",
			status: 200, answer: jobAnswer,
			call: func(c *Client) (any, error) {
				_, created, err := c.PutJob(ctx, "c", "j1", Job{ID: "ignored", TriggerTime: 5, CallbackURL: "http://h/x"}, ptr(int64(7)))
				return created, err
			},
			wantMethod: "PUT", wantURI: "/v1/collections/c/jobs/j1",
			wantBody:   `{"trigger_time":5,"callback_url":"http://h/x"}`,
			wantHeader: map[string]string{"If-Match": "7"},
			want:       false,
		},
		{
			name:   "put job without If-Match creates",
			status: 201, answer: jobAnswer,
			call: func(c *Client) (any, error) {
				_, created, err := c.PutJob(ctx, "c", "j1", Job{TriggerTime: 5, Route: "r"}, nil)
				return created, err
			},
			wantMethod: "PUT", wantURI: "/v1/collections/c/jobs/j1",
			wantBody:   `{"trigger_time":5,"route":"r"}`,
			wantHeader: map[string]string{"If-Match": ""},
			want:       true,
		},
		{
			name:   "get job escapes path segments",
			status: 200, answer: jobAnswer,
			call: func(c *Client) (any, error) {
				j, err := c.GetJob(ctx, "a/b", "x:y@z=1+2 3")
				return j.TriggerTime, err
			},
			wantMethod: "GET", wantURI: "/v1/collections/a%2Fb/jobs/x:y@z=1+2%203",
			want: int64(1767225600000),
		},
		{
			name:   "delete job",
			status: 204,
			call: func(c *Client) (any, error) {
				return nil, c.DeleteJob(ctx, "c", "j1")
			},
			wantMethod: "DELETE", wantURI: "/v1/collections/c/jobs/j1",
		},
		{
			name:   "list jobs with every option",
			status: 200, answer: `{"jobs":[{"id":"a","trigger_time":1},{"id":"b","trigger_time":2}],"next_cursor":"n2"}`,
			call: func(c *Client) (any, error) {
				jobs, next, err := c.ListJobs(ctx, "c", ListOptions{Status: "failed", From: ptr(int64(0)), To: ptr(int64(99)), Limit: 10, Cursor: "abc=="})
				return []any{len(jobs), jobs[1].ID, next}, err
			},
			wantMethod: "GET", wantURI: "/v1/collections/c/jobs?cursor=abc%3D%3D&from=0&limit=10&status=failed&to=99",
			want: []any{2, "b", "n2"},
		},
		{
			name:   "list jobs without options sends no query",
			status: 200, answer: `{"jobs":[]}`,
			call: func(c *Client) (any, error) {
				jobs, next, err := c.ListJobs(ctx, "c", ListOptions{})
				return []any{len(jobs), next}, err
			},
			wantMethod: "GET", wantURI: "/v1/collections/c/jobs",
			want: []any{0, ""},
		},
		{
			name:   "put collection",
			status: 201, answer: `{"retention":"1h","callback_timeout":"5s"}`,
			call: func(c *Client) (any, error) {
				col, created, err := c.PutCollection(ctx, "bench", Collection{
					Name: "ignored", Retention: "1h", CallbackTimeout: "5s",
					SigningSecret: "whsec_abc", RetryPolicy: &RetryPolicy{Multiplier: ptr(1.5)},
				})
				return []any{col.Name, col.Retention, created}, err
			},
			wantMethod: "PUT", wantURI: "/v1/collections/bench",
			wantBody: `{"retry_policy":{"multiplier":1.5},"callback_timeout":"5s","retention":"1h","signing_secret":"whsec_abc"}`,
			want:     []any{"bench", "1h", true},
		},
		{
			name:   "get collection",
			status: 200, answer: `{"name":"n","retention":"24h"}`,
			call: func(c *Client) (any, error) {
				col, err := c.GetCollection(ctx, "n")
				return []any{col.Name, col.Retention}, err
			},
			wantMethod: "GET", wantURI: "/v1/collections/n",
			want: []any{"n", "24h"},
		},
		{
			name:   "list collections (object answer)",
			status: 200, answer: `{"collections":[{"name":"default"},{"name":"x"}]}`,
			call: func(c *Client) (any, error) {
				cs, err := c.ListCollections(ctx)
				return len(cs), err
			},
			wantMethod: "GET", wantURI: "/v1/collections",
			want: 2,
		},
		{
			name:   "list collections (array answer)",
			status: 200, answer: `[{"name":"default"}]`,
			call: func(c *Client) (any, error) {
				cs, err := c.ListCollections(ctx)
				return cs[0].Name, err
			},
			wantMethod: "GET", wantURI: "/v1/collections",
			want: "default",
		},
		{
			name:       "delete collection",
			status:     204,
			call:       func(c *Client) (any, error) { return nil, c.DeleteCollection(ctx, "x") },
			wantMethod: "DELETE", wantURI: "/v1/collections/x",
		},
		{
			name:   "put route",
			status: 200, answer: `{"name":"billing","webhook_url":"https://b/h","headers":{"X-A":"1"}}`,
			call: func(c *Client) (any, error) {
				r, created, err := c.PutRoute(ctx, "billing", Route{WebhookURL: "https://b/h", Headers: map[string]string{"X-A": "1"}, Timeout: "3s"})
				return []any{r.Name, r.Headers["X-A"], created}, err
			},
			wantMethod: "PUT", wantURI: "/v1/routes/billing",
			wantBody: `{"webhook_url":"https://b/h","headers":{"X-A":"1"},"timeout":"3s"}`,
			want:     []any{"billing", "1", false},
		},
		{
			name:   "get route",
			status: 200, answer: `{"webhook_url":"https://b/h"}`,
			call: func(c *Client) (any, error) {
				r, err := c.GetRoute(ctx, "billing")
				return []any{r.Name, r.WebhookURL}, err
			},
			wantMethod: "GET", wantURI: "/v1/routes/billing",
			want: []any{"billing", "https://b/h"},
		},
		{
			name:   "list routes",
			status: 200, answer: `{"routes":[{"name":"a","webhook_url":"u"}]}`,
			call: func(c *Client) (any, error) {
				rs, err := c.ListRoutes(ctx)
				return rs[0].WebhookURL, err
			},
			wantMethod: "GET", wantURI: "/v1/routes",
			want: "u",
		},
		{
			name:       "delete route",
			status:     204,
			call:       func(c *Client) (any, error) { return nil, c.DeleteRoute(ctx, "a") },
			wantMethod: "DELETE", wantURI: "/v1/routes/a",
		},
		{
			name:   "cluster",
			status: 200,
			answer: `{"slot_count":12,"replication_factor":3,
				"nodes":[{"id":"n1","http_addr":"127.0.0.1:8080","status":"alive","slots_led":4,"replicas":12}],
				"slots":[{"slot":0,"leader":"n1","replicas":["n1","n2","n3"],"state":"ok"}]}`,
			call: func(c *Client) (any, error) {
				ci, err := c.Cluster(ctx)
				if err != nil {
					return nil, err
				}
				return []any{ci.SlotCount, ci.ReplicationFactor, ci.Nodes[0].HTTPAddr, ci.Nodes[0].SlotsLed, ci.Nodes[0].Replicas, ci.Slots[0].Replicas[2], ci.Slots[0].Leader}, nil
			},
			wantMethod: "GET", wantURI: "/v1/cluster",
			want: []any{12, 3, "127.0.0.1:8080", 4, 12, "n3", "n1"},
		},
		{
			name:   "rebalance dry run",
			status: 200, answer: `{"moves":[{"slot":1,"from":"n1","to":"n2"}]}`,
			call: func(c *Client) (any, error) {
				raw, err := c.Rebalance(ctx, true)
				return string(raw), err
			},
			wantMethod: "POST", wantURI: "/v1/admin/rebalance?dry_run=true",
			want: `{"moves":[{"slot":1,"from":"n1","to":"n2"}]}`,
		},
		{
			name:   "rebalance",
			status: 200, answer: `{"moves":[]}`,
			call: func(c *Client) (any, error) {
				_, err := c.Rebalance(ctx, false)
				return nil, err
			},
			wantMethod: "POST", wantURI: "/v1/admin/rebalance",
		},
		{
			name:   "compact",
			status: 200, answer: `{"n1":"ok"}`,
			call: func(c *Client) (any, error) {
				raw, err := c.Compact(ctx)
				return string(raw), err
			},
			wantMethod: "POST", wantURI: "/v1/admin/compact",
			want: `{"n1":"ok"}`,
		},
		{
			name:   "transfer slot",
			status: 200,
			call: func(c *Client) (any, error) {
				_, err := c.TransferSlot(ctx, 7, "n2")
				return nil, err
			},
			wantMethod: "POST", wantURI: "/v1/admin/slots/7/transfer",
			wantBody: `{"to":"n2"}`,
		},
		{
			name:   "drain",
			status: 202,
			call: func(c *Client) (any, error) {
				_, err := c.Drain(ctx, "n3")
				return nil, err
			},
			wantMethod: "POST", wantURI: "/v1/admin/nodes/n3/drain",
		},
		{
			name:   "remove node",
			status: 204,
			call: func(c *Client) (any, error) {
				raw, err := c.RemoveNode(ctx, "n3")
				return raw == nil, err
			},
			wantMethod: "DELETE", wantURI: "/v1/admin/nodes/n3",
			want: true,
		},
		{
			name:   "raw Do",
			status: 200, answer: "# HELP x\n",
			call: func(c *Client) (any, error) {
				st, body, err := c.Do(ctx, RawRequest{Method: "GET", Path: "/metrics", Header: map[string]string{"X-Test": "1"}})
				return []any{st, string(body)}, err
			},
			wantMethod: "GET", wantURI: "/metrics",
			wantHeader: map[string]string{"X-Test": "1", "X-Global": "g"},
			want:       []any{200, "# HELP x\n"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
				if tc.answer == "" {
					w.WriteHeader(tc.status)
					return
				}
				reply(w, tc.status, tc.answer)
			})
			c := newClient(t, []string{f.addr()}, WithHeader("X-Global", "g"))
			got, err := tc.call(c)
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			if tc.want != nil && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("result = %#v, want %#v", got, tc.want)
			}
			reqs := f.requests()
			if len(reqs) != 1 {
				t.Fatalf("server saw %d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.Method != tc.wantMethod || r.URI != tc.wantURI {
				t.Errorf("request = %s %s, want %s %s", r.Method, r.URI, tc.wantMethod, tc.wantURI)
			}
			jsonEq(t, r.Body, tc.wantBody)
			for k, v := range tc.wantHeader {
				if got := r.Header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			if r.Header.Get("X-Global") != "g" {
				t.Errorf("WithHeader header missing")
			}
		})
	}
}

func TestErrorDecoding(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		body       string
		retryAfter string
		wantCode   string
		wantMsg    string
		wantRA     time.Duration
		is         func(error) bool
	}{
		{"not found", 404, `{"error":{"code":"not_found","message":"job c/x does not exist"}}`, "", CodeNotFound, "job c/x does not exist", 0, IsNotFound},
		{"conflict", 409, `{"error":{"code":"conflict","message":"different spec"}}`, "", CodeConflict, "different spec", 0, IsConflict},
		{"precondition", 412, `{"error":{"code":"precondition_failed","message":"version is 4"}}`, "", CodePreconditionFailed, "version is 4", 0, IsPreconditionFailed},
		{"invalid", 400, `{"error":{"code":"invalid_argument","message":"bad id"}}`, "", CodeInvalidArgument, "bad id", 0, IsInvalidArgument},
		{"unauthenticated", 401, `{"error":{"code":"unauthenticated","message":"no token"}}`, "", CodeUnauthenticated, "no token", 0, IsUnauthenticated},
		{"too large", 413, `{"error":{"code":"too_large","message":"meta over 64 KiB"}}`, "", CodeTooLarge, "meta over 64 KiB", 0, IsTooLarge},
		{"overloaded keeps Retry-After", 429, `{"error":{"code":"overloaded","message":"slow down"}}`, "1", CodeOverloaded, "slow down", time.Second, IsOverloaded},
		{"unavailable keeps Retry-After", 503, `{"error":{"code":"unavailable","message":"no leader"}}`, "2", CodeUnavailable, "no leader", 2 * time.Second, IsUnavailable},
		{"internal", 500, `{"error":{"code":"internal","message":"boom"}}`, "", CodeInternal, "boom", 0, IsInternal},
		{"plain text body", 502, "  Bad Gateway from proxy\n", "", CodeInternal, "Bad Gateway from proxy", 0, IsInternal},
		{"json of another shape", 404, `{"message":"nope"}`, "", CodeInternal, `{"message":"nope"}`, 0, IsInternal},
		{"empty body", 500, "", "", CodeInternal, "Internal Server Error", 0, IsInternal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
				if tc.retryAfter != "" {
					w.Header().Set("Retry-After", tc.retryAfter)
				}
				reply(w, tc.status, tc.body)
			})
			c := newClient(t, []string{f.addr()}, WithMaxAttempts(1))
			_, err := c.GetJob(context.Background(), "c", "x")
			var apiErr *APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("err = %v (%T), want *APIError", err, err)
			}
			if apiErr.HTTPStatus != tc.status || apiErr.Code != tc.wantCode || apiErr.Message != tc.wantMsg || apiErr.RetryAfter != tc.wantRA {
				t.Errorf("got %+v, want status %d code %q message %q retry-after %v", *apiErr, tc.status, tc.wantCode, tc.wantMsg, tc.wantRA)
			}
			if !tc.is(err) {
				t.Errorf("helper does not recognise %v", err)
			}
			if ErrorCode(err) != tc.wantCode {
				t.Errorf("ErrorCode = %q", ErrorCode(err))
			}
		})
	}
	if IsNotFound(errors.New("x")) || ErrorCode(nil) != "" {
		t.Error("helpers must be false for non-API errors")
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"":                              0,
		"3":                             3 * time.Second,
		"0.5":                           500 * time.Millisecond,
		"-1":                            0,
		"junk":                          0,
		"Thu, 01 Jan 2026 00:00:10 GMT": 10 * time.Second,
		"Wed, 31 Dec 2025 23:00:00 GMT": 0,
	} {
		if got := parseRetryAfter([]byte(in), now); got != want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestFailoverOn503HonoursCappedRetryAfter(t *testing.T) {
	down := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Retry-After", "30")
		reply(w, 503, `{"error":{"code":"unavailable","message":"slot 3 has no leader"}}`)
	})
	up := newFake(t, fixed(200, jobAnswer))
	c := newClient(t, []string{down.addr(), up.addr()}, WithMaxRetryWait(50*time.Millisecond))
	start := time.Now()
	j, err := c.GetJob(context.Background(), "c", "j1")
	if err != nil {
		t.Fatal(err)
	}
	if j.ID != "j1" {
		t.Errorf("job = %+v", j)
	}
	// Retry-After 30 s was honoured but capped at 50 ms.
	if el := time.Since(start); el < 50*time.Millisecond || el > 5*time.Second {
		t.Errorf("elapsed %v, want the capped 50ms wait", el)
	}
	if n, m := len(down.requests()), len(up.requests()); n != 1 || m != 1 {
		t.Errorf("requests down=%d up=%d, want 1 and 1", n, m)
	}
}

func TestFailoverOnConnectionRefused(t *testing.T) {
	// An address nothing listens on: the request is never sent, so even a
	// POST without an id is safe to send to the next address.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	_ = ln.Close()
	up := newFake(t, fixed(201, jobAnswer))
	c := newClient(t, []string{dead, up.addr()})
	_, created, err := c.CreateJob(context.Background(), "c", Job{Delay: "1s", CallbackURL: "http://h/x"})
	if err != nil {
		t.Fatal(err)
	}
	if !created || len(up.requests()) != 1 {
		t.Errorf("created=%v requests=%d", created, len(up.requests()))
	}
}

func TestAttemptsAreBounded(t *testing.T) {
	a := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Retry-After", "1")
		reply(w, 503, `{"error":{"code":"unavailable","message":"no quorum"}}`)
	})
	b := newFake(t, a.handler)
	c := newClient(t, []string{a.addr(), b.addr()}, WithMaxAttempts(3), WithMaxRetryWait(time.Millisecond))
	_, err := c.ListCollections(context.Background())
	if !IsUnavailable(err) {
		t.Fatalf("err = %v, want unavailable", err)
	}
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.RetryAfter != time.Second {
		t.Errorf("RetryAfter = %v, want 1s", apiErr.RetryAfter)
	}
	if total := len(a.requests()) + len(b.requests()); total != 3 {
		t.Errorf("sent %d times, want 3", total)
	}
	if len(a.requests()) != 2 || len(b.requests()) != 1 {
		t.Errorf("a=%d b=%d, want alternating 2/1", len(a.requests()), len(b.requests()))
	}
}

func TestNon503ErrorsAreNotRetried(t *testing.T) {
	a := newFake(t, fixed(409, `{"error":{"code":"conflict","message":"x"}}`))
	b := newFake(t, fixed(201, jobAnswer))
	c := newClient(t, []string{a.addr(), b.addr()})
	_, _, err := c.CreateJob(context.Background(), "c", Job{ID: "j1"})
	if !IsConflict(err) {
		t.Fatalf("err = %v", err)
	}
	if len(b.requests()) != 0 {
		t.Error("a conflict must not be sent to another node")
	}
}

// abort breaks the connection after the request was read, so the client
// cannot know whether it was applied.
func abort(http.ResponseWriter, *http.Request, []byte) { panic(http.ErrAbortHandler) }

func TestAmbiguousFailureResendsOnlyIdempotentRequests(t *testing.T) {
	tests := []struct {
		name       string
		call       func(c *Client) error
		wantResend bool
	}{
		{"POST without id is not resent", func(c *Client) error {
			_, _, err := c.CreateJob(context.Background(), "c", Job{Delay: "1s", CallbackURL: "http://h"})
			return err
		}, false},
		{"POST with id is resent", func(c *Client) error {
			_, _, err := c.CreateJob(context.Background(), "c", Job{ID: "j1", Delay: "1s", CallbackURL: "http://h"})
			return err
		}, true},
		{"batch with every id is resent", func(c *Client) error {
			_, err := c.CreateJobs(context.Background(), "c", []Job{{ID: "a"}, {ID: "b"}})
			return err
		}, true},
		{"batch missing an id is not resent", func(c *Client) error {
			_, err := c.CreateJobs(context.Background(), "c", []Job{{ID: "a"}, {}})
			return err
		}, false},
		{"GET is resent", func(c *Client) error {
			_, err := c.GetJob(context.Background(), "c", "j1")
			return err
		}, true},
		{"compact is not resent", func(c *Client) error {
			_, err := c.Compact(context.Background())
			return err
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newFake(t, abort)
			b := newFake(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
				if strings.HasPrefix(string(body), "[") {
					reply(w, 200, `{"results":[{"id":"a","status":201},{"id":"b","status":201}]}`)
					return
				}
				reply(w, 201, jobAnswer)
			})
			c := newClient(t, []string{a.addr(), b.addr()})
			err := tc.call(c)
			resent := len(b.requests()) == 1
			if resent != tc.wantResend {
				t.Errorf("resent = %v, want %v (err %v)", resent, tc.wantResend, err)
			}
			if tc.wantResend && err != nil {
				t.Errorf("err = %v", err)
			}
			if !tc.wantResend && err == nil {
				t.Error("want the transport error")
			}
		})
	}
}

func TestRoundRobin(t *testing.T) {
	a := newFake(t, fixed(200, jobAnswer))
	b := newFake(t, fixed(200, jobAnswer))
	c := newClient(t, []string{a.addr(), b.addr()})
	for range 6 {
		if _, err := c.GetJob(context.Background(), "c", "j1"); err != nil {
			t.Fatal(err)
		}
	}
	if len(a.requests()) != 3 || len(b.requests()) != 3 {
		t.Errorf("a=%d b=%d, want 3 each", len(a.requests()), len(b.requests()))
	}
}

func TestCreateJobsBatchResults(t *testing.T) {
	f := newFake(t, fixed(200, `{"results":[
		{"id":"a","status":201,"job":{"id":"a","trigger_time":10,"status":"scheduled","version":1}},
		{"id":"b","status":200,"job":{"id":"b","trigger_time":20,"status":"scheduled","version":4}},
		{"id":"c","status":409,"error":{"code":"conflict","message":"different spec"}},
		{"id":"","status":400,"error":{"code":"invalid_argument","message":"bad trigger_time"}}]}`))
	c := newClient(t, []string{f.addr()})
	jobs := []Job{
		{ID: "a", TriggerTime: 10, CallbackURL: "http://h"},
		{ID: "b", TriggerTime: 20, CallbackURL: "http://h"},
		{ID: "c", TriggerTime: 30, CallbackURL: "http://h"},
		{TriggerTime: -1, CallbackURL: "http://h"},
	}
	res, err := c.CreateJobs(context.Background(), "c", jobs)
	if err != nil {
		t.Fatal(err)
	}
	jsonEq(t, f.requests()[0].Body, `[{"id":"a","trigger_time":10,"callback_url":"http://h"},
		{"id":"b","trigger_time":20,"callback_url":"http://h"},
		{"id":"c","trigger_time":30,"callback_url":"http://h"},
		{"trigger_time":-1,"callback_url":"http://h"}]`)
	if len(res) != 4 {
		t.Fatalf("%d results", len(res))
	}
	if res[0].Status != 201 || res[0].Job == nil || res[0].Job.Version != 1 || res[0].Error != nil {
		t.Errorf("res[0] = %+v", res[0])
	}
	if res[1].Status != 200 || res[1].Job.TriggerTime != 20 {
		t.Errorf("res[1] = %+v", res[1])
	}
	if res[2].Job != nil || !IsConflict(res[2].Error) || res[2].Error.HTTPStatus != 409 || res[2].Error.Message != "different spec" {
		t.Errorf("res[2] = %+v (%v)", res[2], res[2].Error)
	}
	if !IsInvalidArgument(res[3].Error) {
		t.Errorf("res[3] = %+v", res[3])
	}

	// The client checks the answer lines up with the input.
	f.setHandler(fixed(200, `{"results":[{"id":"a","status":201}]}`))
	if _, err := c.CreateJobs(context.Background(), "c", jobs[:2]); err == nil {
		t.Error("want an error for a short results array")
	}
	// Over the limit: refused without a request.
	n := len(f.requests())
	if _, err := c.CreateJobs(context.Background(), "c", make([]Job, MaxBatch+1)); err == nil {
		t.Error("want an error for a batch over 1000")
	}
	if res, err := c.CreateJobs(context.Background(), "c", nil); err != nil || res != nil {
		t.Errorf("empty batch = %v, %v", res, err)
	}
	if len(f.requests()) != n {
		t.Error("oversized and empty batches must not be sent")
	}
}

func TestReadyAndHealthyAskEveryNode(t *testing.T) {
	ready := newFake(t, fixed(200, `ok`))
	notReady := newFake(t, fixed(503, `{"error":{"code":"unavailable","message":"slot 4 has no leader"}}`))
	c := newClient(t, []string{ready.addr(), notReady.addr()})
	err := c.Ready(context.Background())
	if !IsUnavailable(err) || !strings.Contains(err.Error(), notReady.addr()) || !strings.Contains(err.Error(), "slot 4") {
		t.Errorf("Ready = %v", err)
	}
	if len(ready.requests()) != 1 || len(notReady.requests()) != 1 {
		t.Errorf("Ready must ask each node once without failover")
	}
	if r := ready.requests()[0]; r.URI != "/readyz" || r.Method != "GET" {
		t.Errorf("request %s %s", r.Method, r.URI)
	}
	notReady.setHandler(fixed(200, "ok"))
	if err := c.Healthy(context.Background()); err != nil {
		t.Errorf("Healthy = %v", err)
	}
	if r := notReady.requests()[1]; r.URI != "/healthz" {
		t.Errorf("request %s", r.URI)
	}
	if err := c.Ready(context.Background()); err != nil {
		t.Errorf("Ready = %v", err)
	}
}

func TestContextCancellationReturnsPromptly(t *testing.T) {
	release := make(chan struct{})
	f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		<-release
		reply(w, 200, jobAnswer)
	})
	t.Cleanup(func() { close(release) }) // runs before the server closes
	c := newClient(t, []string{f.addr()}, WithTimeout(time.Minute))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.GetJob(ctx, "c", "j1")
		done <- err
	}()
	// Cancel once the server holds the request.
	waitFor(t, func() bool { return len(f.requests()) == 1 })
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("call did not return after cancel")
	}
}

func TestContextDeadlineBoundsAttempt(t *testing.T) {
	release := make(chan struct{})
	f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		<-release
		reply(w, 200, jobAnswer)
	})
	t.Cleanup(func() { close(release) })
	c := newClient(t, []string{f.addr()}, WithTimeout(time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.GetJob(ctx, "c", "j1")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want context.DeadlineExceeded", err)
	}
}

func TestNewValidates(t *testing.T) {
	for _, tc := range []struct {
		addrs []string
		opts  []Option
	}{
		{nil, nil},
		{[]string{"http://127.0.0.1:1"}, nil},
		{[]string{"nohost"}, nil},
		{[]string{"127.0.0.1:1"}, []Option{WithScheme("ftp")}},
		{[]string{"127.0.0.1:1"}, []Option{WithTimeout(0)}},
		{[]string{"127.0.0.1:1"}, []Option{WithMaxAttempts(0)}},
	} {
		if _, err := New(tc.addrs, tc.opts...); err == nil {
			t.Errorf("New(%v) succeeded, want an error", tc.addrs)
		}
	}
	c, err := New([]string{"127.0.0.1:1", " 127.0.0.1:2 "}, WithScheme("https"), WithMaxConns(4))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Addrs(); len(got) != 2 || got[1] != "127.0.0.1:2" {
		t.Errorf("Addrs = %v", got)
	}
}

// waitFor polls cond until it holds or 5 s pass: waiting on a condition,
// never sleeping for a fixed time.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}
