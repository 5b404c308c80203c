package cluster

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/raftgroup"
)

// rep is a replica's report: state, term, configuration (voters,
// nonvoters) and its indexes.
func rep(state raft.RaftState, term, cfgIdx, applied uint64, voters, nonvoters []string, self string) SlotReplicaState {
	return SlotReplicaState{Status: raftgroup.Status{State: state.String(), Term: term, ConfigIndex: cfgIdx,
		CommitIndex: applied, LastIndex: applied, Applied: applied, Voters: voters, Nonvoters: nonvoters,
		Member: slices.Contains(voters, self) || slices.Contains(nonvoters, self)}}
}

// gated marks a replica's report as not voting until caught up.
func gated(r SlotReplicaState) SlotReplicaState {
	r.Gated = true
	return r
}

func view(reports map[string]map[int]SlotReplicaState) View {
	v := View{Nodes: map[string]NodeStatus{}}
	for id, slots := range reports {
		v.Nodes[id] = NodeStatus{ID: id, Slots: slots}
	}
	return v
}

var (
	abc  = []string{"a", "b", "c"}
	abcd = []string{"a", "b", "c", "d"}
)

// The truth of a slot is its leader's configuration; without a leader,
// the newest configuration a member reports; the slot table's target
// plays no part. Its state follows: healthy, degraded, moving (with the
// target), no_leader.
func TestTruthAndSlotState(t *testing.T) {
	for _, tc := range []struct {
		name       string
		reports    map[string]map[int]SlotReplicaState
		target     []string
		leader     string
		voters     []string
		nonvoters  []string
		state      string
		showTarget bool
	}{
		{
			name: "healthy",
			reports: map[string]map[int]SlotReplicaState{
				"a": {0: rep(raft.Leader, 2, 9, 100, abc, nil, "a")},
				"b": {0: rep(raft.Follower, 2, 9, 100, abc, nil, "b")},
				"c": {0: rep(raft.Follower, 2, 9, 99, abc, nil, "c")},
			},
			target: abc, leader: "a", voters: abc, state: "healthy",
		},
		{
			name: "a voter unreachable: degraded",
			reports: map[string]map[int]SlotReplicaState{
				"a": {0: rep(raft.Leader, 2, 9, 100, abc, nil, "a")},
				"b": {0: rep(raft.Follower, 2, 9, 100, abc, nil, "b")},
			},
			target: abc, leader: "a", voters: abc, state: "degraded",
		},
		{
			name: "a voter far behind: degraded",
			reports: map[string]map[int]SlotReplicaState{
				"a": {0: rep(raft.Leader, 2, 9, 1000, abc, nil, "a")},
				"b": {0: rep(raft.Follower, 2, 9, 1000, abc, nil, "b")},
				"c": {0: rep(raft.Follower, 2, 9, 100, abc, nil, "c")},
			},
			target: abc, leader: "a", voters: abc, state: "degraded",
		},
		{
			name: "a voter at the leader's index that does not vote yet (it started empty): degraded",
			reports: map[string]map[int]SlotReplicaState{
				"a": {0: rep(raft.Leader, 2, 9, 100, abc, nil, "a")},
				"b": {0: rep(raft.Follower, 2, 9, 100, abc, nil, "b")},
				"c": {0: gated(rep(raft.Follower, 2, 9, 100, abc, nil, "c"))},
			},
			target: abc, leader: "a", voters: abc, state: "degraded",
		},
		{
			name: "a new replica being filled: moving, the nonvoter shown, the target too",
			reports: map[string]map[int]SlotReplicaState{
				"a": {0: rep(raft.Leader, 2, 12, 100, abc, []string{"d"}, "a")},
				"d": {0: rep(raft.Follower, 2, 12, 3, abc, []string{"d"}, "d")},
			},
			target: []string{"a", "b", "d"}, leader: "a", voters: abc, nonvoters: []string{"d"}, state: "moving", showTarget: true,
		},
		{
			name: "the placement changed but nothing moved yet: the configuration, not the target",
			reports: map[string]map[int]SlotReplicaState{
				"a": {0: rep(raft.Leader, 2, 9, 100, abc, nil, "a")},
				"b": {0: rep(raft.Follower, 2, 9, 100, abc, nil, "b")},
				"c": {0: rep(raft.Follower, 2, 9, 100, abc, nil, "c")},
			},
			target: []string{"a", "b", "d"}, leader: "a", voters: abc, state: "moving", showTarget: true,
		},
		{
			name: "promoted, the old replica not removed yet: four voters",
			reports: map[string]map[int]SlotReplicaState{
				"c": {0: rep(raft.Leader, 3, 14, 100, abcd, nil, "c")},
			},
			target: []string{"a", "b", "d"}, leader: "c", voters: abcd, state: "moving", showTarget: true,
		},
		{
			name: "no leader: the newest configuration a member reports",
			reports: map[string]map[int]SlotReplicaState{
				"a": {0: rep(raft.Candidate, 4, 9, 100, abc, nil, "a")},
				"b": {0: rep(raft.Follower, 3, 14, 100, abcd, nil, "b")},
				"e": {0: rep(raft.Follower, 0, 0, 0, nil, nil, "e")}, // an empty replica, not a member yet
			},
			target: abcd, voters: abcd, state: "no_leader",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := view(tc.reports)
			tr := v.Truth(0)
			if tr.Leader != tc.leader || !sameSet(tr.Voters, tc.voters) || !sameSet(tr.Nonvoters, tc.nonvoters) {
				t.Fatalf("truth %+v", tr)
			}
			si := slotInfo(v, 0, tc.target, "")
			if si.State != tc.state || !sameSet(si.Replicas, tc.voters) || (si.Target != nil) != tc.showTarget {
				t.Fatalf("slot info %+v", si)
			}
		})
	}
}

// Holdings count replicas from the configurations (voters and nonvoters),
// leaderships from the leaders, and the replicas a node has open itself;
// a removed replica the node has not deleted yet keeps it from being
// empty.
func TestHoldings(t *testing.T) {
	v := view(map[string]map[int]SlotReplicaState{
		"a": {0: rep(raft.Leader, 2, 9, 100, abc, []string{"d"}, "a"), 1: rep(raft.Follower, 2, 9, 100, []string{"a", "b"}, nil, "a")},
		"b": {1: rep(raft.Leader, 2, 9, 100, []string{"a", "b"}, nil, "b")},
		"c": {0: rep(raft.Follower, 2, 9, 100, abc, nil, "c")},
		"e": {1: rep(raft.Follower, 1, 3, 50, []string{"a", "b", "e"}, nil, "e")}, // removed, not deleted yet
	})
	h := v.Holdings(2)
	for id, want := range map[string]Holdings{
		"a": {Replicas: 2, Led: 1, Local: 2},
		"b": {Replicas: 2, Led: 1, Local: 1},
		"c": {Replicas: 1, Local: 1},
		"d": {Replicas: 1, Local: -1}, // in a configuration, not answering
		"e": {Local: 1},
	} {
		if h[id] != want {
			t.Errorf("%s: %+v, want %+v", id, h[id], want)
		}
	}
	if h["e"].Empty() || h["d"].Empty() || !h["f"].Empty() {
		t.Error("Empty")
	}
}

// Moves: settled and started decide which slots are in motion.
func TestMoveStages(t *testing.T) {
	target := []string{"a", "b", "d"}
	for _, tc := range []struct {
		voters, nonvoters []string
		settled, started  bool
	}{
		{abc, nil, false, false},
		{abc, []string{"d"}, false, true},
		{abcd, nil, false, true},
		{[]string{"a", "b", "d"}, nil, true, true},
		{[]string{"a", "b"}, nil, false, false}, // a replica lost: re-filling it is a new start
	} {
		tr := Truth{Voters: tc.voters, Nonvoters: tc.nonvoters, Known: true}
		if settled(tr, target) != tc.settled || started(tr, target) != tc.started {
			t.Errorf("%v + %v: settled %v started %v", tc.voters, tc.nonvoters, settled(tr, target), started(tr, target))
		}
	}
	var m moveTracker
	t0 := time.Now()
	m.update(map[int]bool{1: true, 2: true, 3: true}, map[int]bool{1: true}, t0)
	m.update(map[int]bool{2: true, 3: true}, map[int]bool{2: true}, t0.Add(time.Second))
	if p := m.snapshot(); p.Pending != 2 || p.Done != 1 || p.Total != 3 || p.Active != 1 || p.FinishedAt != 0 {
		t.Fatalf("progress %+v", p)
	}
	m.update(map[int]bool{}, nil, t0.Add(2*time.Second))
	if p := m.snapshot(); p.Pending != 0 || p.Done != 3 || p.Total != 3 || p.FinishedAt == 0 {
		t.Fatalf("progress when done %+v", p)
	}
	m.update(map[int]bool{7: true}, nil, t0.Add(3*time.Second)) // a new round
	if p := m.snapshot(); p.Pending != 1 || p.Done != 0 || p.Total != 1 || p.FinishedAt != 0 || p.StartedAt != t0.Add(3*time.Second).UnixMilli() {
		t.Fatalf("new round %+v", p)
	}
	if _, _, done := m.counts(); done != 3 {
		t.Fatalf("moves done counter %d", done)
	}
}

type logRecords struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.recs = append(l.recs, r)
	l.mu.Unlock()
	return nil
}
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecords) WithGroup(string) slog.Handler      { return l }

func (l *logRecords) at(lvl slog.Level) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.recs {
		if r.Level == lvl {
			out = append(out, r.Message)
		}
	}
	return out
}

// The replica watcher warns once when a node's replicas stay unreachable
// past the threshold while they are in their slot's configuration and
// target, and says so at INFO when they are back; a replica being removed
// (not in the target) is not its concern.
func TestReplicaWatcher(t *testing.T) {
	logs := &logRecords{}
	c := &Cluster{cfg: Config{ReplicaWarnAfter: 20 * time.Millisecond}, log: slog.New(logs)}
	st := &raftfsm.MetaState{SlotCount: 2, Slots: []model.SlotEntry{{Replicas: abc}, {Replicas: []string{"a", "b"}}}}
	down := view(map[string]map[int]SlotReplicaState{
		"a": {0: rep(raft.Leader, 2, 9, 100, abc, nil, "a"), 1: rep(raft.Leader, 2, 9, 100, abc, nil, "a")},
		"b": {0: rep(raft.Follower, 2, 9, 100, abc, nil, "b"), 1: rep(raft.Follower, 2, 9, 100, abc, nil, "b")},
	}) // c does not answer; in slot 1 it is being removed
	t0 := time.Now()
	c.watchReplicas(st, down, t0)
	if w := logs.at(slog.LevelWarn); len(w) != 0 {
		t.Fatalf("warned at once: %v", w)
	}
	c.watchReplicas(st, down, t0.Add(10*time.Millisecond))
	if w := logs.at(slog.LevelWarn); len(w) != 0 {
		t.Fatalf("warned before the threshold: %v", w)
	}
	c.watchReplicas(st, down, t0.Add(30*time.Millisecond))
	c.watchReplicas(st, down, t0.Add(40*time.Millisecond))
	w := logs.at(slog.LevelWarn)
	if len(w) != 1 {
		t.Fatalf("warnings %v, want one", w)
	}
	logs.mu.Lock()
	var attrs []string
	logs.recs[len(logs.recs)-1].Attrs(func(a slog.Attr) bool { attrs = append(attrs, a.String()); return true })
	logs.mu.Unlock()
	if s := strings.Join(attrs, " "); !strings.Contains(s, "node=c") || !strings.Contains(s, "slot 0 unreachable") || strings.Contains(s, "slot 1") {
		t.Fatalf("warning says %s", s)
	}
	up := view(map[string]map[int]SlotReplicaState{
		"a": {0: rep(raft.Leader, 2, 9, 100, abc, nil, "a")},
		"b": {0: rep(raft.Follower, 2, 9, 100, abc, nil, "b")},
		"c": {0: rep(raft.Follower, 2, 9, 100, abc, nil, "c")},
	})
	st.Slots[1] = model.SlotEntry{Replicas: abc}
	c.watchReplicas(st, up, t0.Add(50*time.Millisecond))
	if i := logs.at(slog.LevelInfo); len(i) != 1 || !strings.Contains(i[0], "again") {
		t.Fatalf("info %v", i)
	}
}

// A voter that reports itself gated (started empty, not voting until it
// has caught up) is a problem of its node even at the leader's index, and
// the warning says why.
func TestReplicaWatcherNamesAReplicaThatDoesNotVoteYet(t *testing.T) {
	logs := &logRecords{}
	c := &Cluster{cfg: Config{ReplicaWarnAfter: 20 * time.Millisecond}, log: slog.New(logs)}
	st := &raftfsm.MetaState{SlotCount: 1, Slots: []model.SlotEntry{{Replicas: abc}}}
	v := view(map[string]map[int]SlotReplicaState{
		"a": {0: rep(raft.Leader, 2, 9, 100, abc, nil, "a")},
		"b": {0: rep(raft.Follower, 2, 9, 100, abc, nil, "b")},
		"c": {0: gated(rep(raft.Follower, 2, 9, 100, abc, nil, "c"))},
	})
	t0 := time.Now()
	c.watchReplicas(st, v, t0)
	c.watchReplicas(st, v, t0.Add(30*time.Millisecond))
	if w := logs.at(slog.LevelWarn); len(w) != 1 {
		t.Fatalf("warnings %v, want one", w)
	}
	logs.mu.Lock()
	var attrs []string
	logs.recs[len(logs.recs)-1].Attrs(func(a slog.Attr) bool { attrs = append(attrs, a.String()); return true })
	logs.mu.Unlock()
	if s := strings.Join(attrs, " "); !strings.Contains(s, "node=c") || !strings.Contains(s, "slot 0 not voting until caught up (behind by 0 entries)") {
		t.Fatalf("warning says %s", s)
	}
}

// Removing a node without force needs proof that it holds nothing: every
// slot's configuration from a leader that answered, none of them with the
// node, no newer configuration in flight, and the node's own word that it
// has no replica open — or, for a node gossip sees dead, the
// configurations alone. A missing answer is never read as "holds nothing".
func TestProveEmpty(t *testing.T) {
	ab := []string{"a", "b", "c"}
	full := func() map[string]map[int]SlotReplicaState {
		return map[string]map[int]SlotReplicaState{
			"a": {0: rep(raft.Leader, 2, 9, 100, ab, nil, "a"), 1: rep(raft.Follower, 2, 9, 100, ab, nil, "a")},
			"b": {0: rep(raft.Follower, 2, 9, 100, ab, nil, "b"), 1: rep(raft.Leader, 2, 9, 100, ab, nil, "b")},
			"c": {0: rep(raft.Follower, 2, 9, 100, ab, nil, "c"), 1: rep(raft.Follower, 2, 9, 100, ab, nil, "c")},
			"d": {}, // drained: holds nothing, answers
		}
	}
	for _, tc := range []struct {
		name          string
		edit          func(map[string]map[int]SlotReplicaState)
		node          string
		alive         bool
		holds, proven bool
	}{
		{name: "drained and answering", node: "d", alive: true, proven: true},
		{name: "holds a replica", node: "c", alive: true, holds: true},
		{name: "alive but did not answer", node: "d", alive: true,
			edit: func(r map[string]map[int]SlotReplicaState) { delete(r, "d") }},
		{name: "dead, out of every configuration", node: "d",
			edit: func(r map[string]map[int]SlotReplicaState) { delete(r, "d") }, proven: true},
		{name: "alive, its replica still open after its removal", node: "d", alive: true, holds: true,
			edit: func(r map[string]map[int]SlotReplicaState) {
				r["d"] = map[int]SlotReplicaState{1: rep(raft.Follower, 1, 3, 50, []string{"b", "c", "d"}, nil, "d")}
			}},
		{name: "a slot's leader did not answer", node: "d", alive: true,
			edit: func(r map[string]map[int]SlotReplicaState) { delete(r, "b") }},
		{name: "no replica of a slot answered", node: "d", alive: true,
			edit: func(r map[string]map[int]SlotReplicaState) {
				for _, id := range []string{"a", "b", "c"} {
					delete(r[id], 1)
				}
			}},
		{name: "only the asking node answered, the node not in its slots", node: "d", alive: true,
			edit: func(r map[string]map[int]SlotReplicaState) {
				delete(r, "b")
				delete(r, "c")
				delete(r, "d")
			}},
		// The leader of slot 0 reports a configuration without d, a
		// follower a newer one (a new leader added d): in flight.
		{name: "a newer configuration than the leader's", node: "d", alive: true,
			edit: func(r map[string]map[int]SlotReplicaState) {
				r["c"][0] = rep(raft.Follower, 3, 12, 100, []string{"a", "b", "c"}, []string{"d"}, "c")
			}},
		{name: "leads a slot", node: "a", alive: true, holds: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := full()
			if tc.edit != nil {
				tc.edit(r)
			}
			p := view(r).ProveEmpty(tc.node, 2, tc.alive)
			if p.Holds != tc.holds || (p.Unconfirmed == "") != (tc.proven || tc.holds) {
				t.Fatalf("%+v, want holds=%v proven=%v", p, tc.holds, tc.proven)
			}
		})
	}
}
