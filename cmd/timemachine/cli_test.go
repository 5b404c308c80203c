package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/client"
	"github.com/timemachine-db/timemachine/client/clienttest"
)

// runCLI runs the command line as main does and returns what it printed
// and its exit code.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	root := newRoot()
	var out, errs bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errs)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		var msg string
		code, msg = describeExit(err)
		errs.WriteString("error: " + msg + "\n")
	}
	return out.String(), errs.String(), code
}

// Mistakes on the command line: exit 2 and a message that says what to do.
func TestCLIUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in stderr
	}{
		{[]string{"job", "lst"}, `did you mean get or list?`},
		{[]string{"jbo"}, `did you mean job?`},
		{[]string{"admin", "stauts"}, `did you mean status?`},
		{[]string{"job", "list", "--limit", "0"}, "--limit 0: must be greater than zero"},
		{[]string{"job", "list", "--limit=-5"}, "--limit -5: must be greater than zero"},
		{[]string{"admin", "status", "--timeout", "0s"}, "--timeout 0s: must be greater than zero"},
		{[]string{"admin", "rebalance", "--wait", "--timeout=-1m"}, "--timeout -1m0s: must be greater than zero"},
		{[]string{"bench", "--concurrency", "0"}, "--concurrency 0: must be greater than zero"},
		{[]string{"server", "--slots", "-1"}, "--slots -1: must be greater than zero"},
		// The server's own checks of its flags are usage errors too.
		{[]string{"server", "--log-level", "loud"}, `--log-level "loud": use debug, info, warn or error`},
		{[]string{"server", "--max-meta-bytes", "20000000", "--data-dir", "/nonexistent/never-created"}, "--max-meta-bytes 20000000: must be at most"},
		{[]string{"server", "--tls-cert", "c.pem", "--data-dir", "/nonexistent/never-created"}, "--tls-cert and --tls-key go together"},
		{[]string{"server", "--callback-deny", "10.0.0.0/99", "--data-dir", "/nonexistent/never-created"}, `--callback-deny "10.0.0.0/99": not a CIDR`},
		{[]string{"admin", "status", "-o", "yaml"}, `-o/--output "yaml": want table or json`},
		{[]string{"admin", "status", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"job", "get"}, "accepts 1 arg(s), received 0"},
		{[]string{"admin", "transfer", "x", "n2"}, `SLOT "x": want a slot number`},
		{[]string{"job", "create", "--url", "http://127.0.0.1:1/"}, "give the job's time"},
		{[]string{"job", "create", "--delay", "1s", "--meta", "{nope"}, "--meta is not valid JSON"},
		{[]string{"route", "put", "r1"}, "give the route's --webhook-url"},
		{[]string{"route", "put", "r1", "--webhook-url", "http://x/", "--header", "novalue"}, `--header "novalue": want NAME=VALUE`},
		{[]string{"job", "redrive"}, "give --ids, or a trigger-time range"},
		// Refused before anything is sent: a file that cannot be read, an
		// argument the client refuses, an unreadable --ca-cert.
		{[]string{"job", "create", "--body", "/nonexistent/job.json"}, "read /nonexistent/job.json"},
		{[]string{"job", "delete", ".."}, `the job id ".." is not valid`},
		{[]string{"job", "get", "j", "--ca-cert", "/nonexistent/ca.pem"}, "CA file"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			args := tc.args
			if args[0] != "jbo" && args[0] != "server" { // (no --addr there)
				args = append(args, "--addr", "127.0.0.1:1")
			}
			_, errs, code := runCLI(t, args...)
			if code != exitUsage || !strings.Contains(errs, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, errs, exitUsage, tc.want)
			}
		})
	}
}

// Exit codes and one-line messages for the other failures.
func TestCLIExitCodes(t *testing.T) {
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotImplemented)
		_, _ = w.Write([]byte("<html><body><h1>Error 501</h1>\n<p>Unsupported method</p></body></html>"))
	}))
	defer html.Close()
	fake := clienttest.NewServer()
	defer fake.Close()

	_, errs, code := runCLI(t, "job", "create", "--delay", "1s", "--url", "http://127.0.0.1:9/", "--addr", html.URL)
	if code != exitFailed || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "does not answer like a timemachine node (HTTP 501, text/html)") {
		t.Errorf("an HTML page at --addr: exit %d, stderr %q", code, errs)
	}
	_, errs, code = runCLI(t, "job", "get", "nope", "--addr", fake.Addr())
	if code != exitFailed || !strings.Contains(errs, "not_found") {
		t.Errorf("a job that does not exist: exit %d, stderr %q", code, errs)
	}
	_, errs, code = runCLI(t, "schedule", "put", "s", "--url", "http://127.0.0.1:9/", "--addr", fake.Addr())
	if code == 0 || !strings.Contains(errs, "exactly one of --cron") {
		t.Errorf("schedule put without --cron/--every: exit %d, stderr %q", code, errs)
	}
	out, _, code := runCLI(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "timemachine ") {
		t.Errorf("--version: exit %d, %q", code, out)
	}
	// admin status: 0 when healthy, 4 when a slot is not.
	if out, errs, code := runCLI(t, "admin", "status", "--addr", fake.Addr()); code != 0 || !strings.Contains(out, "n1") {
		t.Errorf("admin status of a healthy cluster: exit %d\n%s%s", code, out, errs)
	}
	fake.SetCluster(clusterState("moving", "n1", 1, 1))
	if out, errs, code := runCLI(t, "admin", "status", "--addr", fake.Addr()); code != exitUnhealthy || !strings.Contains(errs, "1 of 2 slots are not healthy") ||
		!strings.Contains(out, "moving → n1,n2") {
		t.Errorf("admin status of a moving cluster: exit %d\n%s%s", code, out, errs)
	}
}

// collection, route and job commands against the fake: every flag lands in
// its field, tables by default, JSON keys in the struct's order.
func TestCLIConfigAndJobs(t *testing.T) {
	fake := clienttest.NewServer()
	defer fake.Close()
	addr := "--addr=" + fake.Addr()
	mustRun := func(args ...string) string {
		t.Helper()
		out, errs, code := runCLI(t, append(args, addr)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		return out
	}

	mustRun("collection", "put", "billing", "--retention", "72h", "--callback-timeout", "5s", "--max-attempts", "8",
		"--initial-interval", "2s", "--multiplier", "3", "--max-interval", "1m", "--max-age", "48h",
		"--signing-secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	var c client.Collection
	if err := json.Unmarshal([]byte(mustRun("collection", "get", "billing", "-o", "json")), &c); err != nil {
		t.Fatal(err)
	}
	if c.Retention != "72h" || c.CallbackTimeout != "5s" || c.RetryPolicy == nil || *c.RetryPolicy.MaxAttempts != 8 ||
		c.RetryPolicy.InitialInterval != "2s" || *c.RetryPolicy.Multiplier != 3 || c.RetryPolicy.MaxInterval != "1m" ||
		c.RetryPolicy.MaxAge != "48h" || !c.SigningSecretSet || c.SigningSecret != "" {
		t.Errorf("collection %+v (%+v)", c, c.RetryPolicy)
	}
	if out := mustRun("collection", "list"); !regexp.MustCompile(`(?m)^NAME\s+STATUS\s+RETENTION.*\n(.*\n)*billing\s+\S+\s+72h\s+5s\s+attempts=8 initial=2s x3 max=1m max-age=48h\s+true`).MatchString(out) {
		t.Errorf("collection list:\n%s", out)
	}

	mustRun("route", "put", "hooks", "--webhook-url", "http://127.0.0.1:9/hook", "--header", "X-Team=billing", "--header", "X-B=2",
		"--webhook-timeout", "7s", "--rate-limit", "100", "--burst", "20", "--max-in-flight", "10",
		"--batch-max-jobs", "50", "--batch-max-wait", "20ms", "--signing-secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	out := mustRun("route", "get", "hooks", "-o", "json")
	var r client.Route
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.WebhookURL != "http://127.0.0.1:9/hook" || r.Headers["X-Team"] != "billing" || r.Headers["X-B"] != "2" || r.Timeout != "7s" ||
		r.RateLimit == nil || r.RateLimit.PerSecond != 100 || r.RateLimit.Burst != 20 || r.MaxInFlight != 10 ||
		r.Batch == nil || r.Batch.MaxJobs != 50 || r.Batch.MaxWait != "20ms" || !r.SigningSecretSet {
		t.Errorf("route %s", out)
	}
	// Stable key order: the contract's field order, the same every time.
	if keys := topKeys(t, out); strings.Join(keys, ",") != "name,webhook_url,headers,timeout,rate_limit,max_in_flight,batch,signing_secret_set"+tail(keys) {
		t.Errorf("route keys in order %v", keys)
	}
	if again := mustRun("route", "get", "hooks", "-o", "json"); again != out {
		t.Errorf("two reads print differently:\n%s\n%s", out, again)
	}
	mustRun("route", "put", "fast", "--webhook-url", "http://127.0.0.1:9/fast", "--pipeline")
	out = mustRun("route", "get", "fast", "-o", "json")
	var fast client.Route
	if err := json.Unmarshal([]byte(out), &fast); err != nil {
		t.Fatal(err)
	}
	if !fast.Pipeline || fast.MaxInFlight != 0 || fast.Batch != nil {
		t.Errorf("pipelined route %s", out)
	}
	if keys := topKeys(t, out); strings.Join(keys, ",") != "name,webhook_url,headers,pipeline,signing_secret_set"+tail(keys) {
		t.Errorf("pipelined route keys in order %v", keys)
	}
	if out := mustRun("route", "get", "fast"); !regexp.MustCompile(`(?m)^pipeline:\s+true$`).MatchString(out) {
		t.Errorf("route get of a pipelined route:\n%s", out)
	}
	if out := mustRun("route", "list"); !regexp.MustCompile(`(?m)^NAME\s+WEBHOOK URL\s+TIMEOUT\s+RATE LIMIT\s+MAX IN FLIGHT\s+BATCH\s+PIPELINE\s+HEADERS\s+SIGNED\n`).MatchString(out) ||
		!regexp.MustCompile(`hooks\s+http://127.0.0.1:9/hook\s+7s\s+100/s burst 20\s+10\s+50 jobs / 20ms\s+false\s+X-B,X-Team\s+true`).MatchString(out) ||
		!regexp.MustCompile(`fast\s+http://127.0.0.1:9/fast\s+-\s+-\s+-\s+-\s+true\s+\S+\s+false`).MatchString(out) {
		t.Errorf("route list:\n%s", out)
	}
	mustRun("route", "delete", "fast")

	out = mustRun("job", "create", "-c", "billing", "--id", "j1", "--at", "2030-01-02T03:04:05Z", "--route", "hooks", "--meta", `{"k":1}`, "--max-attempts", "2")
	if !regexp.MustCompile(`(?m)^id:\s+j1$`).MatchString(out) || !regexp.MustCompile(`(?m)^trigger_time:\s+2030-01-02T03:04:05.000Z$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^meta:\s+\{"k":1\}$`).MatchString(out) {
		t.Errorf("job create printed:\n%s", out)
	}
	var j client.Job
	if err := json.Unmarshal([]byte(mustRun("job", "get", "-c", "billing", "j1", "-o", "json")), &j); err != nil {
		t.Fatal(err)
	}
	if j.ID != "j1" || j.Route != "hooks" || j.TriggerTime != time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC).UnixMilli() || *j.RetryPolicy.MaxAttempts != 2 {
		t.Errorf("job %+v", j)
	}
	mustRun("job", "create", "-c", "billing", "--id", "j2", "--delay", "1h", "--url", "http://127.0.0.1:9/x")
	var page client.JobPage
	listed := mustRun("job", "list", "-c", "billing", "-o", "json", "--limit", "1", "--all")
	if err := json.Unmarshal([]byte(listed), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Jobs) != 2 || page.NextCursor != "" {
		t.Errorf("job list --all: %+v", page)
	}
	// The API's page has next_cursor on every page, "" on the last one:
	// so does -o json (a script reads the key whatever the page).
	if !strings.Contains(listed, `"next_cursor": ""`) {
		t.Errorf("job list -o json on the last page has no next_cursor:\n%s", listed)
	}
	if out := mustRun("job", "list", "-c", "billing"); !regexp.MustCompile(`(?m)^j2\s+\S+\s+scheduled\s+0\s+http://127.0.0.1:9/x\s+-\n`).MatchString(out) ||
		!strings.Contains(out, "route:hooks") {
		t.Errorf("job list:\n%s", out)
	}
	if out := mustRun("job", "delete", "-c", "billing", "j2"); out != "deleted job billing/j2\n" {
		t.Errorf("job delete printed %q", out)
	}
	if out := mustRun("route", "delete", "hooks", "-o", "json"); out != "{\n  \"deleted\": \"route\",\n  \"id\": \"hooks\"\n}\n" {
		t.Errorf("route delete -o json printed %q", out)
	}
	mustRun("collection", "delete", "billing")
	if out := mustRun("admin", "compact"); !regexp.MustCompile(`(?m)^NODE\s+OK\s+TOOK.*\n^n1\s+true\s+1ms\s+12\s+-$`).MatchString(out) {
		t.Errorf("admin compact:\n%s", out)
	}
	if out := mustRun("admin", "compact", "-o", "json"); !strings.HasPrefix(out, "{\n  \"results\": [") {
		t.Errorf("admin compact -o json:\n%s", out)
	}
}

func topKeys(t *testing.T, js string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(js))
	var keys []string
	depth := 0
	expectKey := false
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch v := tok.(type) {
		case json.Delim:
			if v == '{' || v == '[' {
				depth++
			} else {
				depth--
			}
			expectKey = depth == 1 && v == '{' || (depth == 1 && (v == '}' || v == ']'))
		case string:
			if depth == 1 && expectKey {
				keys = append(keys, v)
				expectKey = false
				continue
			}
			expectKey = depth == 1
		default:
			expectKey = depth == 1
		}
	}
	return keys
}

// tail is what follows signing_secret_set in keys (the server's times).
func tail(keys []string) string {
	for i, k := range keys {
		if k == "signing_secret_set" {
			if rest := keys[i+1:]; len(rest) > 0 {
				return "," + strings.Join(rest, ",")
			}
		}
	}
	return ""
}

// clusterState is a two-slot cluster of n1 and n2 in which slot 1 is in
// state, led by leader; n2 holds reps replicas and leads led slots.
func clusterState(state, leader string, reps, led int) map[string]any {
	s1 := map[string]any{"slot": 1, "leader": leader, "replicas": []string{"n1"}, "state": state}
	if state == "moving" {
		s1["target"] = []string{"n1", "n2"}
	}
	return map[string]any{"slot_count": 2, "replication_factor": 1,
		"nodes": []map[string]any{
			{"id": "n1", "http_addr": "127.0.0.1:1", "status": "alive", "slots_led": 2 - led, "replicas": 2},
			{"id": "n2", "http_addr": "127.0.0.1:2", "status": "draining", "slots_led": led, "replicas": reps}},
		"slots": []map[string]any{{"slot": 0, "leader": "n1", "replicas": []string{"n1"}, "state": "healthy"}, s1}}
}

// scripted answers the admin endpoints and, for GET /v1/cluster, the
// states in turn (the last one from then on).
type scripted struct {
	mu     sync.Mutex
	states []map[string]any
	reads  int
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == "GET" && r.URL.Path == "/v1/cluster":
		s.mu.Lock()
		st := s.states[min(s.reads, len(s.states)-1)]
		s.reads++
		s.mu.Unlock()
		_ = json.NewEncoder(w).Encode(st)
	case r.URL.Path == "/v1/admin/nodes/n2/drain":
		_, _ = w.Write([]byte(`{"node":"n2","status":"draining","replicas":1,"slots_led":1}`))
	case r.URL.Path == "/v1/admin/slots/1/transfer":
		_, _ = w.Write([]byte(`{"slot":1,"from":"n1","to":"n2","leader":"n1","preferred_leader":"n2"}`))
	case r.URL.Path == "/v1/admin/rebalance":
		_, _ = w.Write([]byte(`{"moves":[{"slot":1,"from":"","to":"n2","kind":"replica"}]}`))
	default:
		w.WriteHeader(404)
		_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"no such endpoint"}}`))
	}
}

// --wait prints progress until the command's aim is reached and the
// cluster is healthy (exit 0), or gives up at --timeout (exit 3).
func TestCLIWait(t *testing.T) {
	old := waitPoll
	waitPoll = 5 * time.Millisecond
	t.Cleanup(func() { waitPoll = old })
	withMoves := func(st map[string]any, done, total int) map[string]any {
		st["moves"] = map[string]any{"pending": total - done, "active": min(1, total-done), "done": done, "total": total}
		return st
	}
	healthy2 := map[string]any{"slot": 1, "leader": "n1", "replicas": []string{"n1", "n2"}, "state": "healthy"}
	for _, tc := range []struct {
		name   string
		args   []string
		states []map[string]any
		code   int
		want   []string // lines of the output, in order
	}{
		{
			name: "drain",
			args: []string{"admin", "drain", "n2", "--wait"},
			states: []map[string]any{
				clusterState("healthy", "n2", 1, 1), // read before the drain, for its warning
				withMoves(clusterState("moving", "n2", 1, 1), 0, 1),
				withMoves(clusterState("moving", "n1", 1, 0), 0, 1),
				withMoves(clusterState("healthy", "n1", 0, 0), 1, 1),
			},
			want: []string{"node:", "moved 0/1 slots, 1 moving (1 being worked on), 0 degraded, 0 without a leader; n2 holds 1 replicas, leads 1",
				"moved 0/1 slots, 1 moving (1 being worked on), 0 degraded, 0 without a leader; n2 holds 1 replicas, leads 0",
				"moved 1/1 slots, 0 degraded, 0 without a leader; n2 holds and leads nothing",
				"done: the drain of n2 finished and the cluster is healthy after"},
		},
		{
			name: "transfer",
			args: []string{"admin", "transfer", "1", "n2", "--wait"},
			states: []map[string]any{
				clusterState("healthy", "n1", 1, 0),
				clusterState("no_leader", "", 1, 0),
				clusterState("healthy", "n2", 1, 1),
			},
			want: []string{"preferred_leader:", "moved 0/1 slots, 0 degraded, 0 without a leader; slot 1 led by n1, not yet n2",
				"moved 0/1 slots, 0 degraded, 1 without a leader; slot 1 led by -, not yet n2",
				"moved 1/1 slots, 0 degraded, 0 without a leader; slot 1 led by n2", "done: the transfer finished"},
		},
		{
			name: "rebalance waits for its planned move, not for a stale healthy view",
			args: []string{"admin", "rebalance", "--wait"},
			states: []map[string]any{
				clusterState("healthy", "n1", 0, 0), // the answering node has not seen the new target yet
				{"slot_count": 2, "replication_factor": 2, "nodes": []any{}, "slots": []any{
					map[string]any{"slot": 0, "leader": "n1", "replicas": []string{"n1"}, "state": "healthy"}, healthy2}},
			},
			want: []string{"moving 1:", "SLOT", "1     replica  -     n2", "slot 1: - → n2 not done", "done: the rebalance finished"},
		},
		{
			name:   "timeout",
			args:   []string{"admin", "drain", "n2", "--wait", "--timeout", "100ms"},
			states: []map[string]any{withMoves(clusterState("moving", "n2", 1, 1), 0, 1)},
			code:   exitTimeout,
			want:   []string{"node:", "n2 holds 1 replicas, leads 1", "error: timed out after 100ms waiting for the drain of n2: moved 0/1 slots"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(&scripted{states: tc.states})
			defer srv.Close()
			out, errs, code := runCLI(t, append(tc.args, "--addr", srv.URL)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, tc.code, out, errs)
			}
			all := out + errs
			at := 0
			for _, w := range tc.want {
				i := strings.Index(all[at:], w)
				if i < 0 {
					t.Fatalf("output lacks %q after offset %d:\n%s", w, at, all)
				}
				at += i + len(w)
			}
		})
	}
	// -o json: stdout is the answer alone, the progress goes to stderr.
	srv := httptest.NewServer(&scripted{states: []map[string]any{clusterState("healthy", "n1", 0, 0)}})
	defer srv.Close()
	out, errs, code := runCLI(t, "admin", "drain", "n2", "--wait", "-o", "json", "--addr", srv.URL)
	var dr client.DrainResult
	if code != 0 || json.Unmarshal([]byte(out), &dr) != nil || dr.Node != "n2" || !strings.Contains(errs, "done: the drain of n2") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
}

// token new prints its token and auth-file entry as the help's examples
// say: two lines by default, one JSON object with -o json (or --json); the
// entry holds the token's SHA-256.
func TestCLITokenNew(t *testing.T) {
	for _, args := range [][]string{
		{"token", "new", "--role", "reader", "--name", "dashboards", "-o", "json"},
		{"token", "new", "--role", "reader", "--name", "dashboards", "--json"},
	} {
		out, errs, code := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d, %s", args, code, errs)
		}
		var got struct {
			Token string `json:"token"`
			Entry struct {
				Name, SHA256, Role string
			} `json:"entry"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v: %v in %q", args, err, out)
		}
		sum := sha256.Sum256([]byte(got.Token))
		if got.Entry.SHA256 != hex.EncodeToString(sum[:]) || got.Entry.Role != "reader" || got.Entry.Name != "dashboards" {
			t.Fatalf("%v: %+v", args, got)
		}
	}
	out, _, code := runCLI(t, "token", "new", "--role", "admin")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[1], "{") {
		t.Fatalf("table: exit %d, %q", code, out)
	}
	if _, errs, code := runCLI(t, "token", "new", "--role", "admin", "-o", "yaml"); code != exitUsage || !strings.Contains(errs, "want table or json") {
		t.Fatalf("-o yaml: exit %d, %q", code, errs)
	}
}

// bench takes -o like the client commands; a format it does not know is
// refused before anything runs.
func TestBenchOutputFlag(t *testing.T) {
	if _, err := runRoot(t, "bench", "-o", "yaml", "--addr", "127.0.0.1:1"); err == nil || !regexp.MustCompile(`"yaml": want table or json`).MatchString(err.Error()) {
		t.Fatalf("bench -o yaml: %v", err)
	}
}

// --body must hold one JSON object; anything else is a usage error before
// any request (the address is a closed loopback port).
func TestBodyMustBeAnObject(t *testing.T) {
	for _, body := range []string{`[1]`, `null`, `{"a":`, ``} {
		p := filepath.Join(t.TempDir(), "b.json")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, errs, code := runCLI(t, "job", "create", "--body", p, "--addr", "127.0.0.1:1")
		if code != exitUsage || !strings.Contains(errs, "not a JSON object") {
			t.Errorf("--body %q: exit %d, stderr %q", body, code, errs)
		}
	}
}

// A bench run in which every create failed exits non-zero, after its
// report (a black-box review: a callback policy refusing the receiver's
// address made every create a 400, and bench exited 0).
func TestBenchFailsWhenNothingWasCreated(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPut {
			w.WriteHeader(201)
			io.WriteString(w, `{"name":"bench"}`)
			return
		}
		w.WriteHeader(400)
		io.WriteString(w, `{"error":{"code":"invalid_argument","message":"callback to 127.0.0.1 refused by the callback egress policy"}}`)
	}))
	defer srv.Close()
	out, errs, code := runCLI(t, "bench", "--addr", srv.URL, "--jobs", "5", "--concurrency", "2", "--create-only")
	if code == 0 || !strings.Contains(errs, "no job was created") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
}

// A wait's timeout names the nodes that are down and hold up slots that
// are not healthy: the counts alone did not say what the moves waited for.
func TestBlockedBy(t *testing.T) {
	ci := &client.ClusterInfo{
		Nodes: []client.NodeInfo{{ID: "n1", Status: client.NodeDraining}, {ID: "n2", Status: client.NodeAlive}, {ID: "n3", Status: client.NodeFailed}, {ID: "n4", Status: client.NodeAlive}},
		Slots: []client.SlotInfo{
			{Slot: 0, State: client.SlotMoving, Replicas: []string{"n1", "n2", "n3"}, Target: []string{"n4", "n2", "n3"}},
			{Slot: 1, State: client.SlotHealthy, Replicas: []string{"n2", "n3", "n4"}},
			{Slot: 2, State: "degraded", Replicas: []string{"n2", "n3", "n4"}},
		},
	}
	got := blockedBy(ci)
	if !strings.Contains(got, "n3 is failed (a member or target of 2 of those slots)") || strings.Contains(got, "n1") {
		t.Fatalf("blockedBy = %q", got)
	}
	ci.Nodes[2].Status = client.NodeAlive
	if got := blockedBy(ci); got != "" {
		t.Fatalf("nothing down, blockedBy = %q", got)
	}
}

// token new says on stderr when TIMEMACHINE_COLLECTION (the job commands'
// variable) scoped the token, and not when the flag did.
func TestTokenScopeFromEnvNoted(t *testing.T) {
	t.Setenv("TIMEMACHINE_COLLECTION", "billing")
	out, errs, code := runCLI(t, "token", "new", "--role", "writer")
	if code != 0 || !strings.Contains(out, `"collections":["billing"]`) || !strings.Contains(errs, "from TIMEMACHINE_COLLECTION") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = runCLI(t, "token", "new", "--role", "writer", "--collection", "orders")
	if code != 0 || !strings.Contains(out, `"collections":["orders"]`) || strings.Contains(errs, "note:") {
		t.Fatalf("the flag given: exit %d\n%s%s", code, out, errs)
	}
}
