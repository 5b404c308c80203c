package tune

import (
	"context"
	"log/slog"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
)

// GovernorOptions tunes a Governor; zero fields take the defaults below.
type GovernorOptions struct {
	// Interval between CPU samples (default 500 ms): two wake-ups a
	// second, and the longest a burst runs on one processor.
	Interval time.Duration
	// Busy is the CPU, in cores, above which one interval brings the
	// default number of processors back (default 0.5).
	Busy float64
	// Idle is the CPU, in cores, that every interval of Quiet must stay
	// under before the governor drops to one processor (default 0.2).
	Idle float64
	// Quiet is how long the process must stay under Idle (default 5 s).
	Quiet  time.Duration
	Logger *slog.Logger
}

func (o GovernorOptions) withDefaults() GovernorOptions {
	if o.Interval <= 0 {
		o.Interval = 500 * time.Millisecond
	}
	if o.Busy <= 0 {
		o.Busy = 0.5
	}
	if o.Idle <= 0 {
		o.Idle = 0.2
	}
	if o.Quiet <= 0 {
		o.Quiet = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// GovernorEnabled reports whether a Governor would do anything in this process:
// GOMAXPROCS is not set in the environment and the runtime's default is
// more than one.
func GovernorEnabled() bool {
	return os.Getenv("GOMAXPROCS") == "" && runtime.GOMAXPROCS(0) > 1
}

// wake carries Wake's hint to the running Governor; low says whether it
// runs on one processor (so Wake costs an atomic load otherwise).
var (
	wake = make(chan struct{}, 1)
	low  atomic.Bool
)

// Wake tells the Governor that a burst of work has started (a slot's
// scheduler found a round of many due jobs at once): while it runs on one
// processor it goes back to the default now instead of at its next
// sample, so a burst due after a long quiet does not spend its first half
// second on one core. Cheap enough to call on every round.
func Wake() {
	if low.Load() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}

// state is the governor's decision, separate from the clock, the CPU
// counter and the runtime so that it can be tested as a table.
type state struct {
	low   bool          // running on one processor
	quiet time.Duration // how long every sample has stayed under Idle
}

// Decisions of step.
const (
	keep = iota
	toOne
	toDefault
)

// step takes one sample: used CPU time over elapsed wall time.
func (s *state) step(used, elapsed time.Duration, o GovernorOptions) int {
	if elapsed <= 0 {
		return keep
	}
	cores := used.Seconds() / elapsed.Seconds()
	if s.low {
		if cores > o.Busy {
			s.low, s.quiet = false, 0
			return toDefault
		}
		return keep
	}
	if cores >= o.Idle {
		s.quiet = 0
		return keep
	}
	s.quiet += elapsed
	if s.quiet >= o.Quiet {
		s.low, s.quiet = true, 0
		return toOne
	}
	return keep
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// Governor switches GOMAXPROCS between one and the runtime's default.
type Governor struct {
	o      GovernorOptions
	cpu    func() (time.Duration, error)
	now    func() time.Time
	setOne func()
	setDef func()
}

// NewGovernor returns a Governor of this process.
func NewGovernor(o GovernorOptions) *Governor {
	return &Governor{
		o:      o.withDefaults(),
		cpu:    cpuTime,
		now:    time.Now,
		setOne: func() { runtime.GOMAXPROCS(1) },
		setDef: runtime.SetDefaultGOMAXPROCS,
	}
}

// Run samples until ctx ends, then leaves the runtime's default in place.
// It returns at once, doing nothing, when the CPU time cannot be read.
func (g *Governor) Run(ctx context.Context) {
	var s state
	defer func() {
		if s.low {
			low.Store(false)
			g.setDef()
		}
	}()
	last, err := g.cpu()
	if err != nil {
		g.o.Logger.Warn("idle governor off: cannot read the process's CPU time", "error", err)
		return
	}
	lastAt := g.now()
	t := time.NewTicker(g.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
			if s.low {
				s.low, s.quiet = false, 0
				low.Store(false)
				g.setDef()
				g.o.Logger.Debug("work due: running Go on the default processors", "gomaxprocs", runtime.GOMAXPROCS(0))
			}
			continue
		case <-t.C:
		}
		used, err := g.cpu()
		if err != nil {
			continue
		}
		at := g.now()
		switch s.step(used-last, at.Sub(lastAt), g.o) {
		case toOne:
			low.Store(true)
			g.setOne()
			g.o.Logger.Debug("idle: running Go on one processor")
		case toDefault:
			low.Store(false)
			g.setDef()
			g.o.Logger.Debug("busy: running Go on the default processors", "gomaxprocs", runtime.GOMAXPROCS(0))
		}
		last, lastAt = used, at
	}
}
