package forward

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/raftgroup"
	"github.com/timemachine-db/timemachine/rpc/peer"
)

type getJobReq struct {
	Coll string `json:"c"`
	ID   string `json:"i"`
}

type listReply struct {
	Jobs    [][]byte      `json:"jobs"` // EncodeResults of one job each, to keep records binary
	Stopped bool          `json:"stopped"`
	Pos     model.ListPos `json:"pos"`
}

// Register installs the handlers of this package's methods on the node's
// peer server.
func (f *Forwarder) Register(s *peer.Server) {
	for _, m := range []peer.Method{MethodProposeSlot, MethodProposeMeta, MethodGetJob, MethodListJobs, MethodMetaIndex, MethodGetSchedule, MethodListSchedules} {
		s.Handle(m, f.local(m))
	}
}

// local is the handler of method m, which also serves calls this node
// forwards to itself.
func (f *Forwarder) local(m peer.Method) peer.HandlerFunc {
	switch m {
	case MethodProposeSlot:
		return f.serveProposeSlot
	case MethodProposeMeta:
		return f.serveProposeMeta
	case MethodGetJob:
		return f.serveGetJob
	case MethodListJobs:
		return f.serveListJobs
	case MethodMetaIndex:
		return f.serveMetaIndex
	case MethodGetSchedule:
		return f.serveGetSchedule
	case MethodListSchedules:
		return f.serveListSchedules
	}
	return func(context.Context, []byte) ([]byte, error) {
		return nil, fmt.Errorf("forward: method %d is not forwarded", m)
	}
}

func (f *Forwarder) serveProposeSlot(ctx context.Context, body []byte) ([]byte, error) {
	s, rest, err := SplitSlotBody(body)
	if err != nil {
		return nil, err
	}
	r := f.cfg.Slots.Get(s)
	if r == nil {
		return nil, NoReplica(f.leaderHint(s))
	}
	if r.IsLeader() && !f.quorate(r.RecentVoters()) {
		// The caller looks for another leader until its deadline, then
		// answers 503 (quorate).
		return nil, ToWire(raftgroup.ErrNotLeader, "")
	}
	cmds, err := raftfsm.SplitBatch(rest)
	if err != nil {
		return nil, err
	}
	res, err := r.ProposeEncoded(ctx, cmds)
	if err != nil {
		return nil, ToWire(err, f.leaderHint(s))
	}
	return raftfsm.EncodeResults(res), nil
}

func (f *Forwarder) serveProposeMeta(ctx context.Context, body []byte) ([]byte, error) {
	cmds, err := raftfsm.SplitBatch(body)
	if err != nil {
		return nil, err
	}
	m := f.cfg.Meta
	if m.IsLeader() && !f.quorate(m.Voters()) {
		// The caller looks for another leader until its deadline, then
		// answers 503 (ProposeMeta).
		return nil, ToWire(raftgroup.ErrNotLeader, "")
	}
	res, err := m.ProposeEncoded(ctx, cmds)
	if err != nil {
		id, _ := m.Leader()
		return nil, ToWire(err, id)
	}
	return append(binary.BigEndian.AppendUint64(nil, m.State().Index), raftfsm.EncodeResults(res)...), nil
}

func (f *Forwarder) serveGetJob(_ context.Context, body []byte) ([]byte, error) {
	s, rest, err := SplitSlotBody(body)
	if err != nil {
		return nil, err
	}
	var q getJobReq
	if err := json.Unmarshal(rest, &q); err != nil {
		return nil, err
	}
	r := f.cfg.Slots.Reader(s)
	if r == nil || r.VerifyRead() != nil {
		// Not the leader, or a leader that cannot prove it is current
		// (barrier pending, liveness lease lost): no stale read.
		return nil, &peer.RemoteError{Code: CodeNotLeader, Message: f.leaderHint(s)}
	}
	j, ok, err := r.Get(q.Coll, q.ID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return raftfsm.EncodeResults([]model.Result{{Code: model.CodeNotFound}}), nil
	}
	code := model.CodeOK
	if j.Status == model.StatusFiring {
		code = model.CodeFiring // the record codec has no firing status
	}
	return raftfsm.EncodeResults([]model.Result{{Code: code, Job: j}}), nil
}

func (f *Forwarder) serveListJobs(_ context.Context, body []byte) ([]byte, error) {
	s, rest, err := SplitSlotBody(body)
	if err != nil {
		return nil, err
	}
	var q model.ListQuery
	if err := json.Unmarshal(rest, &q); err != nil {
		return nil, err
	}
	r := f.cfg.Slots.Reader(s)
	if r == nil || r.VerifyRead() != nil {
		// Not the leader, or a leader that cannot prove it is current
		// (barrier pending, liveness lease lost): no stale read.
		return nil, &peer.RemoteError{Code: CodeNotLeader, Message: f.leaderHint(s)}
	}
	page, err := r.List(q)
	if err != nil {
		return nil, err
	}
	rep := listReply{Stopped: page.Stopped, Pos: page.Pos}
	for _, j := range page.Jobs {
		rep.Jobs = append(rep.Jobs, raftfsm.EncodeResults([]model.Result{{Job: j}}))
	}
	return json.Marshal(rep)
}

func (f *Forwarder) serveMetaIndex(ctx context.Context, _ []byte) ([]byte, error) {
	m := f.cfg.Meta
	// A new leader's index is the one it applied so far, which may trail
	// what its predecessors committed: answer only once it is current.
	if !m.IsLeader() || m.VerifyCurrent(ctx) != nil {
		id, _ := m.Leader()
		return nil, &peer.RemoteError{Code: CodeNotLeader, Message: id}
	}
	return binary.BigEndian.AppendUint64(nil, m.State().Index), nil
}
