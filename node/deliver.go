package node

import (
	"context"
	"sync"

	"github.com/timemachine-db/timemachine/rpc/webhook"
	"github.com/timemachine-db/timemachine/slot"
)

// deliverer adapts the webhook client to the slot's Deliverer: it turns a
// resolved delivery into the wire request and decodes signing secrets once.
type deliverer struct {
	c       *webhook.Client
	mu      sync.RWMutex
	secrets map[string][]byte
}

func newDeliverer(c *webhook.Client) *deliverer {
	return &deliverer{c: c, secrets: map[string][]byte{}}
}

func (d *deliverer) key(secret string) []byte {
	if secret == "" {
		return nil
	}
	d.mu.RLock()
	k, ok := d.secrets[secret]
	d.mu.RUnlock()
	if ok {
		return k
	}
	k, err := webhook.ParseSecret(secret)
	if err != nil {
		return nil // validated on the way in; cannot happen for stored secrets
	}
	d.mu.Lock()
	if len(d.secrets) > 10000 {
		d.secrets = map[string][]byte{}
	}
	d.secrets[secret] = k
	d.mu.Unlock()
	return k
}

func (d *deliverer) Deliver(ctx context.Context, x *slot.Delivery) slot.DeliveryResult {
	j := x.Job
	res := d.c.Deliver(ctx, &webhook.Request{
		URL:     x.URL,
		Headers: x.Headers,
		Payload: webhook.Payload{
			ID:          j.ID,
			Collection:  j.Collection,
			TriggerTime: j.TriggerTime,
			Attempt:     int(x.Attempt),
			Meta:        j.Meta,
		},
		IdempotencyKey: webhook.IdempotencyKey(j.Collection, j.ID, j.TriggerTime),
		SigningKey:     d.key(x.SigningSecret),
		Timeout:        x.Timeout,
		Now:            x.Now,
	})
	return slot.DeliveryResult{
		StatusCode:    res.StatusCode,
		Err:           res.Err,
		TimedOut:      res.TimedOut,
		RetryAfter:    res.RetryAfter,
		HasRetryAfter: res.HasRetryAfter,
		RescheduleAt:  res.RescheduleAt,
		RescheduleIn:  res.RescheduleIn,
		RescheduleErr: res.RescheduleErr,
		BodySnippet:   res.BodySnippet,
	}
}
