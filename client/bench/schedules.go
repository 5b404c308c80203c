package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/timemachine-db/timemachine/client"
	"github.com/valyala/fasthttp"
)

// ScheduleConfig describes a schedules run: Schedules "every: 1s"
// schedules whose first occurrences are spread evenly over one second, so
// the cluster fires Schedules occurrences per second; the occurrences due
// in a measuring window of Duration are checked (once each, none early)
// and their lateness measured. The schedules are deleted at the end.
type ScheduleConfig struct {
	Addrs       []string
	Collection  string
	Schedules   int
	Every       time.Duration // default 1s
	Duration    time.Duration // the measuring window (default 20s)
	Warmup      time.Duration // from the last PUT to the window (default 3s)
	Concurrency int           // concurrent PUTs and DELETEs (default 64)
	// ReceiverAddr is where the webhook receiver listens; CallbackAddr,
	// if set, is the host:port written into callback_url.
	ReceiverAddr, CallbackAddr string
	IDPrefix                   string
	Token, CAFile              string
	// Pipeline: the schedules name a route with "pipeline": true (made
	// for the run and deleted after it) instead of a callback_url.
	Pipeline bool
}

// ScheduleReport is the result of a schedules run.
type ScheduleReport struct {
	Schedules      int     `json:"schedules"`
	EverySeconds   float64 `json:"every_seconds"`
	WindowSeconds  float64 `json:"window_seconds"`
	PutSeconds     float64 `json:"put_seconds"`
	Expected       int64   `json:"expected_occurrences"`
	Delivered      int64   `json:"delivered_occurrences"`
	Missing        int64   `json:"missing"`
	Duplicates     int64   `json:"duplicates"`
	Early          int64   `json:"early"`
	OffGrid        int64   `json:"off_grid"`
	FiresPerSecond float64 `json:"fires_per_second"`
	Lateness       Latency `json:"lateness_ms"`
	// PerSecond is the lateness of the occurrences due in each second of
	// the window, in order: where a tail comes from (a few bad seconds,
	// a stall of the whole cluster, or every second alike).
	PerSecond       []SecondLateness `json:"per_second,omitempty"`
	DeleteSeconds   float64          `json:"delete_seconds"`
	AfterDelete     int64            `json:"after_delete"`
	ReceiverAddress string           `json:"receiver_addr"`
}

func (r *ScheduleReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "schedules %d every %gs; PUT in %.1fs; window %gs\n", r.Schedules, r.EverySeconds, r.PutSeconds, r.WindowSeconds)
	fmt.Fprintf(&b, "occurrences due in the window: %d, delivered %d (%.0f/s), missing %d, duplicates %d, early %d, off grid %d\n",
		r.Expected, r.Delivered, r.FiresPerSecond, r.Missing, r.Duplicates, r.Early, r.OffGrid)
	l := r.Lateness
	fmt.Fprintf(&b, "lateness ms over %d: p50 %.1f  p90 %.1f  p99 %.1f  p99.9 %.1f  max %.1f\n", l.Samples, l.P50, l.P90, l.P99, l.P999, l.Max)
	if len(r.PerSecond) > 0 {
		b.WriteString("lateness p99 ms by second of the window:")
		for _, s := range r.PerSecond {
			fmt.Fprintf(&b, " %.0f", s.P99)
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "deleted in %.1fs; occurrences after the delete: %d", r.DeleteSeconds, r.AfterDelete)
	return b.String()
}

// SecondLateness is the lateness of the occurrences due in one second of
// a schedules run's window (Second counts from the window's start).
type SecondLateness struct {
	Second int     `json:"second"`
	N      int     `json:"occurrences"`
	P50    float64 `json:"p50_ms"`
	P99    float64 `json:"p99_ms"`
	Max    float64 `json:"max_ms"`
}

// perSecond groups first-delivery lateness (ns) by the second of the
// window the occurrence was due in (at, ms).
func perSecond(from, to int64, at, late []int64) []SecondLateness {
	n := int((to - from + 999) / 1000)
	if n <= 0 {
		return nil
	}
	by := make([][]int64, n)
	for i, a := range at {
		if a < from {
			continue // (a-from)/1000 truncates toward zero
		}
		if k := int((a - from) / 1000); k < n {
			by[k] = append(by[k], late[i])
		}
	}
	out := make([]SecondLateness, n)
	for k, ns := range by {
		l := summarize(ns)
		out[k] = SecondLateness{Second: k, N: l.Samples, P50: l.P50, P99: l.P99, Max: l.Max}
	}
	return out
}

// schedRecv records occurrence deliveries: per schedule, per occurrence.
type schedRecv struct {
	prefix string
	start  []int64 // schedule i's first occurrence (ms)
	every  int64

	mu      sync.Mutex
	seen    map[[2]int64]int // (schedule, occurrence ms) → deliveries
	late    []int64          // ns, occurrences in the window
	lateAt  []int64          // ms, the occurrence of each late entry
	from    int64            // window, ms
	to      int64
	early   int64
	offGrid int64
	total   atomic.Int64
}

var keySched = []byte(`"schedule"`)

func (r *schedRecv) handle(ctx *fasthttp.RequestCtx) {
	now := time.Now().UnixNano()
	ctx.SetStatusCode(200)
	body := ctx.PostBody()
	v := valueOf(body, keyID)
	if len(v) < 2 || v[0] != '"' || len(valueOf(body, keySched)) == 0 {
		return
	}
	end := 1
	for end < len(v) && v[end] != '"' {
		end++
	}
	id := string(v[1:end])
	name, atText, ok := strings.Cut(id, "@")
	if !ok || !strings.HasPrefix(name, r.prefix) {
		return
	}
	i, err1 := strconv.Atoi(name[len(r.prefix):])
	at, err2 := strconv.ParseInt(atText, 10, 64)
	if err1 != nil || err2 != nil || i < 0 || i >= len(r.start) {
		return
	}
	r.total.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	k := [2]int64{int64(i), at}
	r.seen[k]++
	if (at-r.start[i])%r.every != 0 {
		r.offGrid++
	}
	if now < at*int64(time.Millisecond) {
		r.early++
	}
	if r.seen[k] == 1 && at >= r.from && at < r.to {
		r.late = append(r.late, now-at*int64(time.Millisecond))
		r.lateAt = append(r.lateAt, at)
	}
}

// RunSchedules runs a schedules bench (see ScheduleConfig).
func RunSchedules(ctx context.Context, cfg ScheduleConfig, out io.Writer) (*ScheduleReport, error) {
	if len(cfg.Addrs) == 0 || cfg.Schedules <= 0 {
		return nil, errors.New("bench: need server addresses and a positive schedule count")
	}
	if out == nil {
		out = io.Discard
	}
	if cfg.Collection == "" {
		cfg.Collection = DefaultCollection
	}
	if cfg.Every <= 0 {
		cfg.Every = time.Second
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 20 * time.Second
	}
	if cfg.Warmup <= 0 {
		cfg.Warmup = 3 * time.Second
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 64
	}
	if cfg.ReceiverAddr == "" {
		cfg.ReceiverAddr = DefaultReceiverAddr
	}
	if cfg.IDPrefix == "" {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		cfg.IDPrefix = "s" + hex.EncodeToString(b)
	}
	opts := []client.Option{client.WithTimeout(DefaultRequestTimeout), client.WithMaxConns(cfg.Concurrency), client.WithUserAgent("timemachine-bench"), client.WithFastHTTP()}
	if cfg.Token != "" {
		opts = append(opts, client.WithToken(cfg.Token))
	}
	if cfg.CAFile != "" {
		opts = append(opts, client.WithCAFile(cfg.CAFile))
	}
	c, err := client.New(cfg.Addrs, opts...)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer c.Close()

	every := cfg.Every.Milliseconds()
	rcv := &schedRecv{prefix: cfg.IDPrefix + "-", start: make([]int64, cfg.Schedules), every: every, seen: map[[2]int64]int{}}
	ln, err := net.Listen("tcp", cfg.ReceiverAddr)
	if err != nil {
		return nil, fmt.Errorf("bench: receiver listen %s: %w", cfg.ReceiverAddr, err)
	}
	srv := &fasthttp.Server{Handler: rcv.handle, Name: "timemachine-bench", IdleTimeout: time.Minute, ReadTimeout: time.Minute, WriteTimeout: 10 * time.Second, CloseOnShutdown: true}
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Shutdown(); _ = ln.Close() }()
	cb := cfg.CallbackAddr
	if cb == "" {
		cb = ln.Addr().String()
	}
	rep := &ScheduleReport{Schedules: cfg.Schedules, EverySeconds: cfg.Every.Seconds(), WindowSeconds: cfg.Duration.Seconds(), ReceiverAddress: ln.Addr().String()}

	if _, _, err := c.PutCollection(ctx, cfg.Collection, client.Collection{Retention: CollectionRetention}); err != nil {
		return nil, fmt.Errorf("bench: create collection %q: %w", cfg.Collection, err)
	}
	// First occurrences spread evenly over one interval, starting after
	// the PUTs (estimated generously) so none is missed while they run.
	base := time.Now().Add(10*time.Second + time.Duration(cfg.Schedules/500)*time.Second).UnixMilli()
	for i := range rcv.start {
		rcv.start[i] = base + int64(i)*every/int64(cfg.Schedules)
	}
	// cleanup deletes every schedule whatever fails: one left behind would
	// keep loading the cluster with occurrences nobody receives.
	route := ""
	if cfg.Pipeline {
		route = "bench-" + cfg.IDPrefix
		if _, _, err := c.PutRoute(ctx, route, client.Route{WebhookURL: "http://" + cb + "/s", Pipeline: true}); err != nil {
			return nil, fmt.Errorf("bench: create route %q: %w", route, err)
		}
	}
	cleanup := func() error {
		if route != "" {
			// After the schedules: an occurrence naming a deleted route
			// fails instead of reaching the receiver.
			defer func() { _ = c.DeleteRoute(context.WithoutCancel(ctx), route) }()
		}
		fmt.Fprintf(out, "bench: deleting the schedules…\n")
		delStart := time.Now()
		var (
			mu      sync.Mutex
			failed  int
			lastErr error
		)
		_ = forEach(context.WithoutCancel(ctx), cfg.Schedules, cfg.Concurrency, func(i int) error {
			err := c.DeleteSchedule(context.WithoutCancel(ctx), cfg.Collection, rcv.prefix+strconv.Itoa(i))
			if err != nil && !errors.Is(err, client.ErrNotFound) { // not found: never put, or a retried DELETE
				mu.Lock()
				failed, lastErr = failed+1, err
				mu.Unlock()
			}
			return nil
		})
		rep.DeleteSeconds = time.Since(delStart).Seconds()
		if failed > 0 {
			return fmt.Errorf("bench: %d schedules (prefix %q) could not be deleted, the last error: %w; delete them by hand", failed, rcv.prefix, lastErr)
		}
		return nil
	}
	fmt.Fprintf(out, "bench: putting %d schedules (every %s)…\n", cfg.Schedules, cfg.Every)
	putStart := time.Now()
	if err := forEach(ctx, cfg.Schedules, cfg.Concurrency, func(i int) error {
		sc := client.Schedule{Every: cfg.Every.String(), StartAt: rcv.start[i], CallbackURL: "http://" + cb + "/s"}
		if route != "" {
			sc.CallbackURL, sc.Route = "", route
		}
		_, _, err := c.PutSchedule(ctx, cfg.Collection, rcv.prefix+strconv.Itoa(i), sc)
		return err
	}); err != nil {
		return nil, errors.Join(err, cleanup())
	}
	rep.PutSeconds = time.Since(putStart).Seconds()
	from := max(time.Now().Add(cfg.Warmup).UnixMilli(), base+every)
	to := from + cfg.Duration.Milliseconds()
	rcv.mu.Lock()
	rcv.from, rcv.to = from, to
	rcv.mu.Unlock()
	fmt.Fprintf(out, "bench: %d schedules put in %.1fs; measuring occurrences due in [%s, %s)…\n", cfg.Schedules, rep.PutSeconds,
		time.UnixMilli(from).UTC().Format("15:04:05.000"), time.UnixMilli(to).UTC().Format("15:04:05.000"))
	// Wait for the window to pass, and a little for its last callbacks.
	select {
	case <-ctx.Done():
		return nil, errors.Join(ctx.Err(), cleanup())
	case <-time.After(time.Until(time.UnixMilli(to).Add(2 * time.Second))):
	}
	rcv.mu.Lock()
	for i, s := range rcv.start {
		for at := s; at < to; at += every {
			if at < from {
				continue
			}
			rep.Expected++
			n := rcv.seen[[2]int64{int64(i), at}]
			switch {
			case n == 0:
				rep.Missing++
			case n > 1:
				rep.Duplicates += int64(n - 1)
			}
			if n > 0 {
				rep.Delivered++
			}
		}
	}
	rep.Early, rep.OffGrid = rcv.early, rcv.offGrid
	rep.PerSecond = perSecond(from, to, rcv.lateAt, rcv.late)
	rep.Lateness = summarize(rcv.late) // sorts late: after perSecond
	rcv.mu.Unlock()
	rep.FiresPerSecond = float64(rep.Delivered) / cfg.Duration.Seconds()

	if err := cleanup(); err != nil {
		return rep, err
	}
	n := rcv.total.Load()
	select {
	case <-ctx.Done():
	case <-time.After(2 * cfg.Every):
	}
	rep.AfterDelete = rcv.total.Load() - n
	return rep, nil
}

// forEach runs fn(0..n-1) on conc goroutines; the first error stops it.
func forEach(ctx context.Context, n, conc int, fn func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					next.Store(int64(n))
					return
				}
			}
		}()
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}
