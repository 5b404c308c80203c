package netfault

import (
	"bufio"
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// echo serves a line echo on a loopback listener.
func echo(t *testing.T, ln net.Listener) {
	t.Helper()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	t.Cleanup(func() { ln.Close() })
}

// roundTrip sends one line through c and times the echo.
func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader) time.Duration {
	t.Helper()
	start := time.Now()
	if _, err := c.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := r.ReadString('\n')
	if err != nil || line != "ping\n" {
		t.Fatalf("echo: %q %v", line, err)
	}
	return time.Since(start)
}

func TestProxyRelaysAndDelays(t *testing.T) {
	target, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	echo(t, target)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := NewProxy(ln, target.Addr().String(), func(ctx context.Context, addr string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	})
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if d := roundTrip(t, c, r); d > 100*time.Millisecond {
		t.Fatalf("round trip without delay took %v", d)
	}
	p.SetDelay(150 * time.Millisecond)
	// Both directions are delayed: at least 300 ms per round trip.
	if d := roundTrip(t, c, r); d < 300*time.Millisecond || d > 2*time.Second {
		t.Fatalf("round trip with 150ms each way took %v", d)
	}
	p.SetDelay(0)
	if d := roundTrip(t, c, r); d > 100*time.Millisecond {
		t.Fatalf("round trip after the delay ended took %v", d)
	}
	// Close ends the relayed connections.
	p.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.ReadByte(); err == nil {
		t.Fatal("connection still open after Close")
	}
}
