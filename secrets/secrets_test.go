package secrets

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func newKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

func TestSealOpen(t *testing.T) {
	k1, k2 := newKey(t), newKey(t)
	old, err := Parse([]byte(k1 + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := Parse([]byte("# new key first\n" + k2 + "\n\n" + k1 + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	s1, err := old.Seal(secret)
	if err != nil {
		t.Fatal(err)
	}
	if !Sealed(s1) || strings.Contains(s1, secret) || strings.Contains(s1, "MfKQ") {
		t.Fatalf("sealed value %q", s1)
	}
	if len(s1) != SealedLen(len(secret)) {
		t.Fatalf("SealedLen %d, actual %d", SealedLen(len(secret)), len(s1))
	}
	s1b, _ := old.Seal(secret)
	if s1b == s1 {
		t.Fatal("two seals of one value are equal (nonce reuse)")
	}
	if again, _ := old.Seal(s1); again != s1 {
		t.Fatal("a sealed value was sealed twice")
	}
	for _, kr := range []*Keyring{old, rotated} {
		if got, err := kr.Open(s1); err != nil || got != secret {
			t.Fatalf("open: %q %v", got, err)
		}
	}
	s2, _ := rotated.Seal(secret)
	if _, err := old.Open(s2); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("old keyring opened a value of the new key: %v", err)
	}
	if got, err := rotated.Open("plain value"); err != nil || got != "plain value" {
		t.Fatalf("plain: %q %v", got, err)
	}
	// Tampering is detected.
	b := []byte(s1)
	b[len(b)-3] ^= 1
	if b[len(b)-3] == '-' || b[len(b)-3] == '_' {
		b[len(b)-3] = 'A'
	}
	if _, err := old.Open(string(b)); err == nil {
		t.Fatal("tampered value opened")
	}
	if _, err := old.Open(Prefix + "nonsense"); err == nil {
		t.Fatal("malformed value opened")
	}
}

func TestParseErrors(t *testing.T) {
	k := newKey(t)
	for _, c := range []struct{ file, want string }{
		{"", "no key"},
		{"# only a comment\n", "no key"},
		{"not base64!\n", "line 1"},
		{base64.StdEncoding.EncodeToString(make([]byte, 16)), "32 random bytes"},
		{k + "\n" + k + "\n", "twice"},
	} {
		if _, err := Parse([]byte(c.file)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v", c.file, err)
		}
	}
}

func TestBoxFileAndReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secrets.key")
	k1, k2 := newKey(t), newKey(t)
	if err := os.WriteFile(path, []byte(k1+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFile(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("world-readable key file: %v", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s1, _ := b.Seal("x")
	if err := os.WriteFile(path, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := b.Reload(); err == nil {
		t.Fatal("bad file reloaded")
	}
	if got, err := b.Open(s1); err != nil || got != "x" {
		t.Fatalf("keys lost after a failed reload: %v", err)
	}
	if err := os.WriteFile(path, []byte(k2+"\n"+k1+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := b.Reload(); err != nil {
		t.Fatal(err)
	}
	s2, _ := b.Seal("y")
	if strings.Split(s2, ":")[2] == strings.Split(s1, ":")[2] {
		t.Fatal("the new first key does not seal")
	}
	var none *Box
	if v, _ := none.Seal("z"); v != "z" {
		t.Fatal("nil box sealed")
	}
	if _, err := none.Open(s1); err == nil {
		t.Fatal("nil box opened a sealed value")
	}
}
