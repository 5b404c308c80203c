package node

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/raftgroup"
	"github.com/timemachine-db/timemachine/rpc/peer"
)

// Node-to-node calls (over the internal port, rpc/peer).
const (
	mProposeSlot peer.Method = 1  // slot u16 | encoded commands → encoded results
	mProposeMeta peer.Method = 2  // encoded commands → index u64 | encoded results
	mGetJob      peer.Method = 3  // slot u16 | collection | id → results with one job (or not_found)
	mListJobs    peer.Method = 4  // slot u16 | JSON ListQuery → JSON listReply
	mSlotStatus  peer.Method = 5  // slot u16 → JSON raftgroup.Status
	mNodeStatus  peer.Method = 6  // → JSON nodeStatus
	mTransfer    peer.Method = 7  // JSON transferReq → {}
	mMetaStatus  peer.Method = 8  // → JSON raftgroup.Status of the meta replica
	mCompact     peer.Method = 9  // → JSON model.CompactResult
	mHasState    peer.Method = 10 // → JSON hasStateReply
	mMetaIndex   peer.Method = 11 // → u64: the meta state's applied index on this node
)

// Error codes carried in peer.RemoteError.Code.
const (
	codeNotLeader      = "not_leader" // Message: the leader's id, if known
	codeNoReplica      = "no_replica"
	codeUnknownOutcome = "unknown_outcome"
	codeClosed         = "closed"
	codeOverloaded     = "overloaded"
	codeStopped        = "stopped"
)

type hasStateReply struct {
	MetaState bool `json:"meta_state"`
	Formed    bool `json:"formed"`
}

type transferReq struct {
	Slot int    `json:"slot"` // -1: the meta group
	To   string `json:"to"`
	Addr string `json:"addr"`
}

type listReply struct {
	Jobs    [][]byte      `json:"jobs"` // EncodeResults of one job each, to keep records binary
	Stopped bool          `json:"stopped"`
	Pos     model.ListPos `json:"pos"`
}

// nodeStatus is one node's report of itself and its replicas.
type nodeStatus struct {
	ID       string                   `json:"id"`
	HTTPAddr string                   `json:"http_addr"`
	Meta     raftgroup.Status         `json:"meta"`
	Slots    map[int]slotReplicaState `json:"slots"`
}

type slotReplicaState struct {
	raftgroup.Status
	Pending int64 `json:"pending"`
}

func slotPrefix(s int, rest []byte) []byte {
	b := make([]byte, 2, 2+len(rest))
	binary.BigEndian.PutUint16(b, uint16(s))
	return append(b, rest...)
}

func splitSlot(b []byte) (int, []byte, error) {
	if len(b) < 2 {
		return 0, nil, errors.New("short request")
	}
	return int(binary.BigEndian.Uint16(b)), b[2:], nil
}

// remoteErr turns a local error into what travels back to the caller.
func remoteErr(err error, leaderHint string) error {
	switch {
	case errors.Is(err, raftgroup.ErrNotLeader):
		return &peer.RemoteError{Code: codeNotLeader, Message: leaderHint}
	case errors.Is(err, raftgroup.ErrUnknownOutcome):
		return &peer.RemoteError{Code: codeUnknownOutcome, Message: err.Error()}
	case errors.Is(err, raftgroup.ErrClosed):
		return &peer.RemoteError{Code: codeClosed, Message: err.Error()}
	case errors.Is(err, raftgroup.ErrOverloaded):
		return &peer.RemoteError{Code: codeOverloaded, Message: err.Error()}
	case errors.Is(err, raftfsm.ErrStopped):
		return &peer.RemoteError{Code: codeStopped, Message: err.Error()}
	}
	var ae *model.Error
	if errors.As(err, &ae) {
		return &peer.RemoteError{Code: string(ae.Kind), Message: ae.Message}
	}
	return err
}

// localErr turns a remote error back into the local error it stands for.
func localErr(err error) error {
	var re *peer.RemoteError
	if !errors.As(err, &re) {
		return err
	}
	switch re.Code {
	case codeNotLeader, codeNoReplica:
		return raftgroup.ErrNotLeader
	case codeUnknownOutcome:
		return raftgroup.ErrUnknownOutcome
	case codeClosed:
		return raftgroup.ErrClosed
	case codeOverloaded:
		return raftgroup.ErrOverloaded
	case codeStopped:
		return raftfsm.ErrStopped
	}
	if k := model.Kind(re.Code); k.Known() {
		return &model.Error{Kind: k, Message: re.Message}
	}
	return err
}

// handleRPC serves calls from other nodes.
func (n *Node) handleRPC(ctx context.Context, m peer.Method, body []byte) ([]byte, error) {
	switch m {
	case mProposeSlot:
		s, rest, err := splitSlot(body)
		if err != nil {
			return nil, err
		}
		r := n.replica(s)
		if r == nil {
			return nil, &peer.RemoteError{Code: codeNoReplica, Message: n.hint(s)}
		}
		cmds, err := raftfsm.SplitBatch(rest)
		if err != nil {
			return nil, err
		}
		res, err := r.ProposeEncoded(ctx, cmds)
		if err != nil {
			id, _ := r.Leader()
			return nil, remoteErr(err, id)
		}
		return raftfsm.EncodeResults(res), nil
	case mProposeMeta:
		cmds, err := raftfsm.SplitBatch(body)
		if err != nil {
			return nil, err
		}
		res, err := n.meta.ProposeEncoded(ctx, cmds)
		if err != nil {
			id, _ := n.meta.Leader()
			return nil, remoteErr(err, id)
		}
		return append(binary.BigEndian.AppendUint64(nil, n.meta.State().Index), raftfsm.EncodeResults(res)...), nil
	case mGetJob:
		s, rest, err := splitSlot(body)
		if err != nil {
			return nil, err
		}
		var q getJobReq
		if err := json.Unmarshal(rest, &q); err != nil {
			return nil, err
		}
		r, err := n.localLeader(s)
		if err != nil {
			return nil, remoteErr(err, n.hint(s))
		}
		j, ok, err := r.Get(q.Coll, q.ID)
		if err != nil {
			return nil, err
		}
		if !ok {
			return raftfsm.EncodeResults([]model.Result{{Code: model.CodeNotFound}}), nil
		}
		return raftfsm.EncodeResults([]model.Result{{Code: model.CodeOK, Job: j}}), nil
	case mListJobs:
		s, rest, err := splitSlot(body)
		if err != nil {
			return nil, err
		}
		var q model.ListQuery
		if err := json.Unmarshal(rest, &q); err != nil {
			return nil, err
		}
		r, err := n.localLeader(s)
		if err != nil {
			return nil, remoteErr(err, n.hint(s))
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
	case mSlotStatus:
		s, _, err := splitSlot(body)
		if err != nil {
			return nil, err
		}
		r := n.replica(s)
		if r == nil {
			return nil, &peer.RemoteError{Code: codeNoReplica, Message: fmt.Sprintf("node %s holds no replica of slot %d", n.id.NodeID, s)}
		}
		return json.Marshal(r.Status())
	case mNodeStatus:
		return json.Marshal(n.localStatus())
	case mTransfer:
		var req transferReq
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, err
		}
		if req.Slot < 0 {
			return []byte("{}"), remoteErr(n.meta.TransferTo(req.To, req.Addr), "")
		}
		r := n.replica(req.Slot)
		if r == nil {
			return nil, &peer.RemoteError{Code: codeNoReplica, Message: fmt.Sprintf("node %s holds no replica of slot %d", n.id.NodeID, req.Slot)}
		}
		if err := r.TransferTo(req.To, req.Addr); err != nil {
			id, _ := r.Leader()
			return nil, remoteErr(err, id)
		}
		return []byte("{}"), nil
	case mMetaStatus:
		return json.Marshal(n.meta.Status())
	case mCompact:
		return json.Marshal(n.compactLocal(ctx))
	case mMetaIndex:
		if !n.meta.IsLeader() {
			id, _ := n.meta.Leader()
			return nil, &peer.RemoteError{Code: codeNotLeader, Message: id}
		}
		return binary.BigEndian.AppendUint64(nil, n.meta.State().Index), nil
	case mHasState:
		has, _ := n.meta.HasState()
		return json.Marshal(hasStateReply{MetaState: has, Formed: n.meta.State().Formed()})
	}
	return nil, fmt.Errorf("unknown method %d", m)
}

type getJobReq struct {
	Coll string `json:"c"`
	ID   string `json:"i"`
}

// localStatus reports this node and its replicas.
func (n *Node) localStatus() nodeStatus {
	st := nodeStatus{ID: n.id.NodeID, HTTPAddr: n.HTTPAddr(), Meta: n.meta.Status(), Slots: map[int]slotReplicaState{}}
	n.mu.RLock()
	defer n.mu.RUnlock()
	for s, r := range n.slots {
		st.Slots[s] = slotReplicaState{Status: r.Status(), Pending: r.Stats().Pending}
	}
	return st
}
