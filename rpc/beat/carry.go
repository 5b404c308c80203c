package beat

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"

	"github.com/timemachine-db/timemachine/rpc/peer"
)

// MethodRaft is the node-to-node method that carries one raft RPC of a
// slot group other than a heartbeat: a vote, a pre-vote, a timeout-now or
// an AppendEntries sent outside a pipeline (see the package doc).
const MethodRaft peer.Method = 42

// The kinds of RPC MethodRaft carries (the first byte after the group).
const (
	kindAppend byte = iota + 1
	kindVote
	kindPreVote
	kindTimeoutNow
)

// defaultRaftTimeout bounds one carried RPC, as the stock transport's
// connection deadline does (raftgroup sets it to 10 s).
const defaultRaftTimeout = 10 * time.Second

// msgpack as hashicorp/raft's NetworkTransport encodes its RPCs (times in
// the old format, which every raft v1 peer decodes).
var (
	encHandle = func() *codec.MsgpackHandle {
		h := &codec.MsgpackHandle{}
		h.TimeNotBuiltin = true
		return h
	}()
	decHandle = &codec.MsgpackHandle{}
)

func encodeRaft(group uint16, kind byte, v any) ([]byte, error) {
	var enc []byte // the encoder writes from the start of its buffer
	if err := codec.NewEncoderBytes(&enc, encHandle).Encode(v); err != nil {
		return nil, fmt.Errorf("beat: encode raft rpc: %w", err)
	}
	out := make([]byte, 3, 3+len(enc))
	out[0], out[1], out[2] = byte(group>>8), byte(group), kind
	return append(out, enc...), nil
}

func decodeRaft(b []byte, v any) error {
	if err := codec.NewDecoderBytes(b, decHandle).Decode(v); err != nil {
		return fmt.Errorf("beat: decode raft rpc: %w", err)
	}
	return nil
}

// errOldPeer: the peer does not serve MethodRaft (an older binary); the
// RPC goes the stock way.
var errOldPeer = errors.New("beat: peer does not carry raft rpcs")

// carry sends one RPC of group to target through the node-to-node
// connection and decodes the group's answer into resp. errOldPeer means the
// caller must use the stock path; any other error is the RPC's failure, as
// raft would have seen it on the stock path (the peer unreachable, the
// group not open there, the group's own error).
func (c *Coalescer) carry(target raft.ServerAddress, group uint16, kind byte, req, resp any) error {
	addr := string(target)
	if c.isOld(addr) {
		return errOldPeer
	}
	body, err := encodeRaft(group, kind, req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.RaftTimeout)
	out, err := c.call.Call(ctx, addr, MethodRaft, body)
	cancel()
	if err != nil {
		var re *peer.RemoteError
		if errors.As(err, &re) && re.Code == peer.CodeUnknownMethod {
			c.markOld(addr)
			return errOldPeer
		}
		return fmt.Errorf("beat: raft rpc of group %d to %s: %w", group, addr, err)
	}
	c.carried.Add(1)
	return decodeRaft(out, resp)
}

// oldPeerRetry is how long a peer that did not know MethodRaft is sent
// RPCs the stock way before it is asked again (it may have been upgraded).
const oldPeerRetry = time.Minute

func (c *Coalescer) isOld(addr string) bool {
	c.oldMu.Lock()
	defer c.oldMu.Unlock()
	return notedLately(c.old, addr)
}

// notedLately reports whether m notes key less than oldPeerRetry ago; an
// older note is dropped (the peer may have been upgraded since). The
// caller holds m's lock.
func notedLately(m map[string]time.Time, key string) bool {
	at, ok := m[key]
	if ok && time.Since(at) > oldPeerRetry {
		delete(m, key)
		return false
	}
	return ok
}

func (c *Coalescer) markOld(addr string) {
	c.oldMu.Lock()
	c.old[addr] = time.Now()
	c.oldMu.Unlock()
	c.log.Info("peer does not carry raft rpcs on its node connection: using the stock transport", "peer", addr)
}

// handleRaft answers a MethodRaft call: the RPC goes to its group's raft
// through the group's transport consumer, as the stock transport hands
// over an RPC read from its connection, and the group's answer goes back.
//
// Order: a leader has at most one such AppendEntries in flight to a
// follower (raft's replicateTo waits for each answer, and a lazy pipeline
// sends synchronously until it dials, pipeline.go), so the calls of one
// group from one leader arrive, and are handed to raft, in the order they
// were sent.
func (c *Coalescer) handleRaft(ctx context.Context, body []byte) ([]byte, error) {
	if len(body) < 3 {
		return nil, errMalformed
	}
	group := uint16(body[0])<<8 | uint16(body[1])
	kind := body[2]
	var cmd any
	switch kind {
	case kindAppend:
		cmd = &raft.AppendEntriesRequest{}
	case kindVote:
		cmd = &raft.RequestVoteRequest{}
	case kindPreVote:
		cmd = &raft.RequestPreVoteRequest{}
	case kindTimeoutNow:
		cmd = &raft.TimeoutNowRequest{}
	default:
		return nil, fmt.Errorf("beat: unknown raft rpc kind %d", kind)
	}
	if err := decodeRaft(body[3:], cmd); err != nil {
		return nil, err
	}
	var h *handler
	if kind == kindVote || kind == kindPreVote {
		h = c.awaitGroup(ctx, group, voteOpenWait)
	} else {
		c.hmu.RLock()
		h = c.handlers[group]
		c.hmu.RUnlock()
	}
	if h == nil || h.rpcs == nil {
		return nil, &peer.RemoteError{Code: CodeNotOpen, Message: fmt.Sprintf("group %d is not open here", group)}
	}
	if kind == kindTimeoutNow {
		wakeRaft(ctx, h)
	}
	respCh := make(chan raft.RPCResponse, 1)
	select {
	case h.rpcs <- raft.RPC{Command: cmd, RespChan: respCh}:
	case <-h.closed:
		return nil, fmt.Errorf("group %d is shutting down", group)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case r := <-respCh:
		if r.Error != nil {
			return nil, r.Error
		}
		var out []byte
		if err := codec.NewEncoderBytes(&out, encHandle).Encode(r.Response); err != nil {
			return nil, fmt.Errorf("beat: encode raft answer: %w", err)
		}
		return out, nil
	case <-h.closed:
		return nil, fmt.Errorf("group %d is shutting down", group)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// wakeRaft hands the group's raft a pre-vote request in term 0 and waits
// briefly for the answer, so that the TimeoutNow that follows (a
// leadership transfer to this replica) starts an election. A replica whose
// own campaign was just refused — one reopened moments before — keeps
// raft in its candidate loop until that campaign's timer fires, even once
// the leader's heartbeats (raft's fast path) made it a follower again; a
// TimeoutNow alone then only sets the state back to candidate, no election
// starts, and the leader refuses writes until its transfer times out.
// Any RPC on the consumer wakes the loop, which moves on to the follower
// loop; raft answers the request without effect, and raftgroup's vote
// gate lets term 0 through (no candidate has it). raftgroup's Campaign
// does the same for its own TimeoutNow (wakeMainLoop, which has the
// details).
func wakeRaft(ctx context.Context, h *handler) {
	respCh := make(chan raft.RPCResponse, 1)
	wake := raft.RPC{Command: &raft.RequestPreVoteRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax}}, RespChan: respCh}
	t := time.NewTimer(wakeWait)
	defer t.Stop()
	select {
	case h.rpcs <- wake:
	case <-h.closed:
		return
	case <-ctx.Done():
		return
	case <-t.C:
		return
	}
	select {
	case <-respCh:
	case <-h.closed:
	case <-ctx.Done():
	case <-t.C: // a busy raft: the TimeoutNow queues behind the request
	}
}

// wakeWait bounds wakeRaft.
const wakeWait = 100 * time.Millisecond

// voteOpenWait is how long a vote or pre-vote for a group that is not
// open here yet waits for it to open. When a cluster forms, a new group's
// first candidate campaigns as soon as its own replica is open, often
// before the peers have opened theirs (1,024 slots take the peers many
// seconds to open); refused at once, the candidate would sit out its
// election timeout (seconds with the slots' long timeouts) before it asked
// again. Waiting, the vote is answered the moment the group opens. Under
// the slots' 10 s election timeout (2 s was too short at 1,024 slots: some
// first elections failed and waited 5-10 s, with the 5 s election timeout
// they had then) and the carried RPC's 10 s.
const voteOpenWait = 4 * time.Second

// awaitGroup returns group's registration, waiting up to wait for the
// group to register (nil: it did not).
func (c *Coalescer) awaitGroup(ctx context.Context, group uint16, wait time.Duration) *handler {
	var timeout <-chan time.Time
	for {
		c.hmu.RLock()
		h, opened := c.handlers[group], c.opened
		c.hmu.RUnlock()
		if h != nil {
			return h
		}
		if timeout == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-opened:
		case <-timeout:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// Inject hands rpc to this group's own raft through its consumer channel,
// as if it had come from a peer; raftgroup uses it to give its raft a
// TimeoutNow (campaign at once, as the target of a leadership transfer
// does). It fails if the transport is closed or raft does not take the RPC
// within a second.
func (t *Transport) Inject(rpc raft.RPC) error {
	if t.h.rpcs == nil {
		return errors.New("beat: this transport has no consumer to inject into")
	}
	timer := time.NewTimer(time.Second)
	defer timer.Stop()
	select {
	case t.h.rpcs <- rpc:
		return nil
	case <-t.h.closed:
		return fmt.Errorf("group %d is shutting down", t.group)
	case <-timer.C:
		return fmt.Errorf("group %d: raft did not take the rpc within a second", t.group)
	}
}

// forward hands the RPCs the stock transport reads from its connections
// (pipelined appends, snapshots, RPCs of older peers) to raft, through the
// same channel as the carried ones, until the transport closes.
func forward(from <-chan raft.RPC, to chan<- raft.RPC, closed <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		select {
		case rpc := <-from:
			select {
			case to <- rpc:
			case <-closed:
				return
			}
		case <-closed:
			return
		}
	}
}

// Consumer implements raft.Transport: the RPCs carried on the node's
// connection and those of the stock transport, merged.
func (t *Transport) Consumer() <-chan raft.RPC {
	if t.h.rpcs == nil {
		return t.NetworkTransport.Consumer()
	}
	return t.h.rpcs
}

// AppendEntries implements raft.Transport: heartbeats are coalesced
// (beat.go), other appends carried on the node's connection.
func (t *Transport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if IsHeartbeat(args) {
		return t.sendHeartbeat(id, target, args, resp, false)
	}
	t.sawCommit(args.LeaderCommitIndex)
	err := t.carry(target, kindAppend, args, resp)
	if err != nil && !errors.Is(err, errOldPeer) && t.holdFailed(target, err) {
		err = t.carry(target, kindAppend, args, resp)
	}
	if errors.Is(err, errOldPeer) {
		err = t.NetworkTransport.AppendEntries(id, target, args, resp)
	}
	t.appended(target, err)
	return err
}

// holdFailed holds an append that failed because target is unreachable
// until the liveness check hears target again (true: send it once more),
// FailHold passes, Urgent is called or the transport closes (false).
//
// Why: raft backs off a follower's replication after each failed append
// (10 ms, doubling per failure up to 10.24 s, hashicorp/raft replicateTo)
// and does not cut that sleep short when the follower comes back. Failing
// at once, a follower cut off for 10 s collected enough failures for a
// 5-10 s sleep, and stayed behind (its slot degraded) that long after the
// partition healed (docs/reliability.md, "Five nodes"). Held, the
// failures come at most one per FailHold, and the append that is held
// when the peer comes back goes through at once. raftgroup calls Urgent
// before raft's Shutdown, which waits for the replication goroutines.
func (t *Transport) holdFailed(target raft.ServerAddress, err error) bool {
	wait := t.c.opts.WaitReachable
	if wait == nil || !errors.Is(err, peer.ErrUnreachable) || t.urgent() {
		return false // (Urgent: the group is stopping or confirming a leadership)
	}
	hold := t.c.opts.FailHold
	if hold <= 0 {
		hold = defaultFailHold
	}
	ctx, cancel := context.WithTimeout(context.Background(), hold)
	defer cancel()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-t.wake():
		case <-t.h.closed:
		case <-stop:
		}
		cancel()
	}()
	return wait(ctx, string(target))
}

// sendHeartbeat sends a heartbeat through the Coalescer (held.go), or the
// stock way to a peer that cannot take it there.
func (t *Transport) sendHeartbeat(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse, confirm bool) error {
	// Only a peer that does not know the method (an older binary) gets
	// heartbeats the stock way. A batch that failed otherwise (the peer
	// unreachable, dropped on a liveness verdict, slow) is not retried
	// there: the stock connection goes to the same port, and each retry
	// would dial a connection per group — two 256 KiB buffers on each
	// side, the memory of an election storm.
	if !t.stockOnly(target) {
		err := t.heartbeat(target, args, resp, confirm)
		if !errors.Is(err, errOldPeer) && !t.refusedGroup(target, err) {
			return err
		}
	}
	t.c.fellBack.Add(1)
	err := t.NetworkTransport.AppendEntries(id, target, args, resp)
	if err == nil {
		t.heartbeatAnswered(target, resp)
	}
	return err
}

// RequestVote implements raft.Transport.
func (t *Transport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if err := t.carryVote(target, kindVote, args, resp); !errors.Is(err, errOldPeer) {
		return err
	}
	return t.NetworkTransport.RequestVote(id, target, args, resp)
}

// RequestPreVote implements raft.Transport.
func (t *Transport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if err := t.carryVote(target, kindPreVote, args, resp); !errors.Is(err, errOldPeer) {
		return err
	}
	return t.NetworkTransport.RequestPreVote(id, target, args, resp)
}

// voteResendFor bounds how long a vote (or pre-vote) request lost to an
// unreachable peer is sent again; voteResendGap is the least time between
// two sends, for a peer the liveness check has not found dead (a refused
// dial fails at once, and waitReachable would not wait).
const (
	voteResendFor = 3 * time.Second
	voteResendGap = 100 * time.Millisecond
)

// carryVote is carry for a vote or pre-vote request, sent again while it
// fails because target is unreachable: once the liveness check hears
// target again (holdFailed), at most every voteResendGap, for up to
// voteResendFor.
//
// Why: raft asks each voter once per election and waits out its election
// timeout (a lease or two, 5-10 s) before it tries again. Under a long
// delay on every link, the nodes' liveness checks find each other dead
// and alive every second or so and drop their connections each time,
// and a vote request or its answer in flight is lost with them: a group
// whose leader stepped down then stood without one for 7-9 s after the
// links healed (docs/reliability.md, "Slots without a leader for seconds
// after a long delay on every link"). Sending a vote request again is
// safe: raft takes each message as possibly delayed or repeated — a
// voter that granted this candidate in this term grants it again, one
// that voted for another refuses again, and an answer for an election
// the candidate has left is ignored.
func (t *Transport) carryVote(target raft.ServerAddress, kind byte, req, resp any) error {
	until := time.Now().Add(voteResendFor)
	for {
		sent := time.Now()
		err := t.carry(target, kind, req, resp)
		if err == nil || errors.Is(err, errOldPeer) || !time.Now().Before(until) || !t.holdFailed(target, err) {
			return err
		}
		if wait := voteResendGap - time.Since(sent); wait > 0 {
			select {
			case <-time.After(wait):
			case <-t.h.closed:
				return err
			}
		}
		if !time.Now().Before(until) {
			return err
		}
		t.c.votesResent.Add(1)
	}
}

// TimeoutNow implements raft.Transport.
func (t *Transport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	if err := t.carry(target, kindTimeoutNow, args, resp); !errors.Is(err, errOldPeer) {
		return err
	}
	return t.NetworkTransport.TimeoutNow(id, target, args, resp)
}

// CodeNotOpen is the code of a carried RPC's refusal when its group is
// not open on the peer. (Binaries before the code sent the same message
// without it: refusedGroup recognises both.)
const CodeNotOpen = "beat.not_open"

// carry is Coalescer.carry for this transport's group; errOldPeer means
// the caller must use the stock path (an older peer, or one that refused
// a group every peer has open: refusedGroup).
func (t *Transport) carry(target raft.ServerAddress, kind byte, req, resp any) error {
	if t.stockOnly(target) {
		return errOldPeer
	}
	err := t.c.carry(target, t.group, kind, req, resp)
	if t.refusedGroup(target, err) {
		return errOldPeer
	}
	return err
}

// stockOnly reports whether this group's RPCs to target go the stock way:
// the peer does not know the node-connection methods, or (alwaysOpen) it
// refused this group lately.
func (t *Transport) stockOnly(target raft.ServerAddress) bool {
	if t.c.isOld(string(target)) {
		return true
	}
	if !t.alwaysOpen {
		return false
	}
	t.bmu.Lock()
	defer t.bmu.Unlock()
	return notedLately(t.refused, string(target))
}

// refusedGroup reports whether err is target refusing this group as not
// open there, for a transport whose group every running peer has open
// (WrapAlwaysOpen: the meta group). Such a peer is a binary from before the
// meta group came onto the node connection: it gets this group's RPCs the
// stock way for oldPeerRetry, as a peer that does not know the methods
// does. Slot groups are refused for real (not open yet on that node), and
// the stock path would be refused too.
func (t *Transport) refusedGroup(target raft.ServerAddress, err error) bool {
	if !t.alwaysOpen || err == nil {
		return false
	}
	var re *peer.RemoteError
	refused := errors.Is(err, ErrRefused) && strings.Contains(err.Error(), "is not open here") ||
		errors.As(err, &re) && (re.Code == CodeNotOpen || strings.HasSuffix(re.Message, "is not open here"))
	if !refused {
		return false
	}
	t.bmu.Lock()
	if t.refused == nil {
		t.refused = map[string]time.Time{}
	}
	_, seen := t.refused[string(target)]
	t.refused[string(target)] = time.Now()
	t.bmu.Unlock()
	if !seen {
		t.c.log.Info("peer refused a group every node has open (an older binary): using the stock transport for it", "peer", target, "group", t.group)
	}
	return true
}
