package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeTM is a small stand-in for a timemachine node: it accepts collection
// PUTs and single and batch job POSTs as docs/api.md#jobs describes, and fires each
// job at its trigger_time by POSTing the payload of docs/api.md#the-callback to its callback_url.
// Hooks make it misbehave on purpose so the tests can prove the report
// counts what really happened.
type fakeTM struct {
	t     *testing.T
	srv   *httptest.Server
	httpc *http.Client

	// Behaviour, set by newFakeTM's configure before the server starts.
	copies      func(n int) int           // deliveries of job n (default 1; 0 drops it)
	early       func(n int) time.Duration // fire this much before trigger_time
	reject      func(n int) (status int, code string)
	createDelay time.Duration

	mu          sync.Mutex
	collections map[string]string // name → PUT body
	routes      map[string]string // name → PUT body, while the route exists
	routePuts   map[string]string // name → PUT body, kept after a DELETE
	jobs        map[string]fakeJob
	singlePosts int
	batchSizes  []int
	timers      []*time.Timer
	closed      bool
	fires       sync.WaitGroup
}

type fakeJob struct {
	ID          string          `json:"id"`
	TriggerTime int64           `json:"trigger_time"`
	CallbackURL string          `json:"callback_url"`
	Route       string          `json:"route,omitempty"`
	Meta        json.RawMessage `json:"meta,omitempty"`
	Collection  string          `json:"collection"`
	Status      string          `json:"status"`
	Version     int64           `json:"version"`
}

// newFakeTM starts a fake; configure sets its behaviour hooks before the
// server starts, so no handler can race with them.
func newFakeTM(t *testing.T, configure func(f *fakeTM)) *fakeTM {
	t.Helper()
	f := &fakeTM{
		t:           t,
		collections: map[string]string{},
		routes:      map[string]string{},
		routePuts:   map[string]string{},
		jobs:        map[string]fakeJob{},
		httpc: &http.Client{
			Timeout:   5 * time.Second,
			Transport: &http.Transport{MaxIdleConnsPerHost: 64},
		},
	}
	if configure != nil {
		configure(f)
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.close)
	return f
}

func (f *fakeTM) addr() string { return strings.TrimPrefix(f.srv.URL, "http://") }

// close stops pending timers, waits for fires in flight, then the server.
func (f *fakeTM) close() {
	f.mu.Lock()
	f.closed = true
	for _, tm := range f.timers {
		if tm.Stop() {
			f.fires.Done()
		}
	}
	f.mu.Unlock()
	f.fires.Wait()
	f.srv.Close()
	f.httpc.CloseIdleConnections()
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"code":%q,"message":%q}}`, code, msg)
}

// putAnswer answers a PUT the way the API does: 200 when it replaced,
// 201 when it created, the object echoed.
func putAnswer(w http.ResponseWriter, existed bool, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	if existed {
		w.WriteHeader(200)
	} else {
		w.WriteHeader(201)
	}
	_, _ = w.Write(body)
}

func (f *fakeTM) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case r.Method == http.MethodPut && len(parts) == 3 && parts[0] == "v1" && parts[1] == "collections":
		f.mu.Lock()
		_, existed := f.collections[parts[2]]
		f.collections[parts[2]] = string(body)
		f.mu.Unlock()
		putAnswer(w, existed, body)
	case r.Method == http.MethodPut && len(parts) == 3 && parts[0] == "v1" && parts[1] == "routes":
		f.mu.Lock()
		_, existed := f.routes[parts[2]]
		f.routes[parts[2]], f.routePuts[parts[2]] = string(body), string(body)
		f.mu.Unlock()
		putAnswer(w, existed, body)
	case r.Method == http.MethodDelete && len(parts) == 3 && parts[0] == "v1" && parts[1] == "routes":
		f.mu.Lock()
		delete(f.routes, parts[2])
		f.mu.Unlock()
		w.WriteHeader(204)
	case r.Method == http.MethodPost && len(parts) == 4 && parts[1] == "collections" && parts[3] == "jobs":
		if f.createDelay > 0 {
			time.Sleep(f.createDelay) // a slow server, not a wait for state
		}
		f.createJobs(w, parts[2], body)
	default:
		writeErr(w, 404, "not_found", "no route "+r.Method+" "+r.URL.Path)
	}
}

func (f *fakeTM) createJobs(w http.ResponseWriter, coll string, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		var jobs []fakeJob
		if err := json.Unmarshal(body, &jobs); err != nil || len(jobs) > 1000 {
			writeErr(w, 400, "invalid_argument", fmt.Sprintf("bad batch: %v", err))
			return
		}
		f.mu.Lock()
		f.batchSizes = append(f.batchSizes, len(jobs))
		f.mu.Unlock()
		type result struct {
			ID     string          `json:"id"`
			Status int             `json:"status"`
			Job    *fakeJob        `json:"job,omitempty"`
			Error  json.RawMessage `json:"error,omitempty"`
		}
		res := make([]result, len(jobs))
		for i, j := range jobs {
			status, code := f.accept(coll, &j)
			res[i] = result{ID: j.ID, Status: status}
			if code != "" {
				res[i].Error = json.RawMessage(fmt.Sprintf(`{"code":%q,"message":"refused by the fake"}`, code))
			} else {
				res[i].Job = &j
			}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"results": res})
		return
	}
	var j fakeJob
	if err := json.Unmarshal(body, &j); err != nil {
		writeErr(w, 400, "invalid_argument", err.Error())
		return
	}
	f.mu.Lock()
	f.singlePosts++
	f.mu.Unlock()
	status, code := f.accept(coll, &j)
	if code != "" {
		writeErr(w, status, code, "refused by the fake")
		return
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(j)
}

// accept validates, stores and schedules one job. A job naming a route
// goes to the route's webhook_url as it is now (the real server resolves
// it at fire time; the bench never changes it meanwhile).
func (f *fakeTM) accept(coll string, j *fakeJob) (int, string) {
	if j.Route != "" {
		var rt struct {
			WebhookURL string `json:"webhook_url"`
		}
		f.mu.Lock()
		body, ok := f.routes[j.Route]
		f.mu.Unlock()
		if !ok || j.CallbackURL != "" || json.Unmarshal([]byte(body), &rt) != nil {
			return 400, "invalid_argument"
		}
		j.CallbackURL = rt.WebhookURL
	}
	n, err := jobNumber(j.ID)
	if err != nil || j.TriggerTime <= 0 || j.CallbackURL == "" {
		return 400, "invalid_argument"
	}
	if f.reject != nil {
		if status, code := f.reject(n); code != "" {
			return status, code
		}
	}
	j.Collection, j.Status, j.Version = coll, "scheduled", 1
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.jobs[j.ID]; ok {
		return 200, ""
	}
	f.jobs[j.ID] = *j
	copies := 1
	if f.copies != nil {
		copies = f.copies(n)
	}
	var shift time.Duration
	if f.early != nil {
		shift = f.early(n)
	}
	if copies == 0 || f.closed {
		return 201, ""
	}
	job := *j
	f.fires.Add(1)
	f.timers = append(f.timers, time.AfterFunc(time.Until(time.UnixMilli(job.TriggerTime).Add(-shift)), func() {
		defer f.fires.Done()
		for range copies {
			f.fire(&job)
		}
	}))
	return 201, ""
}

func (f *fakeTM) fire(j *fakeJob) {
	payload, _ := json.Marshal(map[string]any{
		"id": j.ID, "collection": j.Collection, "trigger_time": j.TriggerTime, "attempt": 1, "meta": j.Meta,
	})
	req, err := http.NewRequest(http.MethodPost, j.CallbackURL, bytes.NewReader(payload))
	if err != nil {
		f.t.Errorf("fake: %v", err)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", fmt.Sprintf("%s:%s:%d", j.Collection, j.ID, j.TriggerTime))
	req.Header.Set("X-Timemachine-Attempt", "1")
	resp, err := f.httpc.Do(req)
	if err != nil {
		return // the receiver may already be closed at the end of a run
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
}

func jobNumber(id string) (int, error) {
	i := strings.LastIndexByte(id, '-')
	if i < 0 {
		return 0, fmt.Errorf("id %q has no -<n>", id)
	}
	return strconv.Atoi(id[i+1:])
}

func (f *fakeTM) snapshot() (jobs map[string]fakeJob, singles int, batches []int, colls map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	jobs = make(map[string]fakeJob, len(f.jobs))
	for k, v := range f.jobs {
		jobs[k] = v
	}
	colls = make(map[string]string, len(f.collections))
	for k, v := range f.collections {
		colls[k] = v
	}
	return jobs, f.singlePosts, append([]int(nil), f.batchSizes...), colls
}
