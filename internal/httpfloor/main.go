// Command httpfloor is the floor under a single create's cost: an HTTP
// server that answers `timemachine bench --create-only` as a node would
// (201 and a job object) while storing nothing, so that the bench against
// it measures what HTTP on loopback and the load generator cost alone, on
// the same cores (scripts/http-floor.sh, docs/benchmarks.md). -mode nop
// answers a fixed body; -mode json decodes each request's job and encodes
// the answer with encoding/json, as a minimal real handler would.
package main

import (
	"encoding/json"
	"flag"
	"log"
	"time"

	"github.com/valyala/fasthttp"
)

// job is the part of a job object the floor decodes and answers.
type job struct {
	ID          string          `json:"id"`
	TriggerTime int64           `json:"trigger_time"`
	CallbackURL string          `json:"callback_url,omitempty"`
	Route       string          `json:"route,omitempty"`
	Meta        json.RawMessage `json:"meta,omitempty"`
	Collection  string          `json:"collection"`
	Status      string          `json:"status"`
	Version     int64           `json:"version"`
	CreatedAt   int64           `json:"created_at"`
	UpdatedAt   int64           `json:"updated_at"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:28990", "listen address (loopback)")
	mode := flag.String("mode", "nop", "nop: a fixed answer; json: decode the job and encode the answer")
	flag.Parse()
	if *mode != "nop" && *mode != "json" {
		log.Fatalf("httpfloor: -mode %q: want nop or json", *mode)
	}
	fixed := []byte(`{"id":"x","collection":"bench","trigger_time":1893456000000,"callback_url":"http://127.0.0.1:9/hook","meta":{},"status":"scheduled","attempts":0,"version":1,"created_at":1,"updated_at":1}`)
	h := func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("application/json")
		ctx.SetStatusCode(fasthttp.StatusCreated)
		if string(ctx.Method()) == fasthttp.MethodPut { // the bench's collection
			ctx.SetBodyString(`{"name":"bench"}`)
			return
		}
		if *mode == "nop" {
			ctx.SetBody(fixed)
			return
		}
		var j job
		if err := json.Unmarshal(ctx.PostBody(), &j); err != nil {
			ctx.SetStatusCode(fasthttp.StatusBadRequest)
			ctx.SetBodyString(`{"error":{"code":"invalid_argument","message":"bad job"}}`)
			return
		}
		now := time.Now().UnixMilli()
		j.Collection, j.Status, j.Version, j.CreatedAt, j.UpdatedAt = "bench", "scheduled", 1, now, now
		b, err := json.Marshal(&j)
		if err != nil {
			ctx.SetStatusCode(fasthttp.StatusInternalServerError)
			return
		}
		ctx.SetBody(b)
	}
	log.Fatal((&fasthttp.Server{Handler: h}).ListenAndServe(*addr))
}
