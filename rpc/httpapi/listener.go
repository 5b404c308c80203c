package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// guardedListener keeps the API serving whatever its clients do:
//
//   - An accept error never ends Serve. fasthttp's Serve returns on any
//     accept error that is not a timeout, so running out of file
//     descriptors (EMFILE) once stopped the API for good while the node
//     stayed a raft leader. Accept here retries every error but a closed
//     listener, backing off from 5 ms to 1 s, and logs at most one line a
//     second.
//   - At most max connections are open at once, a number the node sizes
//     below its file-descriptor limit so that idle clients can never take
//     the descriptors that raft, Pebble and callbacks need. A connection
//     over the cap is answered 503 with Retry-After (plain HTTP only; a
//     TLS one is just closed) and closed at once.
//   - At most perIP of them come from one client address
//     (--max-conns-per-ip); one more is answered 429 overloaded with
//     Retry-After, the same way. (fasthttp's own per-IP cap answered in
//     plain text, outside the contract's error body.)
//   - Over HTTPS, a connection that starts with a plain HTTP request line
//     instead of a TLS handshake is answered 400 in plain HTTP
//     (countedConn.Read).
type guardedListener struct {
	net.Listener
	log     *slog.Logger
	max     int64
	perIP   int64
	tls     bool
	open    atomic.Int64
	refused atomic.Uint64

	mu      sync.Mutex
	lastLog time.Time
	missed  int
	byIP    map[string]int64 // open connections per client address (perIP > 0)
}

func newGuardedListener(ln net.Listener, maxConns, maxPerIP int, isTLS bool, log *slog.Logger) *guardedListener {
	return &guardedListener{Listener: ln, log: log, max: int64(maxConns), perIP: int64(maxPerIP), tls: isTLS, byIP: map[string]int64{}}
}

// errorAnswer is the whole answer to a connection turned away.
func errorAnswer(status, code, message string) []byte {
	return rawAnswer(status, code, message, "Retry-After: 1\r\n")
}

func rawAnswer(status, code, message, extra string) []byte {
	body := fmt.Sprintf(`{"error":{"code":%q,"message":%q}}`, code, message)
	return fmt.Appendf(nil, "HTTP/1.1 %s\r\nContent-Type: application/json\r\n%sConnection: close\r\nContent-Length: %d\r\n\r\n%s", status, extra, len(body), body)
}

var (
	overCapAnswer    = errorAnswer("503 Service Unavailable", "unavailable", "this node has too many open connections; retry in a second or reuse one")
	overIPCapAnswer  = errorAnswer("429 Too Many Requests", "overloaded", "too many open connections from this address (--max-conns-per-ip); retry in a second or reuse one")
	plainOnTLSAnswer = rawAnswer("400 Bad Request", "invalid_argument", "this address serves HTTPS (--tls-cert): send the request to https://, not http://", "")
)

// errPlainOnTLS fails the TLS handshake of a connection that spoke plain
// HTTP; it has had plainOnTLSAnswer.
var errPlainOnTLS = errors.New("a plain HTTP request on the HTTPS port: answered 400")

func (l *guardedListener) Accept() (net.Conn, error) {
	backoff := 5 * time.Millisecond
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil, err
			}
			l.logRateLimited("accepting a connection failed; retrying", "error", err, "retry_in", backoff)
			time.Sleep(backoff)
			backoff = min(backoff*2, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		if l.max > 0 && l.open.Load() >= l.max {
			l.refused.Add(1)
			go l.turnAway(c, overCapAnswer, "connection refused: the API's connection cap is reached", "max_conns", l.max)
			continue
		}
		ip := ""
		if l.perIP > 0 {
			ip = clientIP(c)
			l.mu.Lock()
			over := l.byIP[ip] >= l.perIP
			if !over {
				l.byIP[ip]++
			}
			l.mu.Unlock()
			if over {
				l.refused.Add(1)
				go l.turnAway(c, overIPCapAnswer, "connection refused: the client address's connection cap is reached", "max_conns_per_ip", l.perIP, "client", ip)
				continue
			}
		}
		l.open.Add(1)
		return &countedConn{Conn: c, l: l, ip: ip, sniff: l.tls}, nil
	}
}

// clientIP is the address a connection comes from, without its port.
func clientIP(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String()
	}
	return host
}

// turnAway answers a connection over a cap without reading from it.
func (l *guardedListener) turnAway(c net.Conn, answer []byte, msg string, args ...any) {
	if !l.tls {
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = c.Write(answer)
	}
	_ = c.Close()
	l.logRateLimited(msg, args...)
}

func (l *guardedListener) logRateLimited(msg string, args ...any) {
	l.mu.Lock()
	now := time.Now()
	if now.Sub(l.lastLog) < time.Second {
		l.missed++
		l.mu.Unlock()
		return
	}
	missed := l.missed
	l.lastLog, l.missed = now, 0
	l.mu.Unlock()
	l.log.Warn(msg, append(args, "similar_lines_suppressed", missed)...)
}

// Open is the number of connections open now.
func (l *guardedListener) Open() int64 { return l.open.Load() }

type countedConn struct {
	net.Conn
	l    *guardedListener
	ip   string // counted in l.byIP when not ""
	once sync.Once
	// sniff: the first bytes read are still to be checked for a TLS
	// handshake (HTTPS only; Read runs on the connection's goroutine).
	sniff bool
}

// Read passes the connection's bytes on. Over HTTPS the first ones must
// start a TLS handshake (record type 22); a client that sends plain HTTP
// instead (an http:// URL for an https:// server) is answered 400 with
// the contract's body in plain HTTP, as Go's own server does, rather than
// a connection closed without a word.
func (c *countedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if c.sniff && n > 0 {
		c.sniff = false
		if b[0] != 0x16 && isPlainHTTP(b[:n]) {
			_ = c.Conn.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = c.Conn.Write(plainOnTLSAnswer)
			return 0, errPlainOnTLS
		}
	}
	return n, err
}

// isPlainHTTP reports whether b starts like an HTTP/1 request line: an
// upper-case method and a space.
func isPlainHTTP(b []byte) bool {
	for i, ch := range b {
		switch {
		case ch == ' ':
			return i > 0
		case ch < 'A' || ch > 'Z' || i >= 16:
			return false
		}
	}
	return false
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.open.Add(-1)
		if c.ip != "" {
			c.l.mu.Lock()
			if c.l.byIP[c.ip]--; c.l.byIP[c.ip] <= 0 {
				delete(c.l.byIP, c.ip)
			}
			c.l.mu.Unlock()
		}
	})
	return err
}
