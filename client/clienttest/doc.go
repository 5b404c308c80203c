// Package clienttest is an in-memory fake of the timemachine HTTP API
// (docs/api.md: jobs, collections, routes, cluster and admin, security) for tests of code that uses package client, and for
// the client's own examples.
//
//	srv := clienttest.NewServer()
//	defer srv.Close()
//	c, _ := client.New([]string{srv.Addr()})
//
// It keeps jobs, schedules, collections and routes in memory and answers
// with the contract's shapes, status codes and error bodies: creates that
// are repeated with the same spec answer 200, a different spec 409, PUT
// honours If-Match, lists page by (trigger_time, id) with opaque cursors,
// secrets are never echoed, tokens (SetToken) give 401/403 by role.
//
// It is not the server. Nothing fires: jobs stay scheduled until a test
// marks them with Fail or Succeed (dead letters for redrive tests), and a
// schedule's occurrences appear only through Occur. Cron schedules get no
// next_fire_at (every-schedules do). The cluster is a fixed single node
// unless SetCluster says otherwise. FailNext injects 503/429 answers to
// exercise retries.
package clienttest
