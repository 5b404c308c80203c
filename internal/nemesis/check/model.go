package check

import (
	"fmt"
	"hash/fnv"
	"net/http"

	"github.com/anishathalye/porcupine"

	"github.com/timemachine-db/timemachine/internal/nemesis/history"
)

// The job statuses a client can observe. statusAny is the model's own: a
// job whose exact version and status are unknown (a 412 proved that the
// server moved it past the version the model knew), with Version a lower
// bound.
const (
	statusScheduled = "scheduled"
	statusFiring    = "firing"
	statusSucceeded = "succeeded"
	statusFailed    = "failed"
	statusAny       = "?"
)

// jobState is the model's state of one job key. It is comparable (the
// porcupine model compares states with ==).
type jobState struct {
	Exists  bool
	Spec    string // the label of the spec the client last wrote
	Trigger int64
	Version uint64
	Status  string
}

// input is what a client operation sent.
type input struct {
	Kind    history.Kind
	Spec    string
	Trigger int64
	IfMatch uint64
}

// output is what it got back. Unknown: indeterminate (no definite answer).
type output struct {
	Unknown bool
	Status  int
	Code    string
	Version uint64 // of the job in the answer (0: no job in it)
	JobStat string
	Trigger int64
}

func terminal(status string) bool { return status == statusSucceeded || status == statusFailed }

// reachable reports whether the server, on its own (firing, retrying,
// finishing: each outcome bumps the version), can take a job from s to
// version v with status st, with no client write in between.
func reachable(s jobState, v uint64, st string) bool {
	if !s.Exists {
		return false
	}
	if s.Status == statusAny {
		return v >= s.Version
	}
	if v == s.Version && st == s.Status {
		return true
	}
	if terminal(s.Status) {
		return false // finished jobs stay as they are
	}
	switch st {
	case statusFiring:
		return v >= s.Version
	case statusScheduled:
		return v > s.Version || (v == s.Version && s.Status == statusFiring)
	case statusSucceeded, statusFailed:
		return v > s.Version
	}
	return false
}

// reachableVersion: some status at version v is reachable from s.
func reachableVersion(s jobState, v uint64) bool {
	for _, st := range []string{statusScheduled, statusFiring, statusSucceeded, statusFailed} {
		if reachable(s, v, st) {
			return true
		}
	}
	return false
}

// observe pins the state to the job an answer carried.
func observe(s jobState, out output) jobState {
	if out.Version == 0 {
		return s
	}
	s.Version, s.Status = out.Version, out.JobStat
	return s
}

func created(in input) jobState {
	return jobState{Exists: true, Spec: in.Spec, Trigger: in.Trigger, Version: 1, Status: statusScheduled}
}

// effects lists the states an indeterminate write may have left: not
// applied, or applied in any way that was valid at some point after its
// call.
func effects(s jobState, in input) []jobState {
	out := []jobState{s}
	switch in.Kind {
	case history.Create:
		if !s.Exists {
			out = append(out, created(in))
		}
	case history.Put:
		switch {
		case in.IfMatch == 0 && !s.Exists:
			out = append(out, created(in))
		case in.IfMatch == 0:
			// Replaced at whatever version it had then: only a lower
			// bound is known.
			out = append(out, jobState{Exists: true, Spec: in.Spec, Trigger: in.Trigger, Version: s.Version + 1, Status: statusAny})
		case reachableVersion(s, in.IfMatch):
			out = append(out, jobState{Exists: true, Spec: in.Spec, Trigger: in.Trigger, Version: in.IfMatch + 1, Status: statusScheduled})
		}
	case history.Delete:
		if s.Exists {
			out = append(out, jobState{})
		}
	}
	return out
}

// step is the model's transition: the states the job may be in after the
// operation, given its answer (none: the answer is impossible from s).
func step(s jobState, in input, out output) []jobState {
	if out.Unknown {
		return effects(s, in)
	}
	one := func(ok bool, next jobState) []jobState {
		if ok {
			return []jobState{next}
		}
		return nil
	}
	switch in.Kind {
	case history.Get:
		switch out.Status {
		case http.StatusOK:
			return one(reachable(s, out.Version, out.JobStat) && out.Trigger == s.Trigger, observe(s, out))
		case http.StatusNotFound:
			return one(!s.Exists, s)
		}
	case history.Create:
		switch out.Status {
		case http.StatusCreated:
			return one(!s.Exists && (out.Version == 0 || out.Version == 1), created(in))
		case http.StatusOK: // the same spec again
			return one(s.Exists && s.Spec == in.Spec && (out.Version == 0 || reachable(s, out.Version, out.JobStat)), observe(s, out))
		case http.StatusConflict:
			return one(s.Exists && s.Spec != in.Spec && (out.Version == 0 || reachable(s, out.Version, out.JobStat)), observe(s, out))
		}
	case history.Put:
		replaced := jobState{Exists: true, Spec: in.Spec, Trigger: in.Trigger, Version: in.IfMatch + 1, Status: statusScheduled}
		switch out.Status {
		case http.StatusCreated:
			return one(in.IfMatch == 0 && !s.Exists && (out.Version == 0 || out.Version == 1), created(in))
		case http.StatusOK:
			if in.IfMatch == 0 {
				if out.Version == 0 {
					return one(s.Exists, jobState{Exists: true, Spec: in.Spec, Trigger: in.Trigger, Version: s.Version + 1, Status: statusAny})
				}
				replaced.Version = out.Version
				return one(s.Exists && reachableVersion(s, out.Version-1), replaced)
			}
			return one(s.Exists && reachableVersion(s, in.IfMatch) && (out.Version == 0 || out.Version == in.IfMatch+1), replaced)
		case http.StatusPreconditionFailed:
			switch {
			case in.IfMatch == 0:
				return nil
			case !s.Exists || s.Status == statusAny || s.Version != in.IfMatch:
				return []jobState{s}
			case terminal(s.Status):
				return nil // a finished job stays at its version
			default:
				// The server moved it past the version the model knew.
				return []jobState{{Exists: true, Spec: s.Spec, Trigger: s.Trigger, Version: s.Version + 1, Status: statusAny}}
			}
		case http.StatusConflict: // its callback has started
			return one(out.Code == "conflict" && s.Exists && (out.Version == 0 && !terminal(s.Status) || out.Version != 0 && reachable(s, out.Version, statusFiring)), firing(s, out))
		}
	case history.Delete:
		switch out.Status {
		case http.StatusNoContent, http.StatusOK:
			return one(s.Exists, jobState{})
		case http.StatusNotFound:
			return one(!s.Exists, s)
		case http.StatusConflict: // its callback has started
			return one(s.Exists && (out.Version == 0 && !terminal(s.Status) || out.Version != 0 && reachable(s, out.Version, statusFiring)), firing(s, out))
		}
	}
	return nil // an answer the contract does not allow here
}

func firing(s jobState, out output) jobState {
	if out.Version != 0 {
		s.Version = out.Version
	}
	if s.Status != statusAny {
		s.Status = statusFiring
	}
	return s
}

func hashState(v any) uint64 {
	s := v.(jobState)
	h := fnv.New64a()
	fmt.Fprintf(h, "%t|%s|%d|%d|%s", s.Exists, s.Spec, s.Trigger, s.Version, s.Status)
	return h.Sum64()
}

// jobModel is the per-key porcupine model (the checker partitions by key
// itself, to name the keys that fail).
var jobModel = (&porcupine.NondeterministicModel{
	Init: func() []any { return []any{jobState{}} },
	Step: func(state, in, out any) []any {
		next := step(state.(jobState), in.(input), out.(output))
		res := make([]any, len(next))
		for i, n := range next {
			res[i] = n
		}
		return res
	},
	Hash: hashState,
	DescribeOperation: func(in, out any) string {
		return describe(in.(input), out.(output))
	},
	DescribeState: func(v any) string {
		s := v.(jobState)
		if !s.Exists {
			return "absent"
		}
		return fmt.Sprintf("v%d %s trigger %d spec %s", s.Version, s.Status, s.Trigger, s.Spec)
	},
}).ToModel()

func describe(in input, out output) string {
	var args string
	switch in.Kind {
	case history.Create:
		args = fmt.Sprintf("create(%s, trigger %d)", in.Spec, in.Trigger)
	case history.Put:
		args = fmt.Sprintf("put(%s, trigger %d, if-match %d)", in.Spec, in.Trigger, in.IfMatch)
	default:
		args = string(in.Kind) + "()"
	}
	if out.Unknown {
		return args + " → indeterminate"
	}
	res := fmt.Sprintf("%d", out.Status)
	if out.Code != "" {
		res += " " + out.Code
	}
	if out.Version != 0 {
		res += fmt.Sprintf(" v%d %s trigger %d", out.Version, out.JobStat, out.Trigger)
	}
	return args + " → " + res
}
