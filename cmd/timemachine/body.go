package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"

	"github.com/timemachine-db/timemachine/client"
)

// pathEscape escapes a name or id for a request path.
func pathEscape(s string) string { return url.PathEscape(s) }

// sendBody sends the JSON object in the file name (--body; "-" is stdin)
// as it is, and decodes the answer into out. The API, not the CLI, reads
// the object: an unknown or misspelt field is its 400 naming the field
// (decoding it here first dropped such a field silently), and a time may
// be RFC 3339, as the API accepts. idempotent reports whether the request
// may be resent after a 503 or a broken connection (a POST only when the
// job has an id).
func sendBody(ctx context.Context, cl *client.Client, method, path, name string, idempotent func(obj map[string]json.RawMessage) bool, out any) error {
	raw, err := readArg(name)
	if err != nil {
		return err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		if err == nil {
			err = errors.New("null")
		}
		return usageErr(fmt.Errorf("--body %s: not a JSON object: %w", name, err))
	}
	_, b, err := cl.Do(ctx, client.RawRequest{Method: method, Path: path, Body: raw, Idempotent: idempotent != nil && idempotent(obj)})
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: the answer is not the API's object: %w", method, path, err)
	}
	return nil
}
