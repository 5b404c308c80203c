package node

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/timemachine-db/timemachine/auth"
	"github.com/timemachine-db/timemachine/cluster"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/rpc/mux"
	"github.com/timemachine-db/timemachine/rpc/peer"
	"github.com/timemachine-db/timemachine/rpc/webhook"
	"github.com/timemachine-db/timemachine/secrets"
	"github.com/timemachine-db/timemachine/tlsconf"
)

// security is what the security flags (docs/threat-model.md) load: the
// token table, certificates, the gossip key, the callback egress policy
// and the secrets key. Each part is nil when its flags are absent.
type security struct {
	auth      *auth.Store
	httpTLS   *tlsconf.Files
	peerTLS   *tlsconf.Files
	gossipKey []byte
	egress    *webhook.Policy
	secrets   *secrets.Box
	localIPs  []netip.Addr // this machine's interface addresses (egress: own listeners on 0.0.0.0)
}

// validateSecurity checks the security flags before anything is opened.
func (c *Config) validateSecurity() error {
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key go together: give both for HTTPS, or neither")
	}
	n := 0
	for _, s := range []string{c.PeerTLSCert, c.PeerTLSKey, c.PeerTLSCA} {
		if s != "" {
			n++
		}
	}
	if n != 0 && n != 3 {
		return errors.New("--peer-tls-cert, --peer-tls-key and --peer-tls-ca go together: give all three for mutual TLS on --bind-addr, or none")
	}
	if c.GossipKey != "" {
		if _, err := cluster.ParseGossipKey(c.GossipKey); err != nil {
			return fmt.Errorf("--gossip-key: %w", err)
		}
	}
	if c.MaxBodyBytes < 0 {
		return fmt.Errorf("--max-body-bytes %d: must be positive", c.MaxBodyBytes)
	}
	return nil
}

// loadSecurity reads the files the flags name and builds the policy.
func loadSecurity(c *Config, log *slog.Logger) (*security, error) {
	s := &security{}
	var err error
	if c.AuthFile != "" {
		if s.auth, err = auth.Open(c.AuthFile); err != nil {
			return nil, fmt.Errorf("--auth-file: %w", err)
		}
		log.Info("API tokens required", "auth_file", c.AuthFile, "tokens", s.auth.Table().Len())
	} else if !loopbackAddr(c.HTTPAddr) {
		log.Warn("the HTTP API is open to anybody who can reach it: --http-addr is not a loopback address and there is no --auth-file (docs/threat-model.md)", "http_addr", c.HTTPAddr)
	}
	if c.TLSCert != "" {
		if s.httpTLS, err = tlsconf.Load(c.TLSCert, c.TLSKey, ""); err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
	}
	if c.PeerTLSCert != "" {
		if s.peerTLS, err = tlsconf.Load(c.PeerTLSCert, c.PeerTLSKey, c.PeerTLSCA); err != nil {
			return nil, fmt.Errorf("--peer-tls-*: %w", err)
		}
		// Every dial to a peer speaks TLS; tests that inject their own
		// dialers keep them.
		client := s.peerTLS.PeerClientConfig()
		if c.MuxDialer == nil {
			c.MuxDialer = mux.TLSDialer(client)
		}
		if c.PeerDialer == nil {
			dial := mux.TLSDialer(client)
			c.PeerDialer = peer.Dialer(func(addr string, timeout time.Duration) (net.Conn, error) {
				return dial(addr, mux.ProtoRPC, 0, timeout)
			})
		}
	} else if !loopbackAddr(c.BindAddr) {
		log.Warn("the internal port accepts raft and RPC from anybody who can reach it: --bind-addr is not a loopback address and there is no --peer-tls-* (docs/threat-model.md)", "bind_addr", c.BindAddr)
	}
	if c.GossipKey != "" {
		s.gossipKey, _ = cluster.ParseGossipKey(c.GossipKey)
	} else if !loopbackAddr(c.SerfAddr) {
		log.Warn("gossip is neither encrypted nor authenticated: --serf-addr is not a loopback address and there is no --gossip-key; anybody who reaches it can join (docs/threat-model.md)", "serf_addr", c.SerfAddr)
	}
	deny := c.CallbackDeny
	if deny == nil {
		deny = webhook.DefaultDeny
	}
	if s.egress, err = webhook.NewPolicy(deny, c.CallbackAllow); err != nil {
		// A malformed list is a mistake on the command line (exit 2), like
		// every other flag out of range.
		return nil, &ConfigError{Err: err}
	}
	if s.egress.Reaches(webhook.MetadataAddr) {
		// Only an operator's list can get here: the default denies it.
		log.Warn("callbacks may reach the cloud metadata service: --callback-deny replaces its default list, and the one given does not cover "+webhook.MetadataAddr.String()+"; add 169.254.0.0/16 back unless this is intended (docs/threat-model.md)",
			"callback_deny", strings.Join(deny, ","), "callback_allow", strings.Join(c.CallbackAllow, ","))
	}
	if c.SecretsKeyFile != "" {
		if s.secrets, err = secrets.OpenFile(c.SecretsKeyFile); err != nil {
			return nil, fmt.Errorf("--secrets-key-file: %w", err)
		}
	}
	if ifs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range ifs {
			if pf, err := netip.ParsePrefix(a.String()); err == nil {
				s.localIPs = append(s.localIPs, pf.Addr().Unmap())
			}
		}
	} else {
		// A sandbox without netlink (systemd's RestrictAddressFamilies
		// without AF_NETLINK) refuses the listing: with a wildcard
		// --http-addr, this machine's other addresses then reach the API.
		log.Warn("cannot list this machine's network addresses: a callback to one of them reaching this node's own wildcard listeners is not refused (allow AF_NETLINK in a sandbox)", "error", err)
	}
	return s, nil
}

// loopbackAddr reports whether a listen address is on loopback only.
func loopbackAddr(hostport string) bool {
	h, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if h == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.IsLoopback()
}

// sealer is the secrets box as the service's Sealer, nil when secrets are
// stored as given.
func (s *security) sealer() interface{ Seal(string) (string, error) } {
	if s.secrets == nil {
		return nil
	}
	return s.secrets
}

// checkTarget vets a callback or webhook URL at create against the egress
// policy (API.md §6: 400 invalid_argument naming the policy).
func (n *Node) checkTarget(field, raw string) *model.Error {
	if err := n.sec.egress.CheckURL(raw); err != nil {
		return model.Invalid("%s: %v", field, err)
	}
	return nil
}

// isInternal reports whether ap is one of the cluster's own listeners:
// the HTTP API, internal port or gossip port of this node or of any node
// in the meta state. A callback to them would let whoever creates a job
// call the admin API with the node's own network position.
func (n *Node) isInternal(ap netip.AddrPort) bool {
	target := ap.Addr().Unmap()
	match := func(hostport string) bool {
		h, p, err := net.SplitHostPort(hostport)
		if err != nil {
			return false
		}
		if port, err := strconv.ParseUint(p, 10, 16); err != nil || uint16(port) != ap.Port() {
			return false
		}
		a, ok := webhook.LiteralHost(h)
		if h == "" {
			a, ok = netip.IPv6Unspecified(), true // ":8080": every address
		}
		if !ok {
			return false // a name: not resolved here
		}
		if a.IsUnspecified() { // listening on every address of that machine
			if target.IsLoopback() || target.IsUnspecified() {
				return true
			}
			for _, l := range n.sec.localIPs {
				if l == target {
					return true
				}
			}
			return false
		}
		return a.Unmap() == target
	}
	if n.httpLn != nil && match(n.httpLn.Addr().String()) {
		return true
	}
	if n.mux != nil && match(n.mux.Addr().String()) {
		return true
	}
	if match(n.cfg.SerfAddr) {
		return true
	}
	if n.meta == nil {
		return false
	}
	for _, nd := range n.meta.State().Nodes {
		if match(nd.HTTPAddr) || match(nd.BindAddr) || match(nd.SerfAddr) {
			return true
		}
	}
	return false
}

// Reload re-reads what SIGHUP reloads: the auth file, the HTTPS and peer
// certificates and the secrets key file. A file that fails to load keeps
// its previous version in force; the errors are returned together.
func (n *Node) Reload() error {
	var errs []error
	if a := n.sec.auth; a != nil {
		if k, err := a.Reload(); err != nil {
			errs = append(errs, err)
		} else {
			n.log.Info("auth file reloaded", "tokens", k)
		}
	}
	for _, f := range []struct {
		what  string
		files *tlsconf.Files
	}{{"HTTPS certificate", n.sec.httpTLS}, {"peer certificate", n.sec.peerTLS}} {
		if f.files == nil {
			continue
		}
		if err := f.files.Reload(); err != nil {
			errs = append(errs, fmt.Errorf("%s not reloaded, the previous one stays in use: %w", f.what, err))
		} else {
			n.log.Info(f.what+" reloaded", "not_after", f.files.NotAfter().Format(time.RFC3339))
		}
	}
	if b := n.sec.secrets; b != nil {
		if err := b.Reload(); err != nil {
			errs = append(errs, err)
		} else {
			n.log.Info("secrets key file reloaded")
		}
	}
	return errors.Join(errs...)
}

// DefaultMaxConns sizes the API's connection cap from the process's file
// descriptor limit: what is left after a reserve for everything else the
// node opens (Pebble's table cache, raft logs and snapshots, peer
// connections, one callback connection per fire slot and their idle
// pool), and never less than a quarter of the limit.
func DefaultMaxConns(fireConcurrency int) int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 {
		return 4096
	}
	limit := int(min(rl.Cur, 1<<22))
	reserve := fireConcurrency + 3000
	return max(limit-reserve, limit/4, 64)
}

func (s *security) httpTLSConfig() *tls.Config {
	if s.httpTLS == nil {
		return nil
	}
	return s.httpTLS.ServerConfig()
}
