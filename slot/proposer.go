package slot

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
)

// applyFunc submits one raft entry and returns the FSM's per-command
// results.
type applyFunc func(data []byte) ([]model.Result, error)

// proposal is a group of encoded commands submitted together; its results
// come back in the same order.
type proposal struct {
	cmds [][]byte
	size int
	res  []model.Result
	err  error
	done chan struct{} // closed when res/err are set
}

// proposer coalesces concurrent proposals into few raft entries: while one
// entry is being committed the next fills up, so under load an entry
// carries hundreds of commands for the price of one fsync, and with no load
// a lone command goes out at once.
type proposer struct {
	apply    applyFunc
	ch       chan *proposal
	maxBytes int
	maxCmds  int
	extra    func() [][]byte // commands appended to every entry (may be nil)
	// linger is how long a worker waits for more proposals once it holds
	// one, when the previous entry carried more than one proposal (a sign
	// of concurrent load). Each raft entry costs a bolt commit — two
	// fdatasyncs and ~140 µs of CPU here — so under load a short wait buys
	// far more throughput than it costs latency; a lone writer never waits.
	linger   time.Duration
	lastSize atomic.Int32
	stop     chan struct{}
	wg       sync.WaitGroup
}

func newProposer(apply applyFunc, workers, maxBytes, maxCmds int, linger time.Duration, extra func() [][]byte) *proposer {
	p := &proposer{
		apply:    apply,
		linger:   linger,
		ch:       make(chan *proposal, 8192),
		maxBytes: maxBytes,
		maxCmds:  maxCmds,
		extra:    extra,
		stop:     make(chan struct{}),
	}
	for i := 0; i < workers; i++ {
		p.wg.Add(1)
		go p.loop()
	}
	return p
}

var errProposerClosed = errors.New("slot replica is shutting down")

// propose submits commands and waits for their results.
func (p *proposer) propose(ctx context.Context, cmds [][]byte) ([]model.Result, error) {
	pr := &proposal{cmds: cmds, size: sizeOf(cmds), done: make(chan struct{})}
	select {
	case p.ch <- pr:
	case <-p.stop:
		return nil, errProposerClosed
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: not submitted", ctx.Err())
	}
	select {
	case <-pr.done:
		return pr.res, pr.err
	case <-ctx.Done():
		// The entry may still commit: the caller must treat this as an
		// unknown outcome, like raft's ErrLeadershipLost.
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

func (p *proposer) loop() {
	defer p.wg.Done()
	var batch []*proposal
	for {
		select {
		case <-p.stop:
			p.drain()
			return
		case first := <-p.ch:
			batch = append(batch[:0], first)
			size, n := first.size, len(first.cmds)
			var deadline <-chan time.Time
			if p.linger > 0 && p.lastSize.Load() > 1 {
				t := time.NewTimer(p.linger)
				deadline = t.C
				defer t.Stop()
			}
		fill:
			for size < p.maxBytes && n < p.maxCmds {
				select {
				case q := <-p.ch:
					batch = append(batch, q)
					size += q.size
					n += len(q.cmds)
					continue
				default:
				}
				if deadline == nil {
					break
				}
				select {
				case q := <-p.ch:
					batch = append(batch, q)
					size += q.size
					n += len(q.cmds)
				case <-deadline:
					break fill
				case <-p.stop:
					break fill
				}
			}
			p.lastSize.Store(int32(len(batch)))
			p.flush(batch)
		}
	}
}

func (p *proposer) flush(batch []*proposal) {
	n := 0
	for _, pr := range batch {
		n += len(pr.cmds)
	}
	all := make([][]byte, 0, n+1)
	for _, pr := range batch {
		all = append(all, pr.cmds...)
	}
	if p.extra != nil {
		all = append(all, p.extra()...)
	}
	res, err := p.apply(raftfsm.EncodeBatch(all))
	if err == nil && len(res) < n {
		err = fmt.Errorf("slot: %d results for %d commands", len(res), n)
	}
	off := 0
	for _, pr := range batch {
		if err != nil {
			pr.err = err
		} else {
			pr.res = res[off : off+len(pr.cmds)]
		}
		off += len(pr.cmds)
		p.finish(pr)
	}
}

func (p *proposer) finish(pr *proposal) { close(pr.done) }

func (p *proposer) drain() {
	for {
		select {
		case pr := <-p.ch:
			pr.err = errProposerClosed
			p.finish(pr)
		default:
			return
		}
	}
}

func (p *proposer) close() {
	close(p.stop)
	p.wg.Wait()
	p.drain()
}
