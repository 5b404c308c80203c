package node

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net"
	"time"

	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/raftgroup"
	"github.com/timemachine-db/timemachine/rpc/peer"
	"github.com/timemachine-db/timemachine/slot"
)

// errMetaUnavailable: the meta group has no reachable leader.
var errMetaUnavailable = errors.New("the cluster's meta group has no leader right now (an election is in progress, or a majority of its voters is down)")

// forwardTimeout bounds how long a request looks for a slot's leader
// (through an election, say) before it is answered 503.
const forwardTimeout = 5 * time.Second

func (n *Node) hint(s int) string {
	n.hintMu.Lock()
	defer n.hintMu.Unlock()
	return n.hints[s]
}

func (n *Node) setHint(s int, id string) {
	n.hintMu.Lock()
	n.hints[s] = id
	n.hintMu.Unlock()
}

// addrOf returns a node's internal address.
func (n *Node) addrOf(id string) string {
	if id == n.id.NodeID {
		return n.mux.Addr().String()
	}
	if nd, ok := n.meta.State().Nodes[id]; ok && nd.BindAddr != "" {
		return nd.BindAddr
	}
	for _, m := range n.members() {
		if m.ID == id {
			return m.BindAddr
		}
	}
	return ""
}

// replica returns the local replica of a slot, or nil.
func (n *Node) replica(s int) *slot.Replica {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.slots[s]
}

// localLeader returns the local replica of a slot if it leads the slot.
func (n *Node) localLeader(s int) (*slot.Replica, error) {
	r := n.replica(s)
	if r == nil || !r.IsLeader() {
		return nil, raftgroup.ErrNotLeader
	}
	return r, nil
}

// leaderGuess names the node to try for a slot's leader on this attempt:
// the last leader that answered, what a local replica believes, then the
// slot's replicas in turn.
func (n *Node) leaderGuess(s, attempt int) string {
	if h := n.hint(s); h != "" {
		return h
	}
	if r := n.replica(s); r != nil {
		if id, _ := r.Leader(); id != "" && attempt%2 == 0 {
			return id
		}
	}
	st := n.meta.State()
	if s < len(st.Slots) && len(st.Slots[s].Replicas) > 0 {
		reps := st.Slots[s].Replicas
		return reps[attempt%len(reps)]
	}
	return n.id.NodeID
}

// notSent reports whether a call failed before the request could reach the
// peer (a failed dial), so that even a write may safely be sent elsewhere.
func notSent(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

// forward sends a slot call to the slot's leader, wherever it is, following
// not-leader hints and moving past unreachable nodes until forwardTimeout.
// write marks calls that change state: those are not resent after a
// failure that may have happened after the leader received them.
func (n *Node) forward(ctx context.Context, s int, m peer.Method, body []byte, write bool) ([]byte, error) {
	deadline := time.Now().Add(forwardTimeout)
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
		target := n.leaderGuess(s, attempt)
		var out []byte
		var err error
		if target == n.id.NodeID {
			out, err = n.handleRPC(ctx, m, body)
		} else if addr := n.addrOf(target); addr != "" {
			out, err = n.rpc.Call(ctx, addr, m, body)
		} else {
			n.setHint(s, "")
			continue
		}
		if err == nil {
			n.setHint(s, target)
			return out, nil
		}
		var re *peer.RemoteError
		switch {
		case errors.As(err, &re) && (re.Code == codeNotLeader || re.Code == codeNoReplica):
			n.setHint(s, re.Message)
			lastErr = raftgroup.ErrNotLeader
			if re.Message != "" && re.Message != target && follows < 3 {
				pauseNext = false // follow the hint at once
				follows++
			}
		case errors.Is(err, peer.ErrUnreachable):
			n.setHint(s, "")
			if write && !notSent(err) {
				return nil, raftgroup.ErrUnknownOutcome
			}
			lastErr = raftgroup.ErrNotLeader
		case ctx.Err() != nil:
			if write {
				return nil, raftgroup.ErrUnknownOutcome
			}
			return nil, lastErr
		default:
			return nil, localErr(err)
		}
	}
}

// proposeSlot commits commands on a slot's leader, local or remote.
func (n *Node) proposeSlot(ctx context.Context, s int, cmds ...raftfsm.Command) ([]model.Result, error) {
	if r := n.replica(s); r != nil && r.IsLeader() {
		res, err := r.Propose(ctx, cmds...)
		if !errors.Is(err, raftgroup.ErrNotLeader) {
			return res, err
		}
	}
	enc := make([][]byte, len(cmds))
	for i, c := range cmds {
		enc[i] = raftfsm.EncodeOne(c)
	}
	out, err := n.forward(ctx, s, mProposeSlot, slotPrefix(s, raftfsm.EncodeBatch(enc)), true)
	if err != nil {
		return nil, err
	}
	return raftfsm.DecodeResults(out)
}

// proposeMeta commits commands on the meta leader, then waits until this
// node's copy of the meta state includes them, so the caller's next request
// through this node sees its own change.
func (n *Node) proposeMeta(ctx context.Context, cmds ...raftfsm.Command) ([]model.Result, error) {
	if n.meta.IsLeader() {
		res, err := n.meta.Propose(ctx, cmds...)
		if !errors.Is(err, raftgroup.ErrNotLeader) {
			return res, err
		}
	}
	enc := make([][]byte, len(cmds))
	for i, c := range cmds {
		enc[i] = raftfsm.EncodeOne(c)
	}
	body := raftfsm.EncodeBatch(enc)
	deadline := time.Now().Add(forwardTimeout)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return nil, errMetaUnavailable
			case <-time.After(50 * time.Millisecond):
			}
		}
		_, addr := n.meta.Leader()
		if addr == "" {
			continue
		}
		out, err := n.rpc.Call(ctx, addr, mProposeMeta, body)
		if err != nil {
			var re *peer.RemoteError
			if errors.As(err, &re) && re.Code == codeNotLeader {
				continue
			}
			if errors.Is(err, peer.ErrUnreachable) && notSent(err) {
				continue
			}
			if errors.Is(err, peer.ErrUnreachable) || ctx.Err() != nil {
				return nil, raftgroup.ErrUnknownOutcome
			}
			return nil, localErr(err)
		}
		if len(out) < 8 {
			return nil, errors.New("short meta answer")
		}
		index := binary.BigEndian.Uint64(out)
		res, err := raftfsm.DecodeResults(out[8:])
		if err != nil {
			return nil, err
		}
		n.meta.WaitApplied(ctx, index)
		return res, nil
	}
}

// getJob reads a job on its slot's leader.
func (n *Node) getJob(ctx context.Context, s int, coll, id string) (*model.Job, bool, error) {
	if r := n.replica(s); r != nil && r.IsLeader() {
		return r.Get(coll, id)
	}
	req, _ := json.Marshal(getJobReq{Coll: coll, ID: id})
	out, err := n.forward(ctx, s, mGetJob, slotPrefix(s, req), false)
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

// listSlot lists a collection's jobs in one slot, on the slot's leader.
func (n *Node) listSlot(ctx context.Context, s int, q model.ListQuery) (model.ListPage, error) {
	if r := n.replica(s); r != nil && r.IsLeader() {
		return r.List(q)
	}
	req, _ := json.Marshal(q)
	out, err := n.forward(ctx, s, mListJobs, slotPrefix(s, req), false)
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
