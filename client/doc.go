// Package client is the Go client for the timemachine HTTP API
// (docs/api.md): jobs (docs/api.md#jobs), schedules, collections and routes
// (docs/api.md#collections, docs/api.md#routes), the cluster and admin API
// (docs/api.md#cluster-and-admin), health checks, and tokens and TLS
// (docs/api.md#security). Receivers of callbacks use
// package webhook (client/webhook), which depends on the standard library
// only.
//
// # Quick start
//
//	c, err := client.New([]string{"127.0.0.1:8080"}, client.WithEnv())
//	if err != nil { … }
//	defer c.Close()
//	job, created, err := c.CreateJob(ctx, "notifications", client.Job{
//		ID:          "reminder-42",
//		TriggerTime: time.Now().Add(time.Hour).UnixMilli(),
//		CallbackURL: "https://example.com/hooks/reminder",
//		Meta:        client.MustMeta(map[string]any{"user": 42}),
//	})
//
// The examples (go doc -all, or the package page) show the common flows:
// a job, a batch, paging through a list, a collection with a signing
// secret, a route, a schedule, and — in package webhook — a receiver that
// verifies the callback.
//
// # Addresses, tokens, TLS
//
// New takes one or more addresses of any nodes: "host:port" or a URL
// ("https://host:port", optionally with a path prefix for a gateway). Any
// node serves any request, so more addresses only add failover; calls start
// at the next address in turn.
//
//   - WithToken sends Authorization: Bearer (a server with --auth-file
//     answers unauthenticated without one, permission_denied when the
//     token's role or collections do not allow the call).
//   - WithCAFile trusts a cluster's own CA; WithTLSConfig sets anything
//     else (client certificates). With either, "host:port" means https.
//   - WithEnv takes what is not set explicitly from TIMEMACHINE_ADDR,
//     TIMEMACHINE_TOKEN and TIMEMACHINE_CA_CERT, as the CLI does.
//   - WithHTTPClient plugs in your own *http.Client; WithFastHTTP swaps
//     net/http for fasthttp in load generators.
//   - WithTimeout bounds each attempt; the context bounds the whole call.
//
// # Types
//
// The wire types (Job, Schedule, Collection, Route, ClusterInfo, ...) are
// kept as close to the contract as Go allows: times are int64 Unix
// milliseconds (time.Time.UnixMilli, time.UnixMilli) and durations are the
// Go duration strings that travel on the wire ("90s"), so nothing is lost
// or reinterpreted on a round trip. Meta, the user's own JSON, is kept as
// its encoded bytes (see Meta). Read-only fields are never sent, so a value
// read from the server can be edited and written back.
//
// # Errors
//
// An error answer of the API is an *Error with the contract's code, the
// message, the HTTP status and the server's Retry-After. Branch on the code
// with errors.Is:
//
//	_, err := c.GetJob(ctx, "billing", "inv-7")
//	switch {
//	case errors.Is(err, client.ErrNotFound):        // 404: no such job (or past its retention)
//	case errors.Is(err, client.ErrUnauthenticated): // 401: no or unknown token
//	case errors.Is(err, client.ErrPermissionDenied):// 403: the token may not do this
//	case errors.Is(err, client.ErrUnavailable):     // 503: no leader/quorum; client.RetryAfterOf(err)
//	}
//
// The sentinels cover every code: ErrInvalidArgument, ErrUnauthenticated,
// ErrPermissionDenied, ErrNotFound, ErrConflict, ErrPreconditionFailed,
// ErrTooLarge, ErrOverloaded, ErrUnavailable, ErrInternal. By the contract,
// a request that got an error answer changed nothing.
//
// An answer that is not the contract — an HTML page, another content type,
// JSON of another shape, a redirect — is a *ProtocolError matching
// ErrNotTimemachine, whose message names the address and what came back
// ("http://127.0.0.1:3000 is not a timemachine API (got text/html; …)").
// Transport failures are returned wrapped, naming the request.
//
// # Retries
//
// A call is resent, with exponential backoff and jitter (RetryConfig), when
// it got 503 unavailable or 429 overloaded, or when the connection failed,
// and only if sending it twice cannot do anything twice:
//
//	call                                        resent?
//	GET (every read, list, Cluster, OpenAPI)    yes
//	PUT (PutJob, PutSchedule, PutCollection,    yes: the second send leaves the same state (with
//	     PutRoute)                                   IfMatch it may answer precondition_failed)
//	DELETE (DeleteJob, DeleteSchedule, ...,     yes: a resend after a delete that happened
//	     RemoveNode)                                 answers not_found
//	CreateJob with an ID, CreateJobs when       yes: the contract answers a repeated create of
//	     every job has an ID                         the same spec with 200 and the same job
//	CreateJob without an ID, CreateJobs with    no:  the server would make a second job under a
//	     a job without one                           new id
//	Redrive                                     no:  a job redriven, fired and failed again in
//	                                                 between would be delivered twice
//	Rebalance (real), Compact                   no:  a second plan could move more than needed;
//	                                                 compaction is heavy
//	Rebalance (dry run), TransferSlot, Drain    yes: they change nothing or set a target state
//	Do                                          as RawRequest.Idempotent says (GET/PUT/DELETE: yes)
//
// Why not resend every call after a 503, since the contract says an error
// changed nothing? Because the 503 may come from a proxy or load balancer
// in front of the cluster, after the request reached a node. The one
// exception: when no connection could be made at all, no byte reached any
// server, and every call, even a POST without an id, is tried on the next
// address.
//
// A server's Retry-After is honoured as given (never shortened, plus up to
// a tenth of jitter); when it would end after RetryConfig.MaxElapsed or
// the context's deadline, the call returns the *Error at once, with its
// RetryAfter, instead of waiting in vain. Attempts are bounded by
// MaxAttempts, over all addresses. An untrusted server certificate, a
// redirect or a foreign answer is never retried.
//
// # Lists
//
// ListJobs and ListSchedules return one page and its NextCursor; Jobs,
// Schedules and Occurrences iterate over all pages:
//
//	for job, err := range c.Jobs(ctx, "billing", client.ListOptions{Status: client.StatusFailed}) { … }
//
// # Testing code that uses the client
//
// Package clienttest (client/clienttest) is an in-memory fake of the API
// that follows the contract's shapes, codes and paging: start one with
// clienttest.NewServer and point New at its Addr. It never fires jobs; a
// test marks them failed or succeeded, and can inject 503/429 answers.
//
// # Transport
//
// The default transport is net/http. WithFastHTTP selects valyala/fasthttp,
// which the built-in load generator (package bench) uses because it
// reaches 2–3× the request rate of net/http with a tenth of the allocations
// (BenchmarkDoLoopback: 86k against 32–42k requests/s on a shared 2-core
// host, client and server together); its answers are copied out
// of fasthttp's pooled buffers, so nothing returned aliases them.
package client
