package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cw "github.com/timemachine-db/timemachine/client/webhook"
	"github.com/timemachine-db/timemachine/internal/testutil"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/rpc/webhook"
	"github.com/timemachine-db/timemachine/slot"
)

const deliverySecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// batchReceiver takes batched deliveries through the receiver library
// (client/webhook), which verifies each batch's signature.
type batchReceiver struct {
	url     string
	mu      sync.Mutex
	batches []recvBatch
	answer  func(cb *cw.Callback) cw.Response
	status  int // non-zero: answer every request with it
}

type recvBatch struct {
	at   time.Time
	size string // X-Timemachine-Batch
	cbs  []cw.Callback
}

func newBatchReceiver(t *testing.T, answer func(cb *cw.Callback) cw.Response) *batchReceiver {
	t.Helper()
	v, err := cw.NewVerifier(deliverySecret)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &batchReceiver{url: "http://" + l.Addr().String() + "/batch", answer: answer}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		now := time.Now()
		d, err := cw.Read(req, v, 0)
		if err != nil {
			t.Errorf("receiver: %v", err)
			w.WriteHeader(401)
			return
		}
		r.mu.Lock()
		r.batches = append(r.batches, recvBatch{at: now, size: req.Header.Get("X-Timemachine-Batch"), cbs: d.Callbacks})
		status := r.status
		r.mu.Unlock()
		if status != 0 {
			w.WriteHeader(status)
			return
		}
		rs := make([]cw.Response, len(d.Callbacks))
		for i := range d.Callbacks {
			rs[i] = r.answer(&d.Callbacks[i])
		}
		cw.WriteBatch(w, d.Callbacks, rs)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return r
}

func (r *batchReceiver) got() []recvBatch {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recvBatch(nil), r.batches...)
}

func (r *batchReceiver) jobs() int {
	n := 0
	for _, b := range r.got() {
		n += len(b.cbs)
	}
	return n
}

func putRoute(t *testing.T, n *Node, rt model.Route) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := n.svc.PutRoute(ctx, rt); err != nil {
		t.Fatal(err)
	}
}

func createRouted(t *testing.T, n *Node, prefix, route string, count int, trigger int64) {
	t.Helper()
	var in []model.JobInput
	for i := 0; i < count; i++ {
		in = append(in, model.JobInput{ID: fmt.Sprintf("%s-%03d", prefix, i), Spec: model.JobSpec{TriggerTime: trigger, Route: route, Hash: uint64(i + 1)}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := n.svc.CreateJobs(ctx, "default", in)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil || r.Code != model.CodeCreated {
			t.Fatalf("create %s: %v %v", r.ID, r.Code, r.Err)
		}
	}
}

func jobOf(t *testing.T, n *Node, id string) *model.Job {
	t.Helper()
	j, err := n.svc.GetJob(context.Background(), "default", id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestBatchedRoute: due jobs of a batched route arrive in signed batches
// of at most max_jobs, never before their trigger time, and each job's
// outcome follows its entry in the answer.
func TestBatchedRoute(t *testing.T) {
	n := startReady(t, testConfig(t.TempDir()))
	defer n.Close()
	rcv := newBatchReceiver(t, func(cb *cw.Callback) cw.Response {
		switch cb.ID {
		case "b-003":
			return cw.Retry(0)
		case "b-005":
			return cw.Fail("unknown user")
		case "b-007":
			return cw.RescheduleIn(time.Hour)
		case "b-009":
			return cw.Retry(time.Minute) // a wait of its own: reschedule_in on a "retry"
		}
		return cw.OK()
	})
	putRoute(t, n, model.Route{Name: "bulk", WebhookURL: rcv.url, SigningSecret: deliverySecret,
		Batch: model.BatchPolicy{MaxJobs: 10, MaxWaitMs: 50}})
	trig := time.Now().Add(time.Second).UnixMilli()
	createRouted(t, n, "b", "bulk", 40, trig)
	testutil.Eventually(t, 20*time.Second, "40 jobs delivered", func() error {
		if got := rcv.jobs(); got < 40 {
			return fmt.Errorf("%d delivered", got)
		}
		return nil
	})
	for _, b := range rcv.got() {
		if len(b.cbs) > 10 || b.size != strconv.Itoa(len(b.cbs)) {
			t.Fatalf("batch of %d jobs, header %q", len(b.cbs), b.size)
		}
		if b.at.UnixMilli() < trig {
			t.Fatalf("batch arrived %v before the trigger time", time.UnixMilli(trig).Sub(b.at))
		}
		for _, cb := range b.cbs {
			if cb.IdempotencyKey != fmt.Sprintf("default:%s:%d", cb.ID, trig) || cb.Attempt != 1 {
				t.Fatalf("callback %+v", cb)
			}
		}
	}
	if len(rcv.got()) > 8 {
		t.Errorf("40 jobs in %d batches", len(rcv.got()))
	}
	testutil.Eventually(t, 10*time.Second, "outcomes committed", func() error {
		for _, id := range []string{"b-000", "b-039"} {
			if j := jobOf(t, n, id); j.Status != model.StatusSucceeded {
				return fmt.Errorf("%s: %v", id, j.Status)
			}
		}
		if j := jobOf(t, n, "b-005"); j.Status != model.StatusFailed || j.LastError == "" {
			return fmt.Errorf("b-005: %v %q", j.Status, j.LastError)
		}
		if j := jobOf(t, n, "b-003"); j.Status != model.StatusScheduled || j.Attempts != 1 || j.DueTime <= trig {
			return fmt.Errorf("b-003: %v attempts %d due %d", j.Status, j.Attempts, j.DueTime)
		}
		if j := jobOf(t, n, "b-007"); j.Status != model.StatusScheduled || j.TriggerTime < trig+3500_000 {
			return fmt.Errorf("b-007: %v trigger %d", j.Status, j.TriggerTime)
		}
		// Retried after the minute it asked for, not the 1 s backoff.
		if j := jobOf(t, n, "b-009"); j.Status != model.StatusScheduled || j.Attempts != 1 || j.DueTime < trig+59_000 || j.TriggerTime != trig {
			return fmt.Errorf("b-009: %v attempts %d due %d (trigger %d)", j.Status, j.Attempts, j.DueTime, trig)
		}
		return nil
	})
}

// A schedule's occurrences on a batched route carry "schedule" in their
// batch entries, as single callbacks do (API.md §3; a black-box review
// found batches without it).
func TestBatchedRouteScheduleOccurrences(t *testing.T) {
	n := startReady(t, testConfig(t.TempDir()))
	defer n.Close()
	rcv := newBatchReceiver(t, func(*cw.Callback) cw.Response { return cw.OK() })
	putRoute(t, n, model.Route{Name: "bulk", WebhookURL: rcv.url, SigningSecret: deliverySecret, Batch: model.BatchPolicy{MaxJobs: 10, MaxWaitMs: 20}})
	ctx := context.Background()
	if _, _, err := n.svc.PutSchedule(ctx, "default", "tick", model.ScheduleSpec{EveryMs: 1000, Route: "bulk", Hash: 7}, 0); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "two occurrences delivered", func() error {
		if got := rcv.jobs(); got < 2 {
			return fmt.Errorf("%d delivered", got)
		}
		return nil
	})
	for _, b := range rcv.got() {
		for _, cb := range b.cbs {
			if s, _, ok := model.SplitOccurrenceID(cb.ID); !ok || s != "tick" || cb.Schedule != "tick" {
				t.Fatalf("batch entry %+v: want an occurrence of tick with \"schedule\":\"tick\"", cb)
			}
		}
	}
}

// TestBatchedRouteNon2xx: a batch answered 503 retries every job in it;
// and a lone job waits max_wait for company, no longer.
func TestBatchedRouteNon2xx(t *testing.T) {
	n := startReady(t, testConfig(t.TempDir()))
	defer n.Close()
	rcv := newBatchReceiver(t, func(*cw.Callback) cw.Response { return cw.OK() })
	rcv.mu.Lock()
	rcv.status = 503
	rcv.mu.Unlock()
	putRoute(t, n, model.Route{Name: "down", WebhookURL: rcv.url, SigningSecret: deliverySecret,
		Batch: model.BatchPolicy{MaxJobs: 100, MaxWaitMs: 300}})
	trig := time.Now().Add(time.Second).UnixMilli()
	createRouted(t, n, "d", "down", 5, trig)
	testutil.Eventually(t, 20*time.Second, "5 jobs delivered", func() error {
		if got := rcv.jobs(); got < 5 {
			return fmt.Errorf("%d delivered", got)
		}
		return nil
	})
	first := rcv.got()[0]
	if late := first.at.Sub(time.UnixMilli(trig)); late < 250*time.Millisecond || late > 2*time.Second {
		t.Errorf("a batch short of max_jobs left %v after the trigger time, want ~max_wait (300ms)", late)
	}
	testutil.Eventually(t, 10*time.Second, "every job retried", func() error {
		for i := 0; i < 5; i++ {
			id := fmt.Sprintf("d-%03d", i)
			if j := jobOf(t, n, id); j.Status != model.StatusScheduled || j.Attempts < 1 || j.LastError == "" {
				return fmt.Errorf("%s: %v attempts %d %q", id, j.Status, j.Attempts, j.LastError)
			}
		}
		return nil
	})
}

// TestRateLimitAcrossTwoNodes: a route limited to 100/s with bursts of 10
// gets no more than that from a 2-node cluster (10% slack), and its jobs
// arrive spread out, none early.
func TestRateLimitAcrossTwoNodes(t *testing.T) {
	tc := startCluster(t, 2, nil)
	testutil.Eventually(t, 30*time.Second, "leaders spread 6/6", func() error {
		info, _ := tc.nodes[0].svc.Cluster(context.Background())
		for _, nd := range info.Nodes {
			if nd.SlotsLed != 6 {
				return fmt.Errorf("%s leads %d", nd.ID, nd.SlotsLed)
			}
		}
		return nil
	})
	rcv := newReceiver(t)
	putRoute(t, tc.nodes[0], model.Route{Name: "limited", WebhookURL: rcv.url, RateLimit: model.RateLimit{PerSecond: 100, Burst: 10}})
	trig := time.Now().Add(2 * time.Second).UnixMilli()
	const jobs = 400
	createRouted(t, tc.nodes[1], "r", "limited", jobs, trig)
	testutil.Eventually(t, 60*time.Second, "all delivered", func() error {
		if c := rcv.count(); c < jobs {
			return fmt.Errorf("%d delivered", c)
		}
		return nil
	})
	// Every arrival counts against the limit, repeats included: a 2-node
	// cluster on main repeats the odd callback already (see the report of
	// this branch), which is not the lane's doing.
	var at []int64
	repeats := 0
	for i := 0; i < jobs; i++ {
		d := rcv.deliveries(fmt.Sprintf("default:r-%03d:%d", i, trig))
		if len(d) == 0 {
			t.Fatalf("r-%03d not delivered", i)
		}
		repeats += len(d) - 1
		for _, x := range d {
			if x.UnixMilli() < trig {
				t.Fatalf("r-%03d delivered %v early", i, time.UnixMilli(trig).Sub(x))
			}
			at = append(at, x.UnixMilli())
		}
	}
	if repeats > 0 {
		t.Logf("%d repeated deliveries", repeats)
	}
	sort.Slice(at, func(a, b int) bool { return at[a] < at[b] })
	// Over any 2 s: at most (200 + burst) × 1.1.
	for i := range at {
		j := sort.Search(len(at), func(k int) bool { return at[k] >= at[i]+2000 })
		if j-i > 231 {
			t.Fatalf("%d deliveries in the 2 s from +%d ms", j-i, at[i]-trig)
		}
	}
	span := time.Duration(at[len(at)-1]-at[0]) * time.Millisecond
	if span < 3500*time.Millisecond {
		t.Fatalf("%d deliveries over %v: faster than 100/s", jobs, span)
	}
	t.Logf("%d deliveries over %v (ideal 3.9 s)", jobs, span)
}

// TestInFlightCapAcrossThreeNodes: a route's max_in_flight below the node
// count holds cluster-wide (API.md §3: "requests open at once"). Every
// node leads slots, so shares of a cap of 1 or 2 cannot add up to it; the
// requests take places from the meta leader (package inflight). A slow
// receiver counts the requests open at once; before, a cap of 1 on three
// nodes saw three.
func TestInFlightCapAcrossThreeNodes(t *testing.T) {
	tc := startCluster(t, 3, nil)
	testutil.Eventually(t, 30*time.Second, "every node leads slots", func() error {
		info, _ := tc.nodes[0].svc.Cluster(context.Background())
		if len(info.Nodes) != 3 {
			return fmt.Errorf("%d nodes", len(info.Nodes))
		}
		for _, nd := range info.Nodes {
			if nd.SlotsLed == 0 {
				return fmt.Errorf("%s leads none", nd.ID)
			}
		}
		return nil
	})
	url1, o1 := newOpenCounter(t)
	url2, o2 := newOpenCounter(t)
	putRoute(t, tc.nodes[0], model.Route{Name: "one", WebhookURL: url1, MaxInFlight: 1})
	putRoute(t, tc.nodes[0], model.Route{Name: "two", WebhookURL: url2, MaxInFlight: 2})
	trig := time.Now().Add(2 * time.Second).UnixMilli()
	const jobs = 36
	createRouted(t, tc.nodes[1], "a", "one", jobs, trig)
	createRouted(t, tc.nodes[2], "b", "two", jobs, trig)
	// While they are delivered, the meta leader reports the places it
	// counts (timemachine_route_places_held).
	testutil.Eventually(t, 30*time.Second, "the meta leader reports route one's place", func() error {
		for _, n := range tc.live() {
			if !n.meta.IsLeader() {
				continue
			}
			fams, err := n.metrics.reg.Gather()
			if err != nil {
				return err
			}
			for _, f := range fams {
				if f.GetName() != "timemachine_route_places_held" {
					continue
				}
				for _, m := range f.GetMetric() {
					if m.GetLabel()[0].GetValue() == "one" {
						if v := m.GetGauge().GetValue(); v != 1 {
							return fmt.Errorf("route one: %v places held", v)
						}
						return nil
					}
				}
			}
			return errors.New("no timemachine_route_places_held{route=\"one\"}")
		}
		return errors.New("no meta leader")
	})
	for _, c := range []struct {
		o    *openCounter
		name string
		max  int
	}{{o1, "one", 1}, {o2, "two", 2}} {
		c.o.waitAll(t, jobs)
		peak := c.o.maxOpen()
		if peak > c.max {
			t.Errorf("route %s (max_in_flight %d): %d requests open at once", c.name, c.max, peak)
		}
		if peak < c.max {
			t.Logf("route %s: at most %d open (cap %d)", c.name, peak, c.max)
		}
	}
}

// openCounter is a slow receiver that counts the requests open at once.
type openCounter struct {
	mu        sync.Mutex
	now, peak int
	got       map[string]int
}

func newOpenCounter(t *testing.T) (string, *openCounter) {
	t.Helper()
	o := &openCounter{got: map[string]int{}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		o.mu.Lock()
		o.now++
		o.peak = max(o.peak, o.now)
		o.got[req.Header.Get("Idempotency-Key")]++
		o.mu.Unlock()
		time.Sleep(40 * time.Millisecond)
		o.mu.Lock()
		o.now--
		o.mu.Unlock()
		w.WriteHeader(200)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String() + "/hook", o
}

func (o *openCounter) delivered() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.got)
}

func (o *openCounter) maxOpen() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.peak
}

func (o *openCounter) waitAll(t *testing.T, jobs int) {
	t.Helper()
	testutil.Eventually(t, 60*time.Second, "every job delivered", func() error {
		if n := o.delivered(); n < jobs {
			return fmt.Errorf("%d of %d delivered", n, jobs)
		}
		return nil
	})
}

// TestInFlightCapMetaLeaderLost: the node handing out a route's places
// (the meta leader) dies while the route's jobs are being delivered one
// at a time; the next meta leader takes the census and the rest are
// delivered. Outside that moment the cap holds (inflight/DESIGN.md).
func TestInFlightCapMetaLeaderLost(t *testing.T) {
	tc := startCluster(t, 3, nil)
	tc.waitReady(30 * time.Second)
	url, o := newOpenCounter(t)
	putRoute(t, tc.nodes[0], model.Route{Name: "one", WebhookURL: url, MaxInFlight: 1})
	trig := time.Now().Add(2 * time.Second).UnixMilli()
	const jobs = 60
	createRouted(t, tc.nodes[0], "a", "one", jobs, trig)
	testutil.Eventually(t, 30*time.Second, "deliveries under way", func() error {
		if n := o.delivered(); n < 10 {
			return fmt.Errorf("%d delivered", n)
		}
		return nil
	})
	leader := -1
	for i, n := range tc.live() {
		if n.meta.IsLeader() {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatal("no meta leader")
	}
	at := o.delivered()
	tc.kill(leader)
	o.waitAll(t, jobs)
	t.Logf("meta leader %d killed after %d deliveries; at most %d requests open at once", leader, at, o.maxOpen())
}

// A batch answer's entry with an unknown outcome retries its job with a
// last_error that names the bad outcome, not as if the receiver had said
// "retry" (a black-box review); a real "retry" still says so.
func TestBatchUnknownOutcomeIsNotARetryAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"results":[{"id":"a","collection":"c","outcome":"bogus"},{"id":"b","collection":"c","outcome":"retry"}]}`)
	}))
	defer srv.Close()
	wc := webhook.New(webhook.Options{})
	defer wc.Close()
	d := newDeliverer(wc, nil)
	jobs := []*model.Job{{ID: "a", Collection: "c", TriggerTime: 1}, {ID: "b", Collection: "c", TriggerTime: 1}}
	res := d.DeliverBatch(context.Background(), &slot.BatchDelivery{URL: srv.URL, Jobs: jobs, Attempts: []int64{1, 1}, Timeout: 5 * time.Second, Now: time.Now()})
	if len(res) != 2 || res[0].Err == nil || res[1].Err == nil {
		t.Fatalf("results %+v", res)
	}
	if msg := res[0].Err.Error(); strings.Contains(msg, `said "retry"`) || !strings.Contains(msg, "bogus") {
		t.Errorf("unknown outcome: last_error %q", msg)
	}
	if msg := res[1].Err.Error(); !strings.Contains(msg, `said "retry"`) {
		t.Errorf("retry: last_error %q", msg)
	}
}
