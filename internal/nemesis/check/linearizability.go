package check

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/timemachine-db/timemachine/internal/nemesis/history"
)

// LinResult is the linearizability checker's verdict over the job CRUD
// history.
type LinResult struct {
	Keys          int // job keys checked
	Ops           int // operations given to the model
	Indeterminate int // writes with no definite answer (modelled as possibly applied)
	// Violations: keys whose history no order of the operations explains.
	Violations []KeyFinding
	// ErrorsThatTookEffect: keys whose history is linearizable only if some
	// 5xx answer did take effect ("a request that gets an error changed
	// nothing", API.md §3).
	ErrorsThatTookEffect []KeyFinding
	// Undecided: keys the checker ran out of time on.
	Undecided []string
}

// KeyFinding is one key's failing history, described operation by
// operation in call order.
type KeyFinding struct {
	Key string
	Ops []string
}

func (f KeyFinding) String() string {
	return f.Key + ":\n    " + strings.Join(f.Ops, "\n    ")
}

// LinOptions tunes the checker.
type LinOptions struct {
	// PerKeyTimeout bounds the search for one key (0: 10 s).
	PerKeyTimeout time.Duration
	// Workers checks keys in parallel (0: 2).
	Workers int
}

// Linearizability checks every job key's operations against the job model
// (model.go): creates, gets, puts with If-Match and deletes, with the
// server free to fire, retry and finish a job between any two of them.
// Writes without a definite answer are indeterminate (they may take effect
// at any time after their call: return time infinity). Operations that
// certainly changed nothing (connection refused, 429) and reads without an
// answer are left out.
func Linearizability(h *history.History, opt LinOptions) LinResult {
	if opt.PerKeyTimeout == 0 {
		opt.PerKeyTimeout = 10 * time.Second
	}
	if opt.Workers <= 0 {
		opt.Workers = 2
	}
	byKey := map[string][]history.Op{}
	var keys []string
	var res LinResult
	for _, op := range h.Ops {
		if op.Outcome == history.Fail || (op.Outcome == history.Unknown && !op.Write()) {
			continue
		}
		if op.Outcome == history.Unknown {
			res.Indeterminate++
		}
		k := op.Key()
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], op)
		res.Ops++
	}
	sort.Strings(keys)
	res.Keys = len(keys)

	type verdict struct {
		key     string
		lenient porcupine.CheckResult
		strict  porcupine.CheckResult
	}
	verdicts := make([]verdict, len(keys))
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < opt.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				ops := byKey[keys[i]]
				v := verdict{key: keys[i]}
				v.lenient = porcupine.CheckOperationsTimeout(jobModel, toPorcupine(ops, false), opt.PerKeyTimeout)
				if v.lenient == porcupine.Ok && has5xx(ops) {
					v.strict = porcupine.CheckOperationsTimeout(jobModel, toPorcupine(ops, true), opt.PerKeyTimeout)
				} else {
					v.strict = v.lenient
				}
				verdicts[i] = v
			}
		}()
	}
	for i := range keys {
		next <- i
	}
	close(next)
	wg.Wait()

	for _, v := range verdicts {
		switch {
		case v.lenient == porcupine.Illegal:
			res.Violations = append(res.Violations, KeyFinding{Key: v.key, Ops: describeOps(byKey[v.key])})
		case v.lenient == porcupine.Unknown:
			res.Undecided = append(res.Undecided, v.key)
		case v.strict == porcupine.Illegal:
			res.ErrorsThatTookEffect = append(res.ErrorsThatTookEffect, KeyFinding{Key: v.key, Ops: describeOps(byKey[v.key])})
		}
	}
	return res
}

func has5xx(ops []history.Op) bool {
	for _, op := range ops {
		if op.Status >= 500 {
			return true
		}
	}
	return false
}

// toPorcupine converts one key's operations. strict: a 5xx answer means
// "changed nothing" (the contract's word) rather than indeterminate.
func toPorcupine(ops []history.Op, strict bool) []porcupine.Operation {
	out := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		if strict && op.Status >= 500 {
			continue
		}
		in := input{Kind: op.Kind, Spec: op.Spec, Trigger: op.Trigger, IfMatch: op.IfMatch}
		o := output{Unknown: op.Outcome == history.Unknown, Status: op.Status, Code: op.Code,
			Version: op.Version, JobStat: op.JobStatus, Trigger: op.JobTrigger}
		ret := op.Ret.Mono
		if o.Unknown {
			ret = math.MaxInt64
		}
		out = append(out, porcupine.Operation{ClientId: op.Client, Input: in, Call: op.Call.Mono, Output: o, Return: ret})
	}
	return out
}

func describeOps(ops []history.Op) []string {
	out := make([]string, 0, len(ops))
	for _, op := range ops {
		o := output{Unknown: op.Outcome == history.Unknown, Status: op.Status, Code: op.Code,
			Version: op.Version, JobStat: op.JobStatus, Trigger: op.JobTrigger}
		ret := "∞"
		if op.Ret != history.Never {
			ret = fmt.Sprintf("%.3fs", float64(op.Ret.Mono)/1e9)
		}
		line := fmt.Sprintf("[%.3fs, %s] client %d via %s: %s", float64(op.Call.Mono)/1e9, ret, op.Client, op.Via,
			describe(input{Kind: op.Kind, Spec: op.Spec, Trigger: op.Trigger, IfMatch: op.IfMatch}, o))
		if op.Err != "" {
			line += " (" + op.Err + ")"
		}
		out = append(out, line)
	}
	return out
}
