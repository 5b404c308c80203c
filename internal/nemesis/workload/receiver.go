package workload

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/timemachine-db/timemachine/internal/nemesis/history"
)

// Policy is how the receiver answers, as fractions of the deliveries (the
// rest get 200 at once). The choice for a delivery is a hash of the run's
// seed, its Idempotency-Key, attempt and copy number, so a replay of a
// seed answers the same delivery the same way.
type Policy struct {
	Fail  float64 // 500: the job is retried
	Slow  float64 // 200 after 0.5–3 s (past a 2 s callback timeout: a timeout, retried)
	Close float64 // close the connection without answering
}

// DefaultPolicy exercises retries, timeouts and dropped connections.
var DefaultPolicy = Policy{Fail: 0.07, Slow: 0.04, Close: 0.02}

// Recorder is what the receiver needs of the run's record.
type Recorder interface {
	Delivery(d history.Delivery)
}

// Receiver is the webhook receiver: it records every callback request
// with the checker's clock and answers as the policy says.
type Receiver struct {
	clock  *history.Clock
	rec    Recorder
	policy Policy
	seed   uint64
	from   func(ip string) string // source address → node id ("" unknown)
	srv    *http.Server
	ln     net.Listener

	mu     sync.Mutex
	seq    int64
	copies map[string]int            // Idempotency-Key/attempt → deliveries so far
	got    map[string]map[int64]bool // job key → triggers delivered
}

// NewReceiver serves ln. from maps a source IP to the node that sent the
// request (nil: unknown).
func NewReceiver(ln net.Listener, clock *history.Clock, rec Recorder, policy Policy, seed uint64, from func(ip string) string) *Receiver {
	r := &Receiver{clock: clock, rec: rec, policy: policy, seed: seed, from: from, ln: ln,
		copies: map[string]int{}, got: map[string]map[int64]bool{}}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r
}

// URL is the receiver's base URL.
func (r *Receiver) URL() string { return "http://" + r.ln.Addr().String() }

// Close stops serving.
func (r *Receiver) Close() error { return r.srv.Close() }

// Delivered reports whether coll/id was delivered with this trigger time.
func (r *Receiver) Delivered(coll, id string, trigger int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[coll+"/"+id][trigger]
}

// Count is the number of deliveries so far.
func (r *Receiver) Count() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seq
}

type payload struct {
	ID          string `json:"id"`
	Collection  string `json:"collection"`
	TriggerTime int64  `json:"trigger_time"`
	Attempt     int    `json:"attempt"`
}

// answer picks the reply for the n-th copy of (key, attempt).
func (r *Receiver) answer(key string, attempt, n int) (string, time.Duration) {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], r.seed)
	h.Write(b[:])
	fmt.Fprintf(h, "%s|%d|%d", key, attempt, n)
	x := mix(h.Sum64())
	u := float64(x>>11) / (1 << 53)
	p := r.policy
	switch {
	case u < p.Fail:
		return "500", 0
	case u < p.Fail+p.Slow:
		return "slow-200", 500*time.Millisecond + time.Duration(x%2500)*time.Millisecond
	case u < p.Fail+p.Slow+p.Close:
		return "close", 0
	}
	return "200", 0
}

// mix is splitmix64's finalizer: FNV-1a alone barely changes the high
// bits when only the last input byte differs (copy 0 and copy 1 of a
// delivery would nearly always get the same answer).
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	d := history.Delivery{Recv: r.clock.Now(), IdemKey: req.Header.Get("Idempotency-Key")}
	if req.URL.Path == RoutePath {
		r.serveRoute(w, req, body, d)
		return
	}
	if ip, _, e := net.SplitHostPort(req.RemoteAddr); e == nil {
		d.FromAddr = ip
		if r.from != nil {
			d.From = r.from(ip)
		}
	}
	var p payload
	switch {
	case err != nil:
		d.Bad = "reading the body: " + err.Error()
	case json.Unmarshal(body, &p) != nil || p.ID == "" || p.Collection == "":
		d.Bad = fmt.Sprintf("not a callback body: %.200q", body)
	}
	d.Coll, d.JobID, d.Trigger, d.Attempt = p.Collection, p.ID, p.TriggerTime, p.Attempt
	if a, err := strconv.Atoi(req.Header.Get("X-Timemachine-Attempt")); err == nil {
		d.AttemptHeader = a
	} else if d.Bad == "" {
		d.Bad = fmt.Sprintf("X-Timemachine-Attempt %q", req.Header.Get("X-Timemachine-Attempt"))
	}

	r.mu.Lock()
	r.seq++
	d.Seq = r.seq
	ck := d.IdemKey + "/" + strconv.Itoa(d.AttemptHeader)
	n := r.copies[ck]
	r.copies[ck] = n + 1
	if d.Bad == "" {
		k := d.Key()
		if r.got[k] == nil {
			r.got[k] = map[int64]bool{}
		}
		r.got[k][d.Trigger] = true
	}
	r.mu.Unlock()

	answer, delay := r.answer(d.IdemKey, d.AttemptHeader, n)
	d.Answer = answer
	switch answer {
	case "close":
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				// Recorded before the close, like every other answer is
				// recorded before the handler returns and its response
				// leaves: a sender that saw the answer finds the
				// delivery in the log (the close used to come first, and
				// a test counting deliveries right after the last one
				// sometimes missed it).
				d.Reply = r.clock.Now()
				r.rec.Delivery(d)
				c.Close()
				return
			}
		}
		w.WriteHeader(http.StatusInternalServerError) // cannot hijack: a 500 instead
		d.Answer = "500"
	case "500":
		w.WriteHeader(http.StatusInternalServerError)
	case "slow-200":
		select {
		case <-time.After(delay):
			w.WriteHeader(http.StatusOK)
		case <-req.Context().Done():
			d.Answer = "gone" // the sender gave up (its callback timeout)
		}
	default:
		w.WriteHeader(http.StatusOK)
	}
	d.Reply = r.clock.Now()
	r.rec.Delivery(d)
}

// serveRoute answers the capped route's callbacks: each is held open for
// RouteHold, then answered 200, and recorded with its route so the
// in-flight checker can count the requests open at once.
func (r *Receiver) serveRoute(w http.ResponseWriter, req *http.Request, body []byte, d history.Delivery) {
	d.Route = "capped"
	var p payload
	if json.Unmarshal(body, &p) == nil {
		d.Coll, d.JobID, d.Trigger, d.Attempt = p.Collection, p.ID, p.TriggerTime, p.Attempt
	}
	if ip, _, e := net.SplitHostPort(req.RemoteAddr); e == nil {
		d.FromAddr = ip
		if r.from != nil {
			d.From = r.from(ip)
		}
	}
	r.mu.Lock()
	r.seq++
	d.Seq = r.seq
	r.mu.Unlock()
	time.Sleep(RouteHold)
	w.WriteHeader(http.StatusOK)
	d.Answer = "200"
	d.Reply = r.clock.Now()
	r.rec.Delivery(d)
}
