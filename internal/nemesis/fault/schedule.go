package fault

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"
)

// Kind is a kind of fault.
type Kind string

// The faults. Targets named by role ("the leader of most slots") are
// resolved when the cycle runs, from GET /v1/cluster; every other choice
// is drawn from the seed here.
const (
	KillOne           Kind = "kill-one"           // kill -9 a node (any), restart it after Hold
	KillLeader        Kind = "kill-leader"        // kill -9 the leader of most slots, restart after Hold
	KillAll           Kind = "kill-all"           // kill -9 every node, restart all after Hold
	Wipe              Kind = "wipe"               // kill -9 a node, delete its data directory, restart it empty after Hold
	PauseLeader       Kind = "pause-leader"       // SIGSTOP the leader of most slots for Hold, then SIGCONT
	PauseFollower     Kind = "pause-follower"     // SIGSTOP the node leading fewest slots for Hold
	PartitionOne      Kind = "partition-one"      // cut the leader of most slots off, both ways, for Hold
	PartitionMajority Kind = "partition-majority" // split the nodes into a random majority and minority
	PartitionRing     Kind = "partition-ring"     // overlapping majorities: each node sees only its ring neighbours
	Loss              Kind = "loss"               // drop Loss of the packets between nodes for Hold
	Delay             Kind = "delay"              // delay raft/RPC traffic by Delay each way (one node's links or all)
	Clock             Kind = "clock"              // offset the clock of the leader of most slots by Offset for Hold
	Term              Kind = "sigterm"            // SIGTERM the leader of most slots (planned), restart after Hold
	Membership        Kind = "membership"         // add a node, rebalance, drain and remove an old one, during Under
	// None is a quiet cycle (the baseline: what the workload alone
	// shows). Not part of All.
	None Kind = "none"
)

// All lists every kind, in the order they are documented.
var All = []Kind{KillOne, KillLeader, KillAll, Wipe, PauseLeader, PauseFollower, PartitionOne, PartitionMajority,
	PartitionRing, Loss, Delay, Clock, Term, Membership}

// Network reports whether the kind needs the namespaced network.
func (k Kind) Network() bool {
	switch k {
	case PartitionOne, PartitionMajority, PartitionRing, Loss, Delay:
		return true
	}
	return false
}

// Planned reports whether the kind is an operator's move (the contract
// promises planned moves deliver no callback twice).
func (k Kind) Planned() bool { return k == Term }

// underKinds are the faults a membership change runs during.
var underKinds = []Kind{PauseFollower, Loss, Delay, KillOne}

// Step is one cycle's fault with every random choice made.
type Step struct {
	Cycle int
	Kind  Kind
	// Hold is how long the fault lasts (for kills and SIGTERM: how long
	// the node stays down).
	Hold time.Duration
	// Pick chooses among run-time candidates (sorted): candidate
	// Pick % len(candidates).
	Pick     uint64
	Loss     float64       // Loss: the fraction of packets dropped
	Delay    time.Duration // Delay: one way
	AllLinks bool          // Delay: every link (else the links of one node)
	Offset   time.Duration // Clock: the offset (±)
	Under    *Step         // Membership: the fault that lasts meanwhile
}

func (s Step) String() string {
	b := fmt.Sprintf("%s hold %v", s.Kind, s.Hold.Round(10*time.Millisecond))
	switch s.Kind {
	case Loss:
		b += fmt.Sprintf(" loss %.0f%%", s.Loss*100)
	case Delay:
		scope := "one node's links"
		if s.AllLinks {
			scope = "all links"
		}
		b += fmt.Sprintf(" delay %v on %s", s.Delay, scope)
	case Clock:
		b += fmt.Sprintf(" offset %+v", s.Offset)
	case Membership:
		b = string(s.Kind) + " during " + s.Under.String()
	}
	return b
}

// Options shapes a schedule.
type Options struct {
	Cycles int
	Kinds  []Kind
	// MaxHold caps every Hold (0: no cap); the short test uses it.
	MaxHold time.Duration
}

// Schedule draws the cycles' faults from seed: the same seed and options
// give the same schedule. Kinds are used round-robin in a seeded random
// order (so every kind comes up once per len(Kinds) cycles), each with
// seeded parameters.
func Schedule(seed uint64, opt Options) []Step {
	rng := rand.New(rand.NewPCG(seed, 0x6e656d65736973)) // "nemesis"
	kinds := append([]Kind(nil), opt.Kinds...)
	sort.Slice(kinds, func(i, j int) bool { return kinds[i] < kinds[j] })
	var order []Kind
	var out []Step
	for c := 1; c <= opt.Cycles; c++ {
		if len(order) == 0 {
			order = append([]Kind(nil), kinds...)
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		k := order[0]
		order = order[1:]
		s := draw(rng, k, opt.MaxHold)
		s.Cycle = c
		if k == Membership {
			u := draw(rng, underKinds[rng.IntN(len(underKinds))], opt.MaxHold)
			u.Cycle = c
			s.Under = &u
		}
		out = append(out, s)
	}
	return out
}

func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
}

func draw(rng *rand.Rand, k Kind, maxHold time.Duration) Step {
	s := Step{Kind: k, Pick: rng.Uint64()}
	switch k {
	case KillOne, KillLeader, Wipe:
		s.Hold = between(rng, 500*time.Millisecond, 5*time.Second)
	case KillAll, Term:
		s.Hold = between(rng, 500*time.Millisecond, 3*time.Second)
	case PauseLeader, PauseFollower:
		// Mostly short, sometimes long (up to 20 s).
		if rng.IntN(10) < 7 {
			s.Hold = between(rng, time.Second, 6*time.Second)
		} else {
			s.Hold = between(rng, 6*time.Second, 20*time.Second)
		}
	case PartitionOne, PartitionMajority, PartitionRing:
		s.Hold = between(rng, 2*time.Second, 10*time.Second)
	case Loss:
		s.Hold = between(rng, 3*time.Second, 10*time.Second)
		s.Loss = 0.05 + float64(rng.IntN(26))/100 // 5–30 %
	case Delay:
		s.Hold = between(rng, 3*time.Second, 10*time.Second)
		s.Delay = time.Duration(50+rng.IntN(351)) * time.Millisecond // 50–400 ms
		s.AllLinks = rng.IntN(2) == 0
	case Clock:
		s.Hold = between(rng, 3*time.Second, 10*time.Second)
		s.Offset = time.Duration(500+rng.IntN(2501)) * time.Millisecond // 0.5–3 s
		if rng.IntN(2) == 0 {
			s.Offset = -s.Offset
		}
	case Membership:
		// Its length is that of the membership changes themselves.
	case None:
		s.Hold = between(rng, 3*time.Second, 10*time.Second)
	}
	if maxHold > 0 && s.Hold > maxHold {
		s.Hold = maxHold
	}
	return s
}

// Parse reads a comma-separated list of kinds ("all" for every kind).
func Parse(list string) ([]Kind, error) {
	if list == "" || list == "all" {
		return append([]Kind(nil), All...), nil
	}
	known := map[Kind]bool{None: true}
	for _, k := range All {
		known[k] = true
	}
	var out []Kind
	seen := map[Kind]bool{}
	for _, f := range strings.Split(list, ",") {
		k := Kind(strings.TrimSpace(f))
		if !known[k] {
			return nil, fmt.Errorf("unknown fault %q (known: %s, none)", k, Names(All))
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out, nil
}

// Names joins kinds with commas.
func Names(ks []Kind) string {
	var s []string
	for _, k := range ks {
		s = append(s, string(k))
	}
	return strings.Join(s, ",")
}

// Pick returns candidates[pick % len] ("" when there are none).
func Pick(pick uint64, candidates []string) string {
	if len(candidates) == 0 {
		return ""
	}
	return candidates[pick%uint64(len(candidates))]
}
