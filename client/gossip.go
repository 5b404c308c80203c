package client

import (
	"context"
	"net/http"
)

// GossipKeyring is what the gossip keyring calls answer: which keys the
// members hold, by fingerprint ("sha256:…"; keys themselves are never
// shown).
type GossipKeyring struct {
	// Keys maps each installed key's fingerprint to the number of members
	// holding it; PrimaryKeys the same for the key members encrypt with.
	Keys        map[string]int    `json:"keys"`
	PrimaryKeys map[string]int    `json:"primary_keys"`
	Nodes       int               `json:"nodes"`
	Responses   int               `json:"responses"`
	Errors      map[string]string `json:"errors,omitempty"`
}

// GossipKeys lists the gossip encryption keys of every member (admin).
func (c *Client) GossipKeys(ctx context.Context) (GossipKeyring, error) {
	var out GossipKeyring
	if _, err := c.send(ctx, &call{method: http.MethodGet, path: "/v1/admin/gossip/keys", retrySafe: true}, &out); err != nil {
		return GossipKeyring{}, err
	}
	return out, nil
}

// ChangeGossipKeys installs, uses (makes primary) or removes a gossip key
// (base64 of 16, 24 or 32 bytes) on every member (admin). Each operation
// is idempotent, so it is resent like a PUT.
func (c *Client) ChangeGossipKeys(ctx context.Context, op, key string) (GossipKeyring, error) {
	switch op {
	case "install", "use", "remove":
	default:
		return GossipKeyring{}, argErrorf("timemachine client: gossip key operation %q: want install, use or remove", op)
	}
	if err := need("gossip key", key); err != nil {
		return GossipKeyring{}, err
	}
	body, err := encode("gossip key", struct {
		Op  string `json:"op"`
		Key string `json:"key"`
	}{op, key})
	if err != nil {
		return GossipKeyring{}, err
	}
	var out GossipKeyring
	if _, err := c.send(ctx, &call{method: http.MethodPost, path: "/v1/admin/gossip/keys", body: body, retrySafe: true}, &out); err != nil {
		return GossipKeyring{}, err
	}
	return out, nil
}
