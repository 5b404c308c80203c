package mux_test

import (
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/internal/testcerts"
	"github.com/timemachine-db/timemachine/internal/testutil"
	"github.com/timemachine-db/timemachine/rpc/mux"
	"github.com/timemachine-db/timemachine/tlsconf"
)

func peerFiles(t *testing.T, ca *testcerts.CA, dir, name string) *tlsconf.Files {
	t.Helper()
	p := ca.Issue(t, dir, name)
	f, err := tlsconf.Load(p.CertFile, p.KeyFile, ca.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Mutual TLS on the internal port: a member reaches its group; a plain-TCP
// peer, a peer without a certificate, one with a certificate of another
// CA, and junk bytes are refused before any byte reaches a listener, are
// counted, and the port keeps serving members.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, dir, "cluster")
	other := testcerts.NewCA(t, dir, "other")
	n1, n2 := peerFiles(t, ca, dir, "n1"), peerFiles(t, ca, dir, "n2")
	rogue := peerFiles(t, other, dir, "rogue")

	m, err := mux.ListenWith("127.0.0.1:0", mux.Options{Logger: slog.New(slog.DiscardHandler), TLS: n1.PeerServerConfig()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, err := m.Listen(mux.ProtoRPC, 0)
	if err != nil {
		t.Fatal(err)
	}
	addr := m.Addr().String()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()

	member := func() {
		t.Helper()
		c, err := mux.TLSDialer(n2.PeerClientConfig())(addr, mux.ProtoRPC, 0, 2*time.Second)
		if err != nil {
			t.Fatalf("member dial: %v", err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-accepted:
			buf := make([]byte, 4)
			if _, err := io.ReadFull(got, buf); err != nil || string(buf) != "ping" {
				t.Fatalf("got %q %v", buf, err)
			}
			got.Close()
		case <-time.After(5 * time.Second):
			t.Fatal("member's connection not delivered")
		}
	}
	member()

	attacks := []struct {
		name string
		run  func() error
	}{
		{"plain TCP with a valid header", func() error {
			c, err := mux.Dial(addr, mux.ProtoRPC, 0, time.Second)
			if err != nil {
				return err
			}
			defer c.Close()
			_, _ = c.Write([]byte("raw proposal"))
			_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
			_, err = c.Read(make([]byte, 1))
			return err
		}},
		{"junk bytes", func() error {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				return err
			}
			defer c.Close()
			_, _ = c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n\x00\x01\x02\xff"))
			_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
			_, err = io.ReadAll(c)
			return err
		}},
		{"TLS without a client certificate", func() error {
			c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
			if err != nil {
				return err
			}
			defer c.Close()
			_, _ = c.Write([]byte{mux.ProtoRPC, mux.Version, 0, 0})
			_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
			_, err = c.Read(make([]byte, 1))
			return err
		}},
		{"a certificate from another CA", func() error {
			cfg := rogue.PeerClientConfig()
			cfg.VerifyConnection = nil // the rogue trusts anybody; the server must not
			c, err := mux.TLSDialer(cfg)(addr, mux.ProtoRPC, 0, 2*time.Second)
			if err != nil {
				return err
			}
			defer c.Close()
			_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
			_, err = c.Read(make([]byte, 1))
			return err
		}},
	}
	for _, a := range attacks {
		before := m.Refused()[mux.RefusedTLS]
		_ = a.run() // how the attacker's side ends does not matter
		select {
		case c := <-accepted:
			c.Close()
			t.Fatalf("%s: a connection reached the RPC listener", a.name)
		case <-time.After(100 * time.Millisecond):
		}
		testutil.Eventually(t, 5*time.Second, a.name+" counted as refused", func() error {
			if got := m.Refused()[mux.RefusedTLS]; got <= before {
				return fmt.Errorf("refused(tls) = %d", got)
			}
			return nil
		})
	}
	// A member dialing a node whose certificate another CA signed refuses it.
	rm, err := mux.ListenWith("127.0.0.1:0", mux.Options{Logger: slog.New(slog.DiscardHandler), TLS: rogue.PeerServerConfig()})
	if err != nil {
		t.Fatal(err)
	}
	defer rm.Close()
	if c, err := mux.TLSDialer(n2.PeerClientConfig())(rm.Addr().String(), mux.ProtoRPC, 0, 2*time.Second); err == nil {
		c.Close()
		t.Fatal("a member accepted a server certificate from another CA")
	}
	member() // still serving
}

// Junk on a plain (no TLS) port is refused and counted by the header check.
func TestPlainPortRefusesJunk(t *testing.T) {
	m, err := mux.Listen("127.0.0.1:0", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c, err := net.Dial("tcp", m.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.Write([]byte{9, 9, 9, 9})
	_, _ = io.ReadAll(c)
	c.Close()
	testutil.Eventually(t, 5*time.Second, "junk counted", func() error {
		if m.Refused()[mux.RefusedHeader] == 0 {
			return fmt.Errorf("%v", m.Refused())
		}
		return nil
	})
}
