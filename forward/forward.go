package forward

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/timemachine-db/timemachine/meta"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/raftgroup"
	"github.com/timemachine-db/timemachine/rpc/peer"
	"github.com/timemachine-db/timemachine/slot"
)

// Timeout bounds how long a request looks for a slot's leader (through an
// election, say) before it fails.
const Timeout = 5 * time.Second

// ErrMetaUnavailable: the meta group has no reachable leader.
var ErrMetaUnavailable = errors.New("the cluster's meta group has no leader right now (an election is in progress, or a majority of its voters is down)")

// ErrMetaBehind: this node cannot tell whether its copy of the meta state
// is current (it is starting, or cut off from the meta leader).
var ErrMetaBehind = errors.New("this node's copy of the cluster configuration cannot be brought up to date right now")

// Config wires a Forwarder.
type Config struct {
	NodeID string
	Slots  *slot.Registry
	Meta   *meta.Replica
	Client *peer.Client
	// AddrOf returns a node's internal (bind) address, "" when unknown.
	AddrOf func(id string) string
	// Dead, when set, reports whether a node answers no liveness ping
	// (paused, killed, cut off): slot calls are not sent to it.
	Dead   func(id string) bool
	Logger *slog.Logger
}

// Forwarder sends slot and meta traffic to the leaders. It is safe for
// concurrent use.
type Forwarder struct {
	cfg Config

	hintMu sync.Mutex
	hints  map[int]string // slot → last known leader id
}

// New returns a Forwarder; Register its handlers on the node's peer
// server before that serves.
func New(cfg Config) *Forwarder {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Forwarder{cfg: cfg, hints: map[int]string{}}
}

// Hint is the node last seen leading slot s ("" when unknown).
func (f *Forwarder) Hint(s int) string {
	f.hintMu.Lock()
	defer f.hintMu.Unlock()
	return f.hints[s]
}

func (f *Forwarder) setHint(s int, id string) {
	f.hintMu.Lock()
	f.hints[s] = id
	f.hintMu.Unlock()
}

// clearHint forgets slot s's hint if it still names id.
func (f *Forwarder) clearHint(s int, id string) {
	f.hintMu.Lock()
	if f.hints[s] == id {
		delete(f.hints, s)
	}
	f.hintMu.Unlock()
}

// leaderHint is what this node tells a caller about slot s's leader in a
// not_leader answer: whom its local replica follows, else its hint — but
// never itself. This node does not lead (that is why it answers
// not_leader), so a hint naming it is stale, and a caller following it
// would come straight back here: a cached self-hint once kept reads of a
// slot answering 503 through a healthy node indefinitely.
func (f *Forwarder) leaderHint(s int) string {
	local := ""
	if r := f.cfg.Slots.Get(s); r != nil {
		local, _ = r.Leader()
	}
	return replyHint(local, f.Hint(s), f.cfg.NodeID)
}

// replyHint chooses the leader named in a not_leader answer from what the
// local replica follows and the cached hint: never self.
func replyHint(localLeader, cached, self string) string {
	if localLeader != "" && localLeader != self {
		return localLeader
	}
	if cached != self {
		return cached
	}
	return ""
}

// followHint is the hint a caller keeps from a not_leader answer of target:
// none when it names target itself or the caller.
func followHint(hint, target, self string) string {
	if hint == target || hint == self {
		return ""
	}
	return hint
}

// leaderGuess names the node to try for a slot's leader on this attempt:
// the last leader that answered, what a local replica believes, then the
// slot's replicas in turn.
func (f *Forwarder) leaderGuess(s, attempt int) string {
	if h := f.Hint(s); h != "" {
		return h
	}
	if r := f.cfg.Slots.Get(s); r != nil {
		if id, _ := r.Leader(); id != "" && attempt%2 == 0 {
			return id
		}
	}
	st := f.cfg.Meta.State()
	if s < len(st.Slots) && len(st.Slots[s].Replicas) > 0 {
		reps := st.Slots[s].Replicas
		return reps[attempt%len(reps)]
	}
	return f.cfg.NodeID
}

// notSent reports whether a call failed before the request could reach the
// peer (a failed dial), so that even a write may safely be sent elsewhere.
func notSent(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

// forward sends a slot call to the slot's leader, wherever it is, following
// not-leader hints and moving past unreachable nodes until Timeout. write
// marks calls that change state: those are not resent after a failure that
// may have happened after the leader received them.
func (f *Forwarder) forward(ctx context.Context, s int, m peer.Method, body []byte, write bool) ([]byte, error) {
	deadline := time.Now().Add(Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var lastErr error = raftgroup.ErrNotLeader
	pauseNext, follows := false, 0
	for attempt := 0; ; attempt++ {
		if pauseNext {
			pause := time.Duration(min(attempt, 10)) * 20 * time.Millisecond
			select {
			case <-ctx.Done():
				return nil, lastErr
			case <-time.After(pause):
			}
		}
		pauseNext = true
		target := f.leaderGuess(s, attempt)
		if target != f.cfg.NodeID && f.cfg.Dead != nil && f.cfg.Dead(target) {
			// A paused node's kernel still accepts the connection, and
			// the call would wait out the caller's whole deadline (a
			// failover probe's first try after a pause took 1 s per
			// node): look elsewhere. Raft may name it as the leader
			// until the election it is about to lose.
			f.clearHint(s, target)
			lastErr = raftgroup.ErrNotLeader
			continue
		}
		var out []byte
		var err error
		if target == f.cfg.NodeID {
			out, err = f.local(m)(ctx, body)
		} else if addr := f.cfg.AddrOf(target); addr != "" {
			out, err = f.cfg.Client.Call(ctx, addr, m, body)
		} else {
			f.setHint(s, "")
			continue
		}
		if err == nil {
			f.setHint(s, target)
			return out, nil
		}
		var re *peer.RemoteError
		switch {
		case errors.As(err, &re) && (re.Code == CodeNotLeader || re.Code == CodeNoReplica):
			// A hint naming the node that just said it does not lead, or
			// this node (which does not lead either, or the local replica
			// would have answered), is stale: following it would only
			// come back here. Drop it and look elsewhere.
			hint := followHint(re.Message, target, f.cfg.NodeID)
			f.setHint(s, hint)
			lastErr = raftgroup.ErrNotLeader
			if hint != "" && follows < 3 {
				pauseNext = false // follow the hint at once
				follows++
			}
		case errors.Is(err, peer.ErrUnreachable):
			f.setHint(s, "")
			if write && !notSent(err) {
				return nil, raftgroup.ErrUnknownOutcome
			}
			lastErr = raftgroup.ErrNotLeader
		case ctx.Err() != nil:
			// The target did not answer in time (paused, overloaded or cut
			// off): do not send the next request to it by default.
			f.clearHint(s, target)
			if write {
				return nil, raftgroup.ErrUnknownOutcome
			}
			return nil, lastErr
		default:
			return nil, FromWire(err)
		}
	}
}

// ProposeSlot commits commands on slot s's leader, local or remote, and
// returns one result per command.
func (f *Forwarder) ProposeSlot(ctx context.Context, s int, cmds ...raftfsm.Command) ([]model.Result, error) {
	if r := f.cfg.Slots.Leader(s); r != nil && f.quorate(r.RecentVoters()) {
		res, err := r.Propose(ctx, cmds...)
		if !errors.Is(err, raftgroup.ErrNotLeader) {
			return res, err
		}
	}
	enc := make([][]byte, len(cmds))
	for i, c := range cmds {
		enc[i] = raftfsm.EncodeOne(c)
	}
	out, err := f.forward(ctx, s, MethodProposeSlot, SlotBody(s, raftfsm.EncodeBatch(enc)), true)
	if err != nil {
		return nil, err
	}
	return raftfsm.DecodeResults(out)
}

// ProposeMeta commits commands on the meta leader, then waits until this
// node's copy of the meta state includes them, so the caller's next request
// through this node sees its own change.
func (f *Forwarder) ProposeMeta(ctx context.Context, cmds ...raftfsm.Command) ([]model.Result, error) {
	m := f.cfg.Meta
	if m.IsLeader() {
		if !f.quorate(m.Voters()) {
			return nil, ErrMetaUnavailable
		}
		res, err := m.Propose(ctx, cmds...)
		if !errors.Is(err, raftgroup.ErrNotLeader) {
			return res, err
		}
	}
	enc := make([][]byte, len(cmds))
	for i, c := range cmds {
		enc[i] = raftfsm.EncodeOne(c)
	}
	body := raftfsm.EncodeBatch(enc)
	ctx, cancel := context.WithDeadline(ctx, time.Now().Add(Timeout))
	defer cancel()
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return nil, ErrMetaUnavailable
			case <-time.After(50 * time.Millisecond):
			}
		}
		_, addr := m.Leader()
		if addr == "" {
			continue
		}
		out, err := f.cfg.Client.Call(ctx, addr, MethodProposeMeta, body)
		if err != nil {
			var re *peer.RemoteError
			if errors.As(err, &re) && re.Code == CodeNotLeader {
				continue
			}
			if errors.Is(err, peer.ErrUnreachable) && notSent(err) {
				continue
			}
			if errors.Is(err, peer.ErrUnreachable) || ctx.Err() != nil {
				return nil, raftgroup.ErrUnknownOutcome
			}
			return nil, FromWire(err)
		}
		if len(out) < 8 {
			return nil, errors.New("short meta answer")
		}
		index := binary.BigEndian.Uint64(out)
		res, err := raftfsm.DecodeResults(out[8:])
		if err != nil {
			return nil, err
		}
		m.WaitApplied(ctx, index)
		return res, nil
	}
}

// quorate reports whether a majority of voters (this node counting
// itself) answers liveness pings. A leader cut off from a majority still
// takes proposals until raft's check-quorum deposes it, which with held
// heartbeat answers takes seconds (rpc/beat); such a write's outcome is
// unknown, so the client got no answer at all, and the write could still
// apply once the others were back (a black-box review: a route PUT with
// two of three nodes paused for 3 s). Refused before it is proposed, the
// write changed nothing, and the client gets a 503 to retry (API.md §3).
// The verdicts do not count this node's own stalls against its peers
// (liveness.Tracker), so a starved leader does not refuse for that.
func (f *Forwarder) quorate(voters []string) bool {
	if f.cfg.Dead == nil || len(voters) == 0 {
		return true
	}
	alive := 0
	for _, v := range voters {
		if v == f.cfg.NodeID || !f.cfg.Dead(v) {
			alive++
		}
	}
	return alive*2 > len(voters)
}

// MetaQuorate reports whether this node leads the meta group and a
// majority of its voters answers liveness pings: what a node must hold to
// speak for the meta leader without a proposal (package inflight's owner).
func (f *Forwarder) MetaQuorate() bool {
	m := f.cfg.Meta
	return m.IsLeader() && f.quorate(m.Voters())
}

// CatchUpMeta waits (at most two seconds) until this node's meta state has
// applied everything the meta leader had applied when asked, and returns
// it; it fails with ErrMetaBehind when that cannot be established.
func (f *Forwarder) CatchUpMeta(ctx context.Context) (*raftfsm.MetaState, error) {
	m := f.cfg.Meta
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := m.WaitCaughtUp(ctx); err != nil {
		return nil, ErrMetaBehind
	}
	if m.IsLeader() {
		if err := m.VerifyCurrent(ctx); err != nil {
			return nil, ErrMetaBehind
		}
		return m.State(), nil
	}
	_, addr := m.Leader()
	if addr == "" {
		return nil, ErrMetaBehind
	}
	body, err := f.cfg.Client.Call(ctx, addr, MethodMetaIndex, nil)
	if err != nil || len(body) != 8 {
		return nil, ErrMetaBehind
	}
	m.WaitApplied(ctx, binary.BigEndian.Uint64(body))
	if ctx.Err() != nil {
		return nil, ErrMetaBehind
	}
	return m.State(), nil
}

// GetJob reads a job on slot s's leader.
func (f *Forwarder) GetJob(ctx context.Context, s int, coll, id string) (*model.Job, bool, error) {
	if r := f.cfg.Slots.Reader(s); r != nil && r.VerifyRead() == nil {
		return r.Get(coll, id)
	}
	req, _ := json.Marshal(getJobReq{Coll: coll, ID: id})
	out, err := f.forward(ctx, s, MethodGetJob, SlotBody(s, req), false)
	if err != nil {
		return nil, false, err
	}
	res, err := raftfsm.DecodeResults(out)
	if err != nil || len(res) != 1 {
		return nil, false, errors.Join(err, errors.New("bad get answer"))
	}
	if res[0].Code == model.CodeNotFound {
		return nil, false, nil
	}
	return res[0].Job, true, nil
}

// ListSlot lists a collection's jobs in slot s, on the slot's leader.
func (f *Forwarder) ListSlot(ctx context.Context, s int, q model.ListQuery) (model.ListPage, error) {
	if r := f.cfg.Slots.Reader(s); r != nil && r.VerifyRead() == nil {
		return r.List(q)
	}
	req, _ := json.Marshal(q)
	out, err := f.forward(ctx, s, MethodListJobs, SlotBody(s, req), false)
	if err != nil {
		return model.ListPage{}, err
	}
	var rep listReply
	if err := json.Unmarshal(out, &rep); err != nil {
		return model.ListPage{}, err
	}
	page := model.ListPage{Stopped: rep.Stopped, Pos: rep.Pos}
	for _, b := range rep.Jobs {
		res, err := raftfsm.DecodeResults(b)
		if err != nil || len(res) != 1 || res[0].Job == nil {
			return model.ListPage{}, errors.Join(err, errors.New("bad list answer"))
		}
		page.Jobs = append(page.Jobs, res[0].Job)
	}
	return page, nil
}
