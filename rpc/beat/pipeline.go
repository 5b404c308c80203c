package beat

import (
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Under load a leader replicates through a pipeline: many AppendEntries in
// flight on one connection of the stock transport. At idle that connection
// only costs (two 256 KiB buffers on each side, per leader and follower:
// ~1 MiB per group and follower) — and raft asks for a pipeline right after
// every successful append, so with the stock transport every leader holds
// one per follower from its first entry on. The lazy pipeline sends
// synchronously on the node's connection (carry) and dials the stock one
// only once appends carrying entries come often (pipelineAfter within
// pipelineWindow): a leader under write load.
const (
	pipelineAfter  = 4
	pipelineWindow = time.Second
)

// AppendEntriesPipeline implements raft.Transport with a lazy pipeline.
func (t *Transport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	if t.stockOnly(target) {
		return t.NetworkTransport.AppendEntriesPipeline(id, target)
	}
	return &lazyPipeline{t: t, id: id, target: target,
		ch: make(chan raft.AppendFuture, pipelineQueue), done: make(chan struct{})}, nil
}

// pipelineQueue: the stock pipeline's futures channel is as deep as its
// RPCs in flight (raftgroup: 16); the synchronous sends need at most one.
const pipelineQueue = 16

// lazyPipeline is a raft.AppendPipeline that sends each append
// synchronously through the node's connection, and switches to the stock
// transport's pipeline for good (until raft closes it) once appends come
// often. raft uses a pipeline from one goroutine (pipelineSend), so
// AppendEntries needs no lock against itself; Close comes from the same
// goroutine too, after the decoder stopped.
type lazyPipeline struct {
	t      *Transport
	id     raft.ServerID
	target raft.ServerAddress

	ch   chan raft.AppendFuture // Consumer
	done chan struct{}          // closed by Close

	recent [pipelineAfter]time.Time // when the last appends carrying entries were sent (ring)
	next   int

	mu   sync.Mutex
	real raft.AppendPipeline // the stock pipeline once dialed
	wg   sync.WaitGroup      // the forwarder of its futures
}

// doneFuture is an append already answered.
type doneFuture struct {
	start time.Time
	req   *raft.AppendEntriesRequest
	resp  *raft.AppendEntriesResponse
}

func (f *doneFuture) Error() error                          { return nil }
func (f *doneFuture) Start() time.Time                      { return f.start }
func (f *doneFuture) Request() *raft.AppendEntriesRequest   { return f.req }
func (f *doneFuture) Response() *raft.AppendEntriesResponse { return f.resp }

var errPipelineClosed = errors.New("beat: pipeline closed")

// AppendEntries implements raft.AppendPipeline.
func (p *lazyPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	p.t.sawCommit(args.LeaderCommitIndex)
	p.mu.Lock()
	real := p.real
	p.mu.Unlock()
	if real == nil && p.busy(args) {
		var err error
		if real, err = p.dial(); err != nil {
			return nil, err
		}
	}
	if real != nil {
		return real.AppendEntries(args, resp)
	}
	start := time.Now()
	if err := p.t.carry(p.target, kindAppend, args, resp); err != nil {
		if !errors.Is(err, errOldPeer) {
			p.t.appended(p.target, err)
			return nil, err
		}
		if err := p.t.NetworkTransport.AppendEntries(p.id, p.target, args, resp); err != nil {
			p.t.appended(p.target, err)
			return nil, err
		}
	}
	p.t.appended(p.target, nil)
	f := &doneFuture{start: start, req: args, resp: resp}
	select {
	case p.ch <- f:
		return f, nil
	case <-p.done:
		return nil, errPipelineClosed
	}
}

// busy records an append carrying entries and reports whether
// pipelineAfter of them came within pipelineWindow.
func (p *lazyPipeline) busy(args *raft.AppendEntriesRequest) bool {
	if len(args.Entries) == 0 {
		return false
	}
	now := time.Now()
	oldest := p.recent[p.next]
	p.recent[p.next] = now
	p.next = (p.next + 1) % pipelineAfter
	return !oldest.IsZero() && now.Sub(oldest) < pipelineWindow
}

// dial opens the stock pipeline and forwards its futures to Consumer.
func (p *lazyPipeline) dial() (raft.AppendPipeline, error) {
	real, err := p.t.NetworkTransport.AppendEntriesPipeline(p.id, p.target)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	select {
	case <-p.done:
		p.mu.Unlock()
		_ = real.Close()
		return nil, errPipelineClosed
	default:
	}
	p.real = real
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		in := real.Consumer()
		for {
			select {
			case f := <-in:
				select {
				case p.ch <- f:
				case <-p.done:
					return
				}
			case <-p.done:
				return
			}
		}
	}()
	return real, nil
}

// Consumer implements raft.AppendPipeline.
func (p *lazyPipeline) Consumer() <-chan raft.AppendFuture { return p.ch }

// Close implements raft.AppendPipeline.
func (p *lazyPipeline) Close() error {
	p.mu.Lock()
	select {
	case <-p.done:
		p.mu.Unlock()
		return nil
	default:
	}
	close(p.done)
	real := p.real
	p.mu.Unlock()
	var err error
	if real != nil {
		err = real.Close()
	}
	p.wg.Wait()
	return err
}
