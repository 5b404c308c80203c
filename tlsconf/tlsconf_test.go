package tlsconf_test

import (
	"bytes"
	"crypto/tls"
	"os"
	"testing"

	"github.com/timemachine-db/timemachine/internal/testcerts"
	"github.com/timemachine-db/timemachine/tlsconf"
)

// The served certificate follows Reload; a reload that fails keeps the
// one in use.
func TestReload(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, dir, "ca")
	a := ca.Issue(t, dir, "a")
	f, err := tlsconf.Load(a.CertFile, a.KeyFile, "")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", f.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	served := func() string {
		t.Helper()
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if got := served(); got != "a" {
		t.Fatalf("serves %q", got)
	}
	// Replace the files with b's and reload.
	b := ca.Issue(t, dir, "b")
	copyFile(t, b.CertFile, a.CertFile)
	copyFile(t, b.KeyFile, a.KeyFile)
	if err := f.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := served(); got != "b" {
		t.Fatalf("after reload serves %q", got)
	}
	// A certificate whose key does not match is refused; b stays.
	c := ca.Issue(t, dir, "c")
	copyFile(t, c.CertFile, a.CertFile)
	if err := f.Reload(); err == nil {
		t.Fatal("mismatched key reloaded")
	}
	if got := served(); got != "b" {
		t.Fatalf("after a failed reload serves %q", got)
	}
	if _, err := tlsconf.Load(a.CertFile, "", ""); err == nil {
		t.Fatal("loaded without a key")
	}
	if _, err := tlsconf.Load(b.CertFile, b.KeyFile, b.KeyFile); err == nil {
		t.Fatal("a key file accepted as a CA bundle")
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(b, nil) {
		t.Fatal("empty file")
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
