package raftgroup

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
)

// ApplyFunc submits one raft entry and returns the FSM's per-command
// results (Group.Apply, possibly wrapped with a measurement).
type ApplyFunc func(data []byte) ([]model.Result, error)

// ProposerOptions configures a Proposer.
type ProposerOptions struct {
	// Workers is how many entries may be in flight at once (default 1).
	// One is usually best: writes that arrive while an entry commits form
	// the next entry, and more workers only make entries smaller.
	Workers int
	// MaxBytes and MaxCmds bound one entry.
	MaxBytes int
	MaxCmds  int
	// Linger is how long a worker waits for more proposals once it holds
	// one, when the previous entry carried more than one proposal (a sign
	// of concurrent load). Each raft entry costs a log commit — two
	// fdatasyncs and ~140 µs of CPU on the benchmark machine — so under
	// load a short wait buys far more throughput than it costs latency; a
	// lone writer never waits. Zero: never wait.
	Linger time.Duration
	// Extra, if set, returns commands appended to every entry (the slot's
	// offset proposal rides along with outcomes this way).
	Extra func() [][]byte
}

// proposal is a group of encoded commands submitted together; its results
// come back in the same order.
type proposal struct {
	cmds [][]byte
	size int
	res  []model.Result
	err  error
	done chan struct{} // closed when res/err are set
}

// lingerTimer is the part of *time.Timer a worker uses; tests replace the
// factory to count the timers left running.
type lingerTimer interface {
	C() <-chan time.Time
	Stop() bool
}

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

func newRealTimer(d time.Duration) lingerTimer { return realTimer{time.NewTimer(d)} }

// Proposer coalesces concurrent proposals into few raft entries (group
// commit): while one entry is being committed the next fills up, so under
// load an entry carries hundreds of commands for the price of one fsync,
// and with no load a lone command goes out at once.
type Proposer struct {
	apply    ApplyFunc
	o        ProposerOptions
	ch       chan *proposal
	lastSize atomic.Int32
	newTimer func(time.Duration) lingerTimer
	stop     chan struct{}
	closed   chan struct{} // closed once Close has drained the queue
	wg       sync.WaitGroup
	once     sync.Once
}

// NewProposer starts a proposer's workers.
func NewProposer(apply ApplyFunc, o ProposerOptions) *Proposer {
	return newProposer(apply, o, newRealTimer)
}

func newProposer(apply ApplyFunc, o ProposerOptions, newTimer func(time.Duration) lingerTimer) *Proposer {
	if o.Workers <= 0 {
		o.Workers = 1
	}
	p := &Proposer{
		apply:    apply,
		o:        o,
		ch:       make(chan *proposal, 8192),
		newTimer: newTimer,
		stop:     make(chan struct{}),
		closed:   make(chan struct{}),
	}
	for i := 0; i < o.Workers; i++ {
		p.wg.Add(1)
		go p.loop()
	}
	return p
}

// Propose submits commands and waits for their results. It returns
// ErrClosed once the proposer is closed, and ctx's error (wrapped) when ctx
// ends first — then the commands may still commit: the caller must treat
// that as an unknown outcome, like raft's ErrLeadershipLost.
func (p *Proposer) Propose(ctx context.Context, cmds [][]byte) ([]model.Result, error) {
	pr := &proposal{cmds: cmds, size: sizeOf(cmds), done: make(chan struct{})}
	select {
	case p.ch <- pr:
	case <-p.stop:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: not submitted", ctx.Err())
	}
	select {
	case <-pr.done:
		return pr.res, pr.err
	case <-p.closed:
		// Close answers everything queued before its last drain; a
		// proposal that slipped in after it was never submitted.
		select {
		case <-pr.done:
			return pr.res, pr.err
		default:
			return nil, ErrClosed
		}
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: outcome unknown", ctx.Err())
	}
}

func sizeOf(cmds [][]byte) int {
	n := 0
	for _, c := range cmds {
		n += len(c) + 4
	}
	return n
}

func (p *Proposer) loop() {
	defer p.wg.Done()
	var batch []*proposal
	for {
		select {
		case <-p.stop:
			p.drain()
			return
		case first := <-p.ch:
			batch = p.fill(append(batch[:0], first))
			p.lastSize.Store(int32(len(batch)))
			p.flush(batch)
			clear(batch) // let the flushed proposals go
		}
	}
}

// fill adds waiting proposals to batch until an entry's bounds are reached,
// lingering for more under load. The linger timer is stopped before fill
// returns: a timer left running would hold its memory until it fired, and
// under load every batch makes one.
func (p *Proposer) fill(batch []*proposal) []*proposal {
	size, n := batch[0].size, len(batch[0].cmds)
	var deadline <-chan time.Time
	if p.o.Linger > 0 && p.lastSize.Load() > 1 {
		t := p.newTimer(p.o.Linger)
		defer t.Stop()
		deadline = t.C()
	}
	for size < p.o.MaxBytes && n < p.o.MaxCmds {
		select {
		case q := <-p.ch:
			batch = append(batch, q)
			size += q.size
			n += len(q.cmds)
			continue
		default:
		}
		if deadline == nil {
			return batch
		}
		select {
		case q := <-p.ch:
			batch = append(batch, q)
			size += q.size
			n += len(q.cmds)
		case <-deadline:
			return batch
		case <-p.stop:
			return batch
		}
	}
	return batch
}

func (p *Proposer) flush(batch []*proposal) {
	n := 0
	for _, pr := range batch {
		n += len(pr.cmds)
	}
	all := make([][]byte, 0, n+1)
	for _, pr := range batch {
		all = append(all, pr.cmds...)
	}
	if p.o.Extra != nil {
		all = append(all, p.o.Extra()...)
	}
	res, err := p.apply(raftfsm.EncodeBatch(all))
	if err == nil && len(res) < n {
		err = fmt.Errorf("raftgroup: %d results for %d commands", len(res), n)
	}
	off := 0
	for _, pr := range batch {
		if err != nil {
			pr.err = err
		} else {
			pr.res = res[off : off+len(pr.cmds)]
		}
		off += len(pr.cmds)
		close(pr.done)
	}
}

func (p *Proposer) drain() {
	for {
		select {
		case pr := <-p.ch:
			pr.err = ErrClosed
			close(pr.done)
		default:
			return
		}
	}
}

// Close stops the workers after the entries in flight; proposals still
// queued fail with ErrClosed. It may be called more than once.
func (p *Proposer) Close() {
	p.once.Do(func() {
		close(p.stop)
		p.wg.Wait()
		p.drain()
		close(p.closed)
	})
}
