package workload

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"time"
)

// RoutePath is the receiver's path for the capped route's callbacks;
// RouteHold is how long it keeps each one open, so that requests from
// several nodes would overlap if the cap did not hold.
const (
	RoutePath = "/route/capped"
	RouteHold = 30 * time.Millisecond
)

// Capped creates one job through a route every Every, due TriggerMin to
// TriggerMax later, in collection Coll, until ctx ends. Its jobs are not
// the workload's: they are not recorded as operations (the
// linearizability and fire checkers do not see them); their deliveries
// feed the in-flight checker. Errors are counted, not retried.
type Capped struct {
	Route, Coll            string
	Every                  time.Duration
	TriggerMin, TriggerMax time.Duration
	Seed                   uint64
	Client                 *http.Client
	Targets                func() []Endpoint
	Created, Failed        int
}

// Run creates jobs until ctx ends.
func (c *Capped) Run(ctx context.Context) {
	rng := rand.New(rand.NewPCG(c.Seed, 0xcafe))
	t := time.NewTicker(c.Every)
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		eps := c.Targets()
		if len(eps) == 0 {
			continue
		}
		ep := eps[n%len(eps)]
		span := int64(c.TriggerMax - c.TriggerMin)
		due := time.Now().Add(c.TriggerMin + time.Duration(rng.Int64N(max(span, 1)))).UnixMilli()
		body, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("capped-%d", n), "trigger_time": due, "route": c.Route})
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		req, err := http.NewRequestWithContext(rctx, http.MethodPost, "http://"+ep.HTTPAddr+"/v1/collections/"+c.Coll+"/jobs", bytes.NewReader(body))
		if err != nil {
			cancel()
			panic(err) // a URL of our own making
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusCreated {
				c.Created++
			} else {
				c.Failed++
			}
		} else {
			c.Failed++
		}
		cancel()
	}
}
