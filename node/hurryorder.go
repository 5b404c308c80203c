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

// methodLastIndexes asks a peer about some of its replicas, for the
// followers of groups whose leader died: the last log index and term of
// each, and the peer's own liveness verdict on the leader each group had.
// Request: JSON {"groups": [group keys], "leaders": [leader ids]} (or,
// from older nodes, only the JSON []string of group keys); answer: JSON
// {"last": [uint64, 0: no such replica], "term": [uint64: the last
// entry's term, 0: unknown; absent from older nodes], "dead": [bool: the
// peer finds the leader dead], "follows": [bool: its replica names that
// leader], "leader": [string: whom its replica names as leader now, ""
// none, its own id while it leads; absent from older nodes]} (to older
// nodes only the JSON []uint64).
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
	// voters is how many voters the group has, the dead leader and this
	// follower included (0: the leader, this follower and others).
	voters int
	last   logPos // this replica's last log entry
	hurry  func(dead string, stagger time.Duration, alive func() bool)
	// campaign, when set, makes the replica campaign now through a
	// TimeoutNow (raftgroup Campaign; slots) and reports whether it did.
	campaign func(dead string) bool
	// leaderNow is the replica's leader now (to stop waiting once the
	// group has elected one).
	leaderNow func() string
}

// logPos is a replica's last log entry: what raft's vote compares.
type logPos struct{ index, term uint64 }

func newLogPos(index, term uint64) logPos { return logPos{index: index, term: term} }

// cmp orders two logs as raft's vote does — the later last term first,
// then the longer log — where both terms are known (a peer of an older
// version sends none); otherwise by index alone. By index alone the
// follower picked to campaign could hold entries of an older term that a
// deposed leader left on it (a node that restarted a moment before, not
// yet corrected by the new leader): its log is longer but less up to
// date, the others refused it their votes, and the failover waited for
// the fallback election (2.5 s and more, docs/reliability.md).
func (p logPos) cmp(o logPos) int {
	if p.term != 0 && o.term != 0 && p.term != o.term {
		if p.term < o.term {
			return -1
		}
		return 1
	}
	switch {
	case p.index < o.index:
		return -1
	case p.index > o.index:
		return 1
	}
	return 0
}

// peerView is what a peer answered about one group: its replica's last
// log entry and whether it finds the group's leader dead too.
type peerView struct {
	last    logPos
	dead    bool
	follows bool // its replica names that leader or campaigns itself (one that knows no leader, e.g. just reopened, will not campaign)
	// leader is whom its replica names as leader now ("" none); known is
	// false for a peer too old to say.
	leader      string
	leaderKnown bool
}

// agreeWait bounds how long the follower picked to campaign waits for
// the others to find the leader dead too (their liveness checks see a
// killed leader within a ping interval of each other, a silent one within
// about that); agreePoll is how often it asks them again meanwhile.
const (
	agreeWait = 2 * time.Second
	agreePoll = 50 * time.Millisecond
)

// hurryInOrder makes the followers of groups whose leader died elect a
// new one. The follower with the longest log (ties: the highest id) is
// the one to campaign: where its replica can (slots: raftgroup Campaign),
// it starts the election at once with a TimeoutNow, which the other
// voters grant although they still name the old leader — so it does so
// only once every other live follower answered that it finds the leader
// dead too (a follower that alone lost the leader must not depose it);
// until then it asks them again every agreePoll, for up to agreeWait.
// Every follower also hurries its election the old way (Expedite: raft's
// timeouts drop to the leader lease, pre-vote on), staggered in that
// order, which is what the meta group does and what a slot falls back to
// when the others never agree: the first candidate is refused by the
// other followers, which still name the old leader; the next one wins —
// unless its log is shorter than the first's, which then refuses it (so
// the longest log goes last).
func (n *Node) hurryInOrder(plans []hurryPlan) {
	known := n.askPeers(plans)
	var waiting []hurryPlan
	for _, p := range plans {
		pos := hurryOrder(n.ID(), p.last, p.others, func(peer string) (logPos, bool) {
			v, ok := known[peer][p.group]
			return v.last, ok
		})
		dead := p.leader
		theirs := make([]string, 0, len(p.others))
		for _, o := range p.others {
			if v, ok := known[o][p.group]; ok {
				theirs = append(theirs, fmt.Sprintf("%s:%d@%d:dead=%t", o, v.last.index, v.last.term, v.dead))
			} else {
				theirs = append(theirs, o+":?")
			}
		}
		pick, agreed := campaignDecision(n.ID(), p, known)
		n.log.Info("hurrying an election after its leader died", "group", p.group, "leader", dead,
			"last_index", p.last.index, "last_term", p.last.term, "others", strings.Join(theirs, ","), "place", pos, "campaign", pick, "agreed", agreed)
		if pick && agreed && p.campaign(dead) {
			continue
		}
		if pick && !agreed && n.startAwait(p) {
			waiting = append(waiting, p)
		}
		p.hurry(dead, time.Duration(pos)*hurryStagger, func() bool { return !n.live.Dead(dead) })
	}
	if len(waiting) > 0 {
		n.awaitAgreement(waiting)
	}
}

// campaignDecision says whether this follower is the one to campaign for
// p (it can, it and the other live followers are a majority of the
// group's voters, every other live follower answered, and its log is the
// longest, ties broken by the highest id) and whether every one of them
// also finds the leader dead.
//
// Without a live majority the campaign cannot win, and it would do harm:
// a TimeoutNow election skips pre-vote, so it raises this replica's term,
// and when the partition heals, the leader the majority kept steps down
// on seeing that term, leaving the group without a leader until raft's
// own timeout elects one. A 5-node nemesis run lost its meta leader for
// 9.5 s that way to a nonvoter's campaign (which raftgroup's Campaign now
// refuses; docs/reliability.md, "Five nodes"); a voter on the minority
// side of a five-voter group would do the same.
func campaignDecision(self string, p hurryPlan, known map[string]map[string]peerView) (pick, agreed bool) {
	if p.campaign == nil || len(p.others) == 0 {
		return false, false
	}
	voters := p.voters
	if voters == 0 {
		voters = len(p.others) + 2
	}
	if 2*(1+len(p.others)) <= voters {
		return false, false
	}
	agreed = true
	for _, o := range p.others {
		v, ok := known[o][p.group]
		if !ok {
			return false, false
		}
		agreed = agreed && v.dead
	}
	// hurryOrder's last place, except that a follower that names no
	// leader (it will not plan an election) does not count against an
	// equal log: its vote goes to this one.
	pick = true
	for _, o := range p.others {
		v := known[o][p.group]
		c := v.last.cmp(p.last)
		pick = pick && (c < 0 || (c == 0 && (o < self || !v.follows)))
	}
	return pick, agreed
}

// hurryOrder is this follower's place among a group's live followers: by
// last log entry (logPos.cmp), the most up to date last, then by id. A
// follower whose log is unknown is placed by id alone.
func hurryOrder(self string, last logPos, others []string, pos func(string) (logPos, bool)) int {
	place := 0
	for _, o := range others {
		c := 0 // unknown: a tie, broken by id
		if v, ok := pos(o); ok {
			c = v.cmp(last)
		}
		switch {
		case c == 0:
			if o < self {
				place++
			}
		case c < 0:
			place++
		}
	}
	return place
}

// startAwait marks p as waiting for the others' verdicts; false if a
// wait for it runs already (the liveness reactor plans a group again
// while it still follows the dead leader).
func (n *Node) startAwait(p hurryPlan) bool {
	key := p.group + "/" + p.leader
	n.awaitMu.Lock()
	defer n.awaitMu.Unlock()
	if n.awaiting[key] {
		return false
	}
	if n.awaiting == nil {
		n.awaiting = map[string]bool{}
	}
	n.awaiting[key] = true
	return true
}

func (n *Node) endAwait(p hurryPlan) {
	n.awaitMu.Lock()
	delete(n.awaiting, p.group+"/"+p.leader)
	n.awaitMu.Unlock()
}

// awaitAgreement asks the other followers of the waiting groups again
// every agreePoll until, for each group, they all find its leader dead
// (then the replica campaigns, if it is still the one to), the group has
// another leader, the leader answers again, or agreeWait passed (then the
// hurry started alongside is what remains).
func (n *Node) awaitAgreement(waiting []hurryPlan) {
	defer func() {
		for _, p := range waiting {
			n.endAwait(p)
		}
	}()
	deadline := time.Now().Add(agreeWait)
	tick := time.NewTicker(agreePoll)
	defer tick.Stop()
	for len(waiting) > 0 && time.Now().Before(deadline) {
		select {
		case <-n.stop:
			return
		case <-tick.C:
		}
		live := waiting[:0:0]
		for _, p := range waiting {
			if p.leaderNow() == p.leader && n.live.Dead(p.leader) {
				live = append(live, p)
			}
		}
		if len(live) == 0 {
			break
		}
		known := n.askPeers(live)
		waiting = live[:0:0]
		for _, p := range live {
			pick, agreed := campaignDecision(n.ID(), p, known)
			switch {
			case pick && agreed:
				n.log.Info("the other followers find the leader dead too: campaigning", "group", p.group, "leader", p.leader)
				p.campaign(p.leader)
			case pick:
				waiting = append(waiting, p)
			}
		}
	}
	for _, p := range waiting {
		n.log.Info("the other followers still hear the leader: not deposing it", "group", p.group, "leader", p.leader)
	}
}

// lastIndexesReq and lastIndexesResp are methodLastIndexes' bodies.
type lastIndexesReq struct {
	Groups  []string `json:"groups"`
	Leaders []string `json:"leaders"`
}

type lastIndexesResp struct {
	Last    []uint64 `json:"last"`
	Term    []uint64 `json:"term,omitempty"`
	Dead    []bool   `json:"dead"`
	Follows []bool   `json:"follows"`
	Leader  []string `json:"leader,omitempty"`
}

// askPeers asks the other followers of the plans' groups, each peer once
// and all at once, what they see of those groups.
func (n *Node) askPeers(plans []hurryPlan) map[string]map[string]peerView {
	byPeer := map[string]*lastIndexesReq{}
	for _, p := range plans {
		for _, o := range p.others {
			r := byPeer[o]
			if r == nil {
				r = &lastIndexesReq{}
				byPeer[o] = r
			}
			r.Groups = append(r.Groups, p.group)
			r.Leaders = append(r.Leaders, p.leader)
		}
	}
	return n.askViews(byPeer)
}

// askViews sends each peer its request, at once, and gathers the answers
// (a peer that does not answer in hurryAsk is left out).
func (n *Node) askViews(byPeer map[string]*lastIndexesReq) map[string]map[string]peerView {
	out := map[string]map[string]peerView{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for p, req := range byPeer {
		addr := n.live.Addr(p)
		if addr == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), hurryAsk)
			defer cancel()
			body, _ := json.Marshal(req)
			reply, err := n.rpc.Call(ctx, addr, methodLastIndexes, body)
			var resp lastIndexesResp
			if err == nil {
				err = json.Unmarshal(reply, &resp)
			}
			if err == nil && (len(resp.Last) != len(req.Groups) || len(resp.Dead) != len(req.Groups) || len(resp.Follows) != len(req.Groups)) {
				err = fmt.Errorf("%d answers to %d groups", len(resp.Last), len(req.Groups))
			}
			if err != nil {
				n.log.Debug("no answer from a peer about groups whose leader died; its hurried elections are ordered by id", "peer", p, "error", err)
				return
			}
			m := make(map[string]peerView, len(req.Groups))
			for i, g := range req.Groups {
				if resp.Last[i] > 0 {
					v := peerView{last: logPos{index: resp.Last[i]}, dead: resp.Dead[i], follows: resp.Follows[i]}
					if len(resp.Term) == len(resp.Last) {
						v.last.term = resp.Term[i]
					}
					if len(resp.Leader) == len(resp.Last) {
						v.leader, v.leaderKnown = resp.Leader[i], true
					}
					m[g] = v
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
	var req lastIndexesReq
	old := false
	if err := json.Unmarshal(body, &req); err != nil {
		// An older node sends only the group keys.
		if err2 := json.Unmarshal(body, &req.Groups); err2 != nil {
			return nil, fmt.Errorf("last indexes: %w", err)
		}
		old = true
	}
	k := len(req.Groups)
	resp := lastIndexesResp{Last: make([]uint64, k), Term: make([]uint64, k), Dead: make([]bool, k), Follows: make([]bool, k), Leader: make([]string, k)}
	for i, g := range req.Groups {
		leader := ""
		if i < len(req.Leaders) {
			leader = req.Leaders[i]
		}
		if leader != "" {
			resp.Dead[i] = n.live.Dead(leader)
		}
		if g == metaGroupKey {
			resp.Last[i], resp.Term[i] = n.meta.LastLog()
			// Not just "names leader": a replica that campaigned past it
			// a moment ago names none, and counting it as one that will
			// not campaign made both followers campaign at once — a
			// split vote, and raft's own election timeout seconds later
			// (TestMetaFailoverWithinTwoSeconds, 3.2 s).
			resp.Follows[i] = n.meta.Follows(leader)
			resp.Leader[i], _ = n.meta.Leader()
			continue
		}
		s, err := strconv.Atoi(strings.TrimSpace(g))
		if err != nil {
			continue
		}
		if rep := n.slots.Get(s); rep != nil && slices.Contains(rep.Voters(), n.ID()) {
			resp.Last[i], resp.Term[i] = rep.LastLog()
			resp.Follows[i] = rep.Follows(leader)
			resp.Leader[i], _ = rep.Leader()
		}
	}
	if old {
		return json.Marshal(resp.Last)
	}
	return json.Marshal(resp)
}

// leaderlessConsent answers raftgroup's LeaderlessConsent for group: this
// replica stopped leading a second ago and knows no leader. It consents
// when this replica and the other voters that answer — live to the
// liveness check, not finding this node dead, naming this replica or no
// one as leader — are a majority of voters: then a campaign started
// without pre-vote (a TimeoutNow) is granted, and deposes nobody. A voter
// cut off from the majority (the usual cause of a step-down) hears no
// answers and does not consent; its replica then campaigns a lease after
// its step-down, with pre-vote, as before. A node whose clock is out of
// bounds, which hands its leaderships away, does not consent either.
func (n *Node) leaderlessConsent(group string, voters []string) bool {
	self := n.ID()
	if n.live == nil || !slices.Contains(voters, self) {
		return false
	}
	if ex, _ := n.live.Exceeded(); ex {
		return false
	}
	dead := n.live.DeadPeers()
	byPeer := map[string]*lastIndexesReq{}
	for _, v := range voters {
		if v != self && !slices.Contains(dead, v) {
			byPeer[v] = &lastIndexesReq{Groups: []string{group}, Leaders: []string{self}}
		}
	}
	if 2*(1+len(byPeer)) <= len(voters) {
		return false
	}
	views := n.askViews(byPeer)
	yes := 1
	for p := range byPeer {
		v, ok := views[p][group]
		if ok && v.leaderKnown && !v.dead && (v.leader == "" || v.leader == self) {
			yes++
		}
	}
	return 2*yes > len(voters)
}
