//go:build unix

package webhook

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/internal/testutil"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// When the peek runs: a write that follows an answer is checked unless the
// answer is younger than fresh; the first write after a dial, and a write
// with no answer since the last one, are never checked. A reset shows
// without the peek too: the request's first write fails before a byte
// leaves. A close without a reset (FIN) within fresh is not seen.
func TestStaleCheckConnPeeksAfterIdle(t *testing.T) {
	var now int64
	saved := monoNow
	monoNow = func() int64 { return now }
	t.Cleanup(func() { monoNow = saved })
	const fresh = 100 * time.Millisecond

	for _, tc := range []struct {
		name    string
		fresh   time.Duration
		idle    time.Duration // from the answer to the next write
		closed  bool          // the receiver closed the connection meanwhile
		reset   bool          // … with a reset (SO_LINGER 0), not a FIN
		refused bool          // the write fails with errStaleConn
	}{
		{name: "closed, answered just now", fresh: fresh, idle: 10 * time.Millisecond, closed: true, refused: false},
		{name: "closed, idle past fresh", fresh: fresh, idle: fresh, closed: true, refused: true},
		{name: "closed, long idle", fresh: fresh, idle: 5 * time.Second, closed: true, refused: true},
		{name: "open, idle past fresh", fresh: fresh, idle: time.Second, closed: false, refused: false},
		{name: "closed, fresh 0 peeks always", fresh: 0, idle: 0, closed: true, refused: true},
		{name: "open, fresh 0", fresh: 0, idle: 0, closed: false, refused: false},
		{name: "reset, answered just now", fresh: fresh, idle: 10 * time.Millisecond, closed: true, reset: true, refused: true},
		{name: "reset, idle past fresh", fresh: fresh, idle: time.Second, closed: true, reset: true, refused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl, srv := tcpPair(t)
			c := &staleCheckConn{Conn: cl, fresh: tc.fresh}
			// A request and its answer.
			if _, err := c.Write([]byte("req")); err != nil {
				t.Fatalf("first write: %v", err)
			}
			if _, err := srv.Read(make([]byte, 3)); err != nil {
				t.Fatal(err)
			}
			if _, err := srv.Write([]byte("ans")); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Read(make([]byte, 3)); err != nil {
				t.Fatal(err)
			}
			if tc.closed {
				if tc.reset {
					if err := srv.(*net.TCPConn).SetLinger(0); err != nil {
						t.Fatal(err)
					}
				}
				srv.Close()
				// Wait until the FIN has arrived: a peek sees it.
				testutil.Eventually(t, 5*time.Second, "the close reaching the client socket", testutil.True(func() bool { return peerClosed(cl) }))
			}
			now += int64(tc.idle)
			_, err := c.Write([]byte("req2"))
			if got := errors.Is(err, errStaleConn); got != tc.refused {
				t.Fatalf("write after %v idle (closed %v): err %v, want refused %v", tc.idle, tc.closed, err, tc.refused)
			}
			// A write without an answer since the last one is never checked.
			if tc.refused && !tc.reset {
				if _, err := c.Write([]byte("x")); errors.Is(err, errStaleConn) {
					t.Fatalf("second write without an answer was peeked at: %v", err)
				}
			}
		})
	}
}
