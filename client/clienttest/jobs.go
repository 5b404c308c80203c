package clienttest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// job is a stored job, rendered as docs/api.md#jobs shows it.
type job struct {
	ID              string          `json:"id"`
	Collection      string          `json:"collection"`
	TriggerTime     int64           `json:"trigger_time"`
	CallbackURL     string          `json:"callback_url,omitempty"`
	Route           string          `json:"route,omitempty"`
	Meta            json.RawMessage `json:"meta,omitempty"`
	RetryPolicy     json.RawMessage `json:"retry_policy,omitempty"`
	CallbackTimeout string          `json:"callback_timeout,omitempty"`
	Status          string          `json:"status"`
	Attempts        int             `json:"attempts"`
	LastError       string          `json:"last_error"`
	Version         int64           `json:"version"`
	CreatedAt       int64           `json:"created_at"`
	UpdatedAt       int64           `json:"updated_at"`
	FinishedAt      int64           `json:"finished_at"`
	Schedule        string          `json:"schedule,omitempty"`

	spec string // the writable fields as sent, to tell a repeated create from a different one
}

// jobInput is the writable part of a job.
type jobInput struct {
	ID              string          `json:"id"`
	TriggerTime     json.RawMessage `json:"trigger_time"`
	Delay           string          `json:"delay"`
	CallbackURL     string          `json:"callback_url"`
	Route           string          `json:"route"`
	Meta            json.RawMessage `json:"meta"`
	RetryPolicy     json.RawMessage `json:"retry_policy"`
	CallbackTimeout string          `json:"callback_timeout"`
}

const maxMeta = 64 << 10

var writableJobFields = map[string]bool{"id": true, "trigger_time": true, "delay": true, "callback_url": true,
	"route": true, "meta": true, "retry_policy": true, "callback_timeout": true}

func validID(what, id string) *apiError {
	if len(id) < 1 || len(id) > 255 {
		return invalid("%s: must be 1 to 255 bytes, got %d", what, len(id))
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("._:@~=+-", c) >= 0) {
			return invalid("%s %q: byte %d (%q) is not one of [A-Za-z0-9._:@~=+-]", what, id, i, c)
		}
	}
	return nil
}

func validDuration(what, v string) *apiError {
	if v == "" {
		return nil
	}
	if d, err := time.ParseDuration(v); err != nil || d <= 0 {
		return invalid("%s: %q is not a positive Go duration like \"30s\"", what, v)
	}
	return nil
}

func validTarget(callbackURL, route string) *apiError {
	if (callbackURL == "") == (route == "") {
		return invalid("give exactly one of callback_url and route")
	}
	if callbackURL != "" {
		u, err := url.Parse(callbackURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return invalid("callback_url %q: want an absolute http or https URL", callbackURL)
		}
	}
	return nil
}

func validRetryPolicy(raw json.RawMessage) *apiError {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var p struct {
		MaxAttempts     *int     `json:"max_attempts"`
		InitialInterval string   `json:"initial_interval"`
		Multiplier      *float64 `json:"multiplier"`
		MaxInterval     string   `json:"max_interval"`
		MaxAge          string   `json:"max_age"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return invalid("retry_policy: %v", err)
	}
	if p.MaxAttempts != nil && *p.MaxAttempts < 1 {
		return invalid("retry_policy.max_attempts: must be at least 1")
	}
	if p.Multiplier != nil && *p.Multiplier < 1 {
		return invalid("retry_policy.multiplier: must be at least 1")
	}
	for what, v := range map[string]string{"initial_interval": p.InitialInterval, "max_interval": p.MaxInterval, "max_age": p.MaxAge} {
		if e := validDuration("retry_policy."+what, v); e != nil {
			return e
		}
	}
	return nil
}

// parseJob validates one job object and resolves its trigger time.
func (s *Server) parseJob(raw json.RawMessage, pathID string) (*job, *apiError) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, invalid("a job must be a JSON object: %v", err)
	}
	for k := range fields {
		if !writableJobFields[k] && !readOnlyJobField(k) {
			return nil, invalid("unknown field %q", k)
		}
	}
	var in jobInput
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, invalid("%v", err)
	}
	if pathID != "" {
		in.ID = pathID
	}
	if in.ID != "" {
		if e := validID("id", in.ID); e != nil {
			return nil, e
		}
	}
	now := s.now()
	j := &job{ID: in.ID, CallbackURL: in.CallbackURL, Route: in.Route, RetryPolicy: in.RetryPolicy, CallbackTimeout: in.CallbackTimeout}
	switch {
	case len(in.TriggerTime) > 0 && in.Delay != "":
		return nil, invalid("give trigger_time or delay, not both")
	case in.Delay != "":
		d, err := time.ParseDuration(in.Delay)
		if err != nil || d < 0 {
			return nil, invalid("delay: %q is not a Go duration like \"90s\"", in.Delay)
		}
		j.TriggerTime = now.Add(d).UnixMilli()
	case len(in.TriggerTime) > 0:
		if in.TriggerTime[0] == '"' {
			var str string
			_ = json.Unmarshal(in.TriggerTime, &str)
			t, err := time.Parse(time.RFC3339Nano, str)
			if err != nil {
				return nil, invalid("trigger_time: %s is not Unix milliseconds or an RFC 3339 time", in.TriggerTime)
			}
			j.TriggerTime = t.UnixMilli()
		} else {
			ms, err := strconv.ParseInt(string(in.TriggerTime), 10, 64)
			if err != nil || ms < 0 {
				return nil, invalid("trigger_time: %s is not Unix milliseconds", in.TriggerTime)
			}
			j.TriggerTime = ms
		}
	default:
		return nil, invalid("give the job's time: trigger_time (Unix ms or RFC 3339) or delay")
	}
	if e := validTarget(in.CallbackURL, in.Route); e != nil {
		return nil, e
	}
	if len(in.Meta) > maxMeta {
		return nil, errf(413, "too_large", "meta is %d bytes; at most %d are allowed", len(in.Meta), maxMeta)
	}
	if string(in.Meta) != "null" {
		j.Meta = in.Meta
	}
	if e := validRetryPolicy(in.RetryPolicy); e != nil {
		return nil, e
	}
	if e := validDuration("callback_timeout", in.CallbackTimeout); e != nil {
		return nil, e
	}
	spec, _ := json.Marshal(struct {
		T  json.RawMessage `json:"t"`
		D  string          `json:"d"`
		U  string          `json:"u"`
		R  string          `json:"r"`
		M  json.RawMessage `json:"m,omitempty"`
		P  json.RawMessage `json:"p,omitempty"`
		CT string          `json:"ct"`
	}{in.TriggerTime, in.Delay, in.CallbackURL, in.Route, j.Meta, in.RetryPolicy, in.CallbackTimeout})
	j.spec = string(spec)
	return j, nil
}

func readOnlyJobField(k string) bool {
	switch k {
	case "collection", "status", "attempts", "last_error", "version", "created_at", "updated_at", "finished_at", "schedule", "next_attempt_at":
		return true
	}
	return false
}

// create stores j, or answers as the contract says for an existing id.
func (s *Server) create(coll string, j *job) (int, *job, *apiError) {
	m := s.jobsOf(coll)
	if j.ID == "" {
		s.seq++
		j.ID = fmt.Sprintf("job-%d-%d", s.now().UnixMilli(), s.seq)
	}
	if old := m[j.ID]; old != nil {
		if old.spec == j.spec {
			return 200, old, nil
		}
		e := errf(409, "conflict", "job %q already exists in collection %q with a different spec; PUT replaces it", j.ID, coll)
		e.job = old
		return 0, nil, e
	}
	now := s.now().UnixMilli()
	j.Collection, j.Status, j.Version, j.CreatedAt, j.UpdatedAt = coll, "scheduled", 1, now, now
	m[j.ID] = j
	return 201, j, nil
}

func (s *Server) createJobs(r *request) *apiError {
	coll := r.params[0]
	if s.collections[coll] == nil {
		return notFound("collection %q does not exist; PUT /v1/collections/%s creates it", coll, coll)
	}
	body := bytes.TrimSpace(r.body)
	if len(body) > 0 && body[0] == '[' {
		var items []json.RawMessage
		if err := json.Unmarshal(body, &items); err != nil {
			return invalid("request body: %v", err)
		}
		if len(items) == 0 {
			return invalid("the batch is empty; send 1 to 1000 jobs")
		}
		if len(items) > 1000 {
			return errf(413, "too_large", "the batch has %d jobs; at most 1000 are allowed per request", len(items))
		}
		type result struct {
			ID     string            `json:"id"`
			Status int               `json:"status"`
			Job    *job              `json:"job,omitempty"`
			Error  map[string]string `json:"error,omitempty"`
		}
		out := make([]result, len(items))
		for i, raw := range items {
			j, e := s.parseJob(raw, "")
			var status int
			if e == nil {
				status, j, e = s.create(coll, j)
			}
			if e != nil {
				var id struct {
					ID string `json:"id"`
				}
				_ = json.Unmarshal(raw, &id)
				out[i] = result{ID: id.ID, Status: e.status, Job: e.job, Error: map[string]string{"code": e.code, "message": e.msg}}
				continue
			}
			out[i] = result{ID: j.ID, Status: status, Job: j}
		}
		writeJSON(r.w, 200, map[string]any{"results": out})
		return nil
	}
	j, e := s.parseJob(body, "")
	if e != nil {
		return e
	}
	status, j, e := s.create(coll, j)
	if e != nil {
		return e
	}
	writeJSON(r.w, status, j)
	return nil
}

func (s *Server) putJob(r *request) *apiError {
	coll, id := r.params[0], r.params[1]
	if s.collections[coll] == nil {
		return notFound("collection %q does not exist", coll)
	}
	if e := validID("job id", id); e != nil {
		return e
	}
	m := s.jobsOf(coll)
	old := m[id]
	if im := r.r.Header.Get("If-Match"); im != "" {
		v, err := strconv.ParseInt(strings.Trim(im, `"`), 10, 64)
		if err != nil {
			return invalid("If-Match: want a job version, got %q", im)
		}
		if old == nil {
			return errf(412, "precondition_failed", "If-Match: job %q does not exist in collection %q, so it has no version %d", id, coll, v)
		}
		if old.Version != v {
			return errf(412, "precondition_failed", "If-Match: job %q has version %d, not %d", id, old.Version, v)
		}
	}
	j, e := s.parseJob(r.body, id)
	if e != nil {
		return e
	}
	now := s.now().UnixMilli()
	if old == nil {
		j.Collection, j.Status, j.Version, j.CreatedAt, j.UpdatedAt = coll, "scheduled", 1, now, now
		m[id] = j
		writeJSON(r.w, 201, j)
		return nil
	}
	j.Collection, j.Status, j.Version, j.CreatedAt, j.UpdatedAt = coll, "scheduled", old.Version+1, old.CreatedAt, now
	m[id] = j
	writeJSON(r.w, 200, j)
	return nil
}

func (s *Server) getJob(r *request) *apiError {
	j := s.jobs[r.params[0]][r.params[1]]
	if j == nil {
		return notFound("job %q does not exist in collection %q", r.params[1], r.params[0])
	}
	writeJSON(r.w, 200, j)
	return nil
}

func (s *Server) deleteJob(r *request) *apiError {
	m := s.jobs[r.params[0]]
	if m[r.params[1]] == nil {
		return notFound("job %q does not exist in collection %q", r.params[1], r.params[0])
	}
	delete(m, r.params[1])
	r.w.WriteHeader(204)
	return nil
}

func jobKey(j *job) string { return fmt.Sprintf("%020d/%s", j.TriggerTime, j.ID) }

func (s *Server) listJobs(r *request) *apiError {
	q := r.r.URL.Query()
	n, e := limit(r.r)
	if e != nil {
		return e
	}
	status := q.Get("status")
	switch status {
	case "", "scheduled", "succeeded", "failed":
	default:
		return invalid("status: want scheduled, succeeded or failed, got %q", status)
	}
	bound := func(name string) (int64, bool, *apiError) {
		v := q.Get(name)
		if v == "" {
			return 0, false, nil
		}
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, false, invalid("%s: want Unix milliseconds, got %q", name, v)
		}
		return ms, true, nil
	}
	from, hasFrom, e := bound("from")
	if e != nil {
		return e
	}
	to, hasTo, e := bound("to")
	if e != nil {
		return e
	}
	cursor := ""
	if c := q.Get("cursor"); c != "" {
		if cursor, e = decodeCursor(c); e != nil {
			return e
		}
	}
	sched := q.Get("schedule")
	byKey := map[string]*job{}
	var keys []string
	for _, j := range s.jobs[r.params[0]] {
		if (status != "" && j.Status != status) || (hasFrom && j.TriggerTime < from) || (hasTo && j.TriggerTime >= to) ||
			(sched != "" && j.Schedule != sched) {
			continue
		}
		k := jobKey(j)
		byKey[k] = j
		keys = append(keys, k)
	}
	sort.Strings(keys)
	sel, next := page(keys, cursor, n)
	out := make([]*job, len(sel))
	for i, k := range sel {
		out[i] = byKey[k]
	}
	writeJSON(r.w, 200, map[string]any{"jobs": out, "next_cursor": next})
	return nil
}

func (s *Server) redrive(r *request) *apiError {
	var in struct {
		IDs  []string `json:"ids"`
		From *int64   `json:"from"`
		To   *int64   `json:"to"`
	}
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return invalid("request body: %v", err)
	}
	if (len(in.IDs) > 0) == (in.From != nil || in.To != nil) {
		return invalid(`send {"ids":[…]} or {"from":ms,"to":ms}`)
	}
	now := s.now().UnixMilli()
	n := 0
	again := func(j *job) {
		if j == nil || j.Status != "failed" {
			return
		}
		j.Status, j.Attempts, j.LastError, j.FinishedAt, j.UpdatedAt = "scheduled", 0, "", 0, now
		j.Version++
		n++
	}
	m := s.jobs[r.params[0]]
	if len(in.IDs) > 0 {
		for _, id := range in.IDs {
			again(m[id])
		}
	} else {
		for _, j := range m {
			if (in.From == nil || j.TriggerTime >= *in.From) && (in.To == nil || j.TriggerTime < *in.To) {
				again(j)
			}
		}
	}
	writeJSON(r.w, 200, map[string]int{"redriven": n})
	return nil
}
