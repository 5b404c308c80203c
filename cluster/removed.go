package cluster

import (
	"context"
	"encoding/json"
	"time"
)

// A removed node (admin remove) that still runs is told so by the meta
// leader (forgetRemoved, MethodRemoved): it logs it once, says so on
// /readyz, stops taking part (no replicas opened, no re-join) and leaves
// the gossip, so it disappears from every member list. Restarting it is
// how it joins again: its new process publishes a later start time.

type removedNotice struct {
	At int64 `json:"at"` // when the node was removed (unix ms)
}

// tellRemoved tells a removed node's process that it was removed.
func (c *Cluster) tellRemoved(id, addr string, at int64) {
	body, _ := json.Marshal(removedNotice{At: at})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := c.cfg.Client.Call(ctx, addr, MethodRemoved, body); err != nil {
		c.log.Debug("telling a removed node it was removed", "node", id, "error", err)
	}
}

func (c *Cluster) serveRemoved(_ context.Context, body []byte) ([]byte, error) {
	var n removedNotice
	if err := json.Unmarshal(body, &n); err != nil {
		return nil, err
	}
	if n.At <= 0 {
		n.At = time.Now().UnixMilli()
	}
	if c.removedAt.CompareAndSwap(0, n.At) {
		c.log.Warn("this node was removed from the cluster (admin remove): it holds and serves nothing; stop it, or restart it to join the cluster again",
			"removed_at", time.UnixMilli(n.At).UTC().Format(time.RFC3339))
		if c.serf != nil {
			go c.leaveSerf()
		}
	}
	return []byte("{}"), nil
}

// Removed reports when this node was removed from the cluster (zero: it
// was not).
func (c *Cluster) Removed() time.Time {
	if at := c.removedAt.Load(); at > 0 {
		return time.UnixMilli(at)
	}
	return time.Time{}
}
