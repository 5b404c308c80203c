package secrets

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
)

// Prefix starts every sealed value.
const Prefix = "tmsec:v1:"

const (
	keyLen   = 32
	idLen    = 8 // hex digits
	nonceLen = 12
	tagLen   = 16
)

// additional data bound to every sealed value: a ciphertext of something
// else sealed with the same key cannot pass for a timemachine secret.
var aad = []byte("timemachine secret v1")

type key struct {
	id   string
	aead cipher.AEAD
}

// Keyring holds the keys of a key file; the first one seals.
type Keyring struct {
	keys []key
}

// Parse reads a key file's content.
func Parse(b []byte) (*Keyring, error) {
	kr := &Keyring{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	line := 0
	seen := map[string]bool{}
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(raw) != keyLen {
			return nil, fmt.Errorf("line %d: a key is standard base64 of %d random bytes (openssl rand -base64 32)", line, keyLen)
		}
		block, err := aes.NewCipher(raw)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		sum := sha256.Sum256(raw)
		id := hex.EncodeToString(sum[:])[:idLen]
		if seen[id] {
			return nil, fmt.Errorf("line %d: the same key appears twice", line)
		}
		seen[id] = true
		kr.keys = append(kr.keys, key{id: id, aead: aead})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(kr.keys) == 0 {
		return nil, errors.New("no key in the file (one base64 key per line; make one with: openssl rand -base64 32)")
	}
	return kr, nil
}

// Load reads a key file. It refuses a file that others may read.
func Load(path string) (*Keyring, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("secrets key file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("secrets key file %s is readable by others (mode %v): chmod 600 it", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("secrets key file: %w", err)
	}
	kr, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("secrets key file %s: %w", path, err)
	}
	return kr, nil
}

// PrimaryID is the id of the key that seals.
func (k *Keyring) PrimaryID() string { return k.keys[0].id }

// Sealed reports whether s is a sealed value.
func Sealed(s string) bool { return strings.HasPrefix(s, Prefix) }

// SealedLen is the length of the sealed form of a plain value of n bytes.
func SealedLen(n int) int {
	return len(Prefix) + idLen + 1 + base64.RawURLEncoding.EncodedLen(nonceLen+n+tagLen)
}

// Seal encrypts plain with the first key. An empty value stays empty, and
// a value that is already sealed is returned as it is.
func (k *Keyring) Seal(plain string) (string, error) {
	if plain == "" || Sealed(plain) {
		return plain, nil
	}
	pk := k.keys[0]
	buf := make([]byte, nonceLen, nonceLen+len(plain)+tagLen)
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("seal: %w", err)
	}
	buf = pk.aead.Seal(buf, buf[:nonceLen], []byte(plain), aad)
	return Prefix + pk.id + ":" + base64.RawURLEncoding.EncodeToString(buf), nil
}

// ErrUnknownKey: a value was sealed with a key that is not in the file.
var ErrUnknownKey = errors.New("sealed with a key that is not in --secrets-key-file")

// Open decrypts a sealed value; a plain value is returned as it is. The
// error never contains the value.
func (k *Keyring) Open(s string) (string, error) {
	if !Sealed(s) {
		return s, nil
	}
	rest := s[len(Prefix):]
	id, body, ok := strings.Cut(rest, ":")
	if !ok || len(id) != idLen {
		return "", errors.New("malformed sealed secret")
	}
	for _, kk := range k.keys {
		if kk.id != id {
			continue
		}
		raw, err := base64.RawURLEncoding.DecodeString(body)
		if err != nil || len(raw) < nonceLen+tagLen {
			return "", errors.New("malformed sealed secret")
		}
		plain, err := kk.aead.Open(nil, raw[:nonceLen], raw[nonceLen:], aad)
		if err != nil {
			return "", fmt.Errorf("sealed secret does not open with key %s (tampered with, or another key with the same id)", id)
		}
		return string(plain), nil
	}
	return "", fmt.Errorf("%w (key id %s)", ErrUnknownKey, id)
}

// Box is the keyring in use, reloadable. A nil *Box seals nothing and
// opens only plain values (no --secrets-key-file).
type Box struct {
	path string
	kr   atomic.Pointer[Keyring]
}

// OpenFile loads the key file at path.
func OpenFile(path string) (*Box, error) {
	kr, err := Load(path)
	if err != nil {
		return nil, err
	}
	b := &Box{path: path}
	b.kr.Store(kr)
	return b, nil
}

// Reload reads the key file again; on error the keys in use stay.
func (b *Box) Reload() error {
	if b == nil {
		return nil
	}
	kr, err := Load(b.path)
	if err != nil {
		return fmt.Errorf("secrets key file not reloaded, the previous keys stay in use: %w", err)
	}
	b.kr.Store(kr)
	return nil
}

// Seal seals with the current primary key; a nil Box returns plain.
func (b *Box) Seal(plain string) (string, error) {
	if b == nil {
		return plain, nil
	}
	return b.kr.Load().Seal(plain)
}

// Open opens a sealed value. Without a key file a sealed value cannot be
// opened: the error says so.
func (b *Box) Open(s string) (string, error) {
	if !Sealed(s) {
		return s, nil
	}
	if b == nil {
		return "", errors.New("a secret is sealed but this node has no --secrets-key-file to open it")
	}
	return b.kr.Load().Open(s)
}

// Enabled reports whether secrets are sealed.
func (b *Box) Enabled() bool { return b != nil }

// SealedLen is the package's SealedLen, for callers that check a value
// fits before sealing it.
func (b *Box) SealedLen(n int) int { return SealedLen(n) }
