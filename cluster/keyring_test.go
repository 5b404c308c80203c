package cluster

import (
	"strings"
	"testing"

	"github.com/hashicorp/serf/serf"
)

// The answer to a keyring change carries no primary key: serf still counts
// every member under the empty key, which must not show up as a key.
func TestKeyringOf(t *testing.T) {
	k := "AAECAwQFBgcICQoLDA0ODw=="
	for _, c := range []struct {
		name              string
		resp              serf.KeyResponse
		keys, primaryKeys int
	}{
		{"list", serf.KeyResponse{NumNodes: 3, NumResp: 3, Keys: map[string]int{k: 3}, PrimaryKeys: map[string]int{k: 3}}, 1, 1},
		{"install", serf.KeyResponse{NumNodes: 3, NumResp: 3, Keys: map[string]int{}, PrimaryKeys: map[string]int{"": 3}}, 0, 0},
		{"failed on one", serf.KeyResponse{NumNodes: 3, NumResp: 3, NumErr: 1, Messages: map[string]string{"n2": "boom"}, PrimaryKeys: map[string]int{"": 3}}, 0, 0},
	} {
		got := keyringOf(&c.resp)
		if len(got.Keys) != c.keys || len(got.PrimaryKeys) != c.primaryKeys || got.Nodes != 3 || got.Responses != 3 {
			t.Errorf("%s: %+v", c.name, got)
		}
		for fp := range got.PrimaryKeys {
			if !strings.HasPrefix(fp, "sha256:") || fp == keyFingerprint("") {
				t.Errorf("%s: primary key %q", c.name, fp)
			}
		}
		if len(c.resp.Messages) != len(got.Errors) {
			t.Errorf("%s: errors %v", c.name, got.Errors)
		}
	}
}
