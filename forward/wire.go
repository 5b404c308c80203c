package forward

import (
	"encoding/binary"
	"errors"

	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/raftgroup"
	"github.com/timemachine-db/timemachine/rpc/peer"
)

// The node-to-node methods this package serves. Method numbers are part of
// the wire protocol between versions: never reuse one. The cluster package
// owns 5-10 (see cluster/peer.go).
const (
	MethodProposeSlot peer.Method = 1  // slot u16 | encoded commands → encoded results
	MethodProposeMeta peer.Method = 2  // encoded commands → index u64 | encoded results
	MethodGetJob      peer.Method = 3  // slot u16 | JSON getJobReq → results with one job (or not_found)
	MethodListJobs    peer.Method = 4  // slot u16 | JSON ListQuery → JSON listReply
	MethodMetaIndex   peer.Method = 11 // → u64: the meta state's applied index on the meta leader
)

// Error codes carried in peer.RemoteError.Code besides model's kinds.
const (
	CodeNotLeader      = "not_leader" // Message: the leader's id, if known
	CodeNoReplica      = "no_replica" // the node holds no replica of the slot
	CodeUnknownOutcome = "unknown_outcome"
	CodeClosed         = "closed"
	CodeOverloaded     = "overloaded" // the raft queue is full (the same word as model.KindOverloaded, meant alike)
	CodeStopped        = "stopped"
	CodeStorage        = "storage_failed"
)

// ToWire turns a local error into what travels back to the caller:
// raftgroup's errors and a stopped state machine by code (leaderHint
// names the leader for not_leader), a model error by its kind, anything
// else as its text.
func ToWire(err error, leaderHint string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raftgroup.ErrNotLeader):
		return &peer.RemoteError{Code: CodeNotLeader, Message: leaderHint}
	case errors.Is(err, raftgroup.ErrUnknownOutcome):
		return &peer.RemoteError{Code: CodeUnknownOutcome, Message: err.Error()}
	case errors.Is(err, raftgroup.ErrClosed):
		return &peer.RemoteError{Code: CodeClosed, Message: err.Error()}
	case errors.Is(err, raftgroup.ErrOverloaded):
		return &peer.RemoteError{Code: CodeOverloaded, Message: err.Error()}
	case errors.Is(err, raftfsm.ErrStopped):
		return &peer.RemoteError{Code: CodeStopped, Message: err.Error()}
	case errors.Is(err, raftgroup.ErrStorage):
		return &peer.RemoteError{Code: CodeStorage, Message: raftgroup.ErrStorage.Error()}
	}
	if me, ok := model.AsError(err); ok {
		return &peer.RemoteError{Code: string(me.Kind), Message: me.Message}
	}
	return err
}

// FromWire turns a remote error back into the local error it stands for;
// other errors (unreachable, ctx) are returned as they are.
func FromWire(err error) error {
	var re *peer.RemoteError
	if !errors.As(err, &re) {
		return err
	}
	switch re.Code {
	case CodeNotLeader, CodeNoReplica:
		return raftgroup.ErrNotLeader
	case CodeUnknownOutcome:
		return raftgroup.ErrUnknownOutcome
	case CodeClosed:
		return raftgroup.ErrClosed
	case CodeOverloaded:
		return raftgroup.ErrOverloaded
	case CodeStopped:
		return raftfsm.ErrStopped
	case CodeStorage:
		return raftgroup.ErrStorage
	}
	if k := model.Kind(re.Code); k.Known() {
		return &model.Error{Kind: k, Message: re.Message}
	}
	return err
}

// NoReplica is the answer of a node asked about a slot it holds no
// replica of; hint names the leader it last heard of, if any.
func NoReplica(hint string) error { return &peer.RemoteError{Code: CodeNoReplica, Message: hint} }

// SlotBody prefixes rest with a slot number, as slot calls carry it.
func SlotBody(s int, rest []byte) []byte {
	b := make([]byte, 2, 2+len(rest))
	binary.BigEndian.PutUint16(b, uint16(s))
	return append(b, rest...)
}

// SplitSlotBody is the inverse of SlotBody.
func SplitSlotBody(b []byte) (int, []byte, error) {
	if len(b) < 2 {
		return 0, nil, errors.New("short request")
	}
	return int(binary.BigEndian.Uint16(b)), b[2:], nil
}
