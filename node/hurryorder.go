package node

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/timemachine-db/timemachine/rpc/peer"
)

// methodLastIndexes asks a peer for the last log index of some of its
// replicas: JSON []string group keys → JSON []uint64 (0: no such replica).
const methodLastIndexes peer.Method = 41

// metaGroupKey names the meta group in a methodLastIndexes request; a
// slot's group is its number.
const metaGroupKey = "meta"

func groupKey(slot int) string { return strconv.Itoa(slot) }

// hurryAsk bounds the round trip that orders the hurried elections; a
// follower that does not answer in time is ordered by id.
const hurryAsk = 150 * time.Millisecond

// hurryPlan is one group whose leader died, as this follower sees it.
type hurryPlan struct {
	group  string
	leader string
	others []string // the group's other live followers
	last   uint64   // this replica's last log index
	hurry  func(dead string, stagger time.Duration, alive func() bool)
}

// hurryInOrder hurries the elections of groups whose leader died, each
// follower at its place in hurryOrder. Why the order matters: the first
// candidate is refused by the other followers, which still name the old
// leader; the next one wins — unless its log is shorter than the first's,
// which then refuses it, and both wait out raft's randomised 0.5–1 s
// election timeout (2.1–2.3 s failovers in the short nemesis, where the
// dead leader's last entries had reached one follower only). So the
// followers ask each other for their last log index and the longest log
// goes last.
func (n *Node) hurryInOrder(plans []hurryPlan) {
	byPeer := map[string][]string{}
	for _, p := range plans {
		for _, o := range p.others {
			byPeer[o] = append(byPeer[o], p.group)
		}
	}
	known := n.askLastIndexes(byPeer)
	for _, p := range plans {
		pos := hurryOrder(n.ID(), p.last, p.others, func(peer string) (uint64, bool) {
			v, ok := known[peer][p.group]
			return v, ok
		})
		dead := p.leader
		theirs := make([]string, 0, len(p.others))
		for _, o := range p.others {
			if v, ok := known[o][p.group]; ok {
				theirs = append(theirs, fmt.Sprintf("%s:%d", o, v))
			} else {
				theirs = append(theirs, o+":?")
			}
		}
		n.log.Info("hurrying an election after its leader died", "group", p.group, "leader", dead,
			"last_index", p.last, "others", strings.Join(theirs, ","), "place", pos)
		p.hurry(dead, time.Duration(pos)*hurryStagger, func() bool { return !n.live.Dead(dead) })
	}
}

// hurryOrder is this follower's place among a group's live followers: by
// last log index, the longest last, then by id. A follower whose index is
// unknown is placed by id alone.
func hurryOrder(self string, last uint64, others []string, index func(string) (uint64, bool)) int {
	pos := 0
	for _, o := range others {
		v, ok := index(o)
		switch {
		case !ok || v == last:
			if o < self {
				pos++
			}
		case v < last:
			pos++
		}
	}
	return pos
}

// askLastIndexes asks each peer, at once, for its last log index in the
// given groups.
func (n *Node) askLastIndexes(byPeer map[string][]string) map[string]map[string]uint64 {
	out := map[string]map[string]uint64{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for p, groups := range byPeer {
		addr := n.live.Addr(p)
		if addr == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), hurryAsk)
			defer cancel()
			body, _ := json.Marshal(groups)
			reply, err := n.rpc.Call(ctx, addr, methodLastIndexes, body)
			var idx []uint64
			if err == nil {
				err = json.Unmarshal(reply, &idx)
			}
			if err != nil || len(idx) != len(groups) {
				n.log.Debug("no last log indexes from a peer; its hurried elections are ordered by id", "peer", p, "error", err)
				return
			}
			m := make(map[string]uint64, len(groups))
			for i, g := range groups {
				if idx[i] > 0 {
					m[g] = idx[i]
				}
			}
			mu.Lock()
			out[p] = m
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// serveLastIndexes answers methodLastIndexes.
func (n *Node) serveLastIndexes(_ context.Context, body []byte) ([]byte, error) {
	var groups []string
	if err := json.Unmarshal(body, &groups); err != nil {
		return nil, fmt.Errorf("last indexes: %w", err)
	}
	out := make([]uint64, len(groups))
	for i, g := range groups {
		if g == metaGroupKey {
			out[i] = n.meta.LastIndex()
			continue
		}
		s, err := strconv.Atoi(strings.TrimSpace(g))
		if err != nil {
			continue
		}
		if rep := n.slots.Get(s); rep != nil && slices.Contains(rep.Voters(), n.ID()) {
			out[i] = rep.LastIndex()
		}
	}
	return json.Marshal(out)
}
