package inflight

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/timemachine-db/timemachine/rpc/peer"
)

// The node-to-node methods of this package. Method numbers are part of the
// wire protocol between versions: never reuse one.
const (
	MethodAcquire peer.Method = 50 // JSON acquireReq → {} once granted
	MethodRelease peer.Method = 51 // JSON releaseReq → {}
	MethodRenew   peer.Method = 52 // JSON renewReq → {}
	MethodHeld    peer.Method = 53 // → JSON heldReply: the census
)

// CodeNotOwner: the node asked does not hand out places now.
const CodeNotOwner = "not_owner"

// maxWait bounds how long one acquire call is held on the owner.
const maxWait = 30 * time.Second

type acquireReq struct {
	Key    Key    `json:"k"`
	Route  string `json:"r"`
	Max    int64  `json:"m"`
	Due    int64  `json:"d"`
	WaitMs int64  `json:"w"`
}

type releaseReq struct {
	Key   Key    `json:"k"`
	Route string `json:"r"`
}

type renewReq struct {
	Node   string     `json:"n"`
	Leases []LeaseRef `json:"l"`
}

type heldReply struct {
	Leases []LeaseRef `json:"l"`
}

// Handler is what Register installs on the node's peer server.
type Handler interface {
	Handle(m peer.Method, h peer.HandlerFunc)
}

// Register serves the owner's methods (o) and this node's census (h).
func Register(s Handler, o *Owner, h *Holder) {
	s.Handle(MethodAcquire, func(ctx context.Context, body []byte) ([]byte, error) {
		var req acquireReq
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, fmt.Errorf("acquire: %w", err)
		}
		wait := min(max(time.Duration(req.WaitMs)*time.Millisecond, 0), maxWait)
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		if err := o.Acquire(wctx, req.Route, req.Max, req.Due, req.Key); err != nil {
			return nil, wireErr(err)
		}
		return []byte("{}"), nil
	})
	s.Handle(MethodRelease, func(_ context.Context, body []byte) ([]byte, error) {
		var req releaseReq
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, fmt.Errorf("release: %w", err)
		}
		o.Release(req.Route, req.Key)
		return []byte("{}"), nil
	})
	s.Handle(MethodRenew, func(_ context.Context, body []byte) ([]byte, error) {
		var req renewReq
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, fmt.Errorf("renew: %w", err)
		}
		if err := o.Renew(req.Node, req.Leases); err != nil {
			return nil, wireErr(err)
		}
		return []byte("{}"), nil
	})
	s.Handle(MethodHeld, func(context.Context, []byte) ([]byte, error) {
		return json.Marshal(heldReply{Leases: h.Held()})
	})
}

func wireErr(err error) error {
	if errors.Is(err, ErrNotOwner) {
		return &peer.RemoteError{Code: CodeNotOwner, Message: err.Error()}
	}
	return err
}
