package node

import (
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/timemachine-db/timemachine/internal/testutil"
	"github.com/timemachine-db/timemachine/raftgroup"
)

// gauge reads one of the node's gauges (label peer, when given).
func gauge(t *testing.T, n *Node, name, peer string) float64 {
	t.Helper()
	mfs, err := n.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if peer == "" || hasLabel(m, "peer", peer) {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no metric %s{peer=%q}", name, peer)
	return 0
}

func hasLabel(m *dto.Metric, k, v string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == k && l.GetValue() == v {
			return true
		}
	}
	return false
}

// A node whose clock runs 2 s ahead of the majority's (the --debug-faults
// clock) sees it through the liveness pings, says so in /readyz and the
// metrics, refuses to fire and leads no slot until its clock agrees again.
func TestClockOffsetBeyondTheBoundGivesUpLeadership(t *testing.T) {
	tc := startCluster(t, 3, func(_ int, c *Config) {
		c.DebugFaults = true
		c.Timing = raftgroup.DefaultTiming
	})
	skewed := tc.nodes[2]
	if err := skewed.SetClockOffset(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "the skewed node out of bounds and leading nothing", func() error {
		err := skewed.Ready()
		if err == nil || !strings.Contains(err.Error(), "clock") {
			return fmt.Errorf("ready: %v", err)
		}
		for _, r := range skewed.slots.All() {
			if r.IsLeader() {
				return fmt.Errorf("still leads slot %d", r.Slot())
			}
		}
		return nil
	})
	if off := gauge(t, skewed, "timemachine_clock_offset_seconds", "majority"); off < 1.5 || off > 2.5 {
		t.Errorf("offset to the majority = %v s, want about 2", off)
	}
	if g := gauge(t, skewed, "timemachine_clock_offset_exceeded", ""); g != 1 {
		t.Errorf("exceeded gauge = %v", g)
	}
	if skewed.live.ClockOK() {
		t.Error("a node out of bounds may fire")
	}
	// Nor may it take a leadership back with a TimeoutNow after a
	// step-down (raftgroup LeaderlessConsent); a group of which it is the
	// only voter needs no other answer, so only the clock says no.
	alone := []string{skewed.ID()}
	if skewed.leaderlessConsent(groupKey(0), alone) {
		t.Error("a node out of bounds consents to its own campaign")
	}
	for _, n := range tc.nodes[:2] {
		if err := n.Ready(); err != nil {
			t.Errorf("%s, within bounds, not ready: %v", n.ID(), err)
		}
		if g := gauge(t, n, "timemachine_clock_offset_exceeded", ""); g != 0 {
			t.Errorf("%s: exceeded gauge = %v", n.ID(), g)
		}
	}
	// Back within bounds: ready again, and it may lead again.
	if err := skewed.SetClockOffset(0); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "the node back within bounds", func() error {
		if err := skewed.Ready(); err != nil {
			return err
		}
		if !skewed.live.ClockOK() {
			return fmt.Errorf("clock not OK yet")
		}
		return nil
	})
	if !skewed.leaderlessConsent(groupKey(0), alone) {
		t.Error("a node back within bounds does not consent to its own campaign as the only voter")
	}
}
