package httpapi

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/recur"
	"github.com/valyala/fasthttp"
)

// scheduleFields are the writable members of a schedule object; the
// read-only ones are accepted back and ignored, so a client can PUT what
// it got from a GET.
var scheduleFields = newFieldSet(
	[]string{"cron", "every", "timezone", "callback_url", "route", "meta", "retry_policy", "callback_timeout", "start_at", "end_at", "paused"},
	[]string{"id", "collection", "next_fire_at", "last_fire_at", "last_status", "missed", "version", "created_at", "updated_at"},
)

// scheduleParams validates {c} and {id} of a schedule path.
func scheduleParams(r *request) (coll, id string, e *model.Error) {
	if coll, e = collParam(r); e != nil {
		return
	}
	id = r.params[1]
	return coll, id, model.CheckScheduleID(id)
}

// timeField parses an optional time member (ms or RFC 3339).
func timeField(o object, name string) (int64, *model.Error) {
	raw, ok := o.field(name)
	if !ok {
		return 0, nil
	}
	var t int64
	if raw[0] == '"' {
		s, e := str(name, raw)
		if e != nil {
			return 0, e
		}
		v, ok := parseTimeText(s)
		if !ok {
			return 0, model.Invalid("%s: %s (like 1767225600000 or \"2026-01-01T00:00:00Z\"), got %q", name, triggerHelp, clip(s))
		}
		t = v
	} else {
		v, e := integer(name, raw, 0, maxTriggerMs-1)
		if e != nil {
			return 0, e
		}
		t = v
	}
	if t < 0 || t >= maxTriggerMs {
		return 0, model.Invalid("%s: must not be before 1970-01-01T00:00:00Z and must be before the year 10000", name)
	}
	return t, nil
}

// parseSchedule validates a schedule object. Target, meta, retry policy and
// timeout follow the rules of a job's (jobParser); the recurrence is
// checked by package recur, so what is accepted here is what the slot
// leader can evaluate.
func (s *Server) parseSchedule(coll string, o object) (spec model.ScheduleSpec, e *model.Error) {
	if e := scheduleFields.check("", o); e != nil {
		return spec, e
	}
	if raw, ok := o.field("collection"); ok {
		c, e := str("collection", raw)
		if e != nil {
			return spec, e
		}
		if c != coll {
			return spec, model.Invalid("collection: the body says %q but the path says %q; leave it out or make them match", clip(c), coll)
		}
	}
	cRaw, hasC := o.field("cron")
	eRaw, hasE := o.field("every")
	switch {
	case hasC && hasE:
		return spec, model.Invalid("cron and every are conflicting: give exactly one")
	case !hasC && !hasE:
		return spec, model.Invalid("cron is missing: give cron (5 fields, like \"*/5 * * * *\") or every (a Go duration of at least 1s, like \"30s\")")
	case hasC:
		if spec.Cron, e = str("cron", cRaw); e != nil {
			return spec, e
		}
	default:
		if spec.EveryMs, e = parseDurationMs("every", eRaw, recur.MinEvery, 100*365*24*time.Hour); e != nil {
			return spec, e
		}
	}
	if raw, ok := o.field("timezone"); ok {
		if spec.Timezone, e = str("timezone", raw); e != nil {
			return spec, e
		}
	}
	if spec.StartAt, e = timeField(o, "start_at"); e != nil {
		return spec, e
	}
	if spec.EndAt, e = timeField(o, "end_at"); e != nil {
		return spec, e
	}
	if raw, ok := o.field("paused"); ok {
		switch string(raw) {
		case "true":
			spec.Paused = true
		case "false":
		default:
			return spec, model.Invalid("paused: must be true or false, got %s", shown(raw))
		}
	}
	if _, err := recur.New(recur.Params{Cron: spec.Cron, Every: time.Duration(spec.EveryMs) * time.Millisecond,
		Timezone: spec.Timezone, StartAt: spec.StartAt, EndAt: spec.EndAt}); err != nil {
		return spec, model.Invalid("%v", err)
	}
	// The job template: the job parser's rules, via a job object made of
	// the schedule's target members and a placeholder trigger time.
	job := object{{key: "trigger_time", raw: []byte("0")}}
	for _, k := range []string{"callback_url", "route", "meta", "retry_policy", "callback_timeout"} {
		if raw, ok := o.field(k); ok {
			job = append(job, member{key: k, raw: raw})
		}
	}
	p := s.parser(coll)
	_, js, e := p.parse(job, "")
	if e != nil {
		return spec, e
	}
	spec.CallbackURL, spec.Route, spec.Meta, spec.Retry, spec.CallbackTimeoutMs = js.CallbackURL, js.Route, js.Meta, js.Retry, js.CallbackTimeoutMs
	spec.Hash = hashSchedule(&spec)
	return spec, nil
}

// hashSchedule identifies a schedule spec as given: a PUT of the same spec
// again changes nothing (and keeps next_fire_at). What a GET renders for a
// default is the same spec as leaving it out — "timezone":"UTC" and
// "meta":{} — and a meta is hashed in its canonical form, as a job's is
// (canonicalMeta): a read-modify-write that PUTs back what GET answered
// must not count as a change, which would restart an "every" schedule's
// count and drop the occurrence created ahead. (Before 2026-11-28 both
// were hashed as given: the first such PUT after that upgrade of a
// schedule written with them bumps its version once.)
func hashSchedule(s *model.ScheduleSpec) uint64 {
	tz := s.Timezone
	if tz == "UTC" {
		tz = ""
	}
	meta := canonicalMeta(s.Meta)
	buf := make([]byte, 0, 128+len(meta))
	buf = hashStr(buf, s.Cron)
	buf = binary.AppendVarint(buf, s.EveryMs)
	buf = hashStr(buf, tz)
	buf = hashStr(buf, s.CallbackURL)
	buf = hashStr(buf, s.Route)
	buf = binary.AppendUvarint(buf, uint64(len(meta)))
	buf = append(buf, meta...)
	buf = binary.AppendVarint(buf, s.Retry.MaxAttempts)
	buf = binary.AppendVarint(buf, s.Retry.InitialIntervalMs)
	buf = binary.BigEndian.AppendUint64(buf, math.Float64bits(s.Retry.Multiplier))
	buf = binary.AppendVarint(buf, s.Retry.MaxIntervalMs)
	buf = binary.AppendVarint(buf, s.Retry.MaxAgeMs)
	buf = binary.AppendVarint(buf, s.CallbackTimeoutMs)
	buf = binary.AppendVarint(buf, s.StartAt)
	buf = binary.AppendVarint(buf, s.EndAt)
	if s.Paused {
		buf = append(buf, 1)
	}
	return xxhash.Sum64(buf)
}

// appendSchedule renders a schedule.
func appendSchedule(b []byte, v model.ScheduleView) []byte {
	sc := v.Schedule
	b = append(b, '{')
	b = appendStrField(b, "id", sc.ID)
	b = appendStrField(b, "collection", sc.Collection)
	if sc.Spec.Cron != "" {
		b = appendStrField(b, "cron", sc.Spec.Cron)
	} else {
		b = appendStrField(b, "every", durationString(sc.Spec.EveryMs))
	}
	tz := sc.Spec.Timezone
	if tz == "" {
		tz = "UTC"
	}
	b = appendStrField(b, "timezone", tz)
	if sc.Spec.CallbackURL != "" {
		b = appendStrField(b, "callback_url", sc.Spec.CallbackURL)
	}
	if sc.Spec.Route != "" {
		b = appendStrField(b, "route", sc.Spec.Route)
	}
	b = appendMeta(b, sc.Spec.Meta)
	if !sc.Spec.Retry.IsZero() {
		b = appendRetry(appendKey(b, "retry_policy"), sc.Spec.Retry.Or(model.DefaultRetryPolicy))
	}
	if sc.Spec.CallbackTimeoutMs > 0 {
		b = appendStrField(b, "callback_timeout", durationString(sc.Spec.CallbackTimeoutMs))
	}
	if sc.Spec.StartAt > 0 {
		b = appendIntField(b, "start_at", sc.Spec.StartAt)
	}
	if sc.Spec.EndAt > 0 {
		b = appendIntField(b, "end_at", sc.Spec.EndAt)
	}
	b = appendBoolField(b, "paused", sc.Spec.Paused)
	b = appendIntField(b, "next_fire_at", sc.NextFireAt)
	b = appendIntField(b, "last_fire_at", sc.LastFireAt)
	b = appendStrField(b, "last_status", v.LastStatus)
	b = appendIntField(b, "missed", sc.Missed)
	b = strconv.AppendUint(appendKey(b, "version"), sc.Version, 10)
	b = appendIntField(b, "created_at", sc.CreatedAt)
	b = appendIntField(b, "updated_at", sc.UpdatedAt)
	return append(b, '}')
}

// putSchedule is PUT /v1/collections/{c}/schedules/{id}.
func (s *Server) putSchedule(r *request) {
	coll, id, e := scheduleParams(r)
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	b, e := body(r.ctx)
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	o, e := decodeObject("request body", bytes.TrimSpace(b))
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	if raw, ok := o.field("id"); ok {
		if given, e := str("id", raw); e != nil || given != id {
			writeError(r.ctx, model.Invalid("id: the body says %s but the path says %q; leave it out or make them match", shown(raw), id))
			return
		}
	}
	spec, e := s.parseSchedule(coll, o)
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	ifMatch, e := parseIfMatch(r.ctx, "schedule")
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	ctx, cancel := s.backendCtx()
	v, created, err := s.b.PutSchedule(ctx, coll, id, spec, ifMatch)
	cancel()
	if err != nil {
		s.fail(r, err)
		return
	}
	status := fasthttp.StatusOK
	if created {
		status = fasthttp.StatusCreated
	}
	setETag(r.ctx, v.Version)
	writeJSON(r.ctx, status, appendSchedule(make([]byte, 0, 512), v))
}

// getSchedule is GET /v1/collections/{c}/schedules/{id}.
func (s *Server) getSchedule(r *request) {
	coll, id, e := scheduleParams(r)
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	ctx, cancel := s.backendCtx()
	v, err := s.b.GetSchedule(ctx, coll, id)
	cancel()
	if err != nil {
		s.fail(r, err)
		return
	}
	setETag(r.ctx, v.Version)
	writeJSON(r.ctx, fasthttp.StatusOK, appendSchedule(make([]byte, 0, 512), v))
}

// deleteSchedule is DELETE /v1/collections/{c}/schedules/{id}.
func (s *Server) deleteSchedule(r *request) {
	coll, id, e := scheduleParams(r)
	if e == nil {
		e = noIfMatch(r, "schedule")
	}
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	ctx, cancel := s.backendCtx()
	err := s.b.DeleteSchedule(ctx, coll, id)
	cancel()
	if err != nil {
		s.fail(r, err)
		return
	}
	writeEmpty(r.ctx)
}

// listSchedules is GET /v1/collections/{c}/schedules?limit=&cursor=. The
// cursor holds the last id of the previous page (encodeScheduleCursor).
func (s *Server) listSchedules(r *request) {
	coll, e := collParam(r)
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	args := r.ctx.QueryArgs()
	if e := onceEach(args); e != nil {
		writeError(r.ctx, e)
		return
	}
	limit := model.DefaultListLimit
	after := ""
	for k, v := range args.All() {
		if len(v) == 0 && (string(k) == "limit" || string(k) == "cursor") {
			continue // empty: not given, as the job list reads it (API.md §3 writes ?limit=&cursor=)
		}
		switch string(k) {
		case "limit":
			n, err := strconv.Atoi(string(v))
			if err != nil || n < 1 || n > model.MaxListLimit {
				writeError(r.ctx, model.Invalid("limit: must be an integer from 1 to %d, got %q", model.MaxListLimit, clip(string(v))))
				return
			}
			limit = n
		case "cursor":
			id, err := decodeScheduleCursor(string(v))
			if err != nil {
				writeError(r.ctx, model.Invalid("cursor: %v: pass next_cursor from the previous page unchanged, or leave it out to start at the beginning", err))
				return
			}
			after = id
		default:
			writeError(r.ctx, model.Invalid("unknown query parameter %q; the parameters are: limit, cursor", clip(string(k))))
			return
		}
	}
	ctx, cancel := s.backendCtx()
	list, more, err := s.b.ListSchedules(ctx, coll, after, limit)
	cancel()
	if err != nil {
		s.fail(r, err)
		return
	}
	out := append(make([]byte, 0, 64+len(list)*400), `{"schedules":[`...)
	for i, v := range list {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendSchedule(out, v)
	}
	out = append(out, ']')
	next := ""
	if more && len(list) > 0 {
		next = encodeScheduleCursor(list[len(list)-1].ID)
	}
	out = appendStrField(out, "next_cursor", next)
	writeJSON(r.ctx, fasthttp.StatusOK, append(out, '}'))
}

var redriveFields = newFieldSet([]string{"ids", "from", "to"}, nil)

// redrive is POST /v1/collections/{c}/redrive: {"ids":[…]} or
// {"from":ms,"to":ms} → {"redriven":N}.
func (s *Server) redrive(r *request) {
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
	o, e := decodeObject("request body", bytes.TrimSpace(b))
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	if e := redriveFields.check("", o); e != nil {
		writeError(r.ctx, e)
		return
	}
	var ids []string
	raw, hasIDs := o.field("ids")
	_, hasFrom := o.field("from")
	_, hasTo := o.field("to")
	switch {
	case hasIDs && (hasFrom || hasTo):
		writeError(r.ctx, model.Invalid("ids and from/to are conflicting: redrive by ids or by a trigger-time range, not both"))
		return
	case !hasIDs && !hasFrom && !hasTo:
		writeError(r.ctx, model.Invalid("ids is missing: give ids (the dead letters to send again) or from/to (a trigger-time range)"))
		return
	case hasIDs:
		if err := json.Unmarshal(raw, &ids); err != nil {
			writeError(r.ctx, model.Invalid("ids: must be an array of job id strings, got %s", shown(raw)))
			return
		}
		if len(ids) == 0 || len(ids) > model.MaxBatch {
			writeError(r.ctx, model.Invalid("ids: give 1 to %d ids, got %d", model.MaxBatch, len(ids)))
			return
		}
		for _, id := range ids {
			if e := checkID(id); e != nil {
				writeError(r.ctx, e)
				return
			}
		}
	}
	from, e := timeField(o, "from")
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	to, e := timeField(o, "to")
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	if to != 0 && from > to {
		writeError(r.ctx, model.Invalid("from (%d) is after to (%d); from is inclusive and to exclusive", from, to))
		return
	}
	ctx, cancel := s.backendCtx()
	n, err := s.b.Redrive(ctx, coll, ids, from, to)
	cancel()
	if err != nil {
		s.fail(r, err)
		return
	}
	out := appendIntField(append(make([]byte, 0, 32), '{'), "redriven", n)
	writeJSON(r.ctx, fasthttp.StatusOK, append(out, '}'))
}
