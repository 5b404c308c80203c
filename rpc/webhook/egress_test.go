package webhook

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseInetAton(t *testing.T) {
	cases := []struct {
		in   string
		want string // "" = not an address
	}{
		{"127.1", "127.0.0.1"},
		{"127.0.1", "127.0.0.1"},
		{"0x7f.0.0.1", "127.0.0.1"},
		{"0X7F.1", "127.0.0.1"},
		{"0177.0.0.1", "127.0.0.1"},
		{"2130706433", "127.0.0.1"},
		{"0x7f000001", "127.0.0.1"},
		{"017700000001", "127.0.0.1"},
		{"169.254.43518", "169.254.169.254"},
		{"0xa9fea9fe", "169.254.169.254"},
		{"10.1", "10.0.0.1"},
		{"1.2.3.4", "1.2.3.4"},
		{"0", "0.0.0.0"},
		{"256.1", ""},
		{"1.2.3.256", ""},
		{"1.2.3.4.5", ""},
		{"08.0.0.1", ""},
		{"1.2.3.", ""},
		{"", ""},
		{"example.com", ""},
		{"1e3", ""},
		{"4294967296", ""},
		{"-1", ""},
	}
	for _, c := range cases {
		a, ok := parseInetAton(c.in)
		got := ""
		if ok {
			got = a.String()
		}
		if got != c.want {
			t.Errorf("parseInetAton(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// The SSRF list, against the default policy and against the
// policy docs/threat-model.md recommends for production (private ranges
// and loopback denied too): which are refused already at create.
func TestCheckURLTargets(t *testing.T) {
	def, err := NewPolicy(DefaultDeny, nil)
	if err != nil {
		t.Fatal(err)
	}
	prod, err := NewPolicy(append(append([]string{}, DefaultDeny...),
		"127.0.0.0/8", "::1/128", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7"), nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		url               string
		byDefault, inProd bool // refused?
	}{
		{"http://169.254.169.254/latest/meta-data/", true, true},
		{"http://[fd00:ec2::254]/latest", true, true},
		{"http://100.100.100.200/latest", true, true},
		{"http://metadata.google.internal/computeMetadata/v1/", true, true},
		{"http://[::ffff:169.254.169.254]/", true, true},
		{"http://[64:ff9b::a9fe:a9fe]/", true, true},
		{"http://169.254.169.254./", true, true},
		{"http://0xa9fea9fe./", true, true},
		{"http://[::a9fe:a9fe]/", true, true},
		{"http://[2002:a9fe:a9fe::1]/", true, true},
		{"http://[2002:a00:1::1]/", false, true},
		{"http://10.0.0.1./", false, true},
		{"http://169.254.169.254../", false, false}, // a name (it does not resolve)
		{"http://0xa9fea9fe/", true, true},
		{"http://[fe80::1%25eth0]/", true, true},
		{"http://0.0.0.0:8080/v1/admin/rebalance", true, true},
		{"http://[::]:8080/", true, true},
		{"http://10.0.0.1/", false, true},
		{"http://172.16.0.1/", false, true},
		{"http://192.168.1.1/", false, true},
		{"http://127.1:8080/", false, true},
		{"http://0x7f.0.0.1:8080/", false, true},
		{"http://2130706433:8080/", false, true},
		// A name, "localhost" too, is checked at the dial (below).
		{"http://localhost:8080/", false, false},
		{"http://[::1]:8080/", false, true},
		{"https://example.com/hook", false, false},
		{"https://93.184.215.14/hook", false, false},
	}
	for _, c := range cases {
		for _, pc := range []struct {
			name string
			p    *Policy
			want bool
		}{{"default", def, c.byDefault}, {"production", prod, c.inProd}} {
			err := pc.p.CheckURL(c.url)
			if got := err != nil; got != pc.want {
				t.Errorf("%s policy, %s: refused=%v (%v), want %v", pc.name, c.url, got, err, pc.want)
			}
			if err != nil && !errors.Is(err, ErrRefused) {
				t.Errorf("%s: %v is not ErrRefused", c.url, err)
			}
		}
	}
	// The names refused at the dial, without a DNS lookup and before any
	// packet: the attempt fails with the policy's error.
	for _, c := range []struct {
		p    *Policy
		addr string
	}{{prod, "localhost:8080"}, {prod, "app.localhost:8080"}, {def, "metadata.google.internal:80"}} {
		if _, err := c.p.Dial(c.addr, time.Second); !errors.Is(err, ErrRefused) {
			t.Errorf("Dial(%s) = %v, want ErrRefused", c.addr, err)
		}
	}
	allow, err := NewPolicy(nil, []string{"203.0.113.0/24"})
	if err != nil {
		t.Fatal(err)
	}
	if err := allow.CheckURL("http://203.0.113.9/"); err != nil {
		t.Errorf("allowed address refused: %v", err)
	}
	if err := allow.CheckURL("http://198.51.100.1/"); err == nil || !strings.Contains(err.Error(), "--callback-allow") {
		t.Errorf("address outside the allow list: %v", err)
	}
	if _, err := NewPolicy([]string{"10.0.0.0/33"}, nil); err == nil {
		t.Error("bad CIDR accepted")
	}
}

// fakeResolver answers from a table, and can change its answer between
// lookups (DNS rebinding).
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][][]netip.Addr // successive answers; the last repeats
	asked   map[string]int
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	as, ok := r.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	i := min(r.asked[host], len(as)-1)
	r.asked[host]++
	return as[i], nil
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// A name is checked after resolution on every attempt: a name that
// resolves to a denied address is refused without a connection, and a
// name that resolved to an allowed address and later to a denied one
// (DNS rebinding) is refused at that later attempt.
func TestDialChecksResolvedAddresses(t *testing.T) {
	var hits sync.Map
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Store(r.Host, true)
		w.WriteHeader(200)
	})
	u, _ := url.Parse(srv.URL)
	port := u.Port()
	// 127.0.0.2 stands in for a metadata address: it is loopback, so a
	// connection would succeed if the policy let it through.
	p, err := NewPolicy([]string{"169.254.0.0/16", "127.0.0.2/32"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res := &fakeResolver{asked: map[string]int{}, answers: map[string][][]netip.Addr{
		"good.test":     {addrs("127.0.0.1")},
		"meta.test":     {addrs("169.254.169.254")},
		"mixed.test":    {addrs("127.0.0.1", "127.0.0.2")},
		"rebind.test":   {addrs("127.0.0.1"), addrs("127.0.0.2")},
		"mapped.test":   {addrs("::ffff:127.0.0.2")},
		"internal.test": {addrs("127.0.0.1")},
	}}
	p.SetResolver(res)
	c := newClient(t, Options{Egress: p})
	deliver := func(host string) Result {
		return c.Deliver(context.Background(), testRequest("http://"+host+":"+port+"/hook"))
	}
	if r := deliver("good.test"); r.StatusCode != 200 {
		t.Fatalf("allowed name: %+v", r)
	}
	for _, h := range []string{"meta.test", "mixed.test", "mapped.test"} {
		before := p.Refused()
		r := deliver(h)
		if r.StatusCode != 0 || !errors.Is(r.Err, ErrRefused) {
			t.Fatalf("%s: %+v", h, r)
		}
		if !strings.Contains(r.Err.Error(), "--callback-deny") {
			t.Fatalf("%s: the error does not name the rule: %v", h, r.Err)
		}
		if p.Refused() != before+1 {
			t.Fatalf("%s: refusal not counted", h)
		}
	}
	// Rebinding: the first attempt resolves to an allowed address, the
	// second to a denied one.
	if r := deliver("rebind.test"); r.StatusCode != 200 {
		t.Fatalf("rebind, first attempt: %+v", r)
	}
	c.Close() // no pooled connection: the next attempt dials again
	c2 := newClient(t, Options{Egress: p})
	if r := c2.Deliver(context.Background(), testRequest("http://rebind.test:"+port+"/hook")); !errors.Is(r.Err, ErrRefused) {
		t.Fatalf("rebind, second attempt: %+v", r)
	}
	// The cluster's own listeners.
	pn, _ := strconv.Atoi(port)
	p.SetInternal(func(ap netip.AddrPort) bool { return ap.Port() == uint16(pn) })
	c3 := newClient(t, Options{Egress: p})
	if r := c3.Deliver(context.Background(), testRequest("http://internal.test:"+port+"/v1/admin/rebalance")); !errors.Is(r.Err, ErrRefused) || !strings.Contains(r.Err.Error(), "own listeners") {
		t.Fatalf("own listener: %+v", r)
	}
	if _, ok := hits.Load("127.0.0.2:" + port); ok {
		t.Fatal("a denied address was contacted")
	}
}

// A permitted receiver that redirects to a denied address gets its 3xx
// reported; the redirect is not followed.
func TestRedirectToDeniedTargetNotFollowed(t *testing.T) {
	var mu sync.Mutex
	var hosts []string
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hosts = append(hosts, r.Host)
		mu.Unlock()
		w.Header().Set("Location", "http://169.254.169.254/latest/meta-data/")
		w.WriteHeader(http.StatusFound)
	})
	p, err := NewPolicy(DefaultDeny, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, Options{Egress: p})
	r := c.Deliver(context.Background(), testRequest(srv.URL+"/hook"))
	if r.StatusCode != http.StatusFound || r.Err != nil {
		t.Fatalf("%+v", r)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(hosts) != 1 {
		t.Fatalf("requests: %v", hosts)
	}
}

// Reaches answers for the deny and allow lists as an attempt's check
// would: the server warns at start when an operator's --callback-deny
// lets callbacks reach the metadata address.
func TestReachesMetadata(t *testing.T) {
	for _, c := range []struct {
		name        string
		deny, allow []string
		reaches     bool
	}{
		{"the default list", DefaultDeny, nil, false},
		{"a list that replaced it", []string{"10.0.0.0/8"}, nil, true},
		{"an empty list", []string{}, nil, true},
		{"the default plus more", append(append([]string{}, DefaultDeny...), "10.0.0.0/8"), nil, false},
		{"an allow list without it", []string{"10.0.0.0/8"}, []string{"192.168.0.0/16"}, false},
		{"an allow list with it", []string{"10.0.0.0/8"}, []string{"169.254.0.0/16"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := NewPolicy(c.deny, c.allow)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Reaches(MetadataAddr); got != c.reaches {
				t.Errorf("Reaches(%v) = %v, want %v", MetadataAddr, got, c.reaches)
			}
		})
	}
}
