package node

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/model"
)

// slowReceiver records when each callback arrived and when it was
// answered; it answers after a pause, so callbacks are in flight for a
// while.
type slowReceiver struct {
	url   string
	pause time.Duration
	mu    sync.Mutex
	got   map[string][][2]time.Time // job id → [received, answered]
}

func newSlowReceiver(t *testing.T, pause time.Duration) *slowReceiver {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &slowReceiver{url: "http://" + l.Addr().String() + "/hook", pause: pause, got: map[string][][2]time.Time{}}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		recv := time.Now()
		time.Sleep(r.pause)
		w.WriteHeader(200)
		id := req.Header.Get("Idempotency-Key")
		r.mu.Lock()
		r.got[id] = append(r.got[id], [2]time.Time{recv, time.Now()})
		r.mu.Unlock()
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return r
}

func (r *slowReceiver) deliveries(key string) [][2]time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][2]time.Time(nil), r.got[key]...)
}

// DELETE answers 204 only when the job will not fire afterwards, and a job
// whose callback has started answers 409 with status firing; the same for
// PUT (docs/api.md#jobs). The test, with no fault at all: DELETEs
// sent 0-4 ms before the trigger time all answered 204, yet some of those
// jobs were delivered, a few after the 204 had reached the client.
func TestDeleteAndPutNearTheTriggerTime(t *testing.T) {
	if testing.Short() {
		t.Skip("a node and 300 timers: skipped with -short")
	}
	cfg := testConfig(t.TempDir())
	n := startReady(t, cfg)
	defer n.Close()
	rcv := newSlowReceiver(t, 30*time.Millisecond)
	ctx := context.Background()
	type outcome struct {
		id, key  string
		put      bool
		status   int // 204/200 done, 409 firing
		answered time.Time
	}
	const jobs = 300
	var (
		mu       sync.Mutex
		outcomes []outcome
		wg       sync.WaitGroup
	)
	start := time.Now().Add(500 * time.Millisecond).UnixMilli()
	for i := 0; i < jobs; i++ {
		id := fmt.Sprintf("race-%d", i)
		trig := start + int64(i/10)*20
		spec := model.JobSpec{TriggerTime: trig, CallbackURL: rcv.url, Hash: uint64(i + 1)}
		res, err := n.svc.CreateJobs(ctx, "default", []model.JobInput{{ID: id, Spec: spec}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("create %s: %v %v", id, err, res[0].Err)
		}
		wg.Add(1)
		go func(i int, id string, trig int64) {
			defer wg.Done()
			time.Sleep(time.Until(time.UnixMilli(trig).Add(-time.Duration(i%5) * time.Millisecond)))
			o := outcome{id: id, key: fmt.Sprintf("default:%s:%d", id, trig), put: i%3 == 0}
			var err error
			if o.put {
				// Replace it with a trigger time an hour away.
				_, err = n.svc.UpsertJob(ctx, "default", id, model.JobSpec{TriggerTime: trig + 3600_000, CallbackURL: rcv.url, Hash: 99}, 0)
				o.status = 200
			} else {
				err = n.svc.DeleteJob(ctx, "default", id)
				o.status = 204
			}
			o.answered = time.Now()
			if err != nil {
				e, ok := model.AsError(err)
				if !ok || e.Kind != model.KindConflict || e.Job == nil || e.Job.Status != model.StatusFiring {
					t.Errorf("%s: %v", id, err)
					return
				}
				o.status = 409
			}
			mu.Lock()
			outcomes = append(outcomes, o)
			mu.Unlock()
		}(i, id, trig)
	}
	wg.Wait()
	// Let every callback that did start end.
	time.Sleep(500 * time.Millisecond)
	firing := 0
	for _, o := range outcomes {
		d := rcv.deliveries(o.key)
		switch o.status {
		case 409:
			firing++
			if len(d) == 0 {
				t.Errorf("%s: 409 firing, but its callback never reached the receiver", o.id)
			}
		default:
			for _, x := range d {
				if !x[0].Before(o.answered) {
					t.Errorf("%s: delivered %v after the %d", o.id, x[0].Sub(o.answered), o.status)
				} else if x[1].After(o.answered) {
					t.Errorf("%s: callback in flight (received %v before, answered %v after) when the %d reached the client",
						o.id, o.answered.Sub(x[0]), x[1].Sub(o.answered), o.status)
				}
			}
		}
	}
	t.Logf("%d of %d writes answered 409 firing", firing, len(outcomes))
}
