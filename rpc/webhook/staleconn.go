package webhook

import (
	"errors"
	"net"
	"sync/atomic"
)

// errStaleConn: a pooled keep-alive connection turned out to be closed by
// the receiver before the next request was written. Nothing of the request
// left this process, so sending it again on a fresh connection cannot make
// the receiver see it twice; it is the only error the client replays on.
var errStaleConn = errors.New("webhook: the receiver closed the idle keep-alive connection")

// staleCheckConn wraps a receiver connection so that a request is never
// written onto a connection the receiver has already closed.
//
// fasthttp does not notice a close while a connection idles in its pool
// (net/http has a background reader for that). Replaying a request after
// any error on a reused connection would hide those closes, but it also
// sends the request twice to a receiver that closed the connection without
// answering after it received the request (the nemesis saw each such
// attempt twice). So the connection is checked instead, right before the
// first write of every request after the first: a non-blocking peek at the
// socket says whether the receiver has closed it (EOF or a reset pending)
// or sent bytes nobody asked for (a 408 before closing, a TLS close_notify).
// Either way the write fails with errStaleConn before any byte of the
// request is sent.
type staleCheckConn struct {
	net.Conn
	// readSinceWrite: bytes were read since the last write, so the next
	// write starts a new request (or the next flight of a handshake).
	readSinceWrite atomic.Bool
}

func (c *staleCheckConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.readSinceWrite.Store(true)
	}
	return n, err
}

func (c *staleCheckConn) Write(p []byte) (int, error) {
	if c.readSinceWrite.Swap(false) && peerClosed(c.Conn) {
		return 0, errStaleConn
	}
	return c.Conn.Write(p)
}
