package auth

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/timemachine-db/timemachine/model"
)

// Role is what a token may do. Roles are ordered: each includes the ones
// below it.
type Role uint8

// Roles (API.md §6).
const (
	// RoleReader may read: every GET, /metrics.
	RoleReader Role = iota + 1
	// RoleWriter may also create, replace and delete jobs and schedules
	// in the collections of its scope.
	RoleWriter
	// RoleAdmin may do everything: collections, routes, /v1/admin/*.
	RoleAdmin
)

func (r Role) String() string {
	switch r {
	case RoleReader:
		return "reader"
	case RoleWriter:
		return "writer"
	case RoleAdmin:
		return "admin"
	}
	return "none"
}

// ParseRole reads "reader", "writer" or "admin".
func ParseRole(s string) (Role, error) {
	switch s {
	case "reader":
		return RoleReader, nil
	case "writer":
		return RoleWriter, nil
	case "admin":
		return RoleAdmin, nil
	}
	return 0, fmt.Errorf("role %q: use reader, writer or admin", s)
}

// Principal is the holder of a known token.
type Principal struct {
	// Name is the entry's name, for logs ("" when the entry has none). It
	// is never the token.
	Name string
	Role Role
	// scope is the set of collections the token is limited to; nil means
	// every collection.
	scope map[string]struct{}
}

// Scoped reports whether the token is limited to some collections.
func (p *Principal) Scoped() bool { return p.scope != nil }

// InScope reports whether coll is in the token's scope.
func (p *Principal) InScope(coll string) bool {
	if p.scope == nil {
		return true
	}
	_, ok := p.scope[coll]
	return ok
}

// Can reports whether the principal has at least role need on coll. An
// empty coll means a cluster-wide resource (routes, /v1/admin/*): writing
// one needs an unscoped token, reading one any token of the role.
func (p *Principal) Can(need Role, coll string) bool {
	if p == nil || p.Role < need {
		return false
	}
	if coll == "" {
		return need == RoleReader || p.scope == nil
	}
	return p.InScope(coll)
}

// Entry is one token of the auth file.
type Entry struct {
	Name   string `json:"name,omitempty"`
	SHA256 string `json:"sha256"`
	Role   string `json:"role"`
	// Collections limits the token to these collections; absent means all.
	Collections []string `json:"collections,omitempty"`
}

// File is the auth file's shape.
type File struct {
	Tokens []Entry `json:"tokens"`
}

// Table is a parsed auth file: principals by token digest. It is
// immutable once built.
type Table struct {
	byDigest map[[sha256.Size]byte]*Principal
}

// Len is the number of tokens.
func (t *Table) Len() int { return len(t.byDigest) }

// maxFileBytes bounds the auth file: far more than any real token list,
// small enough that a wrong path (a log file) fails fast.
const maxFileBytes = 16 << 20

// Parse reads an auth file. It is strict — unknown fields, a missing
// digest, an unknown role, a bad collection name or two entries with one
// digest are errors that say which entry is wrong — because a mistake in
// an access-control file should stop the operator, not be guessed around.
// The messages never contain a digest.
func Parse(b []byte) (*Table, error) {
	if len(b) > maxFileBytes {
		return nil, fmt.Errorf("auth file is %d bytes; at most %d are allowed", len(b), maxFileBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("auth file is not valid JSON of the form {\"tokens\":[{\"name\",\"sha256\",\"role\",\"collections\"}]}: %w", err)
	}
	if dec.More() {
		return nil, errors.New("auth file has data after its JSON object")
	}
	if f.Tokens == nil {
		return nil, errors.New(`auth file has no "tokens" list; an empty list ({"tokens":[]}) refuses every request`)
	}
	t := &Table{byDigest: make(map[[sha256.Size]byte]*Principal, len(f.Tokens))}
	for i, e := range f.Tokens {
		where := fmt.Sprintf("tokens[%d]", i)
		if e.Name != "" {
			where += fmt.Sprintf(" (%q)", model.Clip(e.Name))
		}
		var d [sha256.Size]byte
		if len(e.SHA256) != 2*sha256.Size {
			return nil, fmt.Errorf("%s: sha256 must be 64 hex digits (the SHA-256 of the token), got %d characters", where, len(e.SHA256))
		}
		if _, err := hex.Decode(d[:], []byte(e.SHA256)); err != nil {
			return nil, fmt.Errorf("%s: sha256 is not hex", where)
		}
		role, err := ParseRole(e.Role)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		p := &Principal{Name: e.Name, Role: role}
		if e.Collections != nil {
			if len(e.Collections) == 0 {
				return nil, fmt.Errorf("%s: collections is an empty list, which would allow nothing; leave it out for every collection", where)
			}
			p.scope = make(map[string]struct{}, len(e.Collections))
			for _, c := range e.Collections {
				if me := model.CheckName("collection name", c); me != nil {
					return nil, fmt.Errorf("%s: collections: %s", where, me.Message)
				}
				p.scope[c] = struct{}{}
			}
		}
		if _, dup := t.byDigest[d]; dup {
			return nil, fmt.Errorf("%s: the same sha256 appears twice; each token needs one entry", where)
		}
		t.byDigest[d] = p
	}
	return t, nil
}

// Load reads and parses the auth file at path.
func Load(path string) (*Table, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read auth file: %w", err)
	}
	t, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Lookup returns the principal of a token, or nil for an unknown one.
func (t *Table) Lookup(token []byte) *Principal {
	if t == nil || len(token) == 0 {
		return nil
	}
	return t.byDigest[sha256.Sum256(token)]
}

// Errors of Authenticate; both are answered 401 unauthenticated.
var (
	ErrNoToken      = errors.New("this server requires an API token: send Authorization: Bearer <token>")
	ErrUnknownToken = errors.New("the API token is not valid on this server (unknown, revoked, or malformed)")
)

// ParseBearer returns the token of an Authorization header value
// "Bearer <token>" (the scheme is case-insensitive, RFC 9110 §11.1). The
// token must be non-empty printable ASCII without spaces (RFC 6750's
// b64token and more). ok is false for anything else.
func ParseBearer(h []byte) (token []byte, ok bool) {
	const scheme = "bearer"
	h = bytes.Trim(h, " \t")
	if len(h) <= len(scheme) || !strings.EqualFold(string(h[:len(scheme)]), scheme) || (h[len(scheme)] != ' ' && h[len(scheme)] != '\t') {
		return nil, false
	}
	tok := bytes.TrimLeft(h[len(scheme):], " \t")
	if len(tok) == 0 || len(tok) > 4096 {
		return nil, false
	}
	for _, c := range tok {
		if c <= ' ' || c >= 0x7f {
			return nil, false
		}
	}
	return tok, true
}

// Store is the auth table in use, swapped atomically on Reload.
type Store struct {
	path string
	cur  atomic.Pointer[Table]
}

// Open loads the auth file at path.
func Open(path string) (*Store, error) {
	t, err := Load(path)
	if err != nil {
		return nil, err
	}
	s := &Store{path: path}
	s.cur.Store(t)
	return s, nil
}

// NewStore serves a fixed table (tests, embedding).
func NewStore(t *Table) *Store {
	s := &Store{}
	s.cur.Store(t)
	return s
}

// Path is the file the store reads ("" for a fixed table).
func (s *Store) Path() string { return s.path }

// Table is the table in use.
func (s *Store) Table() *Table { return s.cur.Load() }

// Reload reads the file again. On any error the table in use stays and the
// error is returned; on success the new table serves every request that
// starts from now on.
func (s *Store) Reload() (tokens int, err error) {
	if s.path == "" {
		return s.Table().Len(), nil
	}
	t, err := Load(s.path)
	if err != nil {
		return 0, fmt.Errorf("auth file not reloaded, the previous tokens stay in force: %w", err)
	}
	s.cur.Store(t)
	return t.Len(), nil
}

// Authenticate finds the principal of an Authorization header value.
func (s *Store) Authenticate(header []byte) (*Principal, error) {
	if len(bytes.TrimSpace(header)) == 0 {
		return nil, ErrNoToken
	}
	tok, ok := ParseBearer(header)
	if !ok {
		return nil, ErrUnknownToken
	}
	p := s.cur.Load().Lookup(tok)
	if p == nil {
		return nil, ErrUnknownToken
	}
	return p, nil
}

// TokenPrefix starts every token `timemachine token new` makes, so a
// leaked one is easy to recognise (secret scanners, logs).
const TokenPrefix = "tm_"

// NewToken returns a random token: TokenPrefix and 32 random bytes in
// unpadded base64url (256 bits).
func NewToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("read random bytes: %w", err)
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// Digest is the hex SHA-256 of a token, as the auth file stores it.
func Digest(token string) string {
	d := sha256.Sum256([]byte(token))
	return hex.EncodeToString(d[:])
}

// NewEntry is the auth-file entry of a token.
func NewEntry(name string, role Role, collections []string, token string) Entry {
	var cs []string
	if len(collections) > 0 {
		cs = slices.Clone(collections)
	}
	return Entry{Name: name, SHA256: Digest(token), Role: role.String(), Collections: cs}
}
