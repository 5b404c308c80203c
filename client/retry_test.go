package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestFailoverOn503HonoursRetryAfter(t *testing.T) {
	transports(t, func(t *testing.T, opt Option) {
		down := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
			w.Header().Set("Retry-After", "0.2")
			reply(w, 503, `{"error":{"code":"unavailable","message":"slot 3 has no leader"}}`)
		})
		up := newFake(t, fixed(200, jobAnswer))
		c := newClient(t, []string{down.addr(), up.addr()}, opt)
		start := time.Now()
		j, err := c.GetJob(context.Background(), "c", "j1")
		if err != nil {
			t.Fatal(err)
		}
		if j.ID != "j1" {
			t.Errorf("job = %+v", j)
		}
		// The server's 200 ms were waited, not shortened.
		if el := time.Since(start); el < 200*time.Millisecond || el > 5*time.Second {
			t.Errorf("elapsed %v, want the 200ms Retry-After", el)
		}
		if n, m := len(down.requests()), len(up.requests()); n != 1 || m != 1 {
			t.Errorf("requests down=%d up=%d, want 1 and 1", n, m)
		}
	})
}

// TestRetryAfterBeyondBudget: a Retry-After that ends after MaxElapsed (or
// the context's deadline) returns the answer at once, with its RetryAfter,
// instead of waiting in vain.
func TestRetryAfterBeyondBudget(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Retry-After", "30")
		reply(w, 429, `{"error":{"code":"overloaded","message":"slow down"}}`)
	})
	for _, tc := range []struct {
		name string
		opts []Option
		ctx  func() (context.Context, context.CancelFunc)
	}{
		{"max elapsed", []Option{WithRetry(RetryConfig{MaxElapsed: time.Second})}, func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }},
		{"context deadline", nil, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 5*time.Second)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, []string{f.addr()}, tc.opts...)
			ctx, cancel := tc.ctx()
			defer cancel()
			n := len(f.requests())
			start := time.Now()
			_, err := c.Cluster(ctx)
			if !errors.Is(err, ErrOverloaded) || RetryAfterOf(err) != 30*time.Second {
				t.Fatalf("err = %v", err)
			}
			if el := time.Since(start); el > 2*time.Second {
				t.Errorf("took %v; the call must return at once", el)
			}
			if sent := len(f.requests()) - n; sent != 1 {
				t.Errorf("sent %d times", sent)
			}
		})
	}
}

func TestFailoverOnConnectionRefused(t *testing.T) {
	transports(t, func(t *testing.T, opt Option) {
		// An address nothing listens on: the request is never sent, so even
		// a POST without an id may go to the next address.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		dead := ln.Addr().String()
		_ = ln.Close()
		up := newFake(t, fixed(201, jobAnswer))
		c := newClient(t, []string{dead, up.addr()}, opt)
		_, created, err := c.CreateJob(context.Background(), "c", Job{Delay: "1s", CallbackURL: "http://h/x"})
		if err != nil {
			t.Fatal(err)
		}
		if !created || len(up.requests()) != 1 {
			t.Errorf("created=%v requests=%d", created, len(up.requests()))
		}
	})
}

func TestAttemptsAreBounded(t *testing.T) {
	a := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		reply(w, 503, `{"error":{"code":"unavailable","message":"no quorum"}}`)
	})
	b := newFake(t, a.handler)
	c := newClient(t, []string{a.addr(), b.addr()}, WithRetry(RetryConfig{MaxAttempts: 3, InitialBackoff: time.Millisecond}))
	_, err := c.ListCollections(context.Background())
	if !IsUnavailable(err) {
		t.Fatalf("err = %v, want unavailable", err)
	}
	if total := len(a.requests()) + len(b.requests()); total != 3 {
		t.Errorf("sent %d times, want 3", total)
	}
	if len(a.requests()) != 2 || len(b.requests()) != 1 {
		t.Errorf("a=%d b=%d, want alternating 2/1", len(a.requests()), len(b.requests()))
	}
}

func TestBackoffGrowsWithJitter(t *testing.T) {
	r, err := RetryConfig{InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		want *= time.Millisecond
		lo, hi := want, time.Duration(0)
		for range 200 {
			d := r.backoff(k)
			lo, hi = min(lo, d), max(hi, d)
		}
		if lo < want/2 || hi > want {
			t.Errorf("backoff(%d) in [%v, %v], want within [%v, %v]", k, lo, hi, want/2, want)
		}
		if hi-lo < want/10 {
			t.Errorf("backoff(%d) in [%v, %v]: no jitter", k, lo, hi)
		}
	}
	if d := r.backoff(100); d > time.Second {
		t.Errorf("backoff(100) = %v: must stay capped", d)
	}
	for range 100 {
		if d := honour(time.Second); d < time.Second || d > 1100*time.Millisecond {
			t.Fatalf("honour(1s) = %v", d)
		}
	}
	if _, err := (RetryConfig{MaxAttempts: -1}).withDefaults(); err == nil {
		t.Error("negative attempts accepted")
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

// unavailable answers 503 without Retry-After.
func unavailable(w http.ResponseWriter, _ *http.Request, _ []byte) {
	reply(w, 503, `{"error":{"code":"unavailable","message":"no leader"}}`)
}

// TestResendOnlySafeCalls checks the retry table of doc.go: after a broken
// connection and after a 503, only calls that cannot do harm twice are
// sent again (here: to the second address).
func TestResendOnlySafeCalls(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name       string
		call       func(c *Client) error
		wantResend bool
	}{
		{"POST without id", func(c *Client) error {
			_, _, err := c.CreateJob(ctx, "c", Job{Delay: "1s", CallbackURL: "http://h"})
			return err
		}, false},
		{"POST with id", func(c *Client) error {
			_, _, err := c.CreateJob(ctx, "c", Job{ID: "j1", Delay: "1s", CallbackURL: "http://h"})
			return err
		}, true},
		{"batch with every id", func(c *Client) error {
			_, err := c.CreateJobs(ctx, "c", []Job{{ID: "a"}, {ID: "b"}})
			return err
		}, true},
		{"batch missing an id", func(c *Client) error {
			_, err := c.CreateJobs(ctx, "c", []Job{{ID: "a"}, {}})
			return err
		}, false},
		{"GET", func(c *Client) error { _, err := c.GetJob(ctx, "c", "j1"); return err }, true},
		{"PUT", func(c *Client) error { _, _, err := c.PutJob(ctx, "c", "j1", Job{Delay: "1s"}); return err }, true},
		{"DELETE", func(c *Client) error { return c.DeleteJob(ctx, "c", "j1") }, true},
		{"redrive", func(c *Client) error { _, err := c.Redrive(ctx, "c", RedriveRequest{IDs: []string{"a"}}); return err }, false},
		{"rebalance", func(c *Client) error { _, err := c.Rebalance(ctx, false); return err }, false},
		{"rebalance dry run", func(c *Client) error { _, err := c.Rebalance(ctx, true); return err }, true},
		{"compact", func(c *Client) error { _, err := c.Compact(ctx); return err }, false},
		{"transfer", func(c *Client) error { _, err := c.TransferSlot(ctx, 1, "n2"); return err }, true},
		{"drain", func(c *Client) error { _, err := c.Drain(ctx, "n2"); return err }, true},
		{"raw POST", func(c *Client) error {
			_, _, err := c.Do(ctx, RawRequest{Method: "POST", Path: "/v1/collections/c/jobs", Body: []byte(`{}`)})
			return err
		}, false},
		{"raw POST marked idempotent", func(c *Client) error {
			_, _, err := c.Do(ctx, RawRequest{Method: "POST", Path: "/v1/collections/c/jobs", Body: []byte(`{"id":"x"}`), Idempotent: true})
			return err
		}, true},
	}
	for _, failure := range []struct {
		name    string
		handler func(http.ResponseWriter, *http.Request, []byte)
		check   func(error) bool
	}{
		{"broken connection", abort, func(err error) bool { return err != nil && ErrorCode(err) == "" }},
		{"503", unavailable, IsUnavailable},
	} {
		t.Run(failure.name, func(t *testing.T) {
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					transports(t, func(t *testing.T, opt Option) {
						a := newFake(t, failure.handler)
						b := newFake(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
							switch {
							case strings.HasPrefix(string(body), "["):
								reply(w, 200, `{"results":[{"id":"a","status":201},{"id":"b","status":201}]}`)
							case r.Method == "DELETE":
								w.WriteHeader(204)
							case strings.Contains(r.URL.Path, "/admin/"):
								reply(w, 200, `{}`)
							default:
								reply(w, 201, jobAnswer)
							}
						})
						c := newClient(t, []string{a.addr(), b.addr()}, opt, fastRetry)
						err := tc.call(c)
						resent := len(b.requests()) == 1
						if resent != tc.wantResend {
							t.Errorf("resent = %v, want %v (err %v)", resent, tc.wantResend, err)
						}
						if tc.wantResend && err != nil {
							t.Errorf("err = %v", err)
						}
						if !tc.wantResend && !failure.check(err) {
							t.Errorf("err = %v, want the %s", err, failure.name)
						}
					})
				})
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
		{TriggerTime: -1, CallbackURL: "http://h", Meta: Meta(`[1]`)},
	}
	res, err := c.CreateJobs(context.Background(), "c", jobs)
	if err != nil {
		t.Fatal(err)
	}
	jsonEq(t, f.requests()[0].Body, `[{"id":"a","trigger_time":10,"callback_url":"http://h"},
		{"id":"b","trigger_time":20,"callback_url":"http://h"},
		{"id":"c","trigger_time":30,"callback_url":"http://h"},
		{"trigger_time":-1,"callback_url":"http://h","meta":[1]}]`)
	if len(res) != 4 {
		t.Fatalf("%d results", len(res))
	}
	if !res[0].Created() || res[0].Job == nil || res[0].Job.Version != 1 || res[0].Err() != nil {
		t.Errorf("res[0] = %+v", res[0])
	}
	if res[1].Status != 200 || res[1].Created() || res[1].Job.TriggerTime != 20 {
		t.Errorf("res[1] = %+v", res[1])
	}
	if res[2].Job != nil || !IsConflict(res[2].Err()) || res[2].Error.HTTPStatus != 409 || res[2].Error.Message != "different spec" {
		t.Errorf("res[2] = %+v (%v)", res[2], res[2].Error)
	}
	if !errors.Is(res[3].Err(), ErrInvalidArgument) {
		t.Errorf("res[3] = %+v", res[3])
	}

	// The client checks the answer lines up with the input.
	f.setHandler(fixed(200, `{"results":[{"id":"a","status":201}]}`))
	if _, err := c.CreateJobs(context.Background(), "c", jobs[:2]); err == nil {
		t.Error("want an error for a short results array")
	}
	// Over the limit, or invalid meta: refused without a request.
	n := len(f.requests())
	if _, err := c.CreateJobs(context.Background(), "c", make([]Job, MaxBatch+1)); err == nil {
		t.Error("want an error for a batch over 1000")
	}
	if _, err := c.CreateJobs(context.Background(), "c", []Job{{ID: "x", Meta: Meta("{not json")}}); err == nil {
		t.Error("want an error for invalid meta")
	}
	if res, err := c.CreateJobs(context.Background(), "c", nil); err != nil || res != nil {
		t.Errorf("empty batch = %v, %v", res, err)
	}
	if len(f.requests()) != n {
		t.Error("oversized, invalid and empty batches must not be sent")
	}
}

func TestReadyAndHealthyAskEveryNode(t *testing.T) {
	ready := newFake(t, fixed(200, `{"status":"ready"}`))
	notReady := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Retry-After", "1")
		reply(w, 503, `{"error":{"code":"unavailable","message":"slot 4 has no leader"}}`)
	})
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
	notReady.setHandler(func(w http.ResponseWriter, _ *http.Request, _ []byte) { _, _ = w.Write([]byte("ok")) }) // any 2xx body
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
	transports(t, func(t *testing.T, opt Option) {
		release := make(chan struct{})
		f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
			<-release
			reply(w, 200, jobAnswer)
		})
		t.Cleanup(func() { close(release) }) // runs before the server closes
		c := newClient(t, []string{f.addr()}, WithTimeout(time.Minute), opt)
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
	})
}

func TestContextDeadlineBoundsAttempt(t *testing.T) {
	transports(t, func(t *testing.T, opt Option) {
		release := make(chan struct{})
		f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
			<-release
			reply(w, 200, jobAnswer)
		})
		t.Cleanup(func() { close(release) })
		c := newClient(t, []string{f.addr()}, WithTimeout(time.Minute), opt)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := c.GetJob(ctx, "c", "j1")
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want context.DeadlineExceeded", err)
		}
	})
}

// TestAttemptTimeoutRetriesSafeCalls: an attempt that outlives WithTimeout
// is abandoned; a GET is sent again, a POST without id is not.
func TestAttemptTimeoutRetriesSafeCalls(t *testing.T) {
	transports(t, func(t *testing.T, opt Option) {
		var calls atomic.Int32
		release := make(chan struct{})
		f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
			if calls.Add(1) == 1 {
				<-release // the first attempt hangs
			}
			reply(w, 200, jobAnswer)
		})
		t.Cleanup(func() { close(release) }) // runs before the server closes
		c := newClient(t, []string{f.addr()}, WithTimeout(200*time.Millisecond), opt, fastRetry)
		if _, err := c.GetJob(context.Background(), "c", "j1"); err != nil {
			t.Fatalf("GET: %v", err)
		}
		calls.Store(0)
		if _, _, err := c.CreateJob(context.Background(), "c", Job{Delay: "1s"}); err == nil || !strings.Contains(err.Error(), "POST") {
			t.Fatalf("POST without id: %v", err)
		}
		if n := calls.Load(); n != 1 {
			t.Errorf("POST without id sent %d times", n)
		}
	})
}
