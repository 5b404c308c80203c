package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// Cluster reads the cluster's nodes and slot table (GET /v1/cluster).
func (c *Client) Cluster(ctx context.Context) (ClusterInfo, error) {
	var out ClusterInfo
	if _, err := c.send(ctx, &call{method: http.MethodGet, path: "/v1/cluster", retrySafe: true}, &out); err != nil {
		return ClusterInfo{}, err
	}
	return out, nil
}

// Rebalance plans (dryRun) or starts moving whole slots so that replicas
// and leaders are even. A dry run changes nothing and is resent like a
// read; a real rebalance is not resent (a second plan made while the first
// one's moves run could move more than needed).
func (c *Client) Rebalance(ctx context.Context, dryRun bool) (RebalanceResult, error) {
	path := "/v1/admin/rebalance"
	if dryRun {
		path += "?dry_run=true"
	}
	var out RebalanceResult
	if _, err := c.send(ctx, &call{method: http.MethodPost, path: path, retrySafe: dryRun}, &out); err != nil {
		return RebalanceResult{}, err
	}
	if out.Moves == nil {
		out.Moves = []Move{}
	}
	out.DryRun = out.DryRun || dryRun
	return out, nil
}

// Compact compacts storage and truncates raft logs on every node and
// returns the per-node result. It is not resent: it is heavy, and a resend
// after a broken connection would do the whole work again.
func (c *Client) Compact(ctx context.Context) (CompactResult, error) {
	var out CompactResult
	if _, err := c.send(ctx, &call{method: http.MethodPost, path: "/v1/admin/compact"}, &out); err != nil {
		return CompactResult{}, err
	}
	return out, nil
}

// TransferSlot moves the leadership of slot to node to, and keeps it there
// (to is the slot's preferred leader until the next rebalance or until to
// leaves). The leadership moves with a planned transfer: the old leader
// stops firing and finishes its callbacks in flight first. The answer says
// who leads as it was sent (To once the transfer happened). It is resent
// like a PUT: it sets a target, so a second send ends in the same state.
func (c *Client) TransferSlot(ctx context.Context, slot int, to string) (TransferResult, error) {
	if err := need("target node", to); err != nil {
		return TransferResult{}, err
	}
	if slot < 0 {
		return TransferResult{}, argErrorf("timemachine client: slot %d: want a slot number ≥ 0", slot)
	}
	body, err := encode("transfer", struct {
		To string `json:"to"`
	}{to})
	if err != nil {
		return TransferResult{}, err
	}
	var out TransferResult
	if _, err := c.send(ctx, &call{method: http.MethodPost, path: "/v1/admin/slots/" + strconv.Itoa(slot) + "/transfer", body: body, retrySafe: true}, &out); err != nil {
		return TransferResult{}, err
	}
	if out.To == "" { // an older server answers {}
		out.Slot, out.To, out.PreferredLeader = slot, to, to
	}
	return out, nil
}

// Drain starts moving every replica and leadership off node; the answer
// says what it holds and leads now, and Cluster shows the progress (slots
// in state "moving", Moves). It is resent like a PUT: draining a draining
// node changes nothing.
func (c *Client) Drain(ctx context.Context, node string) (DrainResult, error) {
	if err := need("node id", node); err != nil {
		return DrainResult{}, err
	}
	var out DrainResult
	if _, err := c.send(ctx, &call{method: http.MethodPost, path: "/v1/admin/nodes/" + seg(node) + "/drain", retrySafe: true}, &out); err != nil {
		return DrainResult{}, err
	}
	if out.Node == "" {
		out.Node, out.Status = node, NodeDraining
	}
	return out, nil
}

// RemoveNode takes a node that holds no replica out of the cluster; a node
// that still holds one is a conflict error. force removes a dead node
// whatever it holds. A removed node does not come back through gossip
// unless it is restarted and re-joined. A resend after a removal that did
// happen reports not_found.
func (c *Client) RemoveNode(ctx context.Context, node string, force bool) error {
	if err := need("node id", node); err != nil {
		return err
	}
	path := "/v1/admin/nodes/" + seg(node)
	if force {
		path += "?force=true"
	}
	_, err := c.send(ctx, &call{method: http.MethodDelete, path: path, retrySafe: true}, nil)
	return err
}

// Ready asks every configured address, once each and without failover,
// whether it is ready (GET /readyz: in the cluster and every slot has a
// leader). It returns nil only if all are; otherwise the failures joined,
// each naming its address and carrying the reason (an *Error, unavailable,
// whose message is the reason) or the transport error. Use it to wait for a
// cluster to form.
func (c *Client) Ready(ctx context.Context) error { return c.everyNode(ctx, "/readyz") }

// Healthy asks every configured address, once each, whether its process is
// running (GET /healthz). It returns nil only if all answer 200.
func (c *Client) Healthy(ctx context.Context) error { return c.everyNode(ctx, "/healthz") }

func (c *Client) everyNode(ctx context.Context, path string) error {
	var errs []error
	for i, base := range c.bases {
		if _, err := c.do(ctx, &call{method: http.MethodGet, path: path, single: true, addr: i, anyBody: true}); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", base, err))
		}
	}
	return errors.Join(errs...)
}

// OpenAPI fetches the server's OpenAPI 3.1 description
// (GET /v1/openapi.json) as it is.
func (c *Client) OpenAPI(ctx context.Context) ([]byte, error) {
	r, err := c.do(ctx, &call{method: http.MethodGet, path: "/v1/openapi.json", retrySafe: true})
	if err != nil {
		return nil, err
	}
	return r.body, nil
}

// Metrics fetches the Prometheus text of the next node in turn
// (GET /metrics).
func (c *Client) Metrics(ctx context.Context) ([]byte, error) {
	r, err := c.do(ctx, &call{method: http.MethodGet, path: "/metrics", retrySafe: true, anyBody: true,
		header: [][2]string{{"Accept", "text/plain"}}})
	if err != nil {
		return nil, err
	}
	return r.body, nil
}
