package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
)

const usage = `usage:
  vsasynq create --redis ADDR [--jobs N] [--concurrency C] [--json]
  vsasynq timers --redis ADDR [--jobs N] (--window D | --at-once) [--lead D] [--json]
  vsasynq table  asynq=FILE.json|timemachine=FILE.json ...`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "create", "timers":
		err = runAsynq(ctx, os.Args[1], os.Args[2:])
	case "table":
		err = runTable(os.Stdout, os.Args[2:])
	default:
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "vsasynq:", err)
		os.Exit(1)
	}
}

// runTable reads system=file pairs and prints the comparison table.
func runTable(w io.Writer, args []string) error {
	var results []*Result
	for _, a := range args {
		system, file, ok := cutEq(a)
		if !ok {
			return fmt.Errorf("argument %q: want asynq=FILE or timemachine=FILE", a)
		}
		f, err := os.Open(file)
		if err != nil {
			return fmt.Errorf("open report: %w", err)
		}
		r, err := decodeResult(f, system)
		f.Close()
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	writeTable(w, results)
	return nil
}

func cutEq(s string) (string, string, bool) {
	for i := range len(s) {
		if s[i] == '=' {
			return s[:i], s[i+1:], i > 0 && i < len(s)-1
		}
	}
	return "", "", false
}

type config struct {
	redis       string
	jobs        int
	concurrency int
	window      time.Duration
	atOnce      bool
	lead        time.Duration
	wait        time.Duration
	workers     int
	poll        time.Duration
	metaBytes   int
	json        bool
}

func runAsynq(ctx context.Context, cmd string, args []string) error {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	var c config
	fs.StringVar(&c.redis, "redis", "127.0.0.1:6379", "Redis address")
	fs.IntVar(&c.jobs, "jobs", 100000, "tasks to enqueue (bounded: at most 1,000,000)")
	fs.IntVar(&c.concurrency, "concurrency", 64, "concurrent enqueuing goroutines, one task per request")
	fs.DurationVar(&c.window, "window", 0, "timers: spread due times evenly over this span")
	fs.BoolVar(&c.atOnce, "at-once", false, "timers: every task due at one instant")
	fs.DurationVar(&c.lead, "lead", 5*time.Second, "timers: time from the start to the first due time")
	fs.DurationVar(&c.wait, "wait", 30*time.Second, "timers: how long to wait for missing deliveries after the last due time")
	fs.IntVar(&c.workers, "workers", 100, "timers: asynq server concurrency (workers)")
	fs.DurationVar(&c.poll, "poll", 100*time.Millisecond, "timers: asynq's scheduled-task and queue poll interval")
	fs.IntVar(&c.metaBytes, "meta-bytes", 16, "payload bytes per task besides its index and due time")
	fs.BoolVar(&c.json, "json", false, "print the result as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.jobs <= 0 || c.jobs > 1_000_000 || c.concurrency <= 0 {
		return errors.New("--jobs must be 1..1,000,000 and --concurrency > 0")
	}
	var r Result
	var err error
	if cmd == "create" {
		r, err = runCreate(ctx, c)
	} else {
		if c.window <= 0 && !c.atOnce {
			return errors.New("timers needs --window or --at-once")
		}
		r, err = runTimers(ctx, c)
	}
	if err != nil {
		return err
	}
	r.System = "asynq"
	if c.json {
		return json.NewEncoder(os.Stdout).Encode(r)
	}
	fmt.Printf("asynq %s: %d/%d created in %.3f s = %.0f tasks/s", r.Mode, r.JobsCreated, r.JobsRequested, r.CreateSeconds, r.CreateRate)
	if r.Mode != "create_only" {
		fmt.Printf("; fired %d, missing %d, duplicates %d, early %d (worst %.1f ms); lateness p50 %.1f p99 %.1f max %.1f ms; %.0f fires/s",
			r.Fired, r.Missing, r.Duplicates, r.Early, r.WorstEarlyMs, r.Lateness.P50, r.Lateness.P99, r.Lateness.Max, r.FireRate)
		if r.Mode == "at_once" {
			fmt.Printf("; drained in %.3f s", r.DrainSeconds)
		}
	}
	fmt.Println()
	return nil
}

// payload encodes a task's index and due time (Unix nanoseconds) and pads it
// to the meta size, like a bench job's meta.
func payload(i int, due time.Time, meta int) []byte {
	b := make([]byte, 16+meta)
	binary.BigEndian.PutUint64(b, uint64(i))
	binary.BigEndian.PutUint64(b[8:], uint64(due.UnixNano()))
	return b
}

// enqueueAll enqueues c.jobs tasks, one per request from c.concurrency
// goroutines, each due at dueAt(i); it records each acknowledgement time in
// acked and returns the span from the first request to the last ack.
func enqueueAll(ctx context.Context, c config, dueAt func(int) time.Time, acked []time.Time) (time.Duration, error) {
	client := asynq.NewClient(asynq.RedisClientOpt{Addr: c.redis})
	defer client.Close()
	var next atomic.Int64
	var errs atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	var last atomic.Int64
	for range c.concurrency {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= c.jobs {
					return
				}
				due := dueAt(i)
				t := asynq.NewTask("bench", payload(i, due, c.metaBytes))
				_, err := client.EnqueueContext(ctx, t, asynq.ProcessAt(due), asynq.MaxRetry(3))
				now := time.Now()
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				acked[i] = now
				for {
					l := last.Load()
					if now.UnixNano() <= l || last.CompareAndSwap(l, now.UnixNano()) {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	if n := errs.Load(); n > 0 {
		slog.Warn("enqueue errors", "count", n, "first", firstErr.Load())
	}
	if last.Load() == 0 {
		return 0, fmt.Errorf("no task enqueued: %v", firstErr.Load())
	}
	return time.Unix(0, last.Load()).Sub(start), ctx.Err()
}

// runCreate measures single-task enqueues of far-future tasks (Redis's
// scheduled set), as `timemachine bench --create-only` creates far-future
// jobs.
func runCreate(ctx context.Context, c config) (Result, error) {
	acked := make([]time.Time, c.jobs)
	far := time.Now().Add(time.Hour)
	span, err := enqueueAll(ctx, c, func(int) time.Time { return far }, acked)
	r := Result{Mode: "create_only", JobsRequested: c.jobs, Batch: 1, Concurrency: c.concurrency}
	for _, a := range acked {
		if !a.IsZero() {
			r.JobsCreated++
		}
	}
	r.CreateSeconds = span.Seconds()
	if span > 0 {
		r.CreateRate = float64(r.JobsCreated) / span.Seconds()
	}
	return r, err
}

// receiver records the first receive time of each task's callback.
type receiver struct {
	mu         sync.Mutex
	first      []time.Time
	duplicates int
	got        atomic.Int64
	done       chan struct{}
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	i, err := strconv.Atoi(r.URL.Query().Get("i"))
	_, _ = io.Copy(io.Discard, r.Body)
	if err != nil || i < 0 || i >= len(rc.first) {
		http.Error(w, "bad index", http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	if rc.first[i].IsZero() {
		rc.first[i] = now
		if rc.got.Add(1) == int64(len(rc.first)) {
			close(rc.done)
		}
	} else {
		rc.duplicates++
	}
	rc.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// runTimers enqueues timers, runs an asynq server whose handler POSTs each
// task to a local receiver, and measures lateness, early deliveries and the
// fire rate as `timemachine bench` does.
func runTimers(ctx context.Context, c config) (Result, error) {
	rc := &receiver{first: make([]time.Time, c.jobs), done: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Result{}, fmt.Errorf("receiver listen: %w", err)
	}
	hs := &http.Server{Handler: rc, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	url := "http://" + ln.Addr().String() + "/cb?i="

	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		MaxIdleConns: c.workers, MaxIdleConnsPerHost: c.workers,
	}}
	srv := asynq.NewServer(asynq.RedisClientOpt{Addr: c.redis}, asynq.Config{
		Concurrency:              c.workers,
		TaskCheckInterval:        c.poll,
		DelayedTaskCheckInterval: c.poll,
		LogLevel:                 asynq.WarnLevel,
	})
	handler := asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		p := t.Payload()
		if len(p) < 16 {
			return errors.New("short payload")
		}
		i := binary.BigEndian.Uint64(p)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+strconv.FormatUint(i, 10), nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("receiver answered %d", resp.StatusCode)
		}
		return nil
	})
	if err := srv.Start(handler); err != nil {
		return Result{}, fmt.Errorf("asynq server: %w", err)
	}
	defer srv.Shutdown()

	start := time.Now()
	d := &deliveries{due: make([]time.Time, c.jobs), acked: make([]time.Time, c.jobs)}
	first := start.Add(c.lead)
	for i := range d.due {
		if c.atOnce {
			d.due[i] = first
		} else {
			d.due[i] = first.Add(time.Duration(int64(c.window) * int64(i) / int64(c.jobs)))
		}
	}
	span, err := enqueueAll(ctx, c, func(i int) time.Time { return d.due[i] }, d.acked)
	if err != nil {
		return Result{}, err
	}
	deadline := time.NewTimer(time.Until(d.due[len(d.due)-1].Add(c.wait)))
	defer deadline.Stop()
	timedOut := false
	select {
	case <-rc.done:
	case <-deadline.C:
		timedOut = true
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	rc.mu.Lock()
	d.first = append([]time.Time(nil), rc.first...)
	d.duplicates = rc.duplicates
	rc.mu.Unlock()
	mode := "window"
	if c.atOnce {
		mode = "at_once"
	}
	r := d.result(mode)
	r.Batch, r.Concurrency = 1, c.concurrency
	r.WindowSeconds = c.window.Seconds()
	r.CreateSeconds = span.Seconds()
	if span > 0 {
		r.CreateRate = float64(r.JobsCreated) / span.Seconds()
	}
	r.TimedOut = timedOut && r.Missing > 0
	return r, nil
}
