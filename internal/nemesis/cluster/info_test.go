package cluster

import (
	"strings"
	"testing"
)

func info3() Info {
	ci := Info{SlotCount: 3, ReplicationFactor: 3}
	for _, id := range []string{"n1", "n2", "n3"} {
		ci.Nodes = append(ci.Nodes, InfoNode{ID: id, Status: "alive"})
	}
	for s, l := range []string{"n2", "n2", "n1"} {
		ci.Slots = append(ci.Slots, InfoSlot{Slot: s, Leader: l, Replicas: []string{"n1", "n2", "n3"}, State: "healthy"})
	}
	return ci
}

func TestCheckHealthy(t *testing.T) {
	members := map[string]bool{"n1": true, "n2": true, "n3": true}
	if err := info3().CheckHealthy(members, nil, 3, 3); err != nil {
		t.Fatal(err)
	}
	// A removed node still shown as left does not stop the run (the
	// runner reports it on its own).
	ci := info3()
	ci.Nodes = append(ci.Nodes, InfoNode{ID: "n9", Status: "left"})
	if err := ci.CheckHealthy(members, map[string]bool{"n9": true}, 3, 3); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func(ci *Info)
		want   string
	}{
		{"no leader", func(ci *Info) { ci.Slots[1].Leader = "" }, "slot 1 led by"},
		{"degraded", func(ci *Info) { ci.Slots[0].State = "degraded" }, "slot 0 is degraded"},
		{"node failed", func(ci *Info) { ci.Nodes[2].Status = "failed" }, "node n3 is failed"},
		{"member missing", func(ci *Info) { ci.Nodes = ci.Nodes[:2] }, "member n3 not listed"},
		{"removed node still listed", func(ci *Info) { ci.Nodes = append(ci.Nodes, InfoNode{ID: "n9", Status: "alive"}) }, "n9"},
		{"wrong slot count", func(ci *Info) { ci.SlotCount = 12 }, "slot_count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ci := info3()
			tc.change(&ci)
			err := ci.CheckHealthy(members, map[string]bool{"n9": false}, 3, 3)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestLeadership(t *testing.T) {
	ci := info3()
	if got := ci.RankByLeadership([]string{"n1", "n2", "n3"}); strings.Join(got, ",") != "n2,n1,n3" {
		t.Fatalf("rank %v", got)
	}
	if got := ci.LedBy("n2"); len(got) != 2 || got[0] != 0 || got[1] != 1 {
		t.Fatalf("led by n2: %v", got)
	}
	if ci.ReplicasOn("n3") != 3 {
		t.Fatal("replicas on n3")
	}
}

func TestSlots(t *testing.T) {
	for s := 0; s < 12; s++ {
		id := IDInSlot("coll", "p", s, 12)
		if SlotOf("coll", id, 12) != s {
			t.Fatalf("IDInSlot(%d) = %s in slot %d", s, id, SlotOf("coll", id, 12))
		}
	}
}

// A slow recovery's trace starts a new line only when the reason changes,
// not when the cluster summary at its end does.
func TestReasonHead(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"via n1: node n1 is failed: n1:failed:led=0:replicas=12 n2:alive:led=6:replicas=12 | slots 0=n2/n1,n2,n3/healthy",
			"via n1: node n1 is failed"},
		{"via n2: slot 3 led by \"\": n1:alive:led=4:replicas=12 | slots", "via n2: slot 3 led by \"\""},
		{"n1 not ready: /readyz 503: {\"error\":{}}", "n1 not ready: /readyz 503: {\"error\":{}}"},
		{"n3 is paused", "n3 is paused"},
	} {
		if got := reasonHead(c.in); got != c.want {
			t.Errorf("reasonHead(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
