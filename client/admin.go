package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"

	"github.com/valyala/fasthttp"
)

func collectionPath(name string) string { return "/v1/collections/" + url.PathEscape(name) }
func routePath(name string) string      { return "/v1/routes/" + url.PathEscape(name) }

// PutCollection creates or replaces a collection's configuration. created is
// true on 201. The answer never carries the signing secret.
func (c *Client) PutCollection(ctx context.Context, name string, coll Collection) (Collection, bool, error) {
	body, err := json.Marshal(collectionSpec{
		RetryPolicy:     coll.RetryPolicy,
		CallbackTimeout: coll.CallbackTimeout,
		Retention:       coll.Retention,
		SigningSecret:   coll.SigningSecret,
	})
	if err != nil {
		return Collection{}, false, fmt.Errorf("timemachine client: encode collection: %w", err)
	}
	status, resp, err := c.do(ctx, &call{method: fasthttp.MethodPut, path: collectionPath(name), body: body})
	if err != nil {
		return Collection{}, false, err
	}
	out := Collection{Name: name}
	if err := decodeBody(resp, &out); err != nil {
		return Collection{}, false, err
	}
	if out.Name == "" {
		out.Name = name
	}
	return out, status == fasthttp.StatusCreated, nil
}

// GetCollection reads a collection's configuration.
func (c *Client) GetCollection(ctx context.Context, name string) (Collection, error) {
	_, resp, err := c.do(ctx, &call{method: fasthttp.MethodGet, path: collectionPath(name)})
	if err != nil {
		return Collection{}, err
	}
	var out Collection
	if err := decodeBody(resp, &out); err != nil {
		return Collection{}, err
	}
	if out.Name == "" {
		out.Name = name
	}
	return out, nil
}

// ListCollections lists every collection ("default" always exists).
func (c *Client) ListCollections(ctx context.Context) ([]Collection, error) {
	_, resp, err := c.do(ctx, &call{method: fasthttp.MethodGet, path: "/v1/collections"})
	if err != nil {
		return nil, err
	}
	var out []Collection
	if err := decodeList(resp, "collections", &out); err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteCollection removes a collection and all its jobs.
func (c *Client) DeleteCollection(ctx context.Context, name string) error {
	_, _, err := c.do(ctx, &call{method: fasthttp.MethodDelete, path: collectionPath(name)})
	return err
}

// PutRoute creates or replaces a route. created is true on 201. The answer
// never carries the signing secret.
func (c *Client) PutRoute(ctx context.Context, name string, r Route) (Route, bool, error) {
	body, err := json.Marshal(routeSpec{
		WebhookURL:    r.WebhookURL,
		Headers:       r.Headers,
		SigningSecret: r.SigningSecret,
		Timeout:       r.Timeout,
	})
	if err != nil {
		return Route{}, false, fmt.Errorf("timemachine client: encode route: %w", err)
	}
	status, resp, err := c.do(ctx, &call{method: fasthttp.MethodPut, path: routePath(name), body: body})
	if err != nil {
		return Route{}, false, err
	}
	var out Route
	if err := decodeBody(resp, &out); err != nil {
		return Route{}, false, err
	}
	if out.Name == "" {
		out.Name = name
	}
	return out, status == fasthttp.StatusCreated, nil
}

// GetRoute reads a route.
func (c *Client) GetRoute(ctx context.Context, name string) (Route, error) {
	_, resp, err := c.do(ctx, &call{method: fasthttp.MethodGet, path: routePath(name)})
	if err != nil {
		return Route{}, err
	}
	var out Route
	if err := decodeBody(resp, &out); err != nil {
		return Route{}, err
	}
	if out.Name == "" {
		out.Name = name
	}
	return out, nil
}

// ListRoutes lists every route.
func (c *Client) ListRoutes(ctx context.Context) ([]Route, error) {
	_, resp, err := c.do(ctx, &call{method: fasthttp.MethodGet, path: "/v1/routes"})
	if err != nil {
		return nil, err
	}
	var out []Route
	if err := decodeList(resp, "routes", &out); err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteRoute removes a route.
func (c *Client) DeleteRoute(ctx context.Context, name string) error {
	_, _, err := c.do(ctx, &call{method: fasthttp.MethodDelete, path: routePath(name)})
	return err
}

// Cluster reads the cluster's nodes and slot table.
func (c *Client) Cluster(ctx context.Context) (ClusterInfo, error) {
	_, resp, err := c.do(ctx, &call{method: fasthttp.MethodGet, path: "/v1/cluster"})
	if err != nil {
		return ClusterInfo{}, err
	}
	var out ClusterInfo
	if err := decodeBody(resp, &out); err != nil {
		return ClusterInfo{}, err
	}
	return out, nil
}

// Ready asks every configured address, once each and without failover,
// whether it is ready (GET /readyz: in the cluster and every slot has a
// leader). It returns nil only if all are; otherwise the failures joined,
// each an *APIError (the reason is the message) or a transport error. Use it
// to wait for a cluster to form.
func (c *Client) Ready(ctx context.Context) error { return c.everyNode(ctx, "/readyz") }

// Healthy asks every configured address, once each, whether its process is
// running (GET /healthz). It returns nil only if all answer 200.
func (c *Client) Healthy(ctx context.Context) error { return c.everyNode(ctx, "/healthz") }

func (c *Client) everyNode(ctx context.Context, path string) error {
	var errs []error
	for i, a := range c.addrs {
		_, _, err := c.do(ctx, &call{method: fasthttp.MethodGet, path: path, single: true, addr: i})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a, err))
		}
	}
	return errors.Join(errs...)
}

// Rebalance plans (dryRun) or starts moving whole slots so replicas and
// leaders are even. It returns the server's answer, {"moves":[…]}.
func (c *Client) Rebalance(ctx context.Context, dryRun bool) (json.RawMessage, error) {
	path := "/v1/admin/rebalance"
	if dryRun {
		path += "?dry_run=true"
	}
	return c.admin(ctx, &call{method: fasthttp.MethodPost, path: path, retrySafe: dryRun})
}

// Compact compacts storage and truncates raft logs on every node and returns
// the per-node result.
func (c *Client) Compact(ctx context.Context) (json.RawMessage, error) {
	return c.admin(ctx, &call{method: fasthttp.MethodPost, path: "/v1/admin/compact"})
}

// TransferSlot moves the leadership of slot to node to.
func (c *Client) TransferSlot(ctx context.Context, slot int, to string) (json.RawMessage, error) {
	body, err := json.Marshal(struct {
		To string `json:"to"`
	}{to})
	if err != nil {
		return nil, fmt.Errorf("timemachine client: encode transfer: %w", err)
	}
	return c.admin(ctx, &call{
		method: fasthttp.MethodPost,
		path:   "/v1/admin/slots/" + strconv.Itoa(slot) + "/transfer",
		body:   body,
	})
}

// Drain moves every replica and leadership off node.
func (c *Client) Drain(ctx context.Context, node string) (json.RawMessage, error) {
	return c.admin(ctx, &call{method: fasthttp.MethodPost, path: "/v1/admin/nodes/" + url.PathEscape(node) + "/drain"})
}

// RemoveNode takes a drained or dead node out of the cluster.
func (c *Client) RemoveNode(ctx context.Context, node string) (json.RawMessage, error) {
	return c.admin(ctx, &call{method: fasthttp.MethodDelete, path: "/v1/admin/nodes/" + url.PathEscape(node)})
}

// admin sends an admin call and returns its answer as raw JSON (nil for an
// empty answer): the admin answers are for people and tools to print, and
// their detail is not fixed by the contract.
func (c *Client) admin(ctx context.Context, cl *call) (json.RawMessage, error) {
	_, resp, err := c.do(ctx, cl)
	if err != nil {
		return nil, err
	}
	if len(resp) == 0 {
		return nil, nil
	}
	return json.RawMessage(resp), nil
}
