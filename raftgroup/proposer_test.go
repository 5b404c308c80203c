package raftgroup

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/internal/testutil"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
)

// fakeLog is an ApplyFunc: every entry is decoded back into its commands,
// recorded, and answered with one result per command whose N is the
// command's second byte, so each caller can check it got its own results.
type fakeLog struct {
	calls   atomic.Int32 // apply calls started
	mu      sync.Mutex
	entries [][][]byte
	gate    chan struct{} // when set, apply waits for a receive
	err     error
	short   bool // answer one result too few
}

func (f *fakeLog) apply(data []byte) ([]model.Result, error) {
	f.calls.Add(1)
	if f.gate != nil {
		<-f.gate
	}
	cmds, err := raftfsm.SplitBatch(data)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.entries = append(f.entries, cmds)
	f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	res := make([]model.Result, len(cmds))
	for i, c := range cmds {
		res[i] = model.Result{N: int64(c[1])}
	}
	if f.short {
		res = res[:len(res)-1]
	}
	return res, nil
}

func (f *fakeLog) sizes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]int, len(f.entries))
	for i, e := range f.entries {
		out[i] = len(e)
	}
	return out
}

// cmd is an encoded command carrying n in its second byte (the fake
// answers N=n). The first byte is a type no command has, never CmdBatch.
func cmd(n byte) []byte { return []byte{0xF0, n} }

func proposeAsync(p *Proposer, cmds ...[]byte) chan error {
	done := make(chan error, 1)
	go func() {
		res, err := p.Propose(context.Background(), cmds)
		if err == nil {
			for i, r := range res {
				if r.N != int64(cmds[i][1]) {
					err = fmt.Errorf("result %d is N=%d, want %d", i, r.N, cmds[i][1])
				}
			}
		}
		done <- err
	}()
	return done
}

// waitApplying waits until apply was called n times.
func waitApplying(t *testing.T, f *fakeLog, n int32) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, fmt.Sprintf("apply call %d", n), func() error {
		if got := f.calls.Load(); got < n {
			return fmt.Errorf("%d calls", got)
		}
		return nil
	})
}

// Proposals that arrive while an entry commits form the next entry, and
// each caller gets its own results in its own order.
func TestProposerCoalesces(t *testing.T) {
	f := &fakeLog{gate: make(chan struct{})}
	p := NewProposer(f.apply, ProposerOptions{MaxBytes: 1 << 20, MaxCmds: 1000})
	defer p.Close()
	first := proposeAsync(p, cmd(100))
	// The first entry is in apply (blocked on the gate); the ten that
	// follow must share one entry.
	waitApplying(t, f, 1)
	var rest []chan error
	for i := 0; i < 10; i++ {
		rest = append(rest, proposeAsync(p, cmd(byte(2*i)), cmd(byte(2*i+1))))
	}
	testutil.Eventually(t, 5*time.Second, "ten proposals queued", func() error {
		if n := len(p.ch); n != 10 {
			return fmt.Errorf("%d queued", n)
		}
		return nil
	})
	close(f.gate)
	for _, ch := range append(rest, first) {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if got := f.sizes(); len(got) != 2 || got[0] != 1 || got[1] != 20 {
		t.Fatalf("entries carried %v commands, want [1 20]", got)
	}
}

// An entry never exceeds MaxCmds: the rest waits for the next one.
func TestProposerBoundsEntries(t *testing.T) {
	f := &fakeLog{gate: make(chan struct{})}
	p := NewProposer(f.apply, ProposerOptions{MaxBytes: 1 << 20, MaxCmds: 4})
	defer p.Close()
	first := proposeAsync(p, cmd(1))
	waitApplying(t, f, 1)
	var rest []chan error
	for i := 0; i < 10; i++ {
		rest = append(rest, proposeAsync(p, cmd(byte(i))))
	}
	testutil.Eventually(t, 5*time.Second, "ten proposals queued", func() error {
		if n := len(p.ch); n != 10 {
			return fmt.Errorf("%d queued", n)
		}
		return nil
	})
	close(f.gate)
	for _, ch := range append(rest, first) {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range f.sizes() {
		if n > 4 {
			t.Fatalf("an entry carried %d commands, over MaxCmds 4 (%v)", n, f.sizes())
		}
	}
}

func TestProposerErrors(t *testing.T) {
	boom := errors.New("boom")
	f := &fakeLog{err: boom}
	p := NewProposer(f.apply, ProposerOptions{MaxBytes: 1 << 20, MaxCmds: 100})
	if _, err := p.Propose(context.Background(), [][]byte{cmd(1)}); !errors.Is(err, boom) {
		t.Fatalf("apply error: got %v", err)
	}
	p.Close()

	short := &fakeLog{short: true}
	p = NewProposer(short.apply, ProposerOptions{MaxBytes: 1 << 20, MaxCmds: 100})
	if _, err := p.Propose(context.Background(), [][]byte{cmd(1), cmd(2)}); err == nil {
		t.Fatal("too few results were not reported")
	}
	p.Close()

	// A caller whose ctx ends while its entry commits learns that the
	// outcome is unknown; one whose ctx ended first learns nothing went in.
	slow := &fakeLog{gate: make(chan struct{})}
	p = NewProposer(slow.apply, ProposerOptions{MaxBytes: 1 << 20, MaxCmds: 100})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	_, err := p.Propose(ctx, [][]byte{cmd(1)})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ctx ended during commit: %v", err)
	}
	close(slow.gate)
	p.Close()
	done, cancel2 := context.WithCancel(context.Background())
	cancel2()
	p = NewProposer((&fakeLog{}).apply, ProposerOptions{MaxBytes: 1 << 20, MaxCmds: 100})
	p.Close()
	p.Close() // idempotent
	if _, err := p.Propose(done, [][]byte{cmd(1)}); !errors.Is(err, ErrClosed) && !errors.Is(err, context.Canceled) {
		t.Fatalf("closed proposer, ended ctx: %v", err)
	}
}

func TestProposerClose(t *testing.T) {
	f := &fakeLog{gate: make(chan struct{})}
	p := NewProposer(f.apply, ProposerOptions{MaxBytes: 1 << 20, MaxCmds: 1})
	inFlight := proposeAsync(p, cmd(1))
	waitApplying(t, f, 1)
	queued := proposeAsync(p, cmd(2))
	testutil.Eventually(t, 5*time.Second, "a second proposal queued", func() error {
		if len(p.ch) != 1 {
			return errors.New("not queued yet")
		}
		return nil
	})
	closed := make(chan struct{})
	go func() {
		p.Close()
		close(closed)
	}()
	close(f.gate) // the entry in flight finishes; Close waits for it
	<-closed
	if err := <-inFlight; err != nil {
		t.Fatalf("the entry in flight: %v", err)
	}
	// A proposal queued at Close is either committed by the worker's last
	// entry or refused; it is never left waiting.
	if err := <-queued; err != nil && !errors.Is(err, ErrClosed) {
		t.Fatalf("a proposal queued at Close: %v, want success or ErrClosed", err)
	}
	if _, err := p.Propose(context.Background(), [][]byte{cmd(3)}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Propose after Close: %v, want ErrClosed", err)
	}
}

// countingTimers is a lingerTimer factory that counts the timers still
// running: created and neither stopped nor fired. Its timers never fire,
// so a lingering worker waits for proposals (or the entry's bounds).
type countingTimers struct{ created, stopped atomic.Int64 }

type countedTimer struct {
	c       *countingTimers
	ch      chan time.Time
	stopped atomic.Bool
}

func (t *countedTimer) C() <-chan time.Time { return t.ch }
func (t *countedTimer) Stop() bool {
	if t.stopped.CompareAndSwap(false, true) {
		t.c.stopped.Add(1)
		return true
	}
	return false
}

func (c *countingTimers) new(time.Duration) lingerTimer {
	c.created.Add(1)
	return &countedTimer{c: c, ch: make(chan time.Time)}
}

func (c *countingTimers) running() int64 { return c.created.Load() - c.stopped.Load() }

// Every batch that lingers makes a timer; the worker must stop it when the
// batch is complete. The first version deferred Stop inside a loop that
// never returns, so every lingering batch kept its timer (and what it
// references) until the replica closed: 27k outcome batches grew the heap
// from 0.6 to 10.3 MiB.
func TestProposerStopsItsLingerTimers(t *testing.T) {
	f := &fakeLog{gate: make(chan struct{})}
	timers := &countingTimers{}
	p := newProposer(f.apply, ProposerOptions{MaxBytes: 1 << 20, MaxCmds: 2, Linger: time.Hour}, timers.new)
	defer p.Close()
	// Load first: an entry of two proposals makes the worker linger from
	// then on (it lingers only after an entry that carried more than one).
	first := proposeAsync(p, cmd(1))
	waitApplying(t, f, 1)
	a, b := proposeAsync(p, cmd(2)), proposeAsync(p, cmd(3))
	testutil.Eventually(t, 5*time.Second, "two proposals queued", func() error {
		if len(p.ch) != 2 {
			return errors.New("not queued yet")
		}
		return nil
	})
	close(f.gate)
	for _, ch := range []chan error{first, a, b} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	// Now every pair lingers: the first of a pair waits (with a timer) for
	// the second, which completes the entry at MaxCmds.
	const batches = 200
	for i := 0; i < batches; i++ {
		x := proposeAsync(p, cmd(byte(i)))
		y := proposeAsync(p, cmd(byte(i)))
		if err := <-x; err != nil {
			t.Fatal(err)
		}
		if err := <-y; err != nil {
			t.Fatal(err)
		}
	}
	if c := timers.created.Load(); c < batches {
		t.Fatalf("only %d linger timers for %d lingering batches: the test did not make the worker linger", c, batches)
	}
	if n := timers.running(); n != 0 {
		t.Fatalf("%d of %d linger timers still running after their batches were committed", n, timers.created.Load())
	}
}
