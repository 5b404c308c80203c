package raftfsm

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/timemachine-db/timemachine/model"
)

// Whatever validation accepts must decode again: a command that encodes but
// does not decode would fail on every replica that applies it. Every field
// is filled to the largest size model's validation lets through.
func TestLargestValidValuesDecode(t *testing.T) {
	headers := map[string]string{}
	for i := 0; i < model.MaxRouteHeaders; i++ {
		name := fmt.Sprintf("X-%03d-", i) + strings.Repeat("h", model.MaxHeaderNameLen-6)
		headers[name] = strings.Repeat("v", model.MaxHeaderValueLen)
	}
	secret := model.SecretPrefix + strings.Repeat("A", model.MaxSecretLen-len(model.SecretPrefix)-2) + "=="
	url := "https://example.com/" + strings.Repeat("p", model.MaxURLLen-len("https://example.com/"))
	route := model.Route{Name: strings.Repeat("r", model.MaxNameLen), WebhookURL: url, Headers: headers, SigningSecret: secret}
	if e := model.CheckSecret("signing_secret", secret); e != nil {
		t.Fatalf("the test's secret is not valid: %v", e)
	}
	if e := model.CheckHeaders(headers); e != nil {
		t.Fatalf("the test's headers are not valid: %v", e)
	}
	if e := model.CheckURL("webhook_url", url); e != nil {
		t.Fatalf("the test's URL is not valid: %v", e)
	}
	id := strings.Repeat("i", model.MaxIDLen)
	coll := strings.Repeat("c", model.MaxNameLen)
	spec := model.JobSpec{TriggerTime: model.MaxTriggerMs - 1, CallbackURL: url, Meta: []byte(`"` + strings.Repeat("m", model.MaxMetaBytesLimit-2) + `"`)}
	cmds := []Command{
		&PutRoute{R: route, Now: 1},
		&PutCollection{C: model.Collection{Name: coll, SigningSecret: secret}, Now: 1},
		&Create{Coll: coll, ID: id, Spec: spec, Now: 1},
		&Ack{Coll: coll, ID: id, Version: 1, Attempts: 1, LastError: strings.Repeat("e", model.MaxLastErrorLen), Now: 2},
	}
	for _, c := range cmds {
		got, err := Decode(Encode(c))
		if err != nil {
			t.Fatalf("%T at the limits does not decode: %v", c, err)
		}
		if !reflect.DeepEqual(got[0], c) {
			t.Fatalf("%T at the limits changed in a round trip", c)
		}
	}
	j := &model.Job{Collection: coll, ID: id, Version: 1, Status: model.StatusFailed, TriggerTime: spec.TriggerTime, DueTime: spec.TriggerTime,
		CallbackURL: url, Meta: spec.Meta, LastError: strings.Repeat("e", model.MaxLastErrorLen)}
	res, err := DecodeResults(EncodeResults([]model.Result{{Code: model.CodeCreated, Job: j}}))
	if err != nil || !reflect.DeepEqual(res[0].Job, j) {
		t.Fatalf("a job at the limits does not survive the results codec: %v", err)
	}
}

// The codec's string bound covers every string limit of validation.
func TestFieldBoundCoversValidation(t *testing.T) {
	for name, n := range map[string]int{
		"name": model.MaxNameLen, "id": model.MaxIDLen, "node id": model.MaxNodeIDLen, "url": model.MaxURLLen,
		"header name": model.MaxHeaderNameLen, "header value": model.MaxHeaderValueLen,
		"secret": model.MaxSecretLen, "last error": model.MaxLastErrorLen,
	} {
		if n > maxStr {
			t.Errorf("%s may be %d bytes, but the codec decodes at most %d", name, n, maxStr)
		}
	}
}
