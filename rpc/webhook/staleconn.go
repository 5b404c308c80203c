package webhook

import (
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"
)

// errStaleConn: a pooled keep-alive connection turned out to be closed by
// the receiver before the next request was written. Nothing of the request
// left this process, so sending it again on a fresh connection cannot make
// the receiver see it twice; it is the only error the client replays on.
var errStaleConn = errors.New("webhook: the receiver closed the idle keep-alive connection")

// staleCheckConn wraps a receiver connection so that a request is never
// written onto a connection the receiver has already closed while it idled.
//
// fasthttp does not notice a close while a connection idles in its pool
// (net/http has a background reader for that). Replaying a request after
// any error on a reused connection would hide those closes, but it also
// sends the request twice to a receiver that closed the connection without
// answering after it received the request (the nemesis saw each such
// attempt twice). So the connection is checked instead, right before the
// first write of a request that follows an idle spell: a non-blocking peek
// at the socket says whether the receiver has closed it (EOF or a reset
// pending) or sent bytes nobody asked for (a 408 before closing, a TLS
// close_notify). Either way the write fails with errStaleConn before any
// byte of the request is sent.
//
// A connection whose last answer arrived less than fresh ago is written
// to without the peek: receivers close idle connections after seconds
// (gunicorn 2 s, Node and uvicorn 5 s, nginx 75 s), not milliseconds, and
// the peek is a syscall per request — ~5% of a node's CPU in a burst to
// one receiver, where every connection is reused within milliseconds.
// HTTP clients do the same (Apache HttpClient validates a pooled
// connection only after 2 s of inactivity). A reset that arrived
// meanwhile still shows: the first write of the request fails before a
// byte leaves, and that too is errStaleConn. Only a receiver that closes
// a connection (FIN, no reset) right after answering, without
// "Connection: close", can cost the next request on it an attempt
// (retried as usual); the peek never closed that race either, only
// narrowed it.
type staleCheckConn struct {
	net.Conn
	// fresh: no peek when the last read is younger than this (0: always).
	fresh time.Duration
	// readSinceWrite: bytes were read since the last write, so the next
	// write starts a new request (or the next flight of a handshake).
	readSinceWrite atomic.Bool
	// lastRead is when bytes were last read, on monoNow's clock.
	lastRead atomic.Int64
}

// monoStart anchors monoNow: a monotonic clock in ns, cheap to compare.
var monoStart = time.Now()

// monoNow is the clock of lastRead; tests replace it.
var monoNow = func() int64 { return int64(time.Since(monoStart)) }

func (c *staleCheckConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		if c.fresh > 0 {
			c.lastRead.Store(monoNow())
		}
		c.readSinceWrite.Store(true)
	}
	return n, err
}

func (c *staleCheckConn) Write(p []byte) (int, error) {
	first := c.readSinceWrite.Swap(false)
	if first && !c.justUsed() && peerClosed(c.Conn) {
		return 0, errStaleConn
	}
	n, err := c.Conn.Write(p)
	if first && n == 0 && err != nil && !isTimeout(err) {
		// The first write of a request failed before a byte of it left
		// (a reset from the receiver, peeked at or not): a replay on a
		// fresh connection cannot reach the receiver twice.
		return 0, fmt.Errorf("%w: %w", errStaleConn, err)
	}
	return n, err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// justUsed: an answer arrived on the connection less than fresh ago.
func (c *staleCheckConn) justUsed() bool {
	return c.fresh > 0 && monoNow()-c.lastRead.Load() < int64(c.fresh)
}
