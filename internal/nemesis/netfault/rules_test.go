package netfault

import (
	"reflect"
	"strings"
	"testing"
)

func TestNodeRules(t *testing.T) {
	peers := []int{2, 0, 1}
	for _, tc := range []struct {
		name string
		s    int
		cut  map[Pair]bool
		loss float64
		want []string
	}{
		{"nothing", 0, nil, 0, nil},
		{"cut from one peer, both ways, direct and proxied", 0, map[Pair]bool{MakePair(1, 0): true}, 0, []string{
			"-A NEMESIS -s 10.99.0.11 -j DROP", "-A NEMESIS -d 10.99.0.11 -j DROP",
			"-A NEMESIS -s 10.99.1.11 -j DROP", "-A NEMESIS -d 10.99.1.11 -j DROP",
			"-A NEMESIS -s 10.99.2.10 -j DROP", "-A NEMESIS -d 10.99.2.10 -j DROP",
		}},
		{"a cut between two others does not concern this node", 0, map[Pair]bool{MakePair(1, 2): true}, 0, nil},
		{"loss on receipt from every peer", 1, nil, 0.25, []string{
			"-A NEMESIS -s 10.99.0.10 -m statistic --mode random --probability 0.2500 -j DROP",
			"-A NEMESIS -s 10.99.2.10 -m statistic --mode random --probability 0.2500 -j DROP",
			"-A NEMESIS -s 10.99.1.11 -m statistic --mode random --probability 0.2500 -j DROP",
			"-A NEMESIS -s 10.99.0.12 -m statistic --mode random --probability 0.2500 -j DROP",
			"-A NEMESIS -s 10.99.2.12 -m statistic --mode random --probability 0.2500 -j DROP",
			"-A NEMESIS -s 10.99.3.11 -m statistic --mode random --probability 0.2500 -j DROP",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := nodeRules(tc.s, peers, tc.cut, tc.loss)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
	in := string(restoreInput([]string{"-A NEMESIS -s 10.99.0.11 -j DROP"}))
	if in != "*filter\n-F NEMESIS\n-A NEMESIS -s 10.99.0.11 -j DROP\nCOMMIT\n" {
		t.Fatalf("restore input %q", in)
	}
}
