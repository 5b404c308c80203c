package httpapi

import (
	"bytes"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/timemachine-db/timemachine/model"
	"github.com/valyala/fasthttp"
)

// body returns the request body, refusing encodings it cannot read. The
// slice is fasthttp's: callers copy what they keep (decoding does).
func body(ctx *fasthttp.RequestCtx) ([]byte, *model.Error) {
	if ce := ctx.Request.Header.ContentEncoding(); len(ce) > 0 && !strings.EqualFold(string(ce), "identity") {
		return nil, model.Invalid("Content-Encoding %q is not supported; send the body uncompressed", clip(string(ce)))
	}
	return ctx.PostBody(), nil
}

// collParam validates the {c} path parameter.
func collParam(r *request) (string, *model.Error) {
	c := r.params[0]
	return c, checkName("collection name", c)
}

// jobParams validates {c} and {id}.
func jobParams(r *request) (coll, id string, e *model.Error) {
	if coll, e = collParam(r); e != nil {
		return
	}
	id = r.params[1]
	return coll, id, checkID(id)
}

// createJobs is POST /v1/collections/{c}/jobs: one job (object body) or a
// batch (array body).
func (s *Server) createJobs(r *request) {
	coll, e := collParam(r)
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	b, e := body(r.ctx)
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		s.createBatch(r, coll, b)
		return
	}
	if len(b) > 0 && b[0] != '{' {
		if err := validJSON(b); err != nil {
			writeError(r.ctx, syntaxError("request body", err))
			return
		}
		writeError(r.ctx, model.Invalid("request body must be a JSON object (one job) or an array of them (a batch), got %s", jsonKind(b)))
		return
	}
	o, e := decodeObject("request body", b)
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	p := s.parser(coll)
	id, spec, e := p.parse(o, "")
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	if id == "" {
		id = newIDs(p.now, 1)[0]
	}
	in := []model.JobInput{{ID: id, Spec: spec}}
	ctx, cancel := s.backendCtx()
	res, err := s.b.CreateJobs(ctx, coll, in)
	cancel()
	if err != nil {
		s.fail(r, err)
		return
	}
	if len(res) != 1 {
		s.fail(r, model.Internal("the backend answered %d results for 1 job", len(res)))
		return
	}
	status, job, e := s.outcome(coll, in[0], res[0])
	if e != nil {
		if e.Kind == model.KindConflict && job != nil && e.Job == nil {
			c := *e // the existing job goes with the 409 (docs/api.md "Idempotency")
			c.Job = job
			e = &c
		}
		s.fail(r, e)
		return
	}
	rd := jobRenderer{s: s}
	r.ctx.Response.Header.Set("Location", "/v1/collections/"+coll+"/jobs/"+job.ID)
	setETag(r.ctx, job.Version)
	writeJSON(r.ctx, status, rd.append(make([]byte, 0, 512), job))
}

// createBatch answers a batch create: 200 with one result per item, in
// input order. Invalid items get their own 400 (or 413) result; every item,
// valid or not, is passed to the backend so the results line up.
func (s *Server) createBatch(r *request, coll string, b []byte) {
	items, err := parseBatch(b)
	if err != nil {
		writeError(r.ctx, syntaxError("request body", err))
		return
	}
	switch {
	case len(items) == 0:
		writeError(r.ctx, model.Invalid("the batch is empty; send 1 to %d jobs", model.MaxBatch))
		return
	case len(items) > model.MaxBatch:
		writeError(r.ctx, model.TooLarge("the batch has %d jobs; at most %d are allowed per request", len(items), model.MaxBatch))
		return
	}
	p := s.parser(coll)
	in := make([]model.JobInput, len(items))
	missing := 0
	for i, it := range items {
		if !it.isObj {
			in[i].Err = model.Invalid("item %d: must be a JSON object, got %s", i, jsonKind(it.raw))
			continue
		}
		id, spec, e := p.parse(it.obj, "")
		in[i].ID, in[i].Spec = id, spec
		if e != nil {
			in[i].Err = e
			continue
		}
		if id == "" {
			missing++
		}
	}
	var generated []bool // by item: its id was made here
	if missing > 0 {
		ids := newIDs(p.now, missing)
		generated = make([]bool, len(in))
		for i := range in {
			if in[i].Err == nil && in[i].ID == "" {
				in[i].ID, ids = ids[0], ids[1:]
				generated[i] = true
			}
		}
	}
	ctx, cancel := s.backendCtx()
	res, berr := s.b.CreateJobs(ctx, coll, in)
	cancel()
	if berr != nil {
		s.fail(r, berr)
		return
	}
	if len(res) != len(in) {
		s.fail(r, model.Internal("the backend answered %d results for %d jobs", len(res), len(in)))
		return
	}
	rd := jobRenderer{s: s}
	out := make([]byte, 0, 64+len(in)*600)
	out = append(out, `{"results":[`...)
	for i := range in {
		if i > 0 {
			out = append(out, ',')
		}
		if generated != nil && generated[i] && res[i].Err != nil {
			// No job was made: an id made up here names nothing, and the
			// item is known by its place in the input.
			in[i].ID, res[i].ID = "", ""
		}
		out = s.appendResult(out, &rd, coll, in[i], res[i])
	}
	out = append(out, "]}"...)
	writeJSON(r.ctx, fasthttp.StatusOK, out)
}

// appendResult renders one batch result: {"id","status","job","error"}.
func (s *Server) appendResult(b []byte, rd *jobRenderer, coll string, in model.JobInput, res model.JobResult) []byte {
	id := in.ID
	if id == "" {
		id = res.ID
	}
	b = append(b, '{')
	b = appendStrField(b, "id", id)
	if in.Err != nil { // the backend passes these through; ours is authoritative
		e := itemError(in.Err)
		b = appendIntField(b, "status", int64(statusOf(e.Kind)))
		b = appendErrorObject(appendKey(b, "error"), e)
		return append(b, '}')
	}
	status, job, e := s.outcome(coll, in, res)
	if e != nil && e.Kind != model.KindConflict {
		job = nil
	}
	if e != nil {
		e = itemError(e)
		status = statusOf(e.Kind)
	}
	b = appendIntField(b, "status", int64(status))
	if job != nil {
		b = rd.append(appendKey(b, "job"), job)
	}
	if e != nil {
		b = appendErrorObject(appendKey(b, "error"), e)
	}
	return append(b, '}')
}

// itemError is how a batch item's own error is answered: API.md §3 gives
// an item the statuses 201, 200, 409 and 400, so what is a 404 or a 413
// for a single create (a route that does not exist, meta over the limit)
// is a 400 invalid_argument here, with the same message. Errors that are
// not the item's (503 unavailable, 500) keep their status.
func itemError(e *model.Error) *model.Error {
	switch e.Kind {
	case model.KindNotFound, model.KindTooLarge:
		c := *e
		c.Kind = model.KindInvalidArgument
		return &c
	}
	return e
}

// outcome maps one create result to a status and the job to show. A
// conflict comes back as an error together with the existing job.
func (s *Server) outcome(coll string, in model.JobInput, res model.JobResult) (int, *model.Job, *model.Error) {
	if res.Err != nil {
		return 0, nil, res.Err
	}
	job := res.Job
	if job == nil {
		job = jobFromSpec(coll, in.ID, &in.Spec)
	}
	switch res.Code {
	case model.CodeCreated:
		return fasthttp.StatusCreated, job, nil
	case model.CodeExists:
		return fasthttp.StatusOK, job, nil
	case model.CodeConflict:
		return 0, job, model.Conflict("job %q already exists in collection %q with a different spec; PUT /v1/collections/%s/jobs/%s replaces it", in.ID, coll, coll, in.ID)
	}
	return 0, nil, unexpected(res.Code)
}

// unexpected maps an outcome code the handler did not expect.
func unexpected(c model.Code) *model.Error {
	switch c {
	case model.CodeNotFound:
		return model.NotFound("not found")
	case model.CodeRejected:
		return model.Conflict("rejected in the current state (is the collection being deleted?)")
	}
	return model.Internal("unexpected outcome %q from the backend", c.String())
}

// jobFromSpec is the job as it was asked for, for the unlikely case that the
// backend reports success without the stored job.
func jobFromSpec(coll, id string, spec *model.JobSpec) *model.Job {
	return &model.Job{
		Collection: coll, ID: id, Status: model.StatusScheduled,
		TriggerTime: spec.TriggerTime, DueTime: spec.TriggerTime,
		CallbackURL: spec.CallbackURL, Route: spec.Route, Meta: spec.Meta,
		Retry: spec.Retry, CallbackTimeoutMs: spec.CallbackTimeoutMs, SpecHash: spec.Hash,
	}
}

func (s *Server) parser(coll string) *jobParser {
	return &jobParser{coll: coll, maxMetaBytes: s.o.MaxMetaBytes, now: s.o.Clock(), target: s.o.CheckTarget}
}

func setETag(ctx *fasthttp.RequestCtx, version uint64) {
	if version > 0 {
		ctx.Response.Header.Set("ETag", `"`+strconv.FormatUint(version, 10)+`"`)
	}
}

// noIfMatch refuses If-Match on a DELETE: a delete is not conditional
// here (the state machine's delete takes no version), and ignoring the
// header would delete what the client meant to keep if it had changed.
func noIfMatch(r *request, what string) *model.Error {
	if !hasHeader(r.ctx, "If-Match") {
		return nil
	}
	return model.Invalid("a DELETE of a %s does not take If-Match: it deletes whatever version is there; to delete only an unchanged %s, read it and compare its version first", what, what)
}

// parseIfMatch reads If-Match of a PUT of what (a job, a schedule): a
// version as a decimal, quoted ("3", as ETag sends it) or weak (W/"3"). 0
// means no header. An empty header, or more than one, is a 400: taken as
// absent, the PUT went through unconditionally (a black-box review).
func parseIfMatch(ctx *fasthttp.RequestCtx, what string) (uint64, *model.Error) {
	all := ctx.Request.Header.PeekAll("If-Match")
	switch {
	case len(all) == 0:
		return 0, nil
	case len(all) > 1:
		return 0, model.Invalid("If-Match: give it once, with the %s's version, not %d times", what, len(all))
	}
	v := strings.TrimSpace(string(all[0]))
	if v == "" {
		return 0, model.Invalid("If-Match: empty; give the %s's version (such as 3, or the ETag \"3\"), or leave the header out for an unconditional PUT", what)
	}
	raw := v
	v = strings.TrimPrefix(v, "W/")
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 || v[0] == '+' {
		return 0, model.Invalid("If-Match: must be the %s's version (a positive integer such as 3, or the ETag \"3\"), got %q", what, clip(raw))
	}
	return n, nil
}

// upsertJob is PUT /v1/collections/{c}/jobs/{id}.
func (s *Server) upsertJob(r *request) {
	coll, id, e := jobParams(r)
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	ifMatch, e := parseIfMatch(r.ctx, "job")
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	b, e := body(r.ctx)
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	o, e := decodeObject("request body", b)
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	_, spec, e := s.parser(coll).parse(o, id)
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	ctx, cancel := s.backendCtx()
	res, err := s.b.UpsertJob(ctx, coll, id, spec, ifMatch)
	cancel()
	if err != nil {
		s.fail(r, err)
		return
	}
	var status int
	switch res.Code {
	case model.CodeCreated:
		status = fasthttp.StatusCreated
	case model.CodeOK:
		status = fasthttp.StatusOK
	case model.CodePreconditionFailed:
		msg := "If-Match: the job's version is no longer %d; GET it and retry with its current version"
		if res.Job != nil {
			writeError(r.ctx, model.PreconditionFailed(msg+" (it is now %d)", ifMatch, res.Job.Version))
			return
		}
		writeError(r.ctx, model.PreconditionFailed(msg, ifMatch))
		return
	case model.CodeNotFound:
		if ifMatch != 0 {
			writeError(r.ctx, model.PreconditionFailed("If-Match: job %q does not exist in collection %q, so it has no version %d", id, coll, ifMatch))
			return
		}
		fallthrough
	default:
		s.fail(r, unexpected(res.Code))
		return
	}
	job := res.Job
	if job == nil {
		job = jobFromSpec(coll, id, &spec)
	}
	rd := jobRenderer{s: s}
	setETag(r.ctx, job.Version)
	writeJSON(r.ctx, status, rd.append(make([]byte, 0, 512), job))
}

// getJob is GET /v1/collections/{c}/jobs/{id}.
func (s *Server) getJob(r *request) {
	coll, id, e := jobParams(r)
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	ctx, cancel := s.backendCtx()
	job, err := s.b.GetJob(ctx, coll, id)
	cancel()
	if err != nil {
		s.fail(r, err)
		return
	}
	if job == nil {
		writeError(r.ctx, model.NotFound("job %q does not exist in collection %q", id, coll))
		return
	}
	rd := jobRenderer{s: s}
	setETag(r.ctx, job.Version)
	writeJSON(r.ctx, fasthttp.StatusOK, rd.append(make([]byte, 0, 512), job))
}

// deleteJob is DELETE /v1/collections/{c}/jobs/{id}.
func (s *Server) deleteJob(r *request) {
	coll, id, e := jobParams(r)
	if e == nil {
		e = noIfMatch(r, "job")
	}
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	ctx, cancel := s.backendCtx()
	err := s.b.DeleteJob(ctx, coll, id)
	cancel()
	if err != nil {
		s.fail(r, err)
		return
	}
	writeEmpty(r.ctx)
}

var listParams = []string{"status", "from", "to", "limit", "cursor", "schedule"}

// parseListQuery reads the list query string into a ListQuery.
// onceEach refuses a query parameter given more than once: the first
// value won silently (status=failed&status=scheduled listed only the dead
// letters, a black-box review), where the client meant both or neither.
func onceEach(args *fasthttp.Args) *model.Error {
	var seen []string
	for k := range args.All() {
		if slices.Contains(seen, string(k)) {
			return model.Invalid("query parameter %q is given more than once; give it once (a list takes one status, one range and one cursor per request)", clip(string(k)))
		}
		seen = append(seen, string(k))
	}
	return nil
}

func parseListQuery(coll string, args *fasthttp.Args) (model.ListQuery, *model.Error) {
	q := model.ListQuery{Coll: coll, From: math.MinInt64, To: math.MaxInt64, Limit: model.DefaultListLimit}
	var bad *model.Error
	if bad = onceEach(args); bad != nil {
		return q, bad
	}
	for k := range args.All() {
		if !slices.Contains(listParams, string(k)) {
			if s := suggest(string(k), listParams); s != "" {
				bad = model.Invalid("unknown query parameter %q (did you mean %q?)", clip(string(k)), s)
			} else {
				bad = model.Invalid("unknown query parameter %q; the parameters are: %s", clip(string(k)), strings.Join(listParams, ", "))
			}
			break
		}
	}
	if bad != nil {
		return q, bad
	}
	if v := args.Peek("status"); len(v) > 0 {
		st, ok := model.ParseStatus(string(v))
		if !ok {
			return q, model.Invalid("status: must be scheduled, succeeded or failed, got %q", clip(string(v)))
		}
		q.Status = st
	}
	for _, b := range []struct {
		name string
		dst  *int64
	}{{"from", &q.From}, {"to", &q.To}} {
		if v := args.Peek(b.name); len(v) > 0 {
			t, ok := parseTimeText(string(v))
			if !ok && bytes.IndexByte(v, ' ') >= 0 {
				// An unencoded "+01:00" arrives as " 01:00": the query
				// string decodes '+' as a space.
				t, ok = parseTimeText(strings.ReplaceAll(string(v), " ", "+"))
			}
			if !ok {
				return q, model.Invalid("%s: %s (like 1767225600000 or 2026-01-01T00:00:00Z), got %q", b.name, triggerHelp, clip(string(v)))
			}
			*b.dst = t
		}
	}
	if q.From > q.To {
		return q, model.Invalid("from (%d) is after to (%d); from is inclusive and to exclusive", q.From, q.To)
	}
	if v := args.Peek("schedule"); len(v) > 0 {
		if e := model.CheckScheduleID(string(v)); e != nil {
			return q, e
		}
		q.Schedule = string(v)
	}
	if v := args.Peek("limit"); len(v) > 0 {
		n, err := strconv.Atoi(string(v))
		if err != nil || n < 1 || n > model.MaxListLimit {
			return q, model.Invalid("limit: must be an integer from 1 to %d, got %q", model.MaxListLimit, clip(string(v)))
		}
		q.Limit = n
	}
	if v := args.Peek("cursor"); len(v) > 0 {
		pos, err := decodeCursor(string(v))
		if err != nil {
			return q, model.Invalid("cursor: %v; pass next_cursor from the previous page unchanged, or leave it out to start at the beginning", err)
		}
		q.After = pos
	}
	return q, nil
}

// listJobs is GET /v1/collections/{c}/jobs.
func (s *Server) listJobs(r *request) {
	coll, e := collParam(r)
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	q, e := parseListQuery(coll, r.ctx.QueryArgs())
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	ctx, cancel := s.backendCtx()
	jobs, next, err := s.b.ListJobs(ctx, q)
	cancel()
	if err != nil {
		s.fail(r, err)
		return
	}
	rd := jobRenderer{s: s}
	out := make([]byte, 0, 64+len(jobs)*600)
	out = append(out, `{"jobs":[`...)
	first := true
	for _, j := range jobs {
		if j == nil {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = rd.append(out, j)
	}
	out = append(out, ']')
	out = appendStrField(out, "next_cursor", encodeCursor(next))
	out = append(out, '}')
	writeJSON(r.ctx, fasthttp.StatusOK, out)
}
