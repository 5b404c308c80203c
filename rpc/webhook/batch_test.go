package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	cw "github.com/timemachine-db/timemachine/client/webhook"
)

const batchSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func batchJobs(n int) []BatchJob {
	out := make([]BatchJob, n)
	for i := range out {
		out[i] = BatchJob{Payload: Payload{ID: "j" + strconv.Itoa(i), Collection: "c", TriggerTime: 1767225600000 + int64(i), Attempt: 1,
			Meta: json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`)}}
	}
	return out
}

// TestDeliverBatchSignedAndParsed: the receiver library verifies the batch
// signature, sees every job with its idempotency key, and its per-job
// answers come back in request order.
func TestDeliverBatchSignedAndParsed(t *testing.T) {
	key, err := ParseSecret(batchSecret)
	if err != nil {
		t.Fatal(err)
	}
	v, err := cw.NewVerifier(batchSecret)
	if err != nil {
		t.Fatal(err)
	}
	srv, reqs := newServer(t, nil)
	h := cw.NewHandler(v, func(_ context.Context, cb *cw.Callback) cw.Response {
		switch cb.ID {
		case "j1":
			return cw.Retry(0)
		case "j2":
			return cw.Fail("no such user")
		case "j3":
			return cw.RescheduleIn(30 * time.Second)
		}
		return cw.OK()
	})
	recv := httptest.NewServer(h)
	t.Cleanup(recv.Close)
	c := newClient(t, Options{})
	res := c.DeliverBatch(context.Background(), &BatchRequest{URL: recv.URL + "/batch", Jobs: batchJobs(5), SigningKey: key, Timeout: 5 * time.Second, Now: time.Now()})
	if res.Err != nil || res.StatusCode != 200 {
		t.Fatalf("%+v", res.Result)
	}
	if len(res.Jobs) != 5 {
		t.Fatalf("results %+v", res.Jobs)
	}
	want := []string{OutcomeOK, OutcomeRetry, OutcomeFail, OutcomeOK, OutcomeOK}
	for i, jr := range res.Jobs {
		if !jr.Answered || jr.Outcome != want[i] || jr.Err != nil {
			t.Fatalf("job %d: %+v", i, jr)
		}
	}
	if res.Jobs[3].RescheduleIn != 30*time.Second {
		t.Fatalf("reschedule %+v", res.Jobs[3])
	}
	// The raw request, through a plain server: header, body shape.
	res = c.DeliverBatch(context.Background(), &BatchRequest{URL: srv.URL, Jobs: batchJobs(3), SigningKey: key, Now: time.Now()})
	if res.StatusCode != 200 || res.Jobs != nil {
		t.Fatalf("%+v", res)
	}
	got := <-reqs
	if got.header.Get(HeaderBatch) != "3" || got.header.Get(HeaderIdempotencyKey) != "" {
		t.Fatalf("headers %v", got.header)
	}
	if err := v.Verify(got.body, got.header); err != nil {
		t.Fatalf("signature: %v", err)
	}
	d, err := cw.Parse(got.body, got.header)
	if err != nil || !d.Batch || len(d.Callbacks) != 3 || d.Callbacks[2].IdempotencyKey != "c:j2:1767225600002" || string(d.Callbacks[1].Meta) != `{"n":1}` {
		t.Fatalf("parsed %+v %v", d, err)
	}
}

func TestDeliverBatchAnswers(t *testing.T) {
	jobs := batchJobs(3)
	for _, tc := range []struct {
		name, body string
		want       []string // nil: no per-job results
		errs       bool
	}{
		{"empty", "", nil, false},
		{"not json", "OK", nil, false},
		{"no results", `{"ok":true}`, nil, false},
		{"per job", `{"results":[{"id":"j2","collection":"c","outcome":"fail"},{"id":"j0","collection":"c","outcome":"retry"},{"id":"zz","collection":"c","outcome":"fail"}]}`,
			[]string{OutcomeRetry, "", OutcomeFail}, false},
		{"unknown outcome", `{"results":[{"id":"j0","collection":"c","outcome":"maybe"}]}`, []string{OutcomeRetry, "", ""}, true},
		{"no collection: the job of that id", `{"results":[{"id":"j1","outcome":"fail"}]}`, []string{"", OutcomeFail, ""}, false},
		{"broken", `{"results":[`, nil, true},
		{"retry with a wait", `{"results":[{"id":"j0","collection":"c","outcome":"retry","reschedule_in":"5s"},{"id":"j1","collection":"c","outcome":"retry","reschedule_at":1795000000000},{"id":"j2","collection":"c","outcome":"retry","reschedule_in":"soon"}]}`,
			[]string{OutcomeRetry, OutcomeRetry, OutcomeRetry}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jr, err := parseBatchAnswer([]byte(tc.body), true, nil, jobs)
			if tc.want == nil {
				if jr != nil || (err != nil) != tc.errs {
					t.Fatalf("%+v %v", jr, err)
				}
				return
			}
			if err != nil || len(jr) != len(tc.want) {
				t.Fatalf("%+v %v", jr, err)
			}
			for i, w := range tc.want {
				if jr[i].Outcome != w || jr[i].Answered != (w != "") {
					t.Fatalf("job %d: %+v", i, jr[i])
				}
			}
			if tc.errs && jr[0].Err == nil {
				t.Fatal("no error for the bad entry")
			}
			if tc.name == "retry with a wait" {
				if jr[0].RescheduleIn != 5*time.Second || jr[0].Err != nil || jr[1].RescheduleAt != 1795000000000 || jr[1].Err != nil || jr[2].Err == nil {
					t.Fatalf("waits: %+v", jr)
				}
			}
		})
	}
}

func TestDeliverBatchNon2xx(t *testing.T) {
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(503)
	})
	c := newClient(t, Options{})
	res := c.DeliverBatch(context.Background(), &BatchRequest{URL: srv.URL, Jobs: batchJobs(2)})
	if res.StatusCode != 503 || !res.HasRetryAfter || res.RetryAfter != 7*time.Second || res.Jobs != nil {
		t.Fatalf("%+v", res)
	}
}

// An entry without "collection" names the job of that id only when one
// job of the batch has it; with the id in two collections it names none.
func TestBatchAnswerWithoutCollectionIsAmbiguous(t *testing.T) {
	jobs := batchJobs(3)
	jobs[2].Payload.ID, jobs[2].Payload.Collection = "j0", "d"
	jr, err := parseBatchAnswer([]byte(`{"results":[{"id":"j0","outcome":"fail"},{"id":"j1","outcome":"retry"}]}`), true, nil, jobs)
	if err != nil || len(jr) != 3 {
		t.Fatalf("%+v %v", jr, err)
	}
	if jr[0].Answered || jr[2].Answered || !jr[1].Answered || jr[1].Outcome != OutcomeRetry {
		t.Fatalf("%+v", jr)
	}
}
