package mux

import (
	"io"
	"log/slog"
	"net"
	"testing"
	"time"
)

func quietMux(t *testing.T) *Mux {
	t.Helper()
	m, err := Listen("127.0.0.1:0", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func TestRoutesByHeader(t *testing.T) {
	m := quietMux(t)
	a, err := m.Listen(ProtoRaft, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.StreamLayer(2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Listen(ProtoRaft, 1); err == nil {
		t.Fatal("registered the same group twice")
	}
	for _, tc := range []struct {
		l     net.Listener
		group uint16
		msg   string
	}{{a, 1, "to-one"}, {b, 2, "to-two"}} {
		c, err := Dial(m.Addr().String(), ProtoRaft, tc.group, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte(tc.msg)); err != nil {
			t.Fatal(err)
		}
		got, err := tc.l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, len(tc.msg))
		if _, err := io.ReadFull(got, buf); err != nil || string(buf) != tc.msg {
			t.Fatalf("group %d got %q (%v)", tc.group, buf, err)
		}
		c.Close()
		got.Close()
	}
}

func TestUnknownGroupAndBadHeaderAreClosed(t *testing.T) {
	m := quietMux(t)
	for _, hdr := range [][]byte{
		{ProtoRaft, Version, 0, 9}, // nobody registered group 9
		{ProtoRaft, 99, 0, 1},      // unknown header version
	} {
		c, err := net.Dial("tcp", m.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(hdr); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatalf("header %v: connection not closed", hdr)
		}
		c.Close()
	}
}

// Closing one group's listener must not close the shared port: slots come
// and go while the node runs.
func TestClosingAGroupKeepsThePort(t *testing.T) {
	m := quietMux(t)
	a, _ := m.Listen(ProtoRaft, 1)
	b, _ := m.Listen(ProtoRaft, 2)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Accept(); err != ErrClosed {
		t.Fatalf("Accept after Close = %v", err)
	}
	c, err := Dial(m.Addr().String(), ProtoRaft, 2, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := b.Accept()
	if err != nil {
		t.Fatal(err)
	}
	got.Close()
	// The group can be registered again.
	if _, err := m.Listen(ProtoRaft, 1); err != nil {
		t.Fatal(err)
	}
}
