package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/raftgroup"
)

// fakeSlot is one slot's jobs behind a fake forwarder: reads answer from
// it, DeleteIncarnation applies to it, and leaderless answers a number of
// calls with no leader first.
type fakeSlot struct {
	mu         sync.Mutex
	jobs       map[string]*model.Job
	leaderless int
	proposed   []raftfsm.Command
	// late is an upsert that an earlier attempt left in a leader's log:
	// it applies at the start of the next proposal.
	late *raftfsm.Upsert
}

// upsert applies c as the state machine does (If-Match only).
func (f *fakeSlot) upsert(c *raftfsm.Upsert) model.Result {
	j, ok := f.jobs[c.ID]
	if !ok || (c.IfMatch != 0 && j.Version != c.IfMatch) {
		var cur *model.Job
		if ok {
			cp := *j
			cur = &cp
		}
		return model.Result{Code: model.CodePreconditionFailed, Job: cur}
	}
	j.Version++
	j.SpecHash, j.UpdatedAt = c.Spec.Hash, c.Now
	cp := *j
	return model.Result{Code: model.CodeOK, Job: &cp}
}

func (f *fakeSlot) down() bool {
	if f.leaderless > 0 {
		f.leaderless--
		return true
	}
	return false
}

func (f *fakeSlot) GetJob(_ context.Context, _ int, _, id string) (*model.Job, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down() {
		return nil, false, raftgroup.ErrNotLeader
	}
	j, ok := f.jobs[id]
	if !ok {
		return nil, false, nil
	}
	c := *j
	return &c, true, nil
}

func (f *fakeSlot) ProposeSlot(_ context.Context, _ int, cmds ...raftfsm.Command) ([]model.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.proposed = append(f.proposed, cmds...)
	if f.down() {
		return nil, raftgroup.ErrNotLeader
	}
	if f.late != nil {
		f.upsert(f.late)
		f.late = nil
	}
	out := make([]model.Result, len(cmds))
	for i, c := range cmds {
		switch c := c.(type) {
		case *raftfsm.Upsert:
			out[i] = f.upsert(c)
		case *raftfsm.Create:
			if j, ok := f.jobs[c.ID]; ok {
				code := model.CodeConflict
				if j.SpecHash == c.Spec.Hash {
					code = model.CodeExists
				}
				cp := *j
				out[i] = model.Result{Code: code, Job: &cp}
				continue
			}
			j := &model.Job{ID: c.ID, Version: 1, Status: model.StatusScheduled, SpecHash: c.Spec.Hash, CreatedAt: c.Now, UpdatedAt: c.Now}
			f.jobs[c.ID] = j
			cp := *j
			out[i] = model.Result{Code: model.CodeCreated, Job: &cp}
		case *raftfsm.DeleteIncarnation:
			j, ok := f.jobs[c.ID]
			if !ok || j.CreatedAt != c.CreatedAt {
				out[i] = model.Result{Code: model.CodeNotFound}
				continue
			}
			delete(f.jobs, c.ID)
			out[i] = model.Result{Code: model.CodeOK, Job: j}
		default:
			return nil, errors.New("proposed something other than a Create, DeleteIncarnation or Upsert")
		}
	}
	return out, nil
}

func (f *fakeSlot) ProposeMeta(context.Context, ...raftfsm.Command) ([]model.Result, error) {
	return nil, errors.New("unused")
}
func (f *fakeSlot) CatchUpMeta(context.Context) (*raftfsm.MetaState, error) {
	return nil, errors.New("unused")
}
func (f *fakeSlot) ListSlot(context.Context, int, model.ListQuery) (model.ListPage, error) {
	return model.ListPage{}, errors.New("unused")
}
func (f *fakeSlot) GetSchedule(context.Context, int, string, string) (*model.Schedule, string, bool, error) {
	return nil, "", false, errors.New("unused")
}
func (f *fakeSlot) ListSchedules(context.Context, int, string, string, int) (model.ScheduleListPage, []string, error) {
	return model.ScheduleListPage{}, nil, errors.New("unused")
}

func resolvingService(f *fakeSlot) *Service {
	return &Service{fwd: f, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// A DELETE whose outcome was unknown is sent again only for a job created
// before the DELETE began, and only for that incarnation.
func TestResolveDeleteOnlyTheIncarnationItMeant(t *testing.T) {
	const stamp = 1000
	cases := []struct {
		name     string
		job      *model.Job
		unknown  bool
		proposes bool
	}{
		{"still there: deleted now", &model.Job{ID: "j", CreatedAt: 900}, false, true},
		{"gone: deleted by it or before", nil, true, false},
		{"created after the DELETE began: its client's new job stays", &model.Job{ID: "j", CreatedAt: 1001}, true, false},
		{"finished and past its retention when the DELETE began: 404", &model.Job{ID: "j", CreatedAt: 10, Status: model.StatusFailed, FinishedAt: 899}, false, false},
		{"finished, retention not over: deleted now", &model.Job{ID: "j", CreatedAt: 10, Status: model.StatusFailed, FinishedAt: 900}, false, true},
	}
	coll := &model.Collection{Name: "c", RetentionMs: 100}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeSlot{jobs: map[string]*model.Job{}, leaderless: 1}
			if c.job != nil {
				f.jobs["j"] = c.job
			}
			res, err := resolvingService(f).resolveDelete(context.Background(), 0, coll, "j", stamp)
			if (len(f.proposed) > 0) != c.proposes {
				t.Fatalf("proposed %v", f.proposed)
			}
			if c.unknown {
				if !errors.Is(err, model.ErrOutcomeUnknown) {
					t.Fatalf("got %v, %v; want the outcome unknown", res, err)
				}
				if c.job != nil && f.jobs["j"] == nil {
					t.Fatal("the newer job was deleted")
				}
				return
			}
			if !c.proposes {
				if err != nil || res[0].Code != model.CodeNotFound {
					t.Fatalf("got %+v, %v; want not found", res, err)
				}
				return
			}
			if err != nil || res[0].Code != model.CodeOK || f.jobs["j"] != nil {
				t.Fatalf("got %+v, %v; want the job deleted", res, err)
			}
			if d, ok := f.proposed[0].(*raftfsm.DeleteIncarnation); !ok || d.CreatedAt != c.job.CreatedAt {
				t.Fatalf("re-sent %#v, want a DeleteIncarnation of created_at %d", f.proposed[0], c.job.CreatedAt)
			}
		})
	}
}

// A PUT whose first attempt's outcome was unknown, read back at its
// If-Match version, is sent again; the first attempt may still commit
// before the re-send (it sat in the leader's log), which is then refused
// at the new version. That version carries this request's stamp: the PUT
// took effect and is answered 200, not 412 (a nemesis violation). Moved
// on by another writer instead, the outcome is unknown.
func TestResolveUpsertWhenTheFirstAttemptCommitsLate(t *testing.T) {
	const stamp = 5000
	for _, c := range []struct {
		name  string
		other bool // another writer moves the version instead
	}{
		{"the first attempt commits before the re-send", false},
		{"another writer moves the version", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeSlot{jobs: map[string]*model.Job{"j": {ID: "j", Version: 2, SpecHash: 7, CreatedAt: 100, UpdatedAt: 200}}}
			cmd := &raftfsm.Upsert{Coll: "c", ID: "j", Spec: model.JobSpec{Hash: 9}, IfMatch: 2, Now: stamp}
			late := *cmd
			if c.other {
				late.Spec.Hash, late.Now = 11, stamp+1
			}
			f.late = &late // applied at the start of the next proposal
			res, err := resolvingService(f).resolveUpsert(context.Background(), 0, cmd)
			if c.other {
				if !errors.Is(err, model.ErrOutcomeUnknown) {
					t.Fatalf("got %+v, %v; want the outcome unknown", res, err)
				}
				return
			}
			if err != nil || res[0].Code != model.CodeOK || res[0].Job.Version != 3 || res[0].Job.UpdatedAt != stamp {
				t.Fatalf("got %+v, %v; want 200 with version 3, this request's work", res, err)
			}
		})
	}
}

// A create that finds a finished job past its retention makes the new job
// in an entry that deletes that incarnation first; one that finds its own
// job (a re-send after an unknown outcome, the job fired and expired since)
// makes nothing; a failed second proposal fails only the jobs it carried.
func TestCreateOverExpired(t *testing.T) {
	const now = 1_000_000
	coll := &model.Collection{Name: "c", RetentionMs: 1000}
	expiredJob := func(id string, createdAt int64) *model.Job {
		return &model.Job{ID: id, Version: 2, Status: model.StatusSucceeded, SpecHash: 1, CreatedAt: createdAt, FinishedAt: now - 5000}
	}
	create := func(id string, stamp int64) *raftfsm.Create {
		return &raftfsm.Create{Coll: "c", ID: id, Spec: model.JobSpec{Hash: 1}, Now: stamp}
	}
	svc := func(f *fakeSlot) *Service {
		s := resolvingService(f)
		s.clock = func() time.Time { return time.UnixMilli(now) }
		return s
	}
	t.Run("another incarnation: made anew", func(t *testing.T) {
		old := expiredJob("j", 10)
		f := &fakeSlot{jobs: map[string]*model.Job{"j": old}}
		cmds := []raftfsm.Command{create("j", now), create("k", now)}
		res := []model.Result{{Code: model.CodeExists, Job: old}, {Code: model.CodeCreated, Job: &model.Job{ID: "k"}}}
		got, _, again, err := svc(f).createOverExpired(context.Background(), 0, coll, cmds, res, false)
		if err != nil || fmt.Sprint(again) != "[0]" || got[0].Code != model.CodeCreated || got[0].Job.CreatedAt != now || got[1].Code != model.CodeCreated {
			t.Fatalf("got %+v, again %v, %v", got, again, err)
		}
		if d, ok := f.proposed[0].(*raftfsm.DeleteIncarnation); !ok || d.CreatedAt != 10 || len(f.proposed) != 2 {
			t.Fatalf("proposed %#v", f.proposed)
		}
	})
	t.Run("this request's own job: nothing proposed", func(t *testing.T) {
		own := expiredJob("j", now-3000)
		f := &fakeSlot{jobs: map[string]*model.Job{"j": own}}
		cmds := []raftfsm.Command{create("j", now-3000)}
		res := []model.Result{{Code: model.CodeExists, Job: own}}
		got, resent, again, err := svc(f).createOverExpired(context.Background(), 0, coll, cmds, res, true)
		if err != nil || len(again) != 0 || !resent || got[0].Job != own || len(f.proposed) != 0 {
			t.Fatalf("got %+v, again %v, %v; proposed %v", got, again, err, f.proposed)
		}
	})
	t.Run("the second proposal fails: only its jobs", func(t *testing.T) {
		old := expiredJob("j", 10)
		f := &fakeSlot{jobs: map[string]*model.Job{"j": old}, leaderless: 1}
		cmds := []raftfsm.Command{create("k", now), create("j", now)}
		made := &model.Job{ID: "k"}
		res := []model.Result{{Code: model.CodeCreated, Job: made}, {Code: model.CodeExists, Job: old}}
		got, _, again, err := svc(f).createOverExpired(context.Background(), 0, coll, cmds, res, false)
		if err == nil || fmt.Sprint(again) != "[1]" || got[0].Job != made {
			t.Fatalf("got %+v, again %v, %v", got, again, err)
		}
	})
}
