package service

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/forward"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/raftgroup"
	"github.com/timemachine-db/timemachine/storage"
)

// Internal failures become the domain errors a client can act on; the
// mapping keeps what a retry needs (unavailable/overloaded with a wait).
func TestToModel(t *testing.T) {
	own := model.Conflict("mine")
	for _, tc := range []struct {
		err  error
		kind model.Kind
	}{
		{own, model.KindConflict},
		{fmt.Errorf("wrapped: %w", model.NotFound("x")), model.KindNotFound},
		{forward.ErrMetaUnavailable, model.KindUnavailable},
		{forward.ErrMetaBehind, model.KindUnavailable},
		{raftgroup.ErrNotLeader, model.KindUnavailable},
		{fmt.Errorf("slot 3: %w", raftgroup.ErrUnknownOutcome), model.KindUnavailable},
		{raftgroup.ErrClosed, model.KindUnavailable},
		{raftgroup.ErrOverloaded, model.KindOverloaded},
		{raftfsm.ErrStopped, model.KindUnavailable},
		{context.DeadlineExceeded, model.KindUnavailable},
		{errors.New("something else"), model.KindInternal},
	} {
		got := toModel(tc.err)
		if got == nil || got.Kind != tc.kind {
			t.Errorf("%v: %v, want kind %s", tc.err, got, tc.kind)
			continue
		}
		if (tc.kind == model.KindUnavailable || tc.kind == model.KindOverloaded) && got.RetryAfter < time.Second {
			t.Errorf("%v: retry after %v", tc.err, got.RetryAfter)
		}
	}
	if toModel(own) != own {
		t.Error("a domain error is not passed through as it is")
	}
	if toModel(nil) != nil || fail(nil) != nil {
		t.Error("nil must stay nil (a typed nil would be a non-nil error)")
	}
}

// A write during a disk fill answers 503 unavailable, never 500, and no
// answer names a file (the issue saw 500 with the raft log's path).
func TestStorageFailuresAnswerUnavailableWithoutPaths(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("commit storage batch: %w: write /data/pebble/000002.log: no space left on device", storage.ErrFatal),
		fmt.Errorf("slot 3: %w", raftgroup.ErrStorage),
		fmt.Errorf("slot 3: apply: %w", raftfsm.ErrStopped),
		errors.New("open /var/lib/timemachine/raft/slots.db: input/output error"),
	} {
		got := toModel(err)
		if got == nil {
			t.Fatalf("%v: no error", err)
		}
		if strings.Contains(got.Message, "/") {
			t.Errorf("%v: the answer names a file: %q", err, got.Message)
		}
		storageFailed := errors.Is(err, storage.ErrFatal) || errors.Is(err, raftgroup.ErrStorage) || errors.Is(err, raftfsm.ErrStopped)
		if storageFailed && got.Kind != model.KindUnavailable {
			t.Errorf("%v: %s, want unavailable", err, got.Kind)
		}
	}
}

func job(trigger int64, id string) *model.Job { return &model.Job{ID: id, TriggerTime: trigger} }

func ids(jobs []*model.Job) string {
	s := ""
	for _, j := range jobs {
		s += fmt.Sprintf("%d/%s ", j.TriggerTime, j.ID)
	}
	return s
}

// Per-slot pages merge in (trigger_time, id) order; a slot that stopped
// early bounds the merged page, so the next cursor never skips a job that
// slot has not looked at yet.
func TestMergePages(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pages []model.ListPage
		limit int
		want  string
		next  *model.ListPos
	}{
		{"everything fits", []model.ListPage{
			{Jobs: []*model.Job{job(1, "a"), job(5, "e")}},
			{Jobs: []*model.Job{job(3, "c")}},
		}, 10, "1/a 3/c 5/e ", nil},
		{"ties by id", []model.ListPage{
			{Jobs: []*model.Job{job(2, "b")}},
			{Jobs: []*model.Job{job(2, "a")}},
		}, 10, "2/a 2/b ", nil},
		{"the limit cuts the page", []model.ListPage{
			{Jobs: []*model.Job{job(1, "a"), job(4, "d")}},
			{Jobs: []*model.Job{job(2, "b"), job(3, "c")}},
		}, 3, "1/a 2/b 3/c ", &model.ListPos{Trigger: 3, ID: "c"}},
		{"a slot that stopped early bounds the page", []model.ListPage{
			{Jobs: []*model.Job{job(1, "a"), job(2, "b")}, Stopped: true, Pos: model.ListPos{Trigger: 2, ID: "b"}},
			{Jobs: []*model.Job{job(3, "c")}},
		}, 10, "1/a 2/b ", &model.ListPos{Trigger: 2, ID: "b"}},
		{"a stopped slot with nothing matching still bounds", []model.ListPage{
			{Stopped: true, Pos: model.ListPos{Trigger: 7, ID: "x"}},
			{Jobs: []*model.Job{job(5, "e"), job(9, "i")}},
		}, 10, "5/e ", &model.ListPos{Trigger: 7, ID: "x"}},
		{"the lowest bound wins", []model.ListPage{
			{Jobs: []*model.Job{job(1, "a")}, Stopped: true, Pos: model.ListPos{Trigger: 6, ID: "f"}},
			{Jobs: []*model.Job{job(2, "b")}, Stopped: true, Pos: model.ListPos{Trigger: 4, ID: "d"}},
			{Jobs: []*model.Job{job(5, "e")}},
		}, 10, "1/a 2/b ", &model.ListPos{Trigger: 4, ID: "d"}},
		{"nothing at all", []model.ListPage{{}, {}}, 10, "", nil},
		// Jobs past retention ("gone-" here) are left out and do not count.
		{"gone jobs are left out", []model.ListPage{
			{Jobs: []*model.Job{job(1, "gone-a"), job(4, "d")}},
			{Jobs: []*model.Job{job(2, "b"), job(3, "gone-c")}},
		}, 10, "2/b 4/d ", nil},
		{"gone jobs do not count against the limit", []model.ListPage{
			{Jobs: []*model.Job{job(1, "gone-a"), job(2, "b"), job(3, "gone-c"), job(4, "d"), job(5, "e")}},
		}, 2, "2/b 4/d ", &model.ListPos{Trigger: 4, ID: "d"}},
		{"only gone jobs after the limit: the end", []model.ListPage{
			{Jobs: []*model.Job{job(1, "a"), job(2, "b"), job(3, "gone-c")}},
		}, 2, "1/a 2/b ", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jobs, next := mergePages(tc.pages, tc.limit, func(j *model.Job) bool { return strings.HasPrefix(j.ID, "gone-") })
			if got := ids(jobs); got != tc.want {
				t.Errorf("page %q, want %q", got, tc.want)
			}
			if (next == nil) != (tc.next == nil) || (next != nil && *next != *tc.next) {
				t.Errorf("next %+v, want %+v", next, tc.next)
			}
		})
	}
}

// A create whose outcome was unknown and that turns out to have created
// the job answers 201 with the job as the create made it, even if it fired
// meanwhile (the nemesis's checker saw a 201 carrying version 2).
func TestResolvedCreateAnswersTheCreatedJob(t *testing.T) {
	now := &model.Job{ID: "a", Version: 2, Status: model.StatusSucceeded, TriggerTime: 50, DueTime: 50, Attempts: 1,
		CreatedAt: 10, UpdatedAt: 60, FinishedAt: 60, LastError: "x"}
	got := asCreated(now, 50)
	want := model.Job{ID: "a", Version: 1, Status: model.StatusScheduled, TriggerTime: 50, DueTime: 50, CreatedAt: 10, UpdatedAt: 10}
	if !reflect.DeepEqual(*got, want) {
		t.Fatalf("got %+v\nwant %+v", *got, want)
	}
	if now.Version != 2 {
		t.Fatal("the job read was changed")
	}
	if v1 := (&model.Job{ID: "b", Version: 1}); asCreated(v1, 0) != v1 {
		t.Fatal("a job still at version 1 is not answered as it is")
	}
}
