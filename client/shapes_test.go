package client

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
)

const jobAnswer = `{"id":"j1","trigger_time":1767225600000,"callback_url":"http://h/x","meta":{"a":1},
	"collection":"c","status":"scheduled","attempts":0,"version":3,"created_at":5,"updated_at":6}`

// TestRequestShapes checks, per endpoint of docs/api.md, the request the client
// sends (method, escaped path and query, body with only writable fields,
// headers) and the typed result it makes of the answer.
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
					Meta:            Meta(`{"a":1}`),
					RetryPolicy:     &RetryPolicy{MaxAttempts: ptr(3), InitialInterval: "2s"},
					CallbackTimeout: "5s",
					Status:          "succeeded", Version: 9, Attempts: 4, // read-only: not sent
				})
				return []any{j.ID, j.Version, j.Status, j.Meta.String(), created}, err
			},
			wantMethod: "POST", wantURI: "/v1/collections/c/jobs",
			wantBody: `{"id":"j1","trigger_time":1767225600000,"callback_url":"http://h/x","meta":{"a":1},
				"retry_policy":{"max_attempts":3,"initial_interval":"2s"},"callback_timeout":"5s"}`,
			wantHeader: map[string]string{"Content-Type": "application/json", "Accept": "application/json", "Authorization": ""},
			want:       []any{"j1", int64(3), "scheduled", `{"a":1}`, true},
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
				_, created, err := c.PutJob(ctx, "c", "j1", Job{ID: "ignored", TriggerTime: 5, CallbackURL: "http://h/x"}, IfMatch(7))
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
				_, created, err := c.PutJob(ctx, "c", "j1", Job{TriggerTime: 5, Route: "r"})
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
			name:       "delete job",
			status:     204,
			call:       func(c *Client) (any, error) { return nil, c.DeleteJob(ctx, "c", "j1") },
			wantMethod: "DELETE", wantURI: "/v1/collections/c/jobs/j1",
		},
		{
			name:   "list jobs with every option",
			status: 200, answer: `{"jobs":[{"id":"a","trigger_time":1},{"id":"b","trigger_time":2}],"next_cursor":"n2"}`,
			call: func(c *Client) (any, error) {
				p, err := c.ListJobs(ctx, "c", ListOptions{Status: "failed", From: ptr(int64(0)), To: ptr(int64(99)), Schedule: "daily", Limit: 10, Cursor: "abc=="})
				return []any{len(p.Jobs), p.Jobs[1].ID, p.NextCursor}, err
			},
			wantMethod: "GET", wantURI: "/v1/collections/c/jobs?cursor=abc%3D%3D&from=0&limit=10&schedule=daily&status=failed&to=99",
			want: []any{2, "b", "n2"},
		},
		{
			name:   "list jobs without options sends no query",
			status: 200, answer: `{"jobs":[]}`,
			call: func(c *Client) (any, error) {
				p, err := c.ListJobs(ctx, "c", ListOptions{})
				return []any{len(p.Jobs), p.NextCursor}, err
			},
			wantMethod: "GET", wantURI: "/v1/collections/c/jobs",
			want: []any{0, ""},
		},
		{
			name:   "redrive by ids",
			status: 200, answer: `{"redriven":2}`,
			call: func(c *Client) (any, error) {
				r, err := c.Redrive(ctx, "c", RedriveRequest{IDs: []string{"a", "b"}})
				return r, err
			},
			wantMethod: "POST", wantURI: "/v1/collections/c/redrive",
			wantBody: `{"ids":["a","b"]}`,
			want:     RedriveResult{Redriven: 2},
		},
		{
			name:   "redrive by range",
			status: 200, answer: `{"redriven":0}`,
			call: func(c *Client) (any, error) {
				r, err := c.Redrive(ctx, "c", RedriveRequest{From: ptr(int64(0)), To: ptr(int64(1767225600000))})
				return r.Redriven, err
			},
			wantMethod: "POST", wantURI: "/v1/collections/c/redrive",
			wantBody: `{"from":0,"to":1767225600000}`,
			want:     0,
		},
		{
			name:   "put schedule",
			status: 201,
			answer: `{"id":"daily","collection":"c","cron":"0 9 * * *","timezone":"Europe/Berlin","route":"r","next_fire_at":1767254400000,"version":1}`,
			call: func(c *Client) (any, error) {
				s, created, err := c.PutSchedule(ctx, "c", "daily", Schedule{
					ID: "ignored", Cron: "0 9 * * *", Timezone: "Europe/Berlin", Route: "r",
					Meta: MustMeta(map[string]int{"n": 1}), StartAt: 5, EndAt: 6, Paused: true,
					NextFireAt: 99, Version: 4, // read-only: not sent
				})
				return []any{s.ID, s.NextFireAt, s.Version, created}, err
			},
			wantMethod: "PUT", wantURI: "/v1/collections/c/schedules/daily",
			wantBody: `{"cron":"0 9 * * *","timezone":"Europe/Berlin","route":"r","meta":{"n":1},"start_at":5,"end_at":6,"paused":true}`,
			want:     []any{"daily", int64(1767254400000), int64(1), true},
		},
		{
			name:   "put schedule with every",
			status: 200, answer: `{"every":"30s","callback_url":"http://h/x","missed":3,"last_status":"failed","last_fire_at":7}`,
			call: func(c *Client) (any, error) {
				s, created, err := c.PutSchedule(ctx, "c", "tick", Schedule{Every: "30s", CallbackURL: "http://h/x"})
				return []any{s.ID, s.Collection, s.Missed, s.LastStatus, s.LastFireAt, created}, err
			},
			wantMethod: "PUT", wantURI: "/v1/collections/c/schedules/tick",
			wantBody: `{"every":"30s","callback_url":"http://h/x"}`,
			want:     []any{"tick", "c", int64(3), "failed", int64(7), false},
		},
		{
			name:   "get schedule",
			status: 200, answer: `{"id":"daily","cron":"0 9 * * *"}`,
			call: func(c *Client) (any, error) {
				s, err := c.GetSchedule(ctx, "c", "daily")
				return []any{s.ID, s.Cron}, err
			},
			wantMethod: "GET", wantURI: "/v1/collections/c/schedules/daily",
			want: []any{"daily", "0 9 * * *"},
		},
		{
			name:   "list schedules",
			status: 200, answer: `{"schedules":[{"id":"a","every":"1m"}],"next_cursor":"x"}`,
			call: func(c *Client) (any, error) {
				p, err := c.ListSchedules(ctx, "c", ListSchedulesOptions{Limit: 1, Cursor: "w"})
				return []any{p.Schedules[0].ID, p.Schedules[0].Collection, p.NextCursor}, err
			},
			wantMethod: "GET", wantURI: "/v1/collections/c/schedules?cursor=w&limit=1",
			want: []any{"a", "c", "x"},
		},
		{
			name:       "delete schedule",
			status:     204,
			call:       func(c *Client) (any, error) { return nil, c.DeleteSchedule(ctx, "c", "daily") },
			wantMethod: "DELETE", wantURI: "/v1/collections/c/schedules/daily",
		},
		{
			name:   "put collection",
			status: 201, answer: `{"retention":"1h","callback_timeout":"5s","signing_secret_set":true}`,
			call: func(c *Client) (any, error) {
				col, created, err := c.PutCollection(ctx, "bench", Collection{
					Name: "ignored", Retention: "1h", CallbackTimeout: "5s",
					SigningSecret: "whsec_abc", RetryPolicy: &RetryPolicy{Multiplier: ptr(1.5)},
					SigningSecretSet: true, Status: "active", // read-only: not sent
				})
				return []any{col.Name, col.Retention, col.SigningSecret, col.SigningSecretSet, created}, err
			},
			wantMethod: "PUT", wantURI: "/v1/collections/bench",
			wantBody: `{"retry_policy":{"multiplier":1.5},"callback_timeout":"5s","retention":"1h","signing_secret":"whsec_abc"}`,
			want:     []any{"bench", "1h", "", true, true},
		},
		{
			name:   "get collection",
			status: 200, answer: `{"name":"n","retention":"24h","status":"active","retry_policy":{"max_attempts":5,"multiplier":2}}`,
			call: func(c *Client) (any, error) {
				col, err := c.GetCollection(ctx, "n")
				return []any{col.Name, col.Retention, col.Status, *col.RetryPolicy.MaxAttempts, *col.RetryPolicy.Multiplier}, err
			},
			wantMethod: "GET", wantURI: "/v1/collections/n",
			want: []any{"n", "24h", "active", 5, 2.0},
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
			name:   "put route with delivery control",
			status: 200,
			answer: `{"name":"billing","webhook_url":"https://b/h","headers":{"X-A":"1"},"rate_limit":{"per_second":100,"burst":20},"max_in_flight":10,"batch":{"max_jobs":100,"max_wait":"20ms"},"signing_secret_set":true}`,
			call: func(c *Client) (any, error) {
				r, created, err := c.PutRoute(ctx, "billing", Route{
					WebhookURL: "https://b/h", Headers: map[string]string{"X-A": "1"}, Timeout: "3s",
					SigningSecret: "whsec_x", RateLimit: &RateLimit{PerSecond: 100, Burst: 20}, MaxInFlight: 10,
					Batch: &RouteBatch{MaxJobs: 100, MaxWait: "20ms"},
				})
				return []any{r.Name, r.Headers["X-A"], *r.RateLimit, r.MaxInFlight, *r.Batch, r.SigningSecretSet, created}, err
			},
			wantMethod: "PUT", wantURI: "/v1/routes/billing",
			wantBody: `{"webhook_url":"https://b/h","headers":{"X-A":"1"},"signing_secret":"whsec_x","timeout":"3s",
				"rate_limit":{"per_second":100,"burst":20},"max_in_flight":10,"batch":{"max_jobs":100,"max_wait":"20ms"}}`,
			want: []any{"billing", "1", RateLimit{PerSecond: 100, Burst: 20}, 10, RouteBatch{MaxJobs: 100, MaxWait: "20ms"}, true, false},
		},
		{
			name:   "put route pipelined",
			status: 201,
			answer: `{"name":"fast","webhook_url":"https://f/h","headers":{},"pipeline":true,"signing_secret_set":false}`,
			call: func(c *Client) (any, error) {
				r, created, err := c.PutRoute(ctx, "fast", Route{WebhookURL: "https://f/h", Pipeline: true})
				return []any{r.Pipeline, r.MaxInFlight, created}, err
			},
			wantMethod: "PUT", wantURI: "/v1/routes/fast",
			wantBody: `{"webhook_url":"https://f/h","pipeline":true}`,
			want:     []any{true, 0, true},
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
				"slots":[{"slot":0,"leader":"n1","replicas":["n1","n2","n3"],"state":"healthy"},
				         {"slot":1,"leader":"n2","replicas":["n1","n2"],"state":"moving","target":["n2","n3"]}]}`,
			call: func(c *Client) (any, error) {
				ci, err := c.Cluster(ctx)
				if err != nil {
					return nil, err
				}
				n, ok := ci.Node("n1")
				return []any{ci.SlotCount, ci.ReplicationFactor, n.HTTPAddr, n.SlotsLed, n.Replicas, ok,
					ci.Slots[0].Replicas[2], ci.Slots[0].Leader, ci.NotHealthy()[0].Target}, nil
			},
			wantMethod: "GET", wantURI: "/v1/cluster",
			want: []any{12, 3, "127.0.0.1:8080", 4, 12, true, "n3", "n1", []string{"n2", "n3"}},
		},
		{
			name:   "rebalance dry run",
			status: 200, answer: `{"moves":[{"slot":1,"from":"n1","to":"n2","kind":"replica"}],"dry_run":true}`,
			call: func(c *Client) (any, error) {
				return c.Rebalance(ctx, true)
			},
			wantMethod: "POST", wantURI: "/v1/admin/rebalance?dry_run=true",
			want: RebalanceResult{Moves: []Move{{Slot: 1, From: "n1", To: "n2", Kind: "replica"}}, DryRun: true},
		},
		{
			name:   "rebalance",
			status: 200, answer: `{"moves":[]}`,
			call: func(c *Client) (any, error) {
				return c.Rebalance(ctx, false)
			},
			wantMethod: "POST", wantURI: "/v1/admin/rebalance",
			want: RebalanceResult{Moves: []Move{}},
		},
		{
			name:   "compact",
			status: 200, answer: `{"results":[{"node":"n1","ok":true,"took_ms":12,"slots_snapshotted":4},{"node":"n2","ok":false,"error":"disk full","took_ms":0,"slots_snapshotted":0}]}`,
			call: func(c *Client) (any, error) {
				return c.Compact(ctx)
			},
			wantMethod: "POST", wantURI: "/v1/admin/compact",
			want: CompactResult{Results: []NodeCompaction{{Node: "n1", OK: true, TookMs: 12, SlotsSnapshotted: 4}, {Node: "n2", Error: "disk full"}}},
		},
		{
			name:       "transfer slot",
			status:     200,
			answer:     `{"slot":7,"from":"n1","to":"n2","leader":"n2","preferred_leader":"n2"}`,
			call:       func(c *Client) (any, error) { return c.TransferSlot(ctx, 7, "n2") },
			wantMethod: "POST", wantURI: "/v1/admin/slots/7/transfer",
			wantBody: `{"to":"n2"}`,
			want:     TransferResult{Slot: 7, From: "n1", To: "n2", Leader: "n2", PreferredLeader: "n2"},
		},
		{
			name:       "transfer slot, older server",
			status:     200,
			answer:     `{}`,
			call:       func(c *Client) (any, error) { return c.TransferSlot(ctx, 7, "n2") },
			wantMethod: "POST", wantURI: "/v1/admin/slots/7/transfer",
			wantBody: `{"to":"n2"}`,
			want:     TransferResult{Slot: 7, To: "n2", PreferredLeader: "n2"},
		},
		{
			name:       "drain",
			status:     200,
			answer:     `{"node":"n3","status":"draining","replicas":5,"slots_led":2}`,
			call:       func(c *Client) (any, error) { return c.Drain(ctx, "n3") },
			wantMethod: "POST", wantURI: "/v1/admin/nodes/n3/drain",
			want: DrainResult{Node: "n3", Status: "draining", Replicas: 5, SlotsLed: 2},
		},
		{
			name:       "remove node",
			status:     204,
			call:       func(c *Client) (any, error) { return nil, c.RemoveNode(ctx, "n3", false) },
			wantMethod: "DELETE", wantURI: "/v1/admin/nodes/n3",
		},
		{
			name:       "remove dead node with force",
			status:     204,
			call:       func(c *Client) (any, error) { return nil, c.RemoveNode(ctx, "n 3", true) },
			wantMethod: "DELETE", wantURI: "/v1/admin/nodes/n%203?force=true",
		},
		{
			name:   "openapi",
			status: 200, answer: `{"openapi":"3.1.0"}`,
			call: func(c *Client) (any, error) {
				b, err := c.OpenAPI(ctx)
				return string(b), err
			},
			wantMethod: "GET", wantURI: "/v1/openapi.json",
			want: `{"openapi":"3.1.0"}`,
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
			if r.Header.Get("X-Global") != "g" || r.Header.Get("User-Agent") != DefaultUserAgent {
				t.Errorf("headers of every request missing: %v", r.Header)
			}
		})
	}
}

// TestEmptyPathParameters: an empty name, ".", or ".." would address
// another endpoint (GET …/jobs/ is the list), so it is refused before
// anything is sent.
func TestEmptyPathParameters(t *testing.T) {
	f := newFake(t, fixed(200, jobAnswer))
	c := newClient(t, []string{f.addr()})
	ctx := context.Background()
	errs := []error{
		func() error { _, err := c.GetJob(ctx, "c", ""); return err }(),
		func() error { _, err := c.GetJob(ctx, "", "j"); return err }(),
		c.DeleteJob(ctx, "c", ""),
		func() error { _, _, err := c.PutJob(ctx, "c", "", Job{}); return err }(),
		func() error { _, _, err := c.CreateJob(ctx, "", Job{}); return err }(),
		func() error { _, err := c.ListJobs(ctx, "", ListOptions{}); return err }(),
		func() error { _, err := c.GetSchedule(ctx, "c", ""); return err }(),
		c.DeleteSchedule(ctx, "c", ""),
		func() error { _, err := c.GetCollection(ctx, ""); return err }(),
		c.DeleteRoute(ctx, ""),
		func() error { _, err := c.Drain(ctx, ""); return err }(),
		c.RemoveNode(ctx, "", true),
		func() error { _, err := c.TransferSlot(ctx, 1, ""); return err }(),
		func() error { _, err := c.TransferSlot(ctx, -1, "n1"); return err }(),
		func() error { _, err := c.Redrive(ctx, "c", RedriveRequest{}); return err }(),
		func() error {
			_, err := c.Redrive(ctx, "c", RedriveRequest{IDs: []string{"a"}, From: ptr(int64(1))})
			return err
		}(),
		func() error {
			for _, err := range c.Occurrences(ctx, "c", "", ListOptions{}) {
				return err
			}
			return nil
		}(),
		// Dot segments: escaping leaves them as they are, and a stack on
		// the way may resolve them (job ".." would be its collection).
		c.DeleteJob(ctx, "c", ".."),
		c.DeleteJob(ctx, "c", "."),
		func() error { _, err := c.GetJob(ctx, "..", "j"); return err }(),
		c.DeleteSchedule(ctx, "c", ".."),
		c.DeleteRoute(ctx, ".."),
		func() error { _, err := c.Drain(ctx, ".."); return err }(),
	}
	for i, err := range errs {
		if err == nil {
			t.Errorf("call %d: want an error", i)
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

func TestOccurrenceID(t *testing.T) {
	if id := OccurrenceID("daily@eu", 1767225600000); id != "daily@eu@1767225600000" {
		t.Errorf("OccurrenceID = %q", id)
	}
	for _, tc := range []struct {
		id    string
		sched string
		at    int64
		ok    bool
	}{
		{"daily@1767225600000", "daily", 1767225600000, true},
		{"daily@eu@5", "daily@eu", 5, true},
		{"daily", "", 0, false},
		{"@5", "", 0, false},
		{"daily@", "", 0, false},
		{"daily@x", "", 0, false},
		{"daily@+5", "", 0, false},
	} {
		s, at, ok := ParseOccurrenceID(tc.id)
		if s != tc.sched || at != tc.at || ok != tc.ok {
			t.Errorf("ParseOccurrenceID(%q) = %q, %d, %v", tc.id, s, at, ok)
		}
	}
}

// TestAnswersRoundTripEveryKey: the CLI's -o json encodes these types, so
// a field the server always sends, zero or not, is kept (answers as the
// server rendered them on 2026-11-26).
func TestAnswersRoundTripEveryKey(t *testing.T) {
	for _, tc := range []struct {
		answer string
		v      any
	}{
		{`{"id":"j1","collection":"default","trigger_time":1795733212210,"callback_url":"http://127.0.0.1:29399/x","retry_policy":{"max_attempts":5,"initial_interval":"1s","multiplier":2,"max_interval":"10m0s","max_age":"24h0m0s"},"callback_timeout":"10s","status":"scheduled","attempts":0,"last_error":"","version":1,"created_at":1795729612210,"updated_at":1795729612210,"finished_at":0,"next_attempt_at":1795733212210}`, &Job{}},
		// A job due at 0 (accepted: past times fire at once), rendered as the server does since 2026-11-28 (meta always sent).
		{`{"id":"t7","collection":"default","trigger_time":0,"callback_url":"http://127.0.0.1:29399/x","meta":{},"retry_policy":{"max_attempts":5,"initial_interval":"1s","multiplier":2,"max_interval":"10m0s","max_age":"24h0m0s"},"callback_timeout":"10s","status":"succeeded","attempts":1,"last_error":"","version":2,"created_at":1795729612210,"updated_at":1795729612310,"finished_at":1795729612310}`, &Job{}},
		{`{"name":"default","retry_policy":{"max_attempts":5,"initial_interval":"1s","multiplier":2,"max_interval":"10m0s","max_age":"24h0m0s"},"callback_timeout":"10s","retention":"24h0m0s","signing_secret_set":false,"status":"active","created_at":0,"updated_at":0}`, &Collection{}},
		{`{"name":"r1","webhook_url":"http://127.0.0.1:29399/x","headers":{},"signing_secret_set":false,"created_at":1795729612224,"updated_at":1795729612224}`, &Route{}},
		{`{"id":"s1","collection":"default","every":"1h0m0s","timezone":"UTC","callback_url":"http://127.0.0.1:29399/x","paused":false,"next_fire_at":1795733212233,"last_fire_at":0,"last_status":"","missed":0,"version":1,"created_at":1795729612233,"updated_at":1795729612233}`, &Schedule{}},
	} {
		if err := json.Unmarshal([]byte(tc.answer), tc.v); err != nil {
			t.Fatal(err)
		}
		out, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		var want, got map[string]any
		_ = json.Unmarshal([]byte(tc.answer), &want)
		_ = json.Unmarshal(out, &got)
		if !reflect.DeepEqual(want, got) {
			t.Errorf("%T: re-encoded\n%s\nwant the answer's keys and values\n%s", tc.v, out, tc.answer)
		}
	}
}
