package cluster

import (
	"fmt"
	"sort"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// Info is GET /v1/cluster (API.md §5).
type Info struct {
	SlotCount         int        `json:"slot_count"`
	ReplicationFactor int        `json:"replication_factor"`
	Nodes             []InfoNode `json:"nodes"`
	Slots             []InfoSlot `json:"slots"`
}

// InfoNode is one node of Info.
type InfoNode struct {
	ID       string `json:"id"`
	HTTPAddr string `json:"http_addr"`
	Status   string `json:"status"`
	SlotsLed int    `json:"slots_led"`
	Replicas int    `json:"replicas"`
}

// InfoSlot is one slot of Info.
type InfoSlot struct {
	Slot     int      `json:"slot"`
	Leader   string   `json:"leader"`
	Replicas []string `json:"replicas"`
	State    string   `json:"state"`
}

// Node finds a node by id.
func (ci Info) Node(id string) (InfoNode, bool) {
	for _, n := range ci.Nodes {
		if n.ID == id {
			return n, true
		}
	}
	return InfoNode{}, false
}

// LedBy lists the slots id leads.
func (ci Info) LedBy(id string) []int {
	var out []int
	for _, s := range ci.Slots {
		if s.Leader == id {
			out = append(out, s.Slot)
		}
	}
	return out
}

// ReplicasOn counts the slots with a replica on id.
func (ci Info) ReplicasOn(id string) int {
	k := 0
	for _, s := range ci.Slots {
		for _, r := range s.Replicas {
			if r == id {
				k++
			}
		}
	}
	return k
}

// RankByLeadership orders candidates by the number of slots they lead,
// most first; ties keep the candidates' order (deterministic).
func (ci Info) RankByLeadership(candidates []string) []string {
	out := append([]string(nil), candidates...)
	sort.SliceStable(out, func(i, j int) bool { return len(ci.LedBy(out[i])) > len(ci.LedBy(out[j])) })
	return out
}

// CheckHealthy: the slot count and replication factor as configured, every
// member listed and alive and no other node listed (except removed ones
// still shown as left: the runner reports those itself), every slot led by
// a member, healthy, with rf replicas all members.
func (ci Info) CheckHealthy(members, removed map[string]bool, slots, rf int) error {
	if ci.SlotCount != slots || len(ci.Slots) != slots {
		return fmt.Errorf("slot_count %d with %d slots, want %d", ci.SlotCount, len(ci.Slots), slots)
	}
	if ci.ReplicationFactor != rf {
		return fmt.Errorf("replication_factor %d, want %d", ci.ReplicationFactor, rf)
	}
	seen := map[string]bool{}
	for _, n := range ci.Nodes {
		seen[n.ID] = true
		if removed[n.ID] && (n.Status == "left" || n.Status == "failed") {
			continue
		}
		if !members[n.ID] {
			return fmt.Errorf("node %s (%s) listed but not a member: %s", n.ID, n.Status, ci.Summary())
		}
		if n.Status != "alive" {
			return fmt.Errorf("node %s is %s: %s", n.ID, n.Status, ci.Summary())
		}
	}
	for id := range members {
		if !seen[id] {
			return fmt.Errorf("member %s not listed: %s", id, ci.Summary())
		}
	}
	for _, s := range ci.Slots {
		if s.Leader == "" || !members[s.Leader] {
			return fmt.Errorf("slot %d led by %q: %s", s.Slot, s.Leader, ci.Summary())
		}
		if s.State != "healthy" || len(s.Replicas) != rf {
			return fmt.Errorf("slot %d is %s with replicas %v: %s", s.Slot, s.State, s.Replicas, ci.Summary())
		}
		for _, r := range s.Replicas {
			if !members[r] {
				return fmt.Errorf("slot %d has replica %s, not a member: %s", s.Slot, r, ci.Summary())
			}
		}
	}
	return nil
}

// Summary is a one-line description.
func (ci Info) Summary() string {
	var b strings.Builder
	for _, n := range ci.Nodes {
		fmt.Fprintf(&b, "%s:%s:led=%d:replicas=%d ", n.ID, n.Status, n.SlotsLed, n.Replicas)
	}
	b.WriteString("| slots")
	for _, s := range ci.Slots {
		l := s.Leader
		if l == "" {
			l = "-"
		}
		fmt.Fprintf(&b, " %d=%s/%s/%s", s.Slot, l, strings.Join(s.Replicas, ","), s.State)
	}
	return b.String()
}

// SlotOf is the slot of a job, as the contract defines it (API.md §2).
func SlotOf(coll, id string, slots int) int {
	return int(xxhash.Sum64String(coll+"/"+id) % uint64(slots))
}

// IDInSlot returns prefix-<k> for the first k ≥ 0 whose slot is s.
func IDInSlot(coll, prefix string, s, slots int) string {
	for k := 0; ; k++ {
		id := fmt.Sprintf("%s-%d", prefix, k)
		if SlotOf(coll, id, slots) == s {
			return id
		}
	}
}
