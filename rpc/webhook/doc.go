// Package webhook is the outbound half of the callback contract (docs/api.md#the-callback):
// the HTTP client a slot-leader uses to fire a job's callback.
//
// It owns the wire protocol and nothing else: how the JSON body is encoded,
// which headers go out (Idempotency-Key, X-Timemachine-Attempt and, when a
// signing secret is set, the Standard Webhooks webhook-id / webhook-timestamp /
// webhook-signature trio), how the answer is read back (status, Retry-After,
// a reschedule_at / reschedule_in request in a 2xx body, a short body snippet
// for last_error) and how connections are pooled.
//
// It deliberately makes no business decisions. Whether a 503 means "retry",
// how long to back off, whether a reschedule is honoured, when a job becomes
// a dead letter: all of that belongs to the slot that owns the job, because
// only it knows the retry policy, the attempt budget and the replicated state.
// Keeping this package to "send exactly this, report exactly what happened"
// means the firing logic can be tested without a network, and this package can
// be tested against real servers without a cluster.
//
// Signing follows https://www.standardwebhooks.com/ byte for byte so that
// receivers can verify callbacks with that project's libraries instead of
// code of ours; Verify exists for our own tests and for receivers written in Go.
//
// The client is built on fasthttp rather than net/http because a slot-leader
// may have thousands of callbacks in flight to a handful of hosts, and
// fasthttp's pooled request/response objects keep that allocation-light. The
// price is that fasthttp reuses buffers: nothing taken from a fasthttp object
// may outlive Deliver, which is why Result holds only copies.
//
// A request marked Pipeline (a route's "pipeline") is sent HTTP/1.1-
// pipelined over connections of the package's own (pipeline.go), so that
// the callbacks ready at one moment share a write and a read on both
// ends; DESIGN.md has the rules for what is sent again when a pipelined
// connection breaks.
package webhook
