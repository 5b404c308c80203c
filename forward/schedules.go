package forward

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/rpc/peer"
)

// Schedule reads go to the slot's leader like job reads. (30 and up: the
// numbers below stay free for other packages' growth.)
const (
	MethodGetSchedule   peer.Method = 30 // slot u16 | JSON getJobReq → schedReply
	MethodListSchedules peer.Method = 31 // slot u16 | JSON listSchedulesReq → JSON listSchedulesReply
)

// schedReply carries schedules as EncodeResults bytes, to keep records
// binary, plus the status of each one's latest occurrence.
type schedReply struct {
	Schedules [][]byte `json:"s"`
	Status    []string `json:"st"`
	More      bool     `json:"more"`
}

type listSchedulesReq struct {
	Coll  string `json:"c"`
	After string `json:"a"`
	Limit int    `json:"l"`
}

func encodeSchedules(scs []*model.Schedule, st []string, more bool) ([]byte, error) {
	rep := schedReply{Status: st, More: more}
	for _, sc := range scs {
		rep.Schedules = append(rep.Schedules, raftfsm.EncodeResults([]model.Result{{Schedule: sc}}))
	}
	return json.Marshal(rep)
}

func decodeSchedules(b []byte) ([]*model.Schedule, []string, bool, error) {
	var rep schedReply
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, nil, false, err
	}
	if len(rep.Status) != len(rep.Schedules) {
		return nil, nil, false, errors.New("bad schedule answer")
	}
	out := make([]*model.Schedule, 0, len(rep.Schedules))
	for _, e := range rep.Schedules {
		res, err := raftfsm.DecodeResults(e)
		if err != nil || len(res) != 1 || res[0].Schedule == nil {
			return nil, nil, false, errors.Join(err, errors.New("bad schedule answer"))
		}
		out = append(out, res[0].Schedule)
	}
	return out, rep.Status, rep.More, nil
}

// GetSchedule reads a schedule, and the status of its latest occurrence,
// on slot s's leader.
func (f *Forwarder) GetSchedule(ctx context.Context, s int, coll, id string) (*model.Schedule, string, bool, error) {
	if r := f.cfg.Slots.Leader(s); r != nil {
		return r.GetSchedule(coll, id)
	}
	req, _ := json.Marshal(getJobReq{Coll: coll, ID: id})
	out, err := f.forward(ctx, s, MethodGetSchedule, SlotBody(s, req), false)
	if err != nil {
		return nil, "", false, err
	}
	scs, st, _, err := decodeSchedules(out)
	if err != nil || len(scs) == 0 {
		return nil, "", false, err
	}
	return scs[0], st[0], true, nil
}

// ListSchedules lists up to limit schedules of coll in slot s after the
// id after, on the slot's leader.
func (f *Forwarder) ListSchedules(ctx context.Context, s int, coll, after string, limit int) (model.ScheduleListPage, []string, error) {
	if r := f.cfg.Slots.Leader(s); r != nil {
		return r.ListSchedules(coll, after, limit)
	}
	req, _ := json.Marshal(listSchedulesReq{Coll: coll, After: after, Limit: limit})
	out, err := f.forward(ctx, s, MethodListSchedules, SlotBody(s, req), false)
	if err != nil {
		return model.ScheduleListPage{}, nil, err
	}
	scs, st, more, err := decodeSchedules(out)
	return model.ScheduleListPage{Schedules: scs, More: more}, st, err
}

func (f *Forwarder) serveGetSchedule(_ context.Context, body []byte) ([]byte, error) {
	s, rest, err := SplitSlotBody(body)
	if err != nil {
		return nil, err
	}
	var q getJobReq
	if err := json.Unmarshal(rest, &q); err != nil {
		return nil, err
	}
	r := f.cfg.Slots.Leader(s)
	if r == nil {
		return nil, &peer.RemoteError{Code: CodeNotLeader, Message: f.leaderHint(s)}
	}
	sc, st, ok, err := r.GetSchedule(q.Coll, q.ID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return encodeSchedules(nil, nil, false)
	}
	return encodeSchedules([]*model.Schedule{sc}, []string{st}, false)
}

func (f *Forwarder) serveListSchedules(_ context.Context, body []byte) ([]byte, error) {
	s, rest, err := SplitSlotBody(body)
	if err != nil {
		return nil, err
	}
	var q listSchedulesReq
	if err := json.Unmarshal(rest, &q); err != nil {
		return nil, err
	}
	r := f.cfg.Slots.Leader(s)
	if r == nil {
		return nil, &peer.RemoteError{Code: CodeNotLeader, Message: f.leaderHint(s)}
	}
	page, st, err := r.ListSchedules(q.Coll, q.After, q.Limit)
	if err != nil {
		return nil, err
	}
	return encodeSchedules(page.Schedules, st, page.More)
}
