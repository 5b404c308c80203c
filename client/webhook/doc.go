// Package webhook is for services that receive timemachine callbacks: it
// verifies their signatures, parses them and answers them. It depends on
// the standard library only, so a receiver does not pull in the client.
//
// # What timemachine sends (docs/api.md#the-callback)
//
// At a job's trigger time the slot-leader POSTs
//
//	Content-Type: application/json
//	Idempotency-Key: {collection}:{id}:{trigger_time}     (the same on every attempt)
//	X-Timemachine-Attempt: 1
//	webhook-id: {collection}:{id}:{trigger_time}          (when a signing secret is set)
//	webhook-timestamp: <unix seconds>
//	webhook-signature: v1,<base64 HMAC-SHA256(key, "<webhook-id>.<webhook-timestamp>.<body>")>
//
//	{"id":"…","collection":"…","trigger_time":…,"attempt":1,"meta":{…}}
//
// with "schedule":"{id}" added for an occurrence of a schedule. A route with
// "batch" set sends several due jobs in one POST, {"jobs":[…]}, each with its
// "idempotency_key", and the header X-Timemachine-Batch: N.
//
// Signatures follow Standard Webhooks (https://www.standardwebhooks.com): a
// signing secret is "whsec_" + base64 of a 24–64-byte key, webhook-signature
// may carry several space-separated "v1,…" signatures (any one matching is
// enough), and a timestamp more than five minutes from the receiver's clock
// is refused so that a captured request cannot be replayed later. The tests
// check this package against the specification's published vectors.
//
// # Receiving
//
// Handler does everything: body limit, verification, parsing, answer.
//
//	v, err := webhook.NewVerifier(os.Getenv("TIMEMACHINE_SIGNING_SECRET"))
//	if err != nil { … }
//	http.Handle("/hooks/reminder", webhook.NewHandler(v,
//		func(ctx context.Context, cb *webhook.Callback) webhook.Response {
//			var m struct{ User int `json:"user"` }
//			if err := cb.Meta.Decode(&m); err != nil {
//				return webhook.Fail("meta: " + err.Error()) // no point retrying
//			}
//			if err := sendReminder(ctx, m.User, cb.IdempotencyKey); err != nil {
//				return webhook.Retry(30 * time.Second)
//			}
//			return webhook.OK()
//		}))
//
// The function's Response decides what happens to the job:
//
//	OK()               succeeded
//	RescheduleIn(d)    scheduled again d from now, attempts reset
//	RescheduleAt(t)    scheduled again at t, attempts reset
//	Retry(after)       retried (after > 0 sets the wait; the retry policy still bounds attempts)
//	Fail(reason)       failed now, a dead letter that can be redriven; reason goes to last_error
//
// For a batched delivery the function runs once per job (or Handler.Batch
// once for all) and the answers go back per job; see WriteBatch.
//
// Delivery is at-least-once: after a slot-leader failover a callback that
// was in flight may come again with the same Idempotency-Key. Make the work
// idempotent on Callback.IdempotencyKey.
//
// # Other frameworks
//
// Read (or Verifier.Verify and Parse) and Response.Write / WriteBatch are
// the same steps for handlers that are not an http.Handler. Verify needs the
// raw body bytes: verify before decoding, never re-encode.
//
// # Rotating a secret
//
// NewVerifier accepts several secrets. Add the new one to the receiver
// first, then change the collection's or route's secret, then drop the old
// one from the receiver.
//
// # Testing a receiver
//
// Key.SignHeaders signs a request the way timemachine does; with
// Verifier.Now a test can also verify recorded requests.
package webhook
