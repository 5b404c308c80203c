package netfault

import (
	"fmt"
	"sort"
	"strconv"
)

// chain is the iptables filter chain the harness owns in every node's
// namespace; INPUT and OUTPUT jump to it.
const chain = "NEMESIS"

// Addressing inside the harness's namespaces (private addresses that exist
// only there):
//
//	hub (bridge, clients, receiver)  10.99.0.1
//	node i (0-based)                 10.99.0.(10+i)
//	proxy for node s → node d        10.99.(1+s).(10+d), on the hub
//
// Node s's raft/RPC connections to node d are DNATed to the proxy of (s, d),
// which dials d from that same address: both ends can name the pair, so a
// cut drops the proxied legs as well as the direct packets (gossip).
const (
	hubIP    = "10.99.0.1"
	prefixV4 = 16
	maxNodes = 40
)

func nodeIP(i int) string { return fmt.Sprintf("10.99.0.%d", 10+i) }

func proxyIP(s, d int) string { return fmt.Sprintf("10.99.%d.%d", 1+s, 10+d) }

// pairAddrs are the addresses by which node s's packets to and from node d
// show up in s's namespace: d itself (gossip), the proxy s dials to reach
// d, and the proxy d's connections to s arrive from.
func pairAddrs(s, d int) []string {
	return []string{nodeIP(d), proxyIP(s, d), proxyIP(d, s)}
}

// Pair is an unordered pair of node indexes (A < B).
type Pair struct{ A, B int }

// MakePair orders a and b.
func MakePair(a, b int) Pair {
	if a > b {
		a, b = b, a
	}
	return Pair{a, b}
}

// nodeRules renders the rules of node s's chain: every packet between s
// and a peer it is cut from is dropped both ways; with loss > 0, that
// fraction of the packets s receives from every other peer is dropped
// (on receipt only, so a packet crossing one link is dropped with
// probability loss once).
func nodeRules(s int, peers []int, cut map[Pair]bool, loss float64) []string {
	ps := append([]int(nil), peers...)
	sort.Ints(ps)
	var out []string
	for _, d := range ps {
		if d == s {
			continue
		}
		addrs := pairAddrs(s, d)
		if cut[MakePair(s, d)] {
			for _, a := range addrs {
				out = append(out, fmt.Sprintf("-A %s -s %s -j DROP", chain, a), fmt.Sprintf("-A %s -d %s -j DROP", chain, a))
			}
			continue
		}
		if loss > 0 {
			p := strconv.FormatFloat(loss, 'f', 4, 64)
			for _, a := range addrs {
				out = append(out, fmt.Sprintf("-A %s -s %s -m statistic --mode random --probability %s -j DROP", chain, a, p))
			}
		}
	}
	return out
}

// restoreInput is what iptables-restore --noflush gets to replace the chain
// atomically.
func restoreInput(rules []string) []byte {
	b := []byte("*filter\n-F " + chain + "\n")
	for _, r := range rules {
		b = append(b, r...)
		b = append(b, '\n')
	}
	return append(b, "COMMIT\n"...)
}
