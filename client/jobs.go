package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"

	"github.com/valyala/fasthttp"
)

func jobsPath(coll string) string {
	return "/v1/collections/" + url.PathEscape(coll) + "/jobs"
}

func jobPath(coll, id string) string {
	return jobsPath(coll) + "/" + url.PathEscape(id)
}

// CreateJob creates one job (POST). created is true when the server made it
// (201) and false when a job with the same id and the same spec already
// existed (200, e.g. a retried create). A different spec under an existing id
// is a conflict error.
func (c *Client) CreateJob(ctx context.Context, coll string, job Job) (Job, bool, error) {
	body, err := json.Marshal(specOf(&job))
	if err != nil {
		return Job{}, false, fmt.Errorf("timemachine client: encode job: %w", err)
	}
	status, resp, err := c.do(ctx, &call{
		method: fasthttp.MethodPost, path: jobsPath(coll), body: body,
		// With an id, a resent create answers 200 with the same job.
		retrySafe: job.ID != "",
	})
	if err != nil {
		return Job{}, false, err
	}
	var out Job
	if err := decodeBody(resp, &out); err != nil {
		return Job{}, false, err
	}
	return out, status == fasthttp.StatusCreated, nil
}

// CreateJobs creates up to MaxBatch jobs in one request. The results are in
// input order, one per job; a job that was rejected has Error set while the
// others may still have been created, so the error return is only for the
// request as a whole.
func (c *Client) CreateJobs(ctx context.Context, coll string, jobs []Job) ([]BatchResult, error) {
	if len(jobs) > MaxBatch {
		return nil, fmt.Errorf("timemachine client: batch of %d jobs exceeds the maximum of %d", len(jobs), MaxBatch)
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
	body, err := json.Marshal(specs)
	if err != nil {
		return nil, fmt.Errorf("timemachine client: encode jobs: %w", err)
	}
	_, resp, err := c.do(ctx, &call{method: fasthttp.MethodPost, path: jobsPath(coll), body: body, retrySafe: allIDs})
	if err != nil {
		return nil, err
	}
	var out struct {
		Results []BatchResult `json:"results"`
	}
	if err := decodeBody(resp, &out); err != nil {
		return nil, err
	}
	if len(out.Results) != len(jobs) {
		return out.Results, fmt.Errorf("timemachine client: batch of %d jobs answered with %d results", len(jobs), len(out.Results))
	}
	return out.Results, nil
}

// PutJob creates or replaces the job coll/id (upsert); replacing reschedules
// atomically. With ifMatch set, the server replaces only if the job's
// current version equals *ifMatch, else answers precondition_failed.
// created is true on 201.
func (c *Client) PutJob(ctx context.Context, coll, id string, job Job, ifMatch *int64) (Job, bool, error) {
	spec := specOf(&job)
	spec.ID = "" // the path names the job
	body, err := json.Marshal(spec)
	if err != nil {
		return Job{}, false, fmt.Errorf("timemachine client: encode job: %w", err)
	}
	cl := &call{method: fasthttp.MethodPut, path: jobPath(coll, id), body: body}
	if ifMatch != nil {
		cl.header = [][2]string{{"If-Match", strconv.FormatInt(*ifMatch, 10)}}
	}
	status, resp, err := c.do(ctx, cl)
	if err != nil {
		return Job{}, false, err
	}
	var out Job
	if err := decodeBody(resp, &out); err != nil {
		return Job{}, false, err
	}
	return out, status == fasthttp.StatusCreated, nil
}

// GetJob reads a job and its status.
func (c *Client) GetJob(ctx context.Context, coll, id string) (Job, error) {
	_, resp, err := c.do(ctx, &call{method: fasthttp.MethodGet, path: jobPath(coll, id)})
	if err != nil {
		return Job{}, err
	}
	var out Job
	if err := decodeBody(resp, &out); err != nil {
		return Job{}, err
	}
	return out, nil
}

// DeleteJob cancels or removes a job. A job that does not exist is a
// not_found error. Note that a delete resent after an ambiguous connection
// failure may report not_found for a delete that did happen.
func (c *Client) DeleteJob(ctx context.Context, coll, id string) error {
	_, _, err := c.do(ctx, &call{method: fasthttp.MethodDelete, path: jobPath(coll, id)})
	return err
}

// ListJobs lists jobs ordered by (trigger_time, id). nextCursor is empty on
// the last page; pass it as ListOptions.Cursor to get the next one.
func (c *Client) ListJobs(ctx context.Context, coll string, opts ListOptions) ([]Job, string, error) {
	q := url.Values{}
	if opts.Status != "" {
		q.Set("status", opts.Status)
	}
	if opts.From != nil {
		q.Set("from", strconv.FormatInt(*opts.From, 10))
	}
	if opts.To != nil {
		q.Set("to", strconv.FormatInt(*opts.To, 10))
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Cursor != "" {
		q.Set("cursor", opts.Cursor)
	}
	path := jobsPath(coll)
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	_, resp, err := c.do(ctx, &call{method: fasthttp.MethodGet, path: path})
	if err != nil {
		return nil, "", err
	}
	var out struct {
		Jobs       []Job  `json:"jobs"`
		NextCursor string `json:"next_cursor"`
	}
	if err := decodeBody(resp, &out); err != nil {
		return nil, "", err
	}
	return out.Jobs, out.NextCursor, nil
}

// decodeBody decodes a 2xx answer. An empty body leaves v untouched: some
// answers (204) have none.
func decodeBody(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("timemachine client: decode answer: %w", err)
	}
	return nil
}

// decodeList decodes a list answer that is either a bare JSON array or an
// object holding the array under key ({"collections":[…]}). The contract
// does not fix the shape of GET /v1/collections and GET /v1/routes, so both
// are accepted.
func decodeList(body []byte, key string, v any) error {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil
	}
	if body[0] == '[' {
		return decodeBody(body, v)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return fmt.Errorf("timemachine client: decode answer: %w", err)
	}
	raw, ok := m[key]
	if !ok {
		return errors.New("timemachine client: decode answer: no " + strconv.Quote(key) + " in list answer")
	}
	return decodeBody(raw, v)
}
