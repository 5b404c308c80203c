package client

import (
	"context"
	"net/http"
)

func routePath(name string) string { return "/v1/routes/" + seg(name) }

// PutCollection creates or replaces a collection's configuration; created
// is true on 201. The answer never carries the signing secret (see
// Collection.SigningSecretSet).
func (c *Client) PutCollection(ctx context.Context, name string, coll Collection) (Collection, bool, error) {
	if err := need("collection", name); err != nil {
		return Collection{}, false, err
	}
	body, err := encode("collection", collectionSpec{
		RetryPolicy:     coll.RetryPolicy,
		CallbackTimeout: coll.CallbackTimeout,
		Retention:       coll.Retention,
		SigningSecret:   coll.SigningSecret,
	})
	if err != nil {
		return Collection{}, false, err
	}
	var out Collection
	status, err := c.send(ctx, &call{method: http.MethodPut, path: collectionPath(name), body: body, retrySafe: true}, &out)
	if err != nil {
		return Collection{}, false, err
	}
	if out.Name == "" {
		out.Name = name
	}
	return out, status == http.StatusCreated, nil
}

// GetCollection reads a collection's configuration.
func (c *Client) GetCollection(ctx context.Context, name string) (Collection, error) {
	if err := need("collection", name); err != nil {
		return Collection{}, err
	}
	var out Collection
	if _, err := c.send(ctx, &call{method: http.MethodGet, path: collectionPath(name), retrySafe: true}, &out); err != nil {
		return Collection{}, err
	}
	if out.Name == "" {
		out.Name = name
	}
	return out, nil
}

// ListCollections lists every collection ("default" always exists).
func (c *Client) ListCollections(ctx context.Context) ([]Collection, error) {
	var out []Collection
	if err := c.sendList(ctx, &call{method: http.MethodGet, path: "/v1/collections", retrySafe: true}, "collections", &out); err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteCollection removes a collection and all its jobs.
func (c *Client) DeleteCollection(ctx context.Context, name string) error {
	if err := need("collection", name); err != nil {
		return err
	}
	_, err := c.send(ctx, &call{method: http.MethodDelete, path: collectionPath(name), retrySafe: true}, nil)
	return err
}

// PutRoute creates or replaces a route; created is true on 201. The answer
// never carries the signing secret.
func (c *Client) PutRoute(ctx context.Context, name string, r Route) (Route, bool, error) {
	if err := need("route", name); err != nil {
		return Route{}, false, err
	}
	body, err := encode("route", routeSpec{
		WebhookURL:    r.WebhookURL,
		Headers:       r.Headers,
		SigningSecret: r.SigningSecret,
		Timeout:       r.Timeout,
		RateLimit:     r.RateLimit,
		MaxInFlight:   r.MaxInFlight,
		Batch:         r.Batch,
		Pipeline:      r.Pipeline,
	})
	if err != nil {
		return Route{}, false, err
	}
	var out Route
	status, err := c.send(ctx, &call{method: http.MethodPut, path: routePath(name), body: body, retrySafe: true}, &out)
	if err != nil {
		return Route{}, false, err
	}
	if out.Name == "" {
		out.Name = name
	}
	return out, status == http.StatusCreated, nil
}

// GetRoute reads a route.
func (c *Client) GetRoute(ctx context.Context, name string) (Route, error) {
	if err := need("route", name); err != nil {
		return Route{}, err
	}
	var out Route
	if _, err := c.send(ctx, &call{method: http.MethodGet, path: routePath(name), retrySafe: true}, &out); err != nil {
		return Route{}, err
	}
	if out.Name == "" {
		out.Name = name
	}
	return out, nil
}

// ListRoutes lists every route.
func (c *Client) ListRoutes(ctx context.Context) ([]Route, error) {
	var out []Route
	if err := c.sendList(ctx, &call{method: http.MethodGet, path: "/v1/routes", retrySafe: true}, "routes", &out); err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteRoute removes a route. Jobs that name it fail at fire time.
func (c *Client) DeleteRoute(ctx context.Context, name string) error {
	if err := need("route", name); err != nil {
		return err
	}
	_, err := c.send(ctx, &call{method: http.MethodDelete, path: routePath(name), retrySafe: true}, nil)
	return err
}
