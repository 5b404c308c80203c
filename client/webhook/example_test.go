package webhook_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/timemachine-db/timemachine/client/webhook"
)

// A receiver verifies and handles a reminder callback, and timemachine (here
// played by the example, signing as the server does) gets the answer.
func ExampleHandler() {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // the collection's signing secret
	v, err := webhook.NewVerifier(secret)
	if err != nil {
		panic(err)
	}
	receiver := httptest.NewServer(webhook.NewHandler(v, func(_ context.Context, cb *webhook.Callback) webhook.Response {
		var m struct {
			User int `json:"user"`
		}
		if err := cb.Meta.Decode(&m); err != nil {
			return webhook.Fail("meta: " + err.Error())
		}
		fmt.Printf("remind user %d (job %s/%s, attempt %d, key %s)\n", m.User, cb.Collection, cb.ID, cb.Attempt, cb.IdempotencyKey)
		return webhook.RescheduleIn(24 * time.Hour) // again tomorrow
	}))
	defer receiver.Close()

	// What timemachine sends at the trigger time.
	body := `{"id":"reminder-42","collection":"notifications","trigger_time":1767225600000,"attempt":1,"meta":{"user":42}}`
	req, _ := http.NewRequest(http.MethodPost, receiver.URL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(webhook.HeaderIdempotencyKey, "notifications:reminder-42:1767225600000")
	req.Header.Set(webhook.HeaderAttempt, "1")
	key, _ := webhook.ParseSecret(secret)
	key.SignHeaders(req.Header, "notifications:reminder-42:1767225600000", time.Now(), []byte(body))

	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(answer))

	// A forged request (no valid signature) is refused before the handler runs.
	forged, _ := http.NewRequest(http.MethodPost, receiver.URL, strings.NewReader(body))
	forged.Header.Set(webhook.HeaderWebhookID, "notifications:reminder-42:1767225600000")
	forged.Header.Set(webhook.HeaderWebhookTimestamp, fmt.Sprint(time.Now().Unix()))
	forged.Header.Set(webhook.HeaderWebhookSignature, "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=")
	resp, err = http.DefaultClient.Do(forged)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	// Output:
	// remind user 42 (job notifications/reminder-42, attempt 1, key notifications:reminder-42:1767225600000)
	// 200 {"reschedule_in":"24h0m0s"}
	// 401
}

// Verifying by hand, for handlers that are not an http.Handler: the raw
// body and the headers, before any decoding.
func ExampleVerifier_Verify() {
	v, _ := webhook.NewVerifier("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	// A recorded message (the Standard Webhooks reference vector).
	v.Now = func() time.Time { return time.Unix(1614265330, 0) }
	h := http.Header{}
	h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	fmt.Println(v.Verify([]byte(`{"test": 2432232314}`), h))
	fmt.Println(v.Verify([]byte(`{"test":2432232314}`), h))
	// Output:
	// <nil>
	// webhook: signature verification failed: no matching signature found
}

// Answers for a batched delivery are per job.
func ExampleWriteBatch() {
	cbs := []webhook.Callback{{ID: "a", Collection: "c"}, {ID: "b", Collection: "c"}}
	w := httptest.NewRecorder()
	webhook.WriteBatch(w, cbs, []webhook.Response{webhook.OK(), webhook.Fail("unknown user")})
	fmt.Println(w.Code, w.Body.String())
	// Output:
	// 200 {"results":[{"id":"a","collection":"c","outcome":"ok"},{"id":"b","collection":"c","outcome":"fail"}]}
}
