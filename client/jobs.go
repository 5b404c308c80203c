package client

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
)

// need refuses a path parameter that would address another endpoint
// before anything is sent: an empty one (GET …/jobs/ is the list, not a
// job), and "." or "..", which URL escaping leaves as they are and which
// any HTTP stack on the way may resolve as a dot segment (a DELETE of job
// ".." would be a DELETE of its collection). No id or name may be either.
func need(what, v string) error {
	switch v {
	case "":
		return argErrorf("timemachine client: the %s is empty", what)
	case ".", "..":
		return argErrorf("timemachine client: the %s %q is not valid: \".\" and \"..\" are path segments, not names", what, v)
	}
	return nil
}

func jobsPath(coll string) string      { return "/v1/collections/" + seg(coll) + "/jobs" }
func jobPath(coll, id string) string   { return jobsPath(coll) + "/" + seg(id) }
func redrivePath(coll string) string   { return "/v1/collections/" + seg(coll) + "/redrive" }
func collectionPath(c string) string   { return "/v1/collections/" + seg(c) }
func schedulesPath(coll string) string { return "/v1/collections/" + seg(coll) + "/schedules" }

// CreateJob creates one job (POST). created is true when the server made it
// (201) and false when a job with the same id and the same spec already
// existed (200), which is how a resent create is answered. A different spec
// under an existing id is a conflict error.
//
// A job with an ID is resent after 503/429 or a broken connection; one
// without is not (the server would create a second job with another id),
// so give jobs ids when duplicates matter.
func (c *Client) CreateJob(ctx context.Context, coll string, job Job) (Job, bool, error) {
	if err := need("collection", coll); err != nil {
		return Job{}, false, err
	}
	body, err := encode("job", specOf(&job))
	if err != nil {
		return Job{}, false, err
	}
	var out Job
	status, err := c.send(ctx, &call{method: http.MethodPost, path: jobsPath(coll), body: body, retrySafe: job.ID != ""}, &out)
	if err != nil {
		return Job{}, false, err
	}
	return out, status == http.StatusCreated, nil
}

// CreateJobs creates up to MaxBatch jobs in one request. The results are in
// input order, one per job; a job that was rejected has Error set while the
// others may still have been created, so the error return is only for the
// request as a whole. The batch is resent after 503/429 or a broken
// connection only when every job has an ID.
func (c *Client) CreateJobs(ctx context.Context, coll string, jobs []Job) ([]BatchResult, error) {
	if err := need("collection", coll); err != nil {
		return nil, err
	}
	if len(jobs) > MaxBatch {
		return nil, argErrorf("timemachine client: batch of %d jobs exceeds the maximum of %d", len(jobs), MaxBatch)
	}
	if len(jobs) == 0 {
		return nil, nil
	}
	specs := make([]jobSpec, len(jobs))
	allIDs := true
	for i := range jobs {
		specs[i] = specOf(&jobs[i])
		allIDs = allIDs && jobs[i].ID != ""
	}
	body, err := encode("jobs", specs)
	if err != nil {
		return nil, err
	}
	var out struct {
		Results []BatchResult `json:"results"`
	}
	if _, err := c.send(ctx, &call{method: http.MethodPost, path: jobsPath(coll), body: body, retrySafe: allIDs}, &out); err != nil {
		return nil, err
	}
	if len(out.Results) != len(jobs) {
		return out.Results, fmt.Errorf("timemachine client: batch of %d jobs answered with %d results", len(jobs), len(out.Results))
	}
	return out.Results, nil
}

// PutOption modifies a PutJob or a PutSchedule.
type PutOption func(*putOptions)

type putOptions struct {
	header [][2]string
}

// IfMatch makes PutJob (PutSchedule) replace the job (schedule) only if
// its current version is version; otherwise the server answers
// precondition_failed (412) and changes nothing. Read the version with
// GetJob (Job.Version) or GetSchedule (Schedule.Version).
func IfMatch(version int64) PutOption {
	return func(o *putOptions) {
		o.header = append(o.header, [2]string{"If-Match", strconv.FormatInt(version, 10)})
	}
}

// PutJob creates or replaces the job coll/id (upsert); replacing
// reschedules atomically, and a PUT of a failed job redrives it. created is
// true on 201. A job whose callback has already started cannot be replaced:
// that is a conflict error whose Job has Status "firing".
//
// PUT is resent after 503/429 or a broken connection. With IfMatch, a resend
// after a first send that did apply answers precondition_failed (the version
// moved on): read the job to tell the two apart.
func (c *Client) PutJob(ctx context.Context, coll, id string, job Job, opts ...PutOption) (Job, bool, error) {
	if err := errors.Join(need("collection", coll), need("job id", id)); err != nil {
		return Job{}, false, err
	}
	spec := specOf(&job)
	spec.ID = "" // the path names the job
	body, err := encode("job", spec)
	if err != nil {
		return Job{}, false, err
	}
	var po putOptions
	for _, o := range opts {
		o(&po)
	}
	cl := &call{method: http.MethodPut, path: jobPath(coll, id), body: body, retrySafe: true, header: po.header}
	var out Job
	status, err := c.send(ctx, cl, &out)
	if err != nil {
		return Job{}, false, err
	}
	return out, status == http.StatusCreated, nil
}

// GetJob reads a job and its status. Finished jobs stay readable for the
// collection's retention, then are not_found.
func (c *Client) GetJob(ctx context.Context, coll, id string) (Job, error) {
	if err := errors.Join(need("collection", coll), need("job id", id)); err != nil {
		return Job{}, err
	}
	var out Job
	if _, err := c.send(ctx, &call{method: http.MethodGet, path: jobPath(coll, id), retrySafe: true}, &out); err != nil {
		return Job{}, err
	}
	return out, nil
}

// DeleteJob cancels or removes a job. It succeeds only when the job will
// not fire afterwards: a job whose callback has already started is a
// conflict error whose Job has Status "firing". A job that does not exist
// is not_found; note that a delete resent after a broken connection may
// report not_found for a delete that did happen.
func (c *Client) DeleteJob(ctx context.Context, coll, id string) error {
	if err := errors.Join(need("collection", coll), need("job id", id)); err != nil {
		return err
	}
	_, err := c.send(ctx, &call{method: http.MethodDelete, path: jobPath(coll, id), retrySafe: true}, nil)
	return err
}

func (o *ListOptions) query() url.Values {
	q := url.Values{}
	if o.Status != "" {
		q.Set("status", o.Status)
	}
	if o.From != nil {
		q.Set("from", strconv.FormatInt(*o.From, 10))
	}
	if o.To != nil {
		q.Set("to", strconv.FormatInt(*o.To, 10))
	}
	if o.Schedule != "" {
		q.Set("schedule", o.Schedule)
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	return q
}

// ListJobs reads one page of jobs ordered by (trigger_time, id). Pass the
// page's NextCursor as opts.Cursor for the next one; it is empty on the
// last page. Jobs does the paging for you.
func (c *Client) ListJobs(ctx context.Context, coll string, opts ListOptions) (JobPage, error) {
	if err := need("collection", coll); err != nil {
		return JobPage{}, err
	}
	var out JobPage
	if _, err := c.send(ctx, &call{method: http.MethodGet, path: withQuery(jobsPath(coll), opts.query()), retrySafe: true}, &out); err != nil {
		return JobPage{}, err
	}
	return out, nil
}

// Jobs iterates over every job that opts selects, following the cursors
// page by page (opts.Limit is the page size). An error ends the iteration:
// it is yielded once, with a zero Job.
//
//	for job, err := range c.Jobs(ctx, "billing", client.ListOptions{Status: client.StatusFailed}) {
//		if err != nil {
//			return err
//		}
//		fmt.Println(job.ID, job.LastError)
//	}
func (c *Client) Jobs(ctx context.Context, coll string, opts ListOptions) iter.Seq2[Job, error] {
	return func(yield func(Job, error) bool) {
		for {
			page, err := c.ListJobs(ctx, coll, opts)
			if err != nil {
				yield(Job{}, err)
				return
			}
			for _, j := range page.Jobs {
				if !yield(j, nil) {
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

// Redrive sends dead letters (failed jobs) of coll again, now, with
// attempts reset: those named in req.IDs, or those whose trigger time is in
// req.From–req.To. It is never resent automatically: a resend could deliver
// a job twice if it was redriven, fired and failed again in between.
func (c *Client) Redrive(ctx context.Context, coll string, req RedriveRequest) (RedriveResult, error) {
	if err := need("collection", coll); err != nil {
		return RedriveResult{}, err
	}
	if len(req.IDs) == 0 && req.From == nil && req.To == nil {
		return RedriveResult{}, argErrorf("timemachine client: redrive needs ids or a from/to range")
	}
	if len(req.IDs) > 0 && (req.From != nil || req.To != nil) {
		return RedriveResult{}, argErrorf("timemachine client: redrive takes ids or a from/to range, not both")
	}
	body, err := encode("redrive", req)
	if err != nil {
		return RedriveResult{}, err
	}
	var out RedriveResult
	if _, err := c.send(ctx, &call{method: http.MethodPost, path: redrivePath(coll), body: body}, &out); err != nil {
		return RedriveResult{}, err
	}
	return out, nil
}
