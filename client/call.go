package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
)

// send runs cl and decodes a 2xx JSON answer into out (nil: the body is
// not needed). It returns the status. An answer whose body does not decode
// into out is a *ProtocolError: the server at that address does not speak
// this contract.
func (c *Client) send(ctx context.Context, cl *call, out any) (int, error) {
	r, err := c.do(ctx, cl)
	if err != nil {
		return 0, err
	}
	if out == nil || len(bytes.TrimSpace(r.body)) == 0 {
		return r.status, nil
	}
	if err := json.Unmarshal(r.body, out); err != nil {
		return 0, r.protocolError(err)
	}
	return r.status, nil
}

// sendList is send for a list answer that is an object holding the array
// under key ({"collections":[…]}) or, from older servers, a bare array.
func (c *Client) sendList(ctx context.Context, cl *call, key string, out any) error {
	r, err := c.do(ctx, cl)
	if err != nil {
		return err
	}
	body := bytes.TrimSpace(r.body)
	if len(body) == 0 {
		return nil
	}
	if body[0] != '[' {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil {
			return r.protocolError(err)
		}
		raw, ok := m[key]
		if !ok {
			return r.protocolError(fmt.Errorf("no %q in the list answer", key))
		}
		body = raw
	}
	if err := json.Unmarshal(body, out); err != nil {
		return r.protocolError(err)
	}
	return nil
}

// encode marshals a request body.
func encode(what string, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("timemachine client: encode %s: %w", what, err)
	}
	return b, nil
}

// seg escapes one path segment.
func seg(s string) string { return url.PathEscape(s) }

func withQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}
