package client

import (
	"context"
	"errors"
	"iter"
	"net/http"
	"net/url"
	"strconv"
)

// PutSchedule creates or replaces the schedule coll/id; created is true on
// 201. Replacing a schedule changes the occurrences from then on. IfMatch
// makes it conditional on the schedule's version (Schedule.Version), as
// for PutJob.
func (c *Client) PutSchedule(ctx context.Context, coll, id string, s Schedule, opts ...PutOption) (Schedule, bool, error) {
	if err := errors.Join(need("collection", coll), need("schedule id", id)); err != nil {
		return Schedule{}, false, err
	}
	body, err := encode("schedule", scheduleSpec{
		Cron: s.Cron, Every: s.Every, Timezone: s.Timezone,
		CallbackURL: s.CallbackURL, Route: s.Route, Meta: s.Meta,
		RetryPolicy: s.RetryPolicy, CallbackTimeout: s.CallbackTimeout,
		StartAt: s.StartAt, EndAt: s.EndAt, Paused: s.Paused,
	})
	if err != nil {
		return Schedule{}, false, err
	}
	var po putOptions
	for _, o := range opts {
		o(&po)
	}
	out := Schedule{}
	status, err := c.send(ctx, &call{method: http.MethodPut, path: schedulesPath(coll) + "/" + seg(id), body: body, retrySafe: true, header: po.header}, &out)
	if err != nil {
		return Schedule{}, false, err
	}
	fillSchedule(&out, coll, id)
	return out, status == http.StatusCreated, nil
}

func fillSchedule(s *Schedule, coll, id string) {
	if s.ID == "" {
		s.ID = id
	}
	if s.Collection == "" {
		s.Collection = coll
	}
}

// GetSchedule reads a schedule, with its next and last fire times.
func (c *Client) GetSchedule(ctx context.Context, coll, id string) (Schedule, error) {
	if err := errors.Join(need("collection", coll), need("schedule id", id)); err != nil {
		return Schedule{}, err
	}
	var out Schedule
	if _, err := c.send(ctx, &call{method: http.MethodGet, path: schedulesPath(coll) + "/" + seg(id), retrySafe: true}, &out); err != nil {
		return Schedule{}, err
	}
	fillSchedule(&out, coll, id)
	return out, nil
}

// DeleteSchedule stops a schedule. Occurrences already created stay jobs
// of their own.
func (c *Client) DeleteSchedule(ctx context.Context, coll, id string) error {
	if err := errors.Join(need("collection", coll), need("schedule id", id)); err != nil {
		return err
	}
	_, err := c.send(ctx, &call{method: http.MethodDelete, path: schedulesPath(coll) + "/" + seg(id), retrySafe: true}, nil)
	return err
}

// ListSchedules reads one page of a collection's schedules; pass NextCursor
// as opts.Cursor for the next. Schedules does the paging for you.
func (c *Client) ListSchedules(ctx context.Context, coll string, opts ListSchedulesOptions) (SchedulePage, error) {
	if err := need("collection", coll); err != nil {
		return SchedulePage{}, err
	}
	q := url.Values{}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Cursor != "" {
		q.Set("cursor", opts.Cursor)
	}
	var out SchedulePage
	if _, err := c.send(ctx, &call{method: http.MethodGet, path: withQuery(schedulesPath(coll), q), retrySafe: true}, &out); err != nil {
		return SchedulePage{}, err
	}
	for i := range out.Schedules {
		if out.Schedules[i].Collection == "" {
			out.Schedules[i].Collection = coll
		}
	}
	return out, nil
}

// Schedules iterates over every schedule of a collection, following the
// cursors. An error ends the iteration: it is yielded once.
func (c *Client) Schedules(ctx context.Context, coll string, opts ListSchedulesOptions) iter.Seq2[Schedule, error] {
	return func(yield func(Schedule, error) bool) {
		for {
			page, err := c.ListSchedules(ctx, coll, opts)
			if err != nil {
				yield(Schedule{}, err)
				return
			}
			for _, s := range page.Schedules {
				if !yield(s, nil) {
					return
				}
			}
			if page.NextCursor == "" || page.NextCursor == opts.Cursor {
				return
			}
			opts.Cursor = page.NextCursor
		}
	}
}

// Occurrences iterates over the jobs a schedule has created (GET
// …/jobs?schedule=id), in trigger order; opts filters them further (its
// Schedule is set to id).
func (c *Client) Occurrences(ctx context.Context, coll, id string, opts ListOptions) iter.Seq2[Job, error] {
	opts.Schedule = id
	if id == "" {
		return func(yield func(Job, error) bool) { yield(Job{}, need("schedule id", id)) }
	}
	return c.Jobs(ctx, coll, opts)
}
