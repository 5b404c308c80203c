package auth

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func entryJSON(t *testing.T, es ...Entry) []byte {
	t.Helper()
	b, err := json.Marshal(File{Tokens: es})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseRejectsBadFiles(t *testing.T) {
	good := Digest("tm_x")
	cases := []struct {
		name, file, want string
	}{
		{"not json", `{`, "not valid JSON"},
		{"trailing data", `{"tokens":[]} {}`, "after its JSON object"},
		{"no tokens", `{}`, `no "tokens" list`},
		{"unknown field", `{"tokens":[],"extra":1}`, "unknown field"},
		{"unknown entry field", `{"tokens":[{"sha256":"` + good + `","role":"admin","token":"x"}]}`, "unknown field"},
		{"short digest", `{"tokens":[{"sha256":"abc","role":"admin"}]}`, "64 hex digits"},
		{"non-hex digest", `{"tokens":[{"sha256":"` + strings.Repeat("z", 64) + `","role":"admin"}]}`, "not hex"},
		{"bad role", `{"tokens":[{"name":"ci","sha256":"` + good + `","role":"root"}]}`, `tokens[0] ("ci"): role "root"`},
		{"empty scope", `{"tokens":[{"sha256":"` + good + `","role":"writer","collections":[]}]}`, "empty list"},
		{"bad collection", `{"tokens":[{"sha256":"` + good + `","role":"writer","collections":["a b"]}]}`, "collection name"},
		{"duplicate", `{"tokens":[{"sha256":"` + good + `","role":"writer"},{"sha256":"` + strings.ToUpper(good) + `","role":"reader"}]}`, "appears twice"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.file))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Parse(%s) = %v, want an error containing %q", c.file, err, c.want)
			}
			if strings.Contains(err.Error(), good) {
				t.Fatalf("error echoes a digest: %v", err)
			}
		})
	}
}

func TestLookupAndScope(t *testing.T) {
	tab, err := Parse(entryJSON(t,
		NewEntry("r", RoleReader, nil, "tm_reader"),
		NewEntry("w", RoleWriter, []string{"billing"}, "tm_writer"),
		NewEntry("a", RoleAdmin, nil, "tm_admin"),
		NewEntry("sa", RoleAdmin, []string{"ops"}, "tm_scoped_admin"),
	))
	if err != nil {
		t.Fatal(err)
	}
	if tab.Len() != 4 {
		t.Fatalf("Len = %d", tab.Len())
	}
	if p := tab.Lookup([]byte("tm_nope")); p != nil {
		t.Fatalf("unknown token found: %+v", p)
	}
	if p := tab.Lookup(nil); p != nil {
		t.Fatal("empty token found")
	}
	r, w, a, sa := tab.Lookup([]byte("tm_reader")), tab.Lookup([]byte("tm_writer")), tab.Lookup([]byte("tm_admin")), tab.Lookup([]byte("tm_scoped_admin"))
	cases := []struct {
		p    *Principal
		need Role
		coll string
		want bool
	}{
		{r, RoleReader, "", true}, {r, RoleReader, "billing", true}, {r, RoleWriter, "billing", false}, {r, RoleAdmin, "", false},
		{w, RoleReader, "", true}, {w, RoleReader, "billing", true}, {w, RoleReader, "other", false},
		{w, RoleWriter, "billing", true}, {w, RoleWriter, "other", false}, {w, RoleWriter, "", false}, {w, RoleAdmin, "billing", false},
		{a, RoleAdmin, "", true}, {a, RoleAdmin, "x", true}, {a, RoleWriter, "x", true}, {a, RoleReader, "", true},
		{sa, RoleAdmin, "ops", true}, {sa, RoleAdmin, "billing", false}, {sa, RoleAdmin, "", false}, {sa, RoleReader, "", true},
		{nil, RoleReader, "", false},
	}
	for i, c := range cases {
		if got := c.p.Can(c.need, c.coll); got != c.want {
			name := "<nil>"
			if c.p != nil {
				name = c.p.Name
			}
			t.Errorf("case %d: %s.Can(%s, %q) = %v, want %v", i, name, c.need, c.coll, got, c.want)
		}
	}
	if !w.Scoped() || a.Scoped() {
		t.Error("Scoped wrong")
	}
}

func TestParseBearer(t *testing.T) {
	cases := []struct {
		in   string
		want string
		ok   bool
	}{
		{"Bearer tm_abc", "tm_abc", true},
		{"bearer tm_abc", "tm_abc", true},
		{"BEARER   tm_abc  ", "tm_abc", true},
		{"Bearer\ttm_abc", "tm_abc", true},
		{"Bearer", "", false},
		{"Bearer ", "", false},
		{"Bearertm_abc", "", false},
		{"Basic dXNlcjpwYXNz", "", false},
		{"Bearer a b", "", false},
		{"Bearer tm_\x00", "", false},
		{"Bearer tm_é", "", false},
		{"tm_abc", "", false},
		{"Bearer " + strings.Repeat("a", 4097), "", false},
	}
	for _, c := range cases {
		tok, ok := ParseBearer([]byte(c.in))
		if ok != c.ok || string(tok) != c.want {
			t.Errorf("ParseBearer(%q) = %q, %v; want %q, %v", c.in, tok, ok, c.want, c.ok)
		}
	}
}

func TestAuthenticate(t *testing.T) {
	tab, err := Parse(entryJSON(t, NewEntry("ci", RoleWriter, nil, "tm_good")))
	if err != nil {
		t.Fatal(err)
	}
	s := NewStore(tab)
	if _, err := s.Authenticate(nil); err != ErrNoToken {
		t.Errorf("no header: %v", err)
	}
	if _, err := s.Authenticate([]byte("Bearer tm_bad")); err != ErrUnknownToken {
		t.Errorf("unknown: %v", err)
	}
	if _, err := s.Authenticate([]byte("Basic Zm9vOmJhcg==")); err != ErrUnknownToken {
		t.Errorf("basic: %v", err)
	}
	p, err := s.Authenticate([]byte("Bearer tm_good"))
	if err != nil || p.Name != "ci" || p.Role != RoleWriter {
		t.Errorf("good: %+v %v", p, err)
	}
}

func TestReloadKeepsOldTableOnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "auth.json")
	write := func(b []byte) {
		t.Helper()
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(entryJSON(t, NewEntry("old", RoleAdmin, nil, "tm_old")))
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	// Requests racing with reloads always see a whole table.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			// One request holds one table: it knows exactly one of
			// the two tokens. (Two Authenticate calls in a row may
			// straddle a swap, so the check reads one table.)
			tab := s.Table()
			if (tab.Lookup([]byte("tm_old")) == nil) == (tab.Lookup([]byte("tm_new")) == nil) {
				t.Error("a request saw neither or both tables")
				return
			}
			// And Authenticate races with Reload (for -race).
			_, _ = s.Authenticate([]byte("Bearer tm_new"))
		}
	}()
	write([]byte(`{"tokens":[{"sha256":"nothex","role":"admin"}]}`))
	if _, err := s.Reload(); err == nil || !strings.Contains(err.Error(), "previous tokens stay") {
		t.Fatalf("bad file reloaded: %v", err)
	}
	if _, err := s.Authenticate([]byte("Bearer tm_old")); err != nil {
		t.Fatalf("old token refused after a failed reload: %v", err)
	}
	write(entryJSON(t, NewEntry("new", RoleAdmin, nil, "tm_new")))
	if n, err := s.Reload(); err != nil || n != 1 {
		t.Fatalf("reload: %d %v", n, err)
	}
	close(stop)
	wg.Wait()
	if _, err := s.Authenticate([]byte("Bearer tm_old")); err != ErrUnknownToken {
		t.Fatalf("old token still valid: %v", err)
	}
	if _, err := s.Authenticate([]byte("Bearer tm_new")); err != nil {
		t.Fatalf("new token refused: %v", err)
	}
	os.Remove(path)
	if _, err := s.Reload(); err == nil {
		t.Fatal("missing file reloaded")
	}
	if _, err := s.Authenticate([]byte("Bearer tm_new")); err != nil {
		t.Fatalf("table lost after a failed reload: %v", err)
	}
}

func TestNewToken(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		tok, err := NewToken()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(tok, TokenPrefix) || len(tok) != len(TokenPrefix)+43 {
			t.Fatalf("token %q", tok)
		}
		if seen[tok] {
			t.Fatal("repeated token")
		}
		seen[tok] = true
		if got, ok := ParseBearer([]byte("Bearer " + tok)); !ok || string(got) != tok {
			t.Fatalf("a new token does not parse as a bearer token: %q", tok)
		}
	}
	e := NewEntry("ci", RoleWriter, []string{"a"}, "tm_x")
	tab, err := Parse(entryJSON(t, e))
	if err != nil {
		t.Fatal(err)
	}
	if p := tab.Lookup([]byte("tm_x")); p == nil || !p.Can(RoleWriter, "a") || p.Can(RoleWriter, "b") {
		t.Fatalf("entry does not round-trip: %+v", p)
	}
}

func FuzzParseBearer(f *testing.F) {
	for _, s := range []string{"Bearer tm_abc", "bearer  x", "Basic x", "", "Bearer", "Bearer \x00", "BEARER\tx y"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, h []byte) {
		tok, ok := ParseBearer(h)
		if !ok {
			if tok != nil {
				t.Fatal("token returned with ok=false")
			}
			return
		}
		if len(tok) == 0 || len(tok) > 4096 {
			t.Fatalf("bad token length %d", len(tok))
		}
		for _, c := range tok {
			if c <= ' ' || c >= 0x7f {
				t.Fatalf("token has byte %#x", c)
			}
		}
		// What parses round-trips through the canonical form.
		again, ok := ParseBearer(append([]byte("Bearer "), tok...))
		if !ok || string(again) != string(tok) {
			t.Fatalf("canonical form does not parse back: %q", tok)
		}
	})
}

func FuzzParse(f *testing.F) {
	d := Digest("tm_x")
	for _, s := range []string{
		`{"tokens":[]}`,
		`{"tokens":[{"name":"ci","sha256":"` + d + `","role":"writer","collections":["billing"]}]}`,
		`{"tokens":[{"sha256":"` + d + `","role":"admin"},{"sha256":"` + d + `","role":"admin"}]}`,
		`{"tokens":null}`, `[]`, `{"tokens":[{}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tab, err := Parse(b)
		if err != nil {
			if tab != nil {
				t.Fatal("table returned with an error")
			}
			return
		}
		for digest, p := range tab.byDigest {
			if p == nil || p.Role < RoleReader || p.Role > RoleAdmin {
				t.Fatalf("entry %x has role %v", digest, p)
			}
			if p.scope != nil && len(p.scope) == 0 {
				t.Fatal("an empty scope was accepted")
			}
		}
	})
}
