package mux

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Mutual TLS on the internal port, and refusal accounting.
//
// With Options.TLS the mux completes a TLS handshake on every accepted
// connection — the server config requires a client certificate from the
// cluster CA — BEFORE it reads the 4-byte header: an unauthenticated peer
// never reaches a raft transport or the RPC decoder. The handshake has a
// deadline (handshakeTimeout), and at most maxPending connections may be
// in their handshake or header at once, so a flood of half-open
// connections costs a bounded number of goroutines. Refusals (plain TCP
// on a TLS port, a certificate from another CA, junk bytes, an unknown
// header) are counted by reason and logged at INFO, at most once per
// refusalLogEvery with the number suppressed: the node's log is not an
// attacker's to fill.

// Options configures a Mux.
type Options struct {
	Logger *slog.Logger
	// TLS, when set, is the server side of mutual TLS (it must require and
	// verify client certificates); see tlsconf.Files.PeerServerConfig.
	TLS *tls.Config
}

const (
	handshakeTimeout = 5 * time.Second
	maxPending       = 512
	refusalLogEvery  = 10 * time.Second
)

// Refusal reasons, the label of the refused-connections metric.
const (
	RefusedTLS    = "tls"    // the TLS handshake failed (no or a foreign certificate, plain TCP, junk)
	RefusedHeader = "header" // no complete header in time, or an unknown version
	RefusedRoute  = "route"  // a header for a protocol or group nobody serves
	RefusedBusy   = "busy"   // too many connections in their handshake at once
)

var refusalReasons = []string{RefusedTLS, RefusedHeader, RefusedRoute, RefusedBusy}

// refusals counts and logs refused connections.
type refusals struct {
	log    *slog.Logger
	counts [4]atomic.Uint64

	mu         sync.Mutex
	lastLog    time.Time
	suppressed int
}

func (r *refusals) add(reason string, remote net.Addr, err error) {
	for i, rr := range refusalReasons {
		if rr == reason {
			r.counts[i].Add(1)
		}
	}
	r.log.Debug("internal port: connection refused", "reason", reason, "remote", remote, "error", err)
	r.mu.Lock()
	now := time.Now()
	if now.Sub(r.lastLog) < refusalLogEvery {
		r.suppressed++
		r.mu.Unlock()
		return
	}
	n := r.suppressed
	r.lastLog, r.suppressed = now, 0
	r.mu.Unlock()
	r.log.Info("internal port: refused a connection (not a member of this cluster, or not speaking its protocol)",
		"reason", reason, "remote", remote, "error", err, "refused_since_last_line", n)
}

// Refused returns the refused connections by reason.
func (m *Mux) Refused() map[string]uint64 {
	out := make(map[string]uint64, len(refusalReasons))
	for i, r := range refusalReasons {
		out[r] = m.refused.counts[i].Load()
	}
	return out
}

// handshake completes the server side of TLS on c within handshakeTimeout.
func (m *Mux) handshake(c net.Conn) (net.Conn, error) {
	tc := tls.Server(c, m.tls)
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, err
	}
	return tc, nil
}

// TLSDialer returns a dial function like Dial that speaks TLS with cfg
// (tlsconf.Files.PeerClientConfig: it presents the node's certificate and
// verifies the server's against the cluster CA) before it sends the
// header. timeout bounds the connect and the handshake together.
func TLSDialer(cfg *tls.Config) func(addr string, proto byte, group uint16, timeout time.Duration) (net.Conn, error) {
	return func(addr string, proto byte, group uint16, timeout time.Duration) (net.Conn, error) {
		deadline := time.Now().Add(timeout)
		c, err := dialTCP(addr, timeout)
		if err != nil {
			return nil, err
		}
		tc := tls.Client(c, cfg)
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		err = tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("mux: TLS handshake with %s: %w", addr, err)
		}
		if err := sendHeader(tc, addr, proto, group, time.Until(deadline)); err != nil {
			return nil, err
		}
		return tc, nil
	}
}
