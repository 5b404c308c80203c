package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/timemachine-db/timemachine/cluster"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/node"
	"github.com/timemachine-db/timemachine/storage"
	"github.com/timemachine-db/timemachine/tune"
)

func newServerCmd() *cobra.Command {
	var (
		cfg       node.Config
		logLevel  string
		logFormat string
		cacheMB   int64
		idleProcs bool
	)
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a node (alone it is a complete single-node cluster)",
		Long: `Run a timemachine node. With no flags it is a complete single-node cluster
listening on 127.0.0.1:8080 (HTTP API) and 127.0.0.1:7000 (internal port),
keeping its data in ./data. Every flag also reads TIMEMACHINE_<FLAG>
(dashes as underscores), e.g. TIMEMACHINE_HTTP_ADDR.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(logLevel, logFormat)
			if err != nil {
				return usageErr(err)
			}
			slog.SetDefault(log)
			tune.GC(0)
			raiseFileLimit(log)
			cfg.Logger = log
			cfg.CacheBytes = cacheMB << 20
			cfg.Version = version
			if idleProcs && tune.GovernorEnabled() {
				ctx, stop := context.WithCancel(context.Background())
				defer stop()
				go tune.NewGovernor(tune.GovernorOptions{Logger: log}).Run(ctx)
			}
			return runServer(cfg, log)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.NodeID, "node-id", "", "stable node name (default: derived from the hostname, then remembered in the data directory)")
	f.StringVar(&cfg.DataDir, "data-dir", node.DefaultDataDir, "directory for Pebble, raft logs and snapshots")
	f.StringVar(&cfg.HTTPAddr, "http-addr", node.DefaultHTTPAddr, "developer API, admin API, /metrics, /healthz, /readyz")
	f.StringVar(&cfg.BindAddr, "bind-addr", node.DefaultBindAddr, "the one internal TCP port: raft for every slot and node-to-node RPC")
	f.StringVar(&cfg.SerfAddr, "serf-addr", node.DefaultSerfAddr, "gossip address (TCP and UDP)")
	f.StringSliceVar(&cfg.Join, "join", nil, "serf address(es) of any existing member, comma-separated")
	f.IntVar(&cfg.BootstrapExpect, "bootstrap-expect", 1, "form the cluster when this many nodes have met")
	f.IntVar(&cfg.Slots, "slots", 0, "hash slots, fixed when the cluster forms (default 12)")
	f.IntVar(&cfg.Replicas, "replicas", 0, "replicas per slot (default min(3, nodes))")
	f.DurationVar(&cfg.FailureGrace, "failure-grace", 30*time.Second, "how long a failed node keeps its replicas before they are re-created on other nodes")
	f.IntVar(&cfg.MoveConcurrency, "move-concurrency", cluster.DefaultMaxMoves, "slots whose replicas move at once (rebalance, drain, node loss): bounds the copying load")
	f.DurationVar(&cfg.ReplicaWarnAfter, "replica-warn-after", cluster.DefaultReplicaWarnAfter, "log a warning when a slot replica stays unreachable or behind this long")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&logFormat, "log-format", "text", "text or json")
	f.StringVar(&cfg.RaftLogLevel, "raft-log-level", "warn", "log level of the raft library (trace, debug, info, warn, error)")
	f.IntVar(&cfg.FireConcurrency, "fire-concurrency", 1024, "callbacks in flight at once on this node")
	f.IntVar(&cfg.FirePerTarget, "fire-per-target", 0, "callbacks in flight at once to one target host:port, so a slow receiver cannot take the whole pool (default max(8, fire-concurrency/4))")
	f.IntVar(&cfg.MaxMetaBytes, "max-meta-bytes", model.DefaultMaxMetaBytes, fmt.Sprintf("largest meta a job may carry, in bytes (at most %d)", model.MaxMetaBytesLimit))
	f.Int64Var(&cacheMB, "cache-mb", 128, "storage block cache, in MiB")
	f.BoolVar(&idleProcs, "idle-one-proc", true, "run Go on one processor while the node is idle (under 0.2 of a core for 5 s), back on all as soon as it is busy: less CPU per idle wake-up (off when GOMAXPROCS is set)")
	f.StringVar(&cfg.PprofAddr, "pprof-addr", "", "serve Go's /debug/pprof on this address (off when empty; keep it on loopback)")
	addSecurityFlags(f, &cfg)
	f.DurationVar(&cfg.MaxClockOffset, "max-clock-offset", 250*time.Millisecond, "how far this node's clock may be from the cluster majority's; beyond it the node leads no slot (docs/api.md#the-callback)")
	// Fault injection for the nemesis (docs/reliability.md): POST
	// /v1/debug/clock shifts this process's clock. Never in production.
	f.BoolVar(&cfg.DebugFaults, "debug-faults", false, "enable POST /v1/debug/clock (fault injection for tests)")
	_ = f.MarkHidden("debug-faults")
	return cmd
}

func newLogger(level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch strings.ToLower(format) {
	case "text", "":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: use text or json", format)
}

// Exit statuses of the server besides 0 (a clean stop) and 1 (an error).
const (
	// exitStorageFatal: Pebble failed (a full disk, corruption); the node
	// stopped without closing storage (docs/operations.md#failures).
	exitStorageFatal = 70
)

// fatalExit is what the process does with an error from Node.Fatal: the
// exit status, and whether to close the node first. After a Pebble failure
// storage must not be touched again (a close could wait forever on the
// goroutine Pebble blocked in), so the process exits at once; after a
// slot's state write failed the rest of the node can still hand its
// leaderships away.
func fatalExit(err error) (code int, closeFirst bool) {
	if errors.Is(err, storage.ErrFatal) {
		return exitStorageFatal, false
	}
	return 1, true
}

// startNode starts the node while watching for a storage failure and for
// signals. Pebble failing while it opens (a full disk, a corrupt table)
// blocks Start inside Pebble for good: the process hung, ignoring SIGTERM,
// instead of exiting 70 (a black-box review). Now a failure during the
// start exits with fatalExit's code. A signal during the start stops the
// node cleanly once it has started (errStoppedWhileStarting); a second
// one, or a start still under way 30 s later, exits at once (the stores
// recover from an unclean stop, and this process acknowledged nothing).
func startNode(start func(node.Config) (*node.Node, error), cfg node.Config, sig <-chan os.Signal, log *slog.Logger) (*node.Node, error) {
	early := make(chan error, 1)
	cfg.OnFatal = func(err error) {
		select {
		case early <- err:
		default:
		}
	}
	type started struct {
		n   *node.Node
		err error
	}
	done := make(chan started, 1)
	go func() {
		n, err := start(cfg)
		done <- started{n, err}
	}()
	select {
	case r := <-done:
		return r.n, r.err
	case err := <-early:
		return nil, startFatal(err)
	case s := <-sig:
		log.Info("signal received while starting; stopping cleanly once started (send it again to exit at once)", "signal", s.String())
		select {
		case r := <-done:
			if r.err != nil {
				return nil, r.err
			}
			if err := r.n.Close(); err != nil {
				return nil, err
			}
			return nil, errStoppedWhileStarting
		case err := <-early:
			return nil, startFatal(err)
		case <-sig:
		case <-time.After(startStopWait):
		}
		log.Warn("exiting without a clean stop while starting; nothing acknowledged is lost")
		return nil, &exitError{code: 1, err: fmt.Errorf("stopped by %s while starting", s)}
	}
}

// startFatal is the exit of a storage failure during the start.
func startFatal(err error) error {
	code, _ := fatalExit(err)
	return &exitError{code: code, err: fmt.Errorf("storage failure while starting, node stopped: %w", err)}
}

// errStoppedWhileStarting: a signal came during the start, and the node
// stopped cleanly once started (exit 0).
var errStoppedWhileStarting = errors.New("stopped while starting")

// startStopWait bounds how long a signal during the start waits for the
// start to finish before the process exits without a clean stop.
var startStopWait = 30 * time.Second

// runServer runs a node until SIGINT/SIGTERM (a clean stop, exit 0) or a
// storage failure (exit 70 or 1, see fatalExit).
func runServer(cfg node.Config, log *slog.Logger) error {
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	n, err := startNode(node.Start, cfg, sig, log)
	if ce := (*node.ConfigError)(nil); errors.As(err, &ce) {
		return usageErr(err)
	}
	if errors.Is(err, errStoppedWhileStarting) {
		return nil
	}
	if errors.Is(err, storage.ErrCorruptLog) {
		// A damaged raft log: restarting cannot help (exit 70, which the
		// systemd unit does not restart after), the message says what can.
		return &exitError{code: exitStorageFatal, err: err}
	}
	if err != nil {
		return err
	}
	stopReload := reloadOnSIGHUP(n, log)
	defer stopReload()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := n.WaitReady(ctx); err == nil {
			log.Info("ready")
		}
	}()
	select {
	case s := <-sig:
		log.Info("signal received; stopping cleanly (send it again to exit at once)", "signal", s.String())
		go func() {
			<-sig
			log.Warn("second signal: exiting without a clean stop; nothing acknowledged is lost")
			os.Exit(1)
		}()
		return n.Close()
	case err := <-n.Fatal():
		code, closeFirst := fatalExit(err)
		if closeFirst {
			_ = n.Close()
		}
		return &exitError{code: code, err: fmt.Errorf("storage failure, node stopped: %w", err)}
	}
}
