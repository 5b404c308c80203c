package client_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/timemachine-db/timemachine/client"
	"github.com/timemachine-db/timemachine/client/clienttest"
	"github.com/timemachine-db/timemachine/client/webhook"
)

// The examples run against clienttest, an in-memory fake of the API; with a
// real cluster, pass its address ("127.0.0.1:8080", "https://tm.example:8443").

// Create a one-shot job. Giving it an id makes the create safe to retry:
// the same spec again answers 200 with the job instead of creating another.
func ExampleClient_CreateJob() {
	srv := clienttest.NewServer()
	defer srv.Close()
	c, err := client.New([]string{srv.Addr()})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()

	job := client.Job{
		ID:          "reminder-42",
		TriggerTime: time.Date(2027, 1, 1, 9, 0, 0, 0, time.UTC).UnixMilli(),
		CallbackURL: "https://example.com/hooks/reminder",
		Meta:        client.MustMeta(map[string]any{"user": 42}),
		RetryPolicy: &client.RetryPolicy{MaxAttempts: ptr(10), MaxAge: (48 * time.Hour).String()},
	}
	j, created, err := c.CreateJob(ctx, "default", job)
	if err != nil {
		panic(err)
	}
	fmt.Println(j.ID, j.Status, "version", j.Version, "created", created)

	// A retry of the same create (say, after a timeout) finds the job.
	_, created, err = c.CreateJob(ctx, "default", job)
	fmt.Println("created again:", created, err)

	// Cancel it.
	fmt.Println("delete:", c.DeleteJob(ctx, "default", "reminder-42"))
	_, err = c.GetJob(ctx, "default", "reminder-42")
	fmt.Println("gone:", errors.Is(err, client.ErrNotFound))
	// Output:
	// reminder-42 scheduled version 1 created true
	// created again: false <nil>
	// delete: <nil>
	// gone: true
}

// Create many jobs in one request (at most client.MaxBatch). Each job gets
// its own result, in input order.
func ExampleClient_CreateJobs() {
	srv := clienttest.NewServer()
	defer srv.Close()
	c, _ := client.New([]string{srv.Addr()})
	defer c.Close()
	ctx := context.Background()

	at := time.Date(2027, 1, 1, 9, 0, 0, 0, time.UTC).UnixMilli()
	jobs := []client.Job{
		{ID: "invoice-1", TriggerTime: at, Route: "billing"},
		{ID: "invoice-2", TriggerTime: at + 60_000, Route: "billing"},
		{ID: "invoice 3", TriggerTime: at, Route: "billing"}, // a space is not allowed in an id
	}
	results, err := c.CreateJobs(ctx, "default", jobs)
	if err != nil {
		panic(err) // the request as a whole failed
	}
	for _, r := range results {
		if err := r.Err(); err != nil {
			fmt.Println(r.ID, r.Status, errors.Is(err, client.ErrInvalidArgument))
			continue
		}
		fmt.Println(r.ID, r.Status, r.Job.Status)
	}
	// Output:
	// invoice-1 201 scheduled
	// invoice-2 201 scheduled
	// invoice 3 400 true
}

// Page through a list. Jobs follows the cursors for you; ListJobs returns
// one page and its NextCursor.
func ExampleClient_Jobs() {
	srv := clienttest.NewServer()
	defer srv.Close()
	c, _ := client.New([]string{srv.Addr()})
	defer c.Close()
	ctx := context.Background()

	var jobs []client.Job
	for i := range 5 {
		jobs = append(jobs, client.Job{ID: fmt.Sprintf("job-%d", i), TriggerTime: int64(1767225600000 + i*1000), Route: "r"})
	}
	if _, err := c.CreateJobs(ctx, "default", jobs); err != nil {
		panic(err)
	}
	srv.Fail("default", "job-3", "HTTP 410 Gone") // the fake never fires; make a dead letter

	// Every scheduled job, two per page.
	for j, err := range c.Jobs(ctx, "default", client.ListOptions{Status: client.StatusScheduled, Limit: 2}) {
		if err != nil {
			panic(err)
		}
		fmt.Println(j.ID, time.UnixMilli(j.TriggerTime).UTC().Format(time.TimeOnly))
	}

	// One page at a time, e.g. for a UI.
	page, _ := c.ListJobs(ctx, "default", client.ListOptions{Limit: 3})
	fmt.Println(len(page.Jobs), "jobs, more:", page.NextCursor != "")
	page, _ = c.ListJobs(ctx, "default", client.ListOptions{Limit: 3, Cursor: page.NextCursor})
	fmt.Println(len(page.Jobs), "jobs, more:", page.NextCursor != "")

	// The dead letters, sent again.
	for j, err := range c.Jobs(ctx, "default", client.ListOptions{Status: client.StatusFailed}) {
		if err != nil {
			panic(err)
		}
		fmt.Println("dead letter:", j.ID, j.LastError)
	}
	r, _ := c.Redrive(ctx, "default", client.RedriveRequest{IDs: []string{"job-3"}})
	fmt.Println("redriven:", r.Redriven)
	// Output:
	// job-0 00:00:00
	// job-1 00:00:01
	// job-2 00:00:02
	// job-4 00:00:04
	// 3 jobs, more: true
	// 2 jobs, more: false
	// dead letter: job-3 HTTP 410 Gone
	// redriven: 1
}

// A collection with a signing secret: its callbacks are signed (Standard
// Webhooks), and receivers verify them with the same secret (see package
// webhook). The server never echoes the secret.
func ExampleClient_PutCollection() {
	srv := clienttest.NewServer()
	defer srv.Close()
	c, _ := client.New([]string{srv.Addr()})
	defer c.Close()
	ctx := context.Background()

	secret, err := webhook.NewSecret() // "whsec_" + base64 of 32 random bytes
	if err != nil {
		panic(err)
	}
	coll, created, err := c.PutCollection(ctx, "notifications", client.Collection{
		Retention:       "72h",
		CallbackTimeout: "5s",
		SigningSecret:   secret, // keep it for the receiver, e.g. in a secret store
		RetryPolicy:     &client.RetryPolicy{MaxAttempts: ptr(8)},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(coll.Name, "created:", created, "signed:", coll.SigningSecretSet, "secret echoed:", coll.SigningSecret != "")

	// The receiver's side.
	if _, err := webhook.NewVerifier(secret); err != nil {
		panic(err)
	}
	// Output:
	// notifications created: true signed: true secret echoed: false
}

// A route: a named webhook target with delivery control. Jobs that name it
// are delivered to its URL as it is at fire time, so the URL can change
// without touching the jobs.
func ExampleClient_PutRoute() {
	srv := clienttest.NewServer()
	defer srv.Close()
	c, _ := client.New([]string{srv.Addr()})
	defer c.Close()
	ctx := context.Background()

	r, created, err := c.PutRoute(ctx, "billing", client.Route{
		WebhookURL:  "https://billing.example.com/hooks/timemachine",
		Headers:     map[string]string{"X-Team": "billing"},
		Timeout:     "10s",
		RateLimit:   &client.RateLimit{PerSecond: 100, Burst: 20}, // cluster-wide
		MaxInFlight: 10,
		Batch:       &client.RouteBatch{MaxJobs: 100, MaxWait: "20ms"}, // answered per job: webhook.WriteBatch
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Name, created, r.RateLimit.PerSecond, r.MaxInFlight, r.Batch.MaxJobs)

	_, _, err = c.CreateJob(ctx, "default", client.Job{ID: "inv-7", Delay: "1h", Route: "billing"})
	fmt.Println("job on the route:", err)
	// Output:
	// billing true 100 10 100
	// job on the route: <nil>
}

// A schedule fires recurring jobs; each occurrence is a job with the id
// "{schedule}@{occurrence ms}" and is listed with Occurrences.
func ExampleClient_PutSchedule() {
	srv := clienttest.NewServer()
	defer srv.Close()
	now := time.Date(2027, 1, 1, 9, 0, 0, 0, time.UTC)
	srv.SetNow(func() time.Time { return now })
	c, _ := client.New([]string{srv.Addr()})
	defer c.Close()
	ctx := context.Background()

	s, created, err := c.PutSchedule(ctx, "default", "digest", client.Schedule{
		Every:       "15m",
		CallbackURL: "https://example.com/hooks/digest",
		Meta:        client.MustMeta(map[string]string{"kind": "digest"}),
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(s.ID, created, "next:", time.UnixMilli(s.NextFireAt).UTC().Format(time.Kitchen))

	// A cron schedule in a time zone.
	_, _, err = c.PutSchedule(ctx, "default", "weekday-report", client.Schedule{
		Cron: "0 8 * * 1-5", Timezone: "Europe/Berlin", Route: "reports",
	})
	fmt.Println("cron:", err)

	// The fake does not fire; the server would create these.
	srv.Occur("default", "digest", now.Add(15*time.Minute).UnixMilli())
	srv.Occur("default", "digest", now.Add(30*time.Minute).UnixMilli())
	for j, err := range c.Occurrences(ctx, "default", "digest", client.ListOptions{}) {
		if err != nil {
			panic(err)
		}
		_, at, _ := client.ParseOccurrenceID(j.ID)
		fmt.Println(j.ID, time.UnixMilli(at).UTC().Format(time.Kitchen))
	}
	// Output:
	// digest true next: 9:15AM
	// cron: <nil>
	// digest@1798794900000 9:15AM
	// digest@1798795800000 9:30AM
}

// Errors carry the contract's code; branch with errors.Is.
func ExampleError() {
	srv := clienttest.NewServer()
	defer srv.Close()
	srv.SetToken("reader-token", "reader")
	c, _ := client.New([]string{srv.Addr()}, client.WithToken("reader-token"))
	defer c.Close()
	ctx := context.Background()

	_, err := c.GetJob(ctx, "default", "nope")
	fmt.Println(errors.Is(err, client.ErrNotFound), err)

	_, _, err = c.CreateJob(ctx, "default", client.Job{ID: "x", Delay: "1m", Route: "r"})
	fmt.Println(errors.Is(err, client.ErrPermissionDenied))

	var e *client.Error
	if errors.As(err, &e) {
		fmt.Println(e.HTTPStatus, e.Code)
	}
	// Output:
	// true timemachine: not_found (HTTP 404): job "nope" does not exist in collection "default"
	// true
	// 403 permission_denied
}

// Retries: reads and writes that are safe to send twice ride out 503 and
// 429 answers, honouring Retry-After; see RetryConfig.
func ExampleWithRetry() {
	srv := clienttest.NewServer()
	defer srv.Close()
	c, _ := client.New([]string{srv.Addr()}, client.WithRetry(client.RetryConfig{
		MaxAttempts:    4,
		InitialBackoff: 10 * time.Millisecond,
		MaxElapsed:     5 * time.Second,
	}))
	defer c.Close()

	srv.FailNext(2, 503, 0) // no leader for a moment
	info, err := c.Cluster(context.Background())
	fmt.Println(info.SlotCount, err)
	// Output:
	// 12 <nil>
}

func ptr[T any](v T) *T { return &v }
