package workload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/internal/nemesis/history"
)

func TestClassify(t *testing.T) {
	dial := &url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	read := &url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}}
	for _, tc := range []struct {
		err    error
		status int
		want   history.Outcome
	}{
		{dial, 0, history.Fail},
		{read, 0, history.Unknown},
		{context.DeadlineExceeded, 0, history.Unknown},
		{io.ErrUnexpectedEOF, 0, history.Unknown},
		{nil, 429, history.Fail},
		{nil, 503, history.Unknown},
		{nil, 500, history.Unknown},
		{nil, 201, history.OK},
		{nil, 404, history.OK},
		{nil, 409, history.OK},
		{nil, 412, history.OK},
		{nil, 400, history.OK},
	} {
		if got := Classify(tc.err, tc.status); got != tc.want {
			t.Errorf("Classify(%v, %d) = %s, want %s", tc.err, tc.status, got, tc.want)
		}
	}
}

type memRec struct {
	mu   sync.Mutex
	dels []history.Delivery
}

func (m *memRec) Delivery(d history.Delivery) {
	m.mu.Lock()
	m.dels = append(m.dels, d)
	m.mu.Unlock()
}

func TestDoRecordsAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == "POST":
			w.WriteHeader(201)
			io.WriteString(w, `{"id":"a","version":1,"status":"scheduled","trigger_time":1000}`)
		case r.Method == "PUT" && r.Header.Get("If-Match") == "1":
			w.WriteHeader(409)
			io.WriteString(w, `{"error":{"code":"conflict","message":"firing"},"job":{"version":2,"status":"firing","trigger_time":1000}}`)
		case r.Method == "DELETE":
			w.WriteHeader(503)
			io.WriteString(w, `{"error":{"code":"unavailable","message":"no leader"}}`)
		case r.Method == "GET":
			time.Sleep(300 * time.Millisecond)
		}
	}))
	defer srv.Close()
	rec, err := history.NewRecorder(t.TempDir(), history.NewClock())
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	w := New(Config{Coll: "c", Timeout: 100 * time.Millisecond}, rec, srv.Client(), nil)
	ep := Endpoint{ID: "n1", HTTPAddr: strings.TrimPrefix(srv.URL, "http://")}
	ctx := context.Background()
	c := w.Do(ctx, 0, history.Op{Kind: history.Create, JobID: "a", Spec: "s", Trigger: 1000}, ep, map[string]any{"id": "a"})
	if c.Outcome != history.OK || c.Status != 201 || c.Version != 1 || c.JobStatus != "scheduled" || c.JobTrigger != 1000 {
		t.Fatalf("create: %+v", c)
	}
	c = w.Do(ctx, 0, history.Op{Kind: history.Put, JobID: "a", IfMatch: 1}, ep, map[string]any{})
	if c.Outcome != history.OK || c.Status != 409 || c.Code != "conflict" || c.Version != 2 || c.JobStatus != "firing" {
		t.Fatalf("put: %+v", c)
	}
	c = w.Do(ctx, 0, history.Op{Kind: history.Delete, JobID: "a"}, ep, nil)
	if c.Outcome != history.Unknown || c.Status != 503 || c.Code != "unavailable" {
		t.Fatalf("delete: %+v", c)
	}
	c = w.Do(ctx, 0, history.Op{Kind: history.Get, JobID: "a"}, ep, nil)
	if c.Outcome != history.Unknown || c.Err == "" {
		t.Fatalf("timed-out get: %+v", c)
	}
	h := rec.Snapshot()
	if len(h.Ops) != 4 || h.Ops[0].Via != "n1" || h.Ops[0].Coll != "c" || h.Ops[1].IfMatch != 1 || h.Ops[3].Ret != history.Never {
		t.Fatalf("recorded %+v", h.Ops)
	}
}

func TestReceiver(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &memRec{}
	policy := Policy{Fail: 0.3, Close: 0.2}
	r := NewReceiver(ln, history.NewClock(), m, policy, 1, func(ip string) string { return "node-" + ip })
	defer r.Close()
	send := func(id string, attempt int, hdr string) (int, error) {
		body := fmt.Sprintf(`{"id":%q,"collection":"c","trigger_time":1000,"attempt":%d,"meta":{}}`, id, attempt)
		req, _ := http.NewRequest("POST", r.URL()+"/cb/"+id, bytes.NewBufferString(body))
		req.Header.Set("Idempotency-Key", "c:"+id+":1000")
		req.Header.Set("X-Timemachine-Attempt", hdr)
		resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	counts := map[string]int{}
	for i := 0; i < 200; i++ {
		st, err := send(fmt.Sprintf("j%d", i), 1, "1")
		switch {
		case err != nil:
			counts["close"]++
		default:
			counts[fmt.Sprint(st)]++
		}
	}
	// Roughly the policy's fractions.
	if counts["500"] < 30 || counts["close"] < 15 || counts["200"] < 70 {
		t.Fatalf("answers %v for policy %+v", counts, policy)
	}
	if _, err := send("bad", 1, "x"); err != nil && !errors.Is(err, io.EOF) {
		t.Logf("bad header request: %v", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.dels) != 201 {
		t.Fatalf("%d deliveries recorded", len(m.dels))
	}
	d := m.dels[0]
	if d.Coll != "c" || d.JobID != "j0" || d.Trigger != 1000 || d.Attempt != 1 || d.AttemptHeader != 1 ||
		d.IdemKey != "c:j0:1000" || d.From != "node-127.0.0.1" || d.Reply.Mono < d.Recv.Mono || d.Bad != "" {
		t.Fatalf("delivery %+v", d)
	}
	if last := m.dels[200]; last.Bad == "" {
		t.Fatalf("a bad attempt header must be recorded as bad: %+v", last)
	}
	if !r.Delivered("c", "j5", 1000) || r.Delivered("c", "j5", 999) {
		t.Fatal("Delivered")
	}
	// A delivery's copies are answered independently: with half of the
	// answers "close", copy 1 must not simply repeat copy 0.
	half := &Receiver{seed: 3, policy: Policy{Close: 0.5}}
	same := 0
	for i := 0; i < 200; i++ {
		a0, _ := half.answer(fmt.Sprintf("c:j%d:1000", i), 1, 0)
		a1, _ := half.answer(fmt.Sprintf("c:j%d:1000", i), 1, 1)
		if a0 == a1 {
			same++
		}
	}
	if same < 60 || same > 140 {
		t.Fatalf("copy 1 got copy 0's answer %d times in 200 (want about 100)", same)
	}
	// The same delivery gets the same answer in another run with the
	// same seed.
	r2 := &Receiver{seed: 1, policy: policy}
	for i := 0; i < 50; i++ {
		a1, _ := r.answer(fmt.Sprintf("k%d", i), 1, 0)
		a2, _ := r2.answer(fmt.Sprintf("k%d", i), 1, 0)
		if a1 != a2 {
			t.Fatal("the answer policy is not a function of the seed")
		}
	}
}

// slowRec records like memRec, but only after a pause: a receiver that
// answers before it records would let the sender see the answer first.
type slowRec struct{ memRec }

func (s *slowRec) Delivery(d history.Delivery) {
	time.Sleep(50 * time.Millisecond)
	s.memRec.Delivery(d)
}

// TestReceiverRecordsBeforeItAnswers: when the sender sees the answer
// (here the close without an answer), the delivery is already in the log.
// The close used to come first: TestReceiver then sometimes counted 200
// deliveries of 201.
func TestReceiverRecordsBeforeItAnswers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	for _, policy := range []Policy{{Close: 1}, {Fail: 1}, {}} {
		m := &slowRec{}
		r := NewReceiver(ln, history.NewClock(), m, policy, 1, nil)
		for i := 0; i < 3; i++ {
			req, _ := http.NewRequest("POST", r.URL()+"/cb", strings.NewReader(fmt.Sprintf(`{"id":"j%d","collection":"c","trigger_time":1,"attempt":1}`, i)))
			req.Header.Set("X-Timemachine-Attempt", "1")
			resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
			if err == nil {
				resp.Body.Close()
			}
			m.mu.Lock()
			n := len(m.dels)
			m.mu.Unlock()
			if n != i+1 {
				t.Fatalf("policy %+v: the sender saw answer %d (%v) with %d deliveries recorded", policy, i+1, err, n)
			}
		}
		// Serve again on a new listener (Close closes this one).
		r.Close()
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	ln.Close()
}
