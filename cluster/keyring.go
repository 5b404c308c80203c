package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/serf"

	"github.com/timemachine-db/timemachine/model"
)

// Gossip encryption (--gossip-key) and key rotation.
//
// With a key, memberlist encrypts and authenticates every gossip packet
// and stream with AES-GCM: a node without a key of the keyring can neither
// read the gossip nor join (its packets fail to decrypt and are dropped).
// Serf's key manager changes the keyring of every member at once (a serf
// query); serf saves the keyring in <data-dir>/serf/keyring after each
// change, and a restarted node uses that saved keyring, so a rotation
// survives restarts without touching the flags. Rotation, as in Consul:
// install the new key everywhere, make it the primary (use), then remove
// the old one (docs/operations.md#rotating-the-gossip-key).

// keyringFile is the keyring serf saves after every change.
const keyringFile = "keyring"

// ParseGossipKey decodes --gossip-key: standard base64 of 16, 24 or 32
// bytes (AES-128, -192 or -256).
func ParseGossipKey(s string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, errors.New("not standard base64; make one with: openssl rand -base64 32")
	}
	if err := memberlist.ValidateKey(k); err != nil {
		return nil, fmt.Errorf("decodes to %d bytes; a gossip key is 16, 24 or 32 bytes (openssl rand -base64 32)", len(k))
	}
	return k, nil
}

// keyFingerprint names a key without revealing it.
func keyFingerprint(b64 string) string {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		raw = []byte(b64)
	}
	d := sha256.Sum256(raw)
	return "sha256:" + hex.EncodeToString(d[:8])
}

// configureKeyring turns on gossip encryption when the node has a key: the
// keyring saved by serf after the last rotation if there is one, else the
// key of --gossip-key alone.
func (c *Cluster) configureKeyring(conf *serf.Config) error {
	if len(c.cfg.GossipKey) == 0 {
		return nil
	}
	path := filepath.Join(c.cfg.SerfDir, keyringFile)
	keys := [][]byte{c.cfg.GossipKey}
	if saved, err := readKeyring(path); err != nil {
		return err
	} else if len(saved) > 0 {
		if !slices.ContainsFunc(saved, func(k []byte) bool { return string(k) == string(c.cfg.GossipKey) }) {
			c.log.Warn("--gossip-key is not in the keyring saved by the last key rotation; the saved keyring stays in force (install the key with `timemachine admin gossip-keys install`, or remove the saved keyring file to start over)",
				"keyring", path, "primary", keyFingerprint(base64.StdEncoding.EncodeToString(saved[0])))
		}
		keys = saved
	}
	kr, err := memberlist.NewKeyring(keys[1:], keys[0])
	if err != nil {
		return fmt.Errorf("gossip keyring: %w", err)
	}
	conf.MemberlistConfig.Keyring = kr
	conf.MemberlistConfig.GossipVerifyIncoming = true
	conf.MemberlistConfig.GossipVerifyOutgoing = true
	conf.KeyringFile = path
	return nil
}

// readKeyring reads serf's saved keyring (a JSON list of base64 keys,
// primary first); none when the file does not exist.
func readKeyring(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read gossip keyring: %w", err)
	}
	var enc []string
	if err := json.Unmarshal(b, &enc); err != nil {
		return nil, fmt.Errorf("gossip keyring %s is corrupt (%v): restore it, or remove it to use --gossip-key alone", path, err)
	}
	keys := make([][]byte, 0, len(enc))
	for _, e := range enc {
		k, err := ParseGossipKey(e)
		if err != nil {
			return nil, fmt.Errorf("gossip keyring %s: a key %v", path, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// GossipKeys lists or changes the gossip keyring of every member (op is
// one of model.GossipKey*). Serf asks every member and waits for their
// answers; a member that fails makes the call a conflict that names it.
func (c *Cluster) GossipKeys(ctx context.Context, op, key string) (*model.GossipKeyring, error) {
	if c.serf == nil || !c.serf.EncryptionEnabled() {
		return nil, model.Invalid("gossip encryption is off on this node: start every node with --gossip-key to use a keyring")
	}
	if op != model.GossipKeyList {
		if _, err := ParseGossipKey(key); err != nil {
			return nil, model.Invalid("key: %v", err)
		}
		key = base64.StdEncoding.EncodeToString(mustDecode(key))
	}
	km := c.serf.KeyManager()
	type answer struct {
		resp *serf.KeyResponse
		err  error
	}
	ch := make(chan answer, 1)
	go func() {
		var a answer
		switch op {
		case model.GossipKeyList:
			a.resp, a.err = km.ListKeys()
		case model.GossipKeyInstall:
			a.resp, a.err = km.InstallKey(key)
		case model.GossipKeyUse:
			a.resp, a.err = km.UseKey(key)
		case model.GossipKeyRemove:
			a.resp, a.err = km.RemoveKey(key)
		default:
			a.err = model.Invalid("op: must be list, install, use or remove, got %q", op)
		}
		ch <- a
	}()
	var a answer
	select {
	case a = <-ch:
	case <-ctx.Done():
		return nil, model.Unavailable(0, "the gossip keyring query did not finish in time; list the keys to see where it got")
	}
	if a.resp == nil {
		if e, ok := model.AsError(a.err); ok {
			return nil, e
		}
		return nil, model.Internal("gossip keyring %s: %v", op, a.err)
	}
	out := keyringOf(a.resp)
	if a.err != nil {
		var failed []string
		for node, msg := range out.Errors {
			failed = append(failed, node+": "+msg)
		}
		sort.Strings(failed)
		c.log.Warn("gossip keyring change failed on some members", "op", op, "error", a.err, "members", strings.Join(failed, "; "))
		return nil, model.Conflict("gossip keyring %s failed on %d of %d members (%s); fix them and repeat it (it is idempotent)",
			op, a.resp.NumErr, a.resp.NumNodes, strings.Join(failed, "; "))
	}
	c.log.Info("gossip keyring changed", "op", op, "members", a.resp.NumNodes)
	return out, nil
}

// keyringOf renders serf's answer by key fingerprint. Serf counts every
// member's primary key in PrimaryKeys even for install/use/remove, whose
// answers carry none: those empty keys are not a key, and are left out
// (they used to show as the fingerprint of the empty string).
func keyringOf(r *serf.KeyResponse) *model.GossipKeyring {
	out := &model.GossipKeyring{
		Keys: map[string]int{}, PrimaryKeys: map[string]int{},
		Nodes: r.NumNodes, Responses: r.NumResp,
	}
	for k, n := range r.Keys {
		if k != "" {
			out.Keys[keyFingerprint(k)] = n
		}
	}
	for k, n := range r.PrimaryKeys {
		if k != "" {
			out.PrimaryKeys[keyFingerprint(k)] = n
		}
	}
	if len(r.Messages) > 0 {
		out.Errors = map[string]string{}
		for node, msg := range r.Messages {
			out.Errors[node] = msg
		}
	}
	return out
}

func mustDecode(s string) []byte {
	b, _ := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	return b
}
