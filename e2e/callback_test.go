package e2e

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/rpc/webhook"
)

// newSecret returns a Standard Webhooks signing secret: "whsec_" + base64
// of 32 random bytes.
func newSecret(t testing.TB) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// verifyStandard checks a webhook-signature header the way the Standard
// Webhooks spec says a receiver does, written here independently of
// rpc/webhook: the key is the base64-decoded part after "whsec_", the
// signed content is "<webhook-id>.<webhook-timestamp>.<body>", the
// signature is base64(HMAC-SHA256) after "v1,", and the header may carry
// several space-separated signatures.
func verifyStandard(secret string, h http.Header, body []byte) bool {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(h.Get("webhook-id") + "." + h.Get("webhook-timestamp") + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, sig := range strings.Fields(h.Get("webhook-signature")) {
		v, b64, ok := strings.Cut(sig, ",")
		if !ok || v != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err == nil && hmac.Equal(got, want) {
			return true
		}
	}
	return false
}

// sameJSON reports whether a and b are the same JSON value (numbers
// compared as written, so big integers must survive exactly).
func sameJSON(a, b []byte) bool {
	dec := func(x []byte) (any, error) {
		d := json.NewDecoder(bytes.NewReader(x))
		d.UseNumber()
		var v any
		err := d.Decode(&v)
		return v, err
	}
	va, ea := dec(a)
	vb, eb := dec(b)
	return ea == nil && eb == nil && reflect.DeepEqual(va, vb)
}

// TestCallbackSignedAndShaped: headers, body, signatures (collection
// secret, a route's secret winning over it, unsigned), route headers.
func TestCallbackSignedAndShaped(t *testing.T) {
	t.Parallel()
	s := shared(t)
	rcv := newReceiver(t)

	collSecret, routeSecret := newSecret(t), newSecret(t)
	signed := s.newCollection(t, "signed", map[string]any{"signing_secret": collSecret})
	plain := s.newCollection(t, "plain", nil)
	route := uniq("sigroute")
	r := s.Do(t, "PUT", "/v1/routes/"+route, map[string]any{
		"webhook_url":    rcv.URL + "/via-route",
		"headers":        map[string]string{"X-Custom": "hello", "X-Tenant": "t-1"},
		"signing_secret": routeSecret,
	})
	mustStatus(t, "PUT route", r, http.StatusCreated)

	// Secrets are never echoed.
	for _, p := range []string{"/v1/collections/" + signed, "/v1/collections", "/v1/routes/" + route, "/v1/routes"} {
		r := s.Do(t, "GET", p, nil)
		mustStatus(t, "GET "+p, r, http.StatusOK)
		for _, sec := range []string{collSecret, routeSecret} {
			if bytes.Contains(r.Body, []byte(strings.TrimPrefix(sec, "whsec_"))) {
				t.Errorf("GET %s echoes a signing secret: %s", p, r.Body)
			}
		}
	}

	meta := []byte(`{"user":42,"big":12345678901234567890,"frac":0.25,"neg":-7,"s":"h\u00e9llo \u2603 \"q\" \\ \n","nested":{"a":[1,{"b":null},true,false,"x"]},"empty":{},"list":[]}`)
	trigger := nowMs() + 300
	s.createJob(t, signed, map[string]any{"id": "direct", "trigger_time": trigger, "callback_url": rcv.URL + "/direct?x=1", "meta": json.RawMessage(meta)})
	s.createJob(t, signed, map[string]any{"id": "routed", "trigger_time": trigger, "route": route, "meta": []any{"m"}})
	s.createJob(t, plain, map[string]any{"id": "unsigned", "trigger_time": trigger, "callback_url": rcv.URL + "/plain", "meta": "just a string"})
	s.createJob(t, plain, map[string]any{"id": "plain-routed", "trigger_time": trigger, "route": route})

	key, err := webhook.ParseSecret(collSecret)
	if err != nil {
		t.Fatal(err)
	}
	routeKey, err := webhook.ParseSecret(routeSecret)
	if err != nil {
		t.Fatal(err)
	}

	checkCommon := func(d *Delivery, coll, id string) {
		t.Helper()
		if ct := d.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("%s: Content-Type %q", id, ct)
		}
		if k := d.Header.Get("Idempotency-Key"); k != idemKey(coll, id, trigger) {
			t.Errorf("%s: Idempotency-Key %q, want %q", id, k, idemKey(coll, id, trigger))
		}
		if a := d.Header.Get("X-Timemachine-Attempt"); a != "1" {
			t.Errorf("%s: X-Timemachine-Attempt %q, want 1", id, a)
		}
		if msg := checkOnTime(d, trigger); msg != "" {
			t.Error(msg)
		}
		var body map[string]json.RawMessage
		if err := json.Unmarshal(d.Body, &body); err != nil {
			t.Fatalf("%s: body %q: %v", id, d.Body, err)
		}
		var keys []string
		for k := range body {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if strings.Join(keys, ",") != "attempt,collection,id,meta,trigger_time" {
			t.Errorf("%s: body has fields %v, want exactly id, collection, trigger_time, attempt, meta: %s", id, keys, d.Body)
		}
		p := d.Payload
		if p.ID != id || p.Collection != coll || p.TriggerTime != trigger || p.Attempt != 1 {
			t.Errorf("%s: payload %s", id, d.Body)
		}
	}
	checkSigned := func(d *Delivery, secret string, k, wrongKey []byte) {
		t.Helper()
		id := d.Payload.ID
		wid := d.Header.Get("webhook-id")
		if wid != d.Header.Get("Idempotency-Key") || wid != idemKey(d.Payload.Collection, id, trigger) {
			t.Errorf("%s: webhook-id %q, Idempotency-Key %q", id, wid, d.Header.Get("Idempotency-Key"))
		}
		ts, err := strconv.ParseInt(d.Header.Get("webhook-timestamp"), 10, 64)
		if err != nil {
			t.Errorf("%s: webhook-timestamp %q is not unix seconds", id, d.Header.Get("webhook-timestamp"))
		} else if diff := ts - d.At.Unix(); diff < -5 || diff > 5 {
			t.Errorf("%s: webhook-timestamp %d is %d s from the receive time", id, ts, diff)
		}
		sig := d.Header.Get("webhook-signature")
		if !strings.HasPrefix(sig, "v1,") {
			t.Errorf("%s: webhook-signature %q does not start with v1,", id, sig)
		}
		if !verifyStandard(secret, d.Header, d.Body) {
			t.Errorf("%s: webhook-signature %q does not verify (independent HMAC) over %q", id, sig, d.Body)
		}
		if !webhook.Verify(k, wid, ts, d.Body, sig) {
			t.Errorf("%s: webhook.Verify rejects the signature", id)
		}
		if webhook.Verify(wrongKey, wid, ts, d.Body, sig) {
			t.Errorf("%s: the signature also verifies with the other secret", id)
		}
		// Tampering is detected.
		if verifyStandard(secret, d.Header, append(append([]byte(nil), d.Body...), ' ')) {
			t.Errorf("%s: a changed body still verifies", id)
		}
	}
	wait := time.Until(time.UnixMilli(trigger)) + lateBound + waitSlack

	d := rcv.WaitN(t, signed, "direct", 1, wait)[0]
	checkCommon(d, signed, "direct")
	checkSigned(d, collSecret, key, routeKey)
	if !sameJSON(d.Payload.Meta, meta) {
		t.Errorf("meta not echoed exactly:\n got %s\nwant %s", d.Payload.Meta, meta)
	}
	if d.Path != "/direct" {
		t.Errorf("direct: path %q, want /direct", d.Path)
	}

	d = rcv.WaitN(t, signed, "routed", 1, wait)[0]
	checkCommon(d, signed, "routed")
	checkSigned(d, routeSecret, routeKey, key) // the route's secret wins
	if d.Path != "/via-route" || d.Header.Get("X-Custom") != "hello" || d.Header.Get("X-Tenant") != "t-1" {
		t.Errorf("routed: path %q, X-Custom %q, X-Tenant %q", d.Path, d.Header.Get("X-Custom"), d.Header.Get("X-Tenant"))
	}
	if !sameJSON(d.Payload.Meta, []byte(`["m"]`)) {
		t.Errorf("routed: meta %s", d.Payload.Meta)
	}

	d = rcv.WaitN(t, plain, "unsigned", 1, wait)[0]
	checkCommon(d, plain, "unsigned")
	if v := d.Header.Values("webhook-signature"); len(v) != 0 {
		t.Errorf("unsigned collection: webhook-signature %q", v)
	}
	if !sameJSON(d.Payload.Meta, []byte(`"just a string"`)) {
		t.Errorf("unsigned: meta %s", d.Payload.Meta)
	}

	// A route's secret signs even in an unsigned collection.
	d = rcv.WaitN(t, plain, "plain-routed", 1, wait)[0]
	if d.Path != "/via-route" {
		t.Errorf("plain-routed: path %q", d.Path)
	}
	checkSigned(d, routeSecret, routeKey, key)

	for _, j := range [][2]string{{signed, "direct"}, {signed, "routed"}, {plain, "unsigned"}, {plain, "plain-routed"}} {
		s.waitStatus(t, j[0], j[1], "succeeded", 5*time.Second)
		rcv.ExpectNoMore(t, j[0], j[1], 1, 0)
	}
}

// TestRouteResolvedAtFireTime: a job naming a route goes to the route's URL
// and headers as they are when it fires, not when it was created.
func TestRouteResolvedAtFireTime(t *testing.T) {
	t.Parallel()
	s := shared(t)
	rcv := newReceiver(t)
	coll := s.newCollection(t, "routefire", nil)
	route := uniq("moving")
	mustStatus(t, "PUT route", s.Do(t, "PUT", "/v1/routes/"+route, map[string]any{
		"webhook_url": rcv.URL + "/old", "headers": map[string]string{"X-Version": "1"},
	}), http.StatusCreated)

	trigger := nowMs() + 1200
	j := s.createJob(t, coll, map[string]any{"id": "follow", "trigger_time": trigger, "route": route})
	if j.Route != route || j.CallbackURL != "" {
		t.Errorf("created job %+v, want route %s and no callback_url", j, route)
	}
	r := s.Do(t, "PUT", "/v1/routes/"+route, map[string]any{
		"webhook_url": rcv.URL + "/new", "headers": map[string]string{"X-Version": "2"},
	})
	mustStatus(t, "PUT route again", r, http.StatusOK)
	if g := s.Do(t, "GET", "/v1/routes/"+route, nil); !strings.Contains(string(g.Body), rcv.URL+"/new") {
		t.Fatalf("GET route after update: %s", g)
	}

	d := rcv.WaitN(t, coll, "follow", 1, time.Until(time.UnixMilli(trigger))+lateBound+waitSlack)[0]
	if d.Path != "/new" || d.Header.Get("X-Version") != "2" {
		t.Errorf("delivered to %q with X-Version %q, want /new and 2 (the route as it is at fire time)", d.Path, d.Header.Get("X-Version"))
	}
	if msg := checkOnTime(d, trigger); msg != "" {
		t.Error(msg)
	}
	s.waitStatus(t, coll, "follow", "succeeded", 5*time.Second)
}
