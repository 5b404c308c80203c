package bench

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/timemachine-db/timemachine/client"
)

// Defaults applied by Run to zero fields of Config.
const (
	DefaultCollection       = "bench"
	DefaultLead             = 3 * time.Second
	DefaultConcurrency      = 64 // single-job POSTs
	DefaultBatchConcurrency = 8  // array POSTs
	DefaultMetaBytes        = 16
	DefaultReceiverAddr     = "127.0.0.1:0"
	DefaultWaitTimeout      = 30 * time.Second
	DefaultFarFuture        = 24 * time.Hour
	DefaultSettle           = 500 * time.Millisecond
	DefaultRequestTimeout   = 30 * time.Second
	CollectionRetention     = "1h" // retention of the bench collection

	// MaxJobs bounds the per-job tables (about 29 bytes a job when firing:
	// the receiver's, then each job's lateness and due time for the report).
	MaxJobs = 100_000_000
)

// Config describes one bench run. Zero fields take the defaults above.
type Config struct {
	// Addrs are the HTTP addresses ("host:port") of the nodes; creates are
	// spread over all of them.
	Addrs []string
	// Collection receives the jobs. It is created (PUT) first with a
	// retention of 1h, so finished bench jobs do not linger.
	Collection string
	// Jobs is how many jobs to create.
	Jobs int
	// Window spreads the trigger times evenly over this span: job i fires at
	// first + i*Window/(Jobs-1). Ignored with AtOnce. A zero Window without
	// AtOnce also puts every job at the same instant.
	Window time.Duration
	// AtOnce puts every trigger at one instant (start+Lead), to measure how
	// fast the cluster drains a burst.
	AtOnce bool
	// Lead is the time from the start of the create phase to the first
	// trigger. Jobs whose create is acknowledged after their trigger time are
	// counted as CreatedLate and left out of the lateness figures. Zero
	// takes the default (3s); for "due now" use a tiny value such as 1ms.
	Lead time.Duration
	// Batch is the number of jobs per POST: 1 posts single objects, more
	// posts arrays (at most 1000).
	Batch int
	// Concurrency is the number of concurrent create requests (default 64
	// for single POSTs, 8 for batches).
	Concurrency int
	// MetaBytes is the length of the string in each job's meta ({"p":"…"}).
	// Zero takes the default (16); negative sends no meta.
	MetaBytes int
	// ReceiverAddr is where the webhook receiver listens.
	ReceiverAddr string
	// CallbackAddr, if set, is the "host:port" written into callback_url
	// instead of the receiver's listen address (a receiver on 0.0.0.0, or
	// behind NAT, reached by a remote cluster).
	CallbackAddr string
	// ReceiverStatus is the status the receiver answers every delivery with
	// (default 200). A retryable status makes the cluster retry, which shows
	// up as duplicates.
	ReceiverStatus int
	// WaitTimeout is how long after the last trigger (or the last create
	// acknowledgement, if later) the run waits for missing deliveries.
	WaitTimeout time.Duration
	// Settle is how long the receiver keeps listening after every created
	// job has been delivered, to count late duplicates (default 500ms).
	Settle time.Duration
	// CreateOnly creates jobs with far-future triggers (FarFuture + Lead
	// from now), does not start a receiver and reports only the create
	// phase: the way to load millions of pending jobs.
	CreateOnly bool
	// FarFuture is the trigger offset used by CreateOnly (default 24h).
	FarFuture time.Duration
	// IDPrefix starts every job id ("<prefix>-<n>"). Default: random per
	// run, so runs never collide with each other's jobs.
	IDPrefix string
	// RequestTimeout bounds one create request (default 30s).
	RequestTimeout time.Duration
	// Token is sent as Authorization: Bearer (servers with --auth-file;
	// it needs the admin role: the run creates its collection).
	Token string
	// CAFile trusts this CA for HTTPS; Addrs may then be host:port.
	CAFile string

	// Route delivery control (docs/api.md#route-delivery-control): when
	// any is set, the run creates a route to its receiver with these
	// limits and the jobs name it instead of a callback_url.
	RateLimit   float64       // rate_limit.per_second
	Burst       int           // rate_limit.burst (0: the server's default)
	MaxInFlight int           // max_in_flight
	BatchJobs   int           // batch.max_jobs
	BatchWait   time.Duration // batch.max_wait
	Pipeline    bool          // pipeline: callbacks HTTP/1.1-pipelined (the receiver answers in order)
}

// routed reports whether the run delivers through a route: pipelining is
// a route setting too, though it limits nothing.
func (cfg *Config) routed() bool {
	return cfg.RateLimit > 0 || cfg.MaxInFlight > 0 || cfg.BatchJobs > 0 || cfg.Pipeline
}

// withDefaults returns cfg with zero fields filled in, or an error for a
// configuration that cannot run.
func (cfg Config) withDefaults() (Config, error) {
	if len(cfg.Addrs) == 0 {
		return cfg, errors.New("bench: no server addresses")
	}
	if cfg.Jobs <= 0 || cfg.Jobs > MaxJobs {
		return cfg, fmt.Errorf("bench: jobs = %d, want 1..%d", cfg.Jobs, MaxJobs)
	}
	if cfg.Collection == "" {
		cfg.Collection = DefaultCollection
	}
	if cfg.Window < 0 || cfg.Lead < 0 || cfg.WaitTimeout < 0 || cfg.Settle < 0 || cfg.FarFuture < 0 {
		return cfg, errors.New("bench: durations must not be negative")
	}
	if cfg.Lead == 0 {
		cfg.Lead = DefaultLead
	}
	if cfg.Window == 0 {
		cfg.AtOnce = true
	}
	if cfg.AtOnce {
		cfg.Window = 0
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 1
	}
	if cfg.Batch > client.MaxBatch {
		return cfg, fmt.Errorf("bench: batch = %d, want at most %d", cfg.Batch, client.MaxBatch)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
		if cfg.Batch > 1 {
			cfg.Concurrency = DefaultBatchConcurrency
		}
	}
	if cfg.MetaBytes == 0 {
		cfg.MetaBytes = DefaultMetaBytes
	}
	if cfg.MetaBytes > 1<<20 {
		return cfg, fmt.Errorf("bench: meta bytes = %d, want at most 1 MiB", cfg.MetaBytes)
	}
	if cfg.ReceiverAddr == "" {
		cfg.ReceiverAddr = DefaultReceiverAddr
	}
	if cfg.RateLimit < 0 || cfg.Burst < 0 || cfg.MaxInFlight < 0 || cfg.BatchJobs < 0 || cfg.BatchJobs > 1000 || cfg.BatchWait < 0 {
		return cfg, errors.New("bench: route limits must not be negative (and batch jobs at most 1000)")
	}
	if cfg.ReceiverStatus == 0 {
		cfg.ReceiverStatus = 200
	}
	if cfg.ReceiverStatus < 100 || cfg.ReceiverStatus > 599 {
		return cfg, fmt.Errorf("bench: receiver status %d is not an HTTP status", cfg.ReceiverStatus)
	}
	if cfg.WaitTimeout == 0 {
		cfg.WaitTimeout = DefaultWaitTimeout
	}
	if cfg.Settle == 0 {
		cfg.Settle = DefaultSettle
	}
	if cfg.FarFuture == 0 {
		cfg.FarFuture = DefaultFarFuture
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.IDPrefix == "" {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return cfg, fmt.Errorf("bench: random id prefix: %w", err)
		}
		cfg.IDPrefix = "b" + hex.EncodeToString(b[:])
	}
	// Ids travel unescaped in hand-built JSON and URLs: only the contract's
	// id alphabet, and room for "-<n>".
	if len(cfg.IDPrefix)+1+len(fmt.Sprint(cfg.Jobs)) > 255 {
		return cfg, fmt.Errorf("bench: id prefix %q is too long", cfg.IDPrefix)
	}
	for i := 0; i < len(cfg.IDPrefix); i++ {
		if !idByte(cfg.IDPrefix[i]) {
			return cfg, fmt.Errorf("bench: id prefix %q: byte %q is not in [A-Za-z0-9._:@~=+-]", cfg.IDPrefix, cfg.IDPrefix[i])
		}
	}
	return cfg, nil
}

func idByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '.', '_', ':', '@', '~', '=', '+', '-':
		return true
	}
	return false
}

// schedule maps a job number to its trigger time. It is a pure function of
// three numbers, so neither the creator nor the receiver stores per-job
// trigger times.
type schedule struct {
	firstMs  int64 // trigger of job 0, Unix ms
	windowMs int64 // trigger of job n-1 is firstMs+windowMs
	n        int64
}

func (s *schedule) at(i int) int64 {
	if s.n <= 1 || s.windowMs == 0 {
		return s.firstMs
	}
	return s.firstMs + int64(i)*s.windowMs/(s.n-1)
}

func (s *schedule) last() int64 { return s.at(int(s.n - 1)) }
