package httpapi

import (
	"context"

	"github.com/timemachine-db/timemachine/model"
)

// The schedule and redrive side of fakeBackend: it keeps the last PUT spec
// and answers it back.
type scheduleFake struct {
	putSpec      model.ScheduleSpec
	putID        string
	putIfMatch   uint64
	redriveIDs   []string
	redriveRange [2]int64
	listAfter    string
}

func (f *fakeBackend) sched() *scheduleFake { return &f.sf }

func (f *fakeBackend) PutSchedule(_ context.Context, coll, id string, spec model.ScheduleSpec, ifMatch uint64) (model.ScheduleView, bool, error) {
	f.record("PutSchedule")
	if f.err != nil {
		return model.ScheduleView{}, false, f.err
	}
	sf := f.sched()
	sf.putSpec, sf.putID, sf.putIfMatch = spec, id, ifMatch
	return model.ScheduleView{Schedule: &model.Schedule{Collection: coll, ID: id, Spec: spec, Version: 1, NextFireAt: 1767225600000}}, f.created, nil
}

func (f *fakeBackend) GetSchedule(_ context.Context, coll, id string) (model.ScheduleView, error) {
	f.record("GetSchedule")
	if f.err != nil {
		return model.ScheduleView{}, f.err
	}
	sf := f.sched()
	return model.ScheduleView{Schedule: &model.Schedule{Collection: coll, ID: id, Spec: sf.putSpec, Version: 2, LastFireAt: 5}, LastStatus: "succeeded"}, nil
}

func (f *fakeBackend) DeleteSchedule(context.Context, string, string) error {
	f.record("DeleteSchedule")
	return f.err
}

func (f *fakeBackend) ListSchedules(_ context.Context, coll, after string, limit int) ([]model.ScheduleView, bool, error) {
	f.record("ListSchedules")
	f.sf.listAfter = after
	return []model.ScheduleView{{Schedule: &model.Schedule{Collection: coll, ID: "a", Spec: model.ScheduleSpec{EveryMs: 1000}}}}, true, f.err
}

func (f *fakeBackend) Redrive(_ context.Context, coll string, ids []string, from, to int64) (int64, error) {
	f.record("Redrive")
	sf := f.sched()
	sf.redriveIDs, sf.redriveRange = ids, [2]int64{from, to}
	return int64(len(ids)), f.err
}
