package service

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"

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
	out := make([]model.Result, len(cmds))
	for i, c := range cmds {
		switch c := c.(type) {
		case *raftfsm.DeleteIncarnation:
			j, ok := f.jobs[c.ID]
			if !ok || j.CreatedAt != c.CreatedAt {
				out[i] = model.Result{Code: model.CodeNotFound}
				continue
			}
			delete(f.jobs, c.ID)
			out[i] = model.Result{Code: model.CodeOK, Job: j}
		default:
			return nil, errors.New("the resolver proposed something other than a DeleteIncarnation")
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
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeSlot{jobs: map[string]*model.Job{}, leaderless: 1}
			if c.job != nil {
				f.jobs["j"] = c.job
			}
			res, err := resolvingService(f).resolveDelete(context.Background(), 0, "c", "j", stamp)
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
			if err != nil || res[0].Code != model.CodeOK || f.jobs["j"] != nil {
				t.Fatalf("got %+v, %v; want the job deleted", res, err)
			}
			if d, ok := f.proposed[0].(*raftfsm.DeleteIncarnation); !ok || d.CreatedAt != c.job.CreatedAt {
				t.Fatalf("re-sent %#v, want a DeleteIncarnation of created_at %d", f.proposed[0], c.job.CreatedAt)
			}
		})
	}
}
