package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// The callback egress policy (--callback-deny, --callback-allow): which
// addresses a callback may be sent to, so that creating a job cannot turn
// the cluster into a proxy toward cloud metadata services or the
// cluster's own admin API (SSRF).
//
// The policy is enforced where the connection is made. The client's dial
// function resolves the host name itself, checks every address the name
// resolves to, and connects to a checked address: a name that resolves
// to a public address when a job is created and to 169.254.169.254 when
// it fires (DNS rebinding) is refused at the fire, because the address
// checked is the address connected to. Literal addresses — including the
// odd IPv4 spellings inet_aton accepts (127.1, 0x7f.0.0.1, 2130706433,
// 0177.0.0.1), IPv4-mapped IPv6 and NAT64 — are normalised before the
// check, and are also checked when the job or route is created
// (CheckTarget) so the mistake is a 400 instead of a failed job.
// Redirects are never followed (Deliver), so a permitted receiver cannot
// bounce a callback to a refused one.

// DefaultDeny is the default of --callback-deny: link-local (which holds
// the cloud metadata services of AWS, GCP and Azure at 169.254.169.254),
// "this network" and the unspecified addresses (which reach the local
// host), IPv6 link-local, AWS's IPv6 metadata address and Alibaba
// Cloud's metadata address. Private ranges and loopback stay allowed by
// default, because receivers on the same host or network are the common
// case; production deployments should deny them or use an allow list
// (docs/threat-model.md).
var DefaultDeny = []string{
	"169.254.0.0/16", "fe80::/10", "0.0.0.0/8",
	"::/128", "fd00:ec2::254/128", "100.100.100.200/32",
}

// metadataNames are host names that always mean a cloud metadata
// address; they are checked as that address, at create too.
var metadataNames = map[string]netip.Addr{
	"metadata.google.internal":   netip.MustParseAddr("169.254.169.254"),
	"metadata.goog":              netip.MustParseAddr("169.254.169.254"),
	"metadata":                   netip.MustParseAddr("169.254.169.254"),
	"instance-data":              netip.MustParseAddr("169.254.169.254"),
	"instance-data.ec2.internal": netip.MustParseAddr("169.254.169.254"),
}

// IPv6 prefixes that carry an IPv4 address a packet may end up at: NAT64
// (64:ff9b::a.b.c.d, in its last four bytes), the deprecated
// IPv4-compatible form (::a.b.c.d, the same bytes) and 6to4
// (2002:AABB:CCDD::, in bytes 2 to 5). Each is checked as that IPv4
// address too.
var (
	nat64        = netip.MustParsePrefix("64:ff9b::/96")
	v4compat     = netip.MustParsePrefix("::/96")
	sixToFour    = netip.MustParsePrefix("2002::/16")
	loopback6    = netip.IPv6Loopback()
	unspecified6 = netip.IPv6Unspecified()
)

// embeddedV4 returns the IPv4 address an IPv6 address of those prefixes
// carries.
func embeddedV4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() || a == loopback6 || a == unspecified6 {
		return netip.Addr{}, false
	}
	b := a.As16()
	switch {
	case nat64.Contains(a), v4compat.Contains(a):
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), true
	}
	return netip.Addr{}, false
}

// ErrRefused marks a callback the egress policy refused: it cannot succeed
// by retrying, so the job fails at once.
var ErrRefused = errors.New("refused by the callback egress policy")

// RefusedError says which address was refused and by which rule.
type RefusedError struct {
	Host string
	Addr netip.Addr
	Rule string
}

func (e *RefusedError) Error() string {
	target := e.Addr.String()
	if e.Host != "" && e.Host != target {
		target = e.Host + " (" + target + ")"
	}
	return fmt.Sprintf("callback to %s %s: %s", target, ErrRefused.Error(), e.Rule)
}

// Unwrap makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Unwrap() error { return ErrRefused }

// Resolver resolves host names (net.DefaultResolver; tests substitute
// their own).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Policy is an egress policy. The zero value allows everything; use
// NewPolicy.
type Policy struct {
	deny  []netip.Prefix
	allow []netip.Prefix
	// internal reports whether an address is one of the cluster's own
	// listeners (HTTP API, internal port, gossip): never a callback target.
	internal atomic.Pointer[func(netip.AddrPort) bool]
	resolver Resolver
	dialer   net.Dialer
	refused  atomic.Uint64
}

// NewPolicy builds a policy from CIDRs or bare addresses. An empty allow
// list allows everything the deny list does not refuse.
func NewPolicy(deny, allow []string) (*Policy, error) {
	p := &Policy{resolver: net.DefaultResolver}
	var err error
	if p.deny, err = parsePrefixes("--callback-deny", deny); err != nil {
		return nil, err
	}
	if p.allow, err = parsePrefixes("--callback-allow", allow); err != nil {
		return nil, err
	}
	return p, nil
}

func parsePrefixes(flag string, ss []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range ss {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if pf, err := netip.ParsePrefix(s); err == nil {
			if pf.Addr().Is4In6() {
				pf = netip.PrefixFrom(pf.Addr().Unmap(), max(pf.Bits()-96, 0))
			}
			out = append(out, pf.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%s %q: not a CIDR (like 10.0.0.0/8) or an address", flag, s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// SetResolver replaces the resolver (tests).
func (p *Policy) SetResolver(r Resolver) { p.resolver = r }

// SetInternal sets the test for the cluster's own addresses; it may be
// called while callbacks are sent (the cluster's membership changes).
func (p *Policy) SetInternal(f func(netip.AddrPort) bool) { p.internal.Store(&f) }

// MetadataAddr is the cloud metadata services' address (AWS, GCP, Azure),
// the most valuable target of a callback URL turned against its server.
var MetadataAddr = netip.MustParseAddr("169.254.169.254")

// Reaches reports whether the deny and allow lists let a callback reach a
// (the cluster's own addresses aside): the server warns at start when an
// operator's --callback-deny, which replaces the default list, no longer
// keeps MetadataAddr out.
func (p *Policy) Reaches(a netip.Addr) bool {
	var e *RefusedError
	return !errors.As(p.check("", a, 80), &e)
}

// Refused counts the callback attempts the policy refused.
func (p *Policy) Refused() uint64 { return p.refused.Load() }

// check decides about one address and port.
func (p *Policy) check(host string, a netip.Addr, port uint16) error {
	a = a.Unmap().WithZone("")
	addrs := []netip.Addr{a}
	if v4, ok := embeddedV4(a); ok {
		addrs = append(addrs, v4)
	}
	for _, x := range addrs {
		for _, pf := range p.deny {
			if pf.Contains(x) {
				return &RefusedError{Host: host, Addr: a, Rule: "--callback-deny " + pf.String()}
			}
		}
	}
	if len(p.allow) > 0 {
		ok := false
		for _, pf := range p.allow {
			if pf.Contains(addrs[len(addrs)-1]) {
				ok = true
				break
			}
		}
		if !ok {
			return &RefusedError{Host: host, Addr: a, Rule: "not in --callback-allow"}
		}
	}
	if f := p.internal.Load(); f != nil && (*f)(netip.AddrPortFrom(a, port)) {
		return &RefusedError{Host: host, Addr: a, Rule: "it is one of this cluster's own listeners (HTTP API, internal port or gossip)"}
	}
	return nil
}

// LiteralHost returns the address a URL host stands for without a DNS
// lookup: an IP literal in any spelling the system resolver would accept
// (dotted, shortened, hexadecimal, octal or a single 32-bit number; IPv6
// in brackets, with or without a zone), "localhost" and its subdomains,
// or a well-known cloud metadata name. ok is false for a host name.
func LiteralHost(host string) (netip.Addr, bool) {
	if a, ok := addressLiteral(host); ok {
		return a, true
	}
	lower := strings.TrimSuffix(strings.ToLower(host), ".")
	if lower == "localhost" || strings.HasSuffix(lower, ".localhost") {
		return netip.MustParseAddr("127.0.0.1"), true
	}
	if a, ok := metadataNames[lower]; ok {
		return a, true
	}
	return netip.Addr{}, false
}

// addressLiteral returns the address a URL host spells, in any spelling
// the system resolver would accept (dotted, shortened, hexadecimal, octal
// or a single 32-bit number; IPv6 in brackets, with or without a zone).
// ok is false for a name, "localhost" included.
func addressLiteral(host string) (netip.Addr, bool) {
	if strings.HasPrefix(host, "[") {
		h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		if i := strings.IndexByte(h, '%'); i >= 0 {
			h = h[:i]
		}
		a, err := netip.ParseAddr(h)
		return a.Unmap(), err == nil
	}
	h := host
	if i := strings.IndexByte(h, '%'); i >= 0 {
		h = h[:i]
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap(), true
	}
	// One trailing dot (a fully qualified spelling): URL parsers in
	// browsers and curl read "169.254.169.254." as that address.
	if a, ok := parseInetAton(h); ok {
		return a, true
	}
	if strings.HasSuffix(h, ".") && !strings.HasSuffix(h, "..") {
		return parseInetAton(strings.TrimSuffix(h, "."))
	}
	return netip.Addr{}, false
}

// parseInetAton parses the IPv4 forms of BSD's inet_aton, which glibc's
// resolver (and so curl, and any cgo-resolving program) accepts: 1 to 4
// parts separated by dots, each decimal, octal (leading 0) or hexadecimal
// (0x); the last part fills the remaining bytes.
func parseInetAton(s string) (netip.Addr, bool) {
	if s == "" || strings.HasSuffix(s, ".") {
		return netip.Addr{}, false
	}
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, part := range parts {
		if part == "" {
			return netip.Addr{}, false
		}
		base, digits := 10, part
		switch {
		case len(part) > 1 && (part[:2] == "0x" || part[:2] == "0X"):
			base, digits = 16, part[2:]
			if digits == "" {
				digits = "0"
			}
		case len(part) > 1 && part[0] == '0':
			base, digits = 8, part[1:]
		}
		v, err := strconv.ParseUint(digits, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var n uint64
	last := len(vals) - 1
	for i, v := range vals[:last] {
		if v > 0xff {
			return netip.Addr{}, false
		}
		n |= v << (24 - 8*uint(i))
	}
	if vals[last] >= 1<<(32-8*uint(last)) {
		return netip.Addr{}, false
	}
	n |= vals[last]
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

// CheckURL vets a callback or webhook URL at create: a host that is an
// address in any spelling is checked against the policy; a host name is
// left to the dial, where it is checked after resolution on every attempt
// (API.md §6). That includes "localhost", which the dial checks without
// asking DNS: refused there, it fails the job with a last_error naming
// the policy, as any refused name does. The well-known cloud metadata
// names stand for one address each and are checked here, as that address
// (docs/api.md). The error names the rule; the URL's other parts are not
// repeated.
func (p *Policy) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%w: callback URL does not parse", ErrInvalidRequest)
	}
	h := u.Hostname()
	a, ok := addressLiteral(h)
	if !ok {
		a, ok = metadataNames[strings.TrimSuffix(strings.ToLower(h), ".")]
	}
	if !ok {
		return nil
	}
	return p.check(h, a, portOf(u))
}

func portOf(u *url.URL) uint16 {
	if ps := u.Port(); ps != "" {
		n, _ := strconv.ParseUint(ps, 10, 16)
		return uint16(n)
	}
	if strings.EqualFold(u.Scheme, "https") {
		return 443
	}
	return 80
}

// Dial connects to addr ("host:port", as fasthttp passes it) under the
// policy: resolve, check every address, connect to a checked one. A name
// with any refused address is refused whole: a name that mixes internal
// and external answers is what a rebinding attack looks like.
func (p *Policy) Dial(addr string, timeout time.Duration) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%w: callback address %q: %v", ErrInvalidRequest, addr, err)
	}
	port64, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("%w: callback port %q", ErrInvalidRequest, portStr)
	}
	port := uint16(port64)
	deadline := time.Now().Add(timeout)
	var addrs []netip.Addr
	if a, ok := LiteralHost(host); ok {
		addrs = []netip.Addr{a}
	} else {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		addrs, err = p.resolver.LookupNetIP(ctx, "ip", host)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("resolving %s: %w", host, err)
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("resolving %s: no addresses", host)
		}
	}
	for _, a := range addrs {
		if err := p.check(host, a, port); err != nil {
			p.refused.Add(1)
			return nil, err
		}
	}
	var lastErr error
	for _, a := range addrs {
		d := p.dialer
		d.Timeout = time.Until(deadline)
		if d.Timeout <= 0 {
			break
		}
		c, err := d.Dial("tcp", netip.AddrPortFrom(a.Unmap(), port).String())
		if err == nil {
			return c, nil
		}
		lastErr = err
	}
	if lastErr == nil {
		lastErr = fmt.Errorf("dial %s: timed out", addr)
	}
	return nil, lastErr
}
