package cluster

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/timemachine-db/timemachine/forward"
	"github.com/timemachine-db/timemachine/rpc/peer"
)

// The node-to-node methods this package serves. Method numbers are part of
// the wire protocol between versions: never reuse one. The forward package
// owns 1-4 and 11.
const (
	MethodSlotStatus peer.Method = 5  // slot u16 → JSON raftgroup.Status of the local replica
	MethodNodeStatus peer.Method = 6  // → JSON NodeStatus
	MethodTransfer   peer.Method = 7  // JSON transferReq → {}
	MethodMetaStatus peer.Method = 8  // → JSON raftgroup.Status of the meta replica
	MethodCompact    peer.Method = 9  // → JSON model.CompactResult
	MethodHasState   peer.Method = 10 // → JSON hasStateReply
	MethodStep       peer.Method = 20 // JSON stepReq → {}: take one membership step of a slot this node leads
	MethodRemoved    peer.Method = 21 // JSON removedNotice → {}: this node was removed from the cluster
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

// Register installs the handlers of this package's methods on the node's
// peer server.
func (c *Cluster) Register(s *peer.Server) {
	s.Handle(MethodSlotStatus, c.serveSlotStatus)
	s.Handle(MethodNodeStatus, func(context.Context, []byte) ([]byte, error) { return json.Marshal(c.localStatus()) })
	s.Handle(MethodTransfer, c.serveTransfer)
	s.Handle(MethodMetaStatus, func(context.Context, []byte) ([]byte, error) { return json.Marshal(c.cfg.Meta.Status()) })
	s.Handle(MethodCompact, func(ctx context.Context, _ []byte) ([]byte, error) { return json.Marshal(c.compactLocal(ctx)) })
	s.Handle(MethodStep, c.serveStep)
	s.Handle(MethodRemoved, c.serveRemoved)
	s.Handle(MethodHasState, func(context.Context, []byte) ([]byte, error) {
		has, _ := c.cfg.Meta.HasState()
		return json.Marshal(hasStateReply{MetaState: has, Formed: c.cfg.Meta.State().Formed()})
	})
}

func (c *Cluster) noReplica(s int) error {
	return &peer.RemoteError{Code: forward.CodeNoReplica, Message: fmt.Sprintf("node %s holds no replica of slot %d", c.cfg.NodeID, s)}
}

func (c *Cluster) serveSlotStatus(_ context.Context, body []byte) ([]byte, error) {
	s, _, err := forward.SplitSlotBody(body)
	if err != nil {
		return nil, err
	}
	r := c.cfg.Slots.Get(s)
	if r == nil {
		return nil, c.noReplica(s)
	}
	return json.Marshal(r.Status())
}

func (c *Cluster) serveTransfer(_ context.Context, body []byte) ([]byte, error) {
	var req transferReq
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	if req.Slot < 0 {
		return []byte("{}"), forward.ToWire(c.cfg.Meta.TransferTo(req.To, req.Addr), "")
	}
	r := c.cfg.Slots.Get(req.Slot)
	if r == nil {
		return nil, c.noReplica(req.Slot)
	}
	if err := r.TransferTo(req.To, req.Addr); err != nil {
		id, _ := r.Leader()
		return nil, forward.ToWire(err, id)
	}
	return []byte("{}"), nil
}
