package check

import (
	"strings"
	"testing"

	"github.com/timemachine-db/timemachine/internal/nemesis/history"
)

// hb builds a hand-made history of one key; times are in milliseconds of
// the checker's clock.
type hb struct {
	ops []history.Op
}

func ms(t int64) history.Stamp { return history.Stamp{Mono: t * 1e6, Wall: t * 1e6} }

// add appends an operation with a definite answer.
func (b *hb) add(client int, kind history.Kind, call, ret int64, in input, out output) *hb {
	op := history.Op{ID: int64(len(b.ops) + 1), Client: client, Kind: kind, Coll: "c", JobID: "j",
		Via: "n1", Spec: in.Spec, Trigger: in.Trigger, IfMatch: in.IfMatch, Call: ms(call), Ret: ms(ret),
		Outcome: history.OK, Status: out.Status, Code: out.Code, Version: out.Version, JobStatus: out.JobStat, JobTrigger: out.Trigger}
	if out.Unknown {
		op.Outcome, op.Ret = history.Unknown, history.Never
	}
	b.ops = append(b.ops, op)
	return b
}

func (b *hb) create(client int, call, ret int64, spec string, trig int64, status int) *hb {
	out := output{Status: status}
	if status == 201 || status == 200 {
		out.Version, out.JobStat, out.Trigger = 1, statusScheduled, trig
	}
	return b.add(client, history.Create, call, ret, input{Spec: spec, Trigger: trig}, out)
}

func (b *hb) createUnknown(client int, call int64, spec string, trig int64, status int) *hb {
	return b.add(client, history.Create, call, 0, input{Spec: spec, Trigger: trig}, output{Unknown: true, Status: status})
}

func (b *hb) get(client int, call, ret int64, status int, v uint64, st string, trig int64) *hb {
	return b.add(client, history.Get, call, ret, input{}, output{Status: status, Version: v, JobStat: st, Trigger: trig})
}

func (b *hb) put(client int, call, ret int64, spec string, trig int64, ifMatch uint64, status int, v uint64) *hb {
	out := output{Status: status}
	if status == 200 || status == 201 {
		out.Version, out.JobStat, out.Trigger = v, statusScheduled, trig
	}
	return b.add(client, history.Put, call, ret, input{Spec: spec, Trigger: trig, IfMatch: ifMatch}, out)
}

func (b *hb) del(client int, call, ret int64, status int) *hb {
	out := output{Status: status}
	if status == 409 {
		out.Code = "conflict"
	}
	return b.add(client, history.Delete, call, ret, input{}, out)
}

func (b *hb) delUnknown(client int, call int64) *hb {
	return b.add(client, history.Delete, call, 0, input{}, output{Unknown: true})
}

func (b *hb) check() LinResult {
	return Linearizability(&history.History{Ops: b.ops}, LinOptions{})
}

func TestLinearizabilityAcceptsValidHistories(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    *hb
	}{
		{"create get delete get", new(hb).
			create(0, 0, 10, "A", 1000, 201).get(0, 11, 12, 200, 1, statusScheduled, 1000).
			del(0, 13, 14, 204).get(0, 15, 16, 404, 0, "", 0)},
		{"the server fires, retries and finishes between reads", new(hb).
			create(0, 0, 10, "A", 1000, 201).get(1, 20, 21, 200, 2, statusScheduled, 1000).
			get(1, 30, 31, 200, 4, statusSucceeded, 1000).get(0, 40, 41, 200, 4, statusSucceeded, 1000)},
		{"indeterminate create seen later", new(hb).
			createUnknown(0, 0, "A", 1000, 0).get(1, 20, 21, 200, 1, statusScheduled, 1000)},
		{"indeterminate create never seen", new(hb).
			createUnknown(0, 0, "A", 1000, 0).get(1, 20, 21, 404, 0, "", 0).get(1, 30, 31, 404, 0, "", 0)},
		{"indeterminate create then its retry answers 200", new(hb).
			createUnknown(0, 0, "A", 1000, 0).create(0, 20, 21, "A", 1000, 200)},
		{"put with if-match then read", new(hb).
			create(0, 0, 10, "A", 1000, 201).put(0, 11, 12, "B", 2000, 1, 200, 2).get(1, 13, 14, 200, 2, statusScheduled, 2000)},
		{"put of a finished job with a stale version: 412", new(hb).
			create(0, 0, 10, "A", 1000, 201).get(0, 20, 21, 200, 2, statusSucceeded, 1000).put(0, 22, 23, "B", 2000, 1, 412, 0)},
		{"put with the known version 412s because the server moved on", new(hb).
			create(0, 0, 10, "A", 1000, 201).put(0, 11, 12, "B", 2000, 1, 412, 0).get(0, 13, 14, 200, 3, statusFailed, 1000)},
		{"a read concurrent with the create sees nothing", new(hb).
			create(0, 0, 10, "A", 1000, 201).get(1, 5, 6, 404, 0, "", 0).get(1, 11, 12, 200, 1, statusScheduled, 1000)},
		{"indeterminate delete takes effect late", new(hb).
			create(0, 0, 10, "A", 1000, 201).delUnknown(0, 11).get(1, 20, 21, 200, 1, statusScheduled, 1000).get(1, 30, 31, 404, 0, "", 0)},
		{"delete refused while firing, then the job finishes", new(hb).
			create(0, 0, 10, "A", 1000, 201).del(0, 11, 12, 409).get(0, 13, 14, 200, 2, statusSucceeded, 1000)},
		{"delete of a finished job", new(hb).
			create(0, 0, 10, "A", 1000, 201).get(0, 11, 12, 200, 2, statusSucceeded, 1000).del(0, 13, 14, 204).del(0, 15, 16, 404)},
		{"create conflict with another spec", new(hb).
			create(0, 0, 10, "A", 1000, 201).create(1, 11, 12, "B", 3000, 409)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := tc.h.check()
			if len(res.Violations) != 0 || len(res.Undecided) != 0 || len(res.ErrorsThatTookEffect) != 0 {
				t.Fatalf("valid history rejected: %+v", res)
			}
			if res.Keys != 1 || res.Ops != len(tc.h.ops) {
				t.Fatalf("keys %d ops %d, want 1 and %d", res.Keys, res.Ops, len(tc.h.ops))
			}
		})
	}
}

func TestLinearizabilityRejectsInvalidHistories(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    *hb
	}{
		{"stale read after a replace", new(hb).
			create(0, 0, 10, "A", 1000, 201).put(0, 11, 12, "B", 2000, 1, 200, 2).get(1, 13, 14, 200, 1, statusScheduled, 1000)},
		{"read after an acknowledged delete", new(hb).
			create(0, 0, 10, "A", 1000, 201).del(0, 11, 12, 204).get(1, 13, 14, 200, 1, statusScheduled, 1000)},
		{"acknowledged create not found", new(hb).
			create(0, 0, 10, "A", 1000, 201).get(1, 11, 12, 404, 0, "", 0)},
		{"created twice", new(hb).
			create(0, 0, 10, "A", 1000, 201).create(1, 11, 12, "A", 1000, 201)},
		{"the same spec again answers conflict", new(hb).
			create(0, 0, 10, "A", 1000, 201).create(0, 11, 12, "A", 1000, 409)},
		{"version goes backwards", new(hb).
			create(0, 0, 10, "A", 1000, 201).get(0, 11, 12, 200, 3, statusScheduled, 1000).get(1, 13, 14, 200, 2, statusScheduled, 1000)},
		{"a finished job is scheduled again with no write", new(hb).
			create(0, 0, 10, "A", 1000, 201).get(0, 11, 12, 200, 2, statusSucceeded, 1000).get(0, 13, 14, 200, 3, statusScheduled, 1000)},
		{"412 for the version a finished job is at", new(hb).
			create(0, 0, 10, "A", 1000, 201).get(0, 11, 12, 200, 2, statusSucceeded, 1000).put(0, 13, 14, "B", 2000, 2, 412, 0)},
		{"two puts succeed with the same if-match", new(hb).
			create(0, 0, 10, "A", 1000, 201).put(0, 11, 12, "B", 2000, 1, 200, 2).put(1, 13, 14, "C", 3000, 1, 200, 2)},
		{"a put succeeds with a version a 412 ruled out", new(hb).
			create(0, 0, 10, "A", 1000, 201).put(0, 11, 12, "B", 2000, 1, 412, 0).put(0, 13, 14, "C", 3000, 1, 200, 2)},
		{"deleted twice", new(hb).
			create(0, 0, 10, "A", 1000, 201).del(0, 11, 12, 204).del(1, 13, 14, 204)},
		{"the trigger time read is not the one written", new(hb).
			create(0, 0, 10, "A", 1000, 201).get(0, 11, 12, 200, 1, statusScheduled, 1001)},
		{"an answer the contract does not have", new(hb).
			create(0, 0, 10, "A", 1000, 400)},
		{"delete refused as firing after the job finished", new(hb).
			create(0, 0, 10, "A", 1000, 201).get(0, 11, 12, 200, 2, statusSucceeded, 1000).del(0, 13, 14, 409)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := tc.h.check()
			if len(res.Violations) != 1 {
				t.Fatalf("invalid history accepted: %+v", res)
			}
			if f := res.Violations[0]; f.Key != "c/j" || len(f.Ops) != len(tc.h.ops) {
				t.Fatalf("finding %+v", f)
			}
		})
	}
}

func TestLinearizabilityFindsErrorsThatTookEffect(t *testing.T) {
	h := new(hb).createUnknown(0, 0, "A", 1000, 503).get(1, 20, 21, 200, 1, statusScheduled, 1000)
	res := h.check()
	if len(res.Violations) != 0 {
		t.Fatalf("a 5xx create is indeterminate: %+v", res.Violations)
	}
	if len(res.ErrorsThatTookEffect) != 1 || !strings.Contains(res.ErrorsThatTookEffect[0].String(), "create(A") {
		t.Fatalf("want the 503 that took effect reported: %+v", res)
	}
	// A timeout (no status) that took effect is no contract violation.
	h = new(hb).createUnknown(0, 0, "A", 1000, 0).get(1, 20, 21, 200, 1, statusScheduled, 1000)
	if res := h.check(); len(res.ErrorsThatTookEffect) != 0 || len(res.Violations) != 0 {
		t.Fatalf("%+v", res)
	}
}

func TestLinearizabilityPartitionsByKey(t *testing.T) {
	a := new(hb).create(0, 0, 10, "A", 1000, 201)
	b := new(hb).get(1, 11, 12, 200, 1, statusScheduled, 1000) // another key: never created
	ops := append(a.ops, b.ops...)
	ops[1].JobID = "other"
	res := Linearizability(&history.History{Ops: ops}, LinOptions{})
	if res.Keys != 2 || len(res.Violations) != 1 || res.Violations[0].Key != "c/other" {
		t.Fatalf("%+v", res)
	}
}
