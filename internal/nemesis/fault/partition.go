package fault

import (
	"math/rand/v2"
	"sort"
)

// Link is a pair of node ids whose packets are dropped both ways.
type Link [2]string

// Isolate cuts target off from every other node.
func Isolate(target string, nodes []string) []Link {
	var out []Link
	for _, n := range nodes {
		if n != target {
			out = append(out, Link{target, n})
		}
	}
	return out
}

// MajoritySplit splits nodes (in a pick-seeded random order) into a
// minority of (n-1)/2 and a majority, and cuts every link between them.
// It returns the links and the minority.
func MajoritySplit(pick uint64, nodes []string) ([]Link, []string) {
	order := shuffled(pick, nodes)
	minority := order[:(len(order)-1)/2]
	in := map[string]bool{}
	for _, n := range minority {
		in[n] = true
	}
	var out []Link
	for _, a := range minority {
		for _, b := range order {
			if !in[b] {
				out = append(out, Link{a, b})
			}
		}
	}
	return out, append([]string(nil), minority...)
}

// Ring places nodes on a ring (in a pick-seeded random order) and cuts
// every link but those between ring neighbours: each node sees itself and
// its two neighbours, a majority for 3 to 5 nodes, and no two nodes see
// the same majority. With 3 nodes (where every pair are neighbours) one
// link is cut instead: a bridge node sees both others, which do not see
// each other. It returns the links and the ring order.
func Ring(pick uint64, nodes []string) ([]Link, []string) {
	order := shuffled(pick, nodes)
	n := len(order)
	if n == 3 {
		return []Link{{order[0], order[2]}}, order // order[1] is the bridge
	}
	var out []Link
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			d := j - i
			if d > n-d {
				d = n - d
			}
			if d > 1 {
				out = append(out, Link{order[i], order[j]})
			}
		}
	}
	return out, order
}

func shuffled(pick uint64, nodes []string) []string {
	order := append([]string(nil), nodes...)
	sort.Strings(order)
	rng := rand.New(rand.NewPCG(pick, 0x7269_6e67))
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	return order
}
