package raftgroup

import (
	"testing"

	"github.com/hashicorp/raft"
)

func voter(id, addr string) raft.Server {
	return raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(addr)}
}

func nonvoter(id, addr string) raft.Server {
	return raft.Server{Suffrage: raft.Nonvoter, ID: raft.ServerID(id), Address: raft.ServerAddress(addr)}
}

func members(ids ...string) []Member {
	out := make([]Member, len(ids))
	for i, id := range ids {
		out[i] = Member{ID: id, Addr: id + ":7000"}
	}
	return out
}

// NextStep over raft configurations: each row is a configuration a leader
// can find its group in, and the one step it must take from there.
func TestNextStep(t *testing.T) {
	all := func(string) bool { return true }
	none := func(string) bool { return false }
	only := func(ids ...string) func(string) bool {
		return func(id string) bool {
			for _, x := range ids {
				if x == id {
					return true
				}
			}
			return false
		}
	}
	a, b, c, d := voter("a", "a:7000"), voter("b", "b:7000"), voter("c", "c:7000"), voter("d", "d:7000")
	for _, tc := range []struct {
		name     string
		cur      []raft.Server
		want     Membership
		self     string
		caughtUp func(string) bool
		step     Step
	}{
		{"nothing wanted: leave the group alone", []raft.Server{a}, Membership{}, "a", all, Step{}},
		{"already in shape", []raft.Server{a, b, c}, Membership{Voters: members("a", "b", "c")}, "a", all, Step{}},
		{"same members in another order", []raft.Server{c, a, b}, Membership{Voters: members("a", "b", "c")}, "a", all, Step{}},
		{"a lone node adds the second replica as a nonvoter", []raft.Server{a}, Membership{Voters: members("a", "b")}, "a", all,
			Step{Kind: StepAddNonvoter, ID: "b", Addr: "b:7000"}},
		{"two missing: the first wanted comes first", []raft.Server{a}, Membership{Voters: members("a", "c", "b")}, "a", all,
			Step{Kind: StepAddNonvoter, ID: "c", Addr: "c:7000"}},
		{"a caught-up nonvoter is promoted", []raft.Server{a, nonvoter("b", "b:7000")}, Membership{Voters: members("a", "b")}, "a", all,
			Step{Kind: StepPromote, ID: "b", Addr: "b:7000"}},
		{"a nonvoter still catching up: wait", []raft.Server{a, nonvoter("b", "b:7000")}, Membership{Voters: members("a", "b")}, "a", none, Step{}},
		{"nobody is removed while a new voter catches up", []raft.Server{a, b, d, nonvoter("c", "c:7000")}, Membership{Voters: members("a", "b", "c")}, "a", none, Step{}},
		{"replacement caught up: promote before removing", []raft.Server{a, b, d, nonvoter("c", "c:7000")}, Membership{Voters: members("a", "b", "c")}, "a", all,
			Step{Kind: StepPromote, ID: "c", Addr: "c:7000"}},
		{"every wanted voter votes: remove the extra one", []raft.Server{a, b, c, d}, Membership{Voters: members("a", "b", "c")}, "a", all,
			Step{Kind: StepRemove, ID: "d"}},
		{"an extra nonvoter is removed too", []raft.Server{a, b, nonvoter("d", "d:7000")}, Membership{Voters: members("a", "b")}, "a", all,
			Step{Kind: StepRemove, ID: "d"}},
		{"a voter's address changed", []raft.Server{a, voter("b", "b:7001")}, Membership{Voters: members("a", "b")}, "a", all,
			Step{Kind: StepUpdateAddress, ID: "b", Addr: "b:7000", Voter: true}},
		{"a nonvoter's address changed", []raft.Server{a, b, c, nonvoter("d", "d:7001")}, Membership{Voters: members("a", "b", "c"), Nonvoters: members("d")}, "a", all,
			Step{Kind: StepUpdateAddress, ID: "d", Addr: "d:7000"}},
		{"an unknown wanted address is not an address change", []raft.Server{a, b}, Membership{Voters: []Member{{ID: "a", Addr: "a:7000"}, {ID: "b"}}}, "a", all, Step{}},
		{"the leader leaves last: others are removed first", []raft.Server{a, b, c, d}, Membership{Voters: members("b", "c")}, "a", all,
			Step{Kind: StepRemove, ID: "d"}},
		{"the leader is leaving: hand leadership to a caught-up voter", []raft.Server{a, b, c}, Membership{Voters: members("b", "c")}, "a", only("c"),
			Step{Kind: StepTransferLeader, ID: "c", Addr: "c:7000"}},
		{"the leader is leaving but nobody caught up: wait", []raft.Server{a, b, c}, Membership{Voters: members("b", "c")}, "a", none, Step{}},
		{"meta group: every other node becomes a nonvoter", []raft.Server{a, b, c}, Membership{Voters: members("a", "b", "c"), Nonvoters: members("d")}, "a", all,
			Step{Kind: StepAddNonvoter, ID: "d", Addr: "d:7000"}},
		{"meta group: a voter that should only hold a copy is demoted", []raft.Server{a, b, c, d}, Membership{Voters: members("a", "b", "c"), Nonvoters: members("d")}, "a", all,
			Step{Kind: StepDemote, ID: "d"}},
		{"meta group: a member listed as both counts as a voter", []raft.Server{a, b}, Membership{Voters: members("a", "b"), Nonvoters: members("b")}, "a", all, Step{}},
		{"meta group: the nonvoters in shape", []raft.Server{a, b, c, nonvoter("d", "d:7000")}, Membership{Voters: members("a", "b", "c"), Nonvoters: members("d")}, "a", all, Step{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := NextStep(tc.cur, tc.want, tc.self, tc.caughtUp)
			if got != tc.step {
				t.Fatalf("NextStep = %+v (%q), want %+v (%q)", got, got, tc.step, tc.step)
			}
		})
	}
}

// caughtUp may cost a network round trip: it is asked only about replicas
// that are about to get a vote or the leadership.
func TestNextStepAsksOnlyWhenNeeded(t *testing.T) {
	asked := map[string]int{}
	count := func(id string) bool { asked[id]++; return true }
	NextStep([]raft.Server{voter("a", "a:7000"), voter("b", "b:7000")}, Membership{Voters: members("a", "b", "c")}, "a", count)
	if len(asked) != 0 {
		t.Fatalf("asked %v while adding a replica", asked)
	}
	NextStep([]raft.Server{voter("a", "a:7000"), voter("b", "b:7000"), nonvoter("c", "c:7000")}, Membership{Voters: members("a", "b", "c")}, "a", count)
	if asked["c"] != 1 || len(asked) != 1 {
		t.Fatalf("asked %v, want only c once", asked)
	}
}

func TestStepString(t *testing.T) {
	for _, tc := range []struct {
		s    Step
		want string
	}{
		{Step{}, ""},
		{Step{Kind: StepAddNonvoter, ID: "b"}, "add b as nonvoter"},
		{Step{Kind: StepUpdateAddress, ID: "b"}, "update address of b"},
		{Step{Kind: StepPromote, ID: "b"}, "promote b to voter"},
		{Step{Kind: StepDemote, ID: "b"}, "demote b to nonvoter"},
		{Step{Kind: StepRemove, ID: "b"}, "remove b"},
		{Step{Kind: StepTransferLeader, ID: "b"}, "hand leadership to b before leaving"},
	} {
		if got := tc.s.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.s, got, tc.want)
		}
	}
}

func TestCaughtUp(t *testing.T) {
	leader := Status{CommitIndex: 1000, LastIndex: 1000}
	for _, tc := range []struct {
		f    Status
		want bool
	}{
		{Status{Applied: 1000, LastIndex: 1000}, true},
		{Status{Applied: 1000 - CaughtUpSlack, LastIndex: 1000 - CaughtUpSlack}, true},
		{Status{Applied: 1000 - CaughtUpSlack - 1, LastIndex: 1000}, false},
		{Status{Applied: 1000, LastIndex: 1000 - CaughtUpSlack - 1}, false},
		{Status{}, false},
		{Status{Applied: 1000, LastIndex: 1000, Gated: true}, false}, // would not vote yet
	} {
		if got := CaughtUp(leader, tc.f); got != tc.want {
			t.Errorf("CaughtUp(%+v) = %v, want %v", tc.f, got, tc.want)
		}
	}
}
