package clienttest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"sort"
	"strings"
	"time"
)

// collection is a stored collection; the secret is never rendered.
type collection struct {
	Name             string          `json:"name"`
	RetryPolicy      json.RawMessage `json:"retry_policy,omitempty"`
	CallbackTimeout  string          `json:"callback_timeout,omitempty"`
	Retention        string          `json:"retention,omitempty"`
	SigningSecretSet bool            `json:"signing_secret_set"`
	Status           string          `json:"status"`
	CreatedAt        int64           `json:"created_at"`
	UpdatedAt        int64           `json:"updated_at"`
	secret           string
}

// route is a stored route; the secret is never rendered.
type route struct {
	Name             string            `json:"name"`
	WebhookURL       string            `json:"webhook_url"`
	Headers          map[string]string `json:"headers"`
	Timeout          string            `json:"timeout,omitempty"`
	RateLimit        *rateLimit        `json:"rate_limit,omitempty"`
	MaxInFlight      int               `json:"max_in_flight,omitempty"`
	Batch            *batch            `json:"batch,omitempty"`
	Pipeline         bool              `json:"pipeline,omitempty"`
	SigningSecretSet bool              `json:"signing_secret_set"`
	CreatedAt        int64             `json:"created_at"`
	UpdatedAt        int64             `json:"updated_at"`
	secret           string
}

type rateLimit struct {
	PerSecond float64 `json:"per_second"`
	Burst     int     `json:"burst,omitempty"`
}

type batch struct {
	MaxJobs int    `json:"max_jobs"`
	MaxWait string `json:"max_wait,omitempty"`
}

// schedule is a stored schedule.
type schedule struct {
	ID              string          `json:"id"`
	Collection      string          `json:"collection"`
	Cron            string          `json:"cron,omitempty"`
	Every           string          `json:"every,omitempty"`
	Timezone        string          `json:"timezone,omitempty"`
	CallbackURL     string          `json:"callback_url,omitempty"`
	Route           string          `json:"route,omitempty"`
	Meta            json.RawMessage `json:"meta,omitempty"`
	RetryPolicy     json.RawMessage `json:"retry_policy,omitempty"`
	CallbackTimeout string          `json:"callback_timeout,omitempty"`
	StartAt         int64           `json:"start_at,omitempty"`
	EndAt           int64           `json:"end_at,omitempty"`
	Paused          bool            `json:"paused"`
	NextFireAt      int64           `json:"next_fire_at,omitempty"`
	LastFireAt      int64           `json:"last_fire_at,omitempty"`
	LastStatus      string          `json:"last_status,omitempty"`
	Missed          int64           `json:"missed"`
	Version         int64           `json:"version"`
	CreatedAt       int64           `json:"created_at"`
	UpdatedAt       int64           `json:"updated_at"`
}

// strict decodes a request body, refusing unknown fields as the server does.
func strict(body []byte, v any) *apiError {
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalid("request body: %v", err)
	}
	return nil
}

// validSecret checks a signing secret: "whsec_" + base64 of 24–64 bytes.
func validSecret(what, s string) *apiError {
	if s == "" {
		return nil
	}
	b64, ok := strings.CutPrefix(s, "whsec_")
	key, err := base64.StdEncoding.DecodeString(b64)
	if !ok || err != nil || len(key) < 24 || len(key) > 64 {
		return invalid("%s: want whsec_ followed by the base64 of 24 to 64 bytes", what)
	}
	return nil
}

func (s *Server) putCollection(r *request) *apiError {
	name := r.params[0]
	if e := validID("collection", name); e != nil {
		return e
	}
	var in struct {
		RetryPolicy     json.RawMessage `json:"retry_policy"`
		CallbackTimeout string          `json:"callback_timeout"`
		Retention       string          `json:"retention"`
		SigningSecret   string          `json:"signing_secret"`
	}
	if e := strict(r.body, &in); e != nil {
		return e
	}
	if e := validRetryPolicy(in.RetryPolicy); e != nil {
		return e
	}
	for what, v := range map[string]string{"callback_timeout": in.CallbackTimeout, "retention": in.Retention} {
		if e := validDuration(what, v); e != nil {
			return e
		}
	}
	if e := validSecret("signing_secret", in.SigningSecret); e != nil {
		return e
	}
	now := s.now().UnixMilli()
	c := &collection{Name: name, RetryPolicy: in.RetryPolicy, CallbackTimeout: in.CallbackTimeout, Retention: in.Retention,
		secret: in.SigningSecret, SigningSecretSet: in.SigningSecret != "", Status: "active", CreatedAt: now, UpdatedAt: now}
	status := 201
	if old := s.collections[name]; old != nil {
		status, c.CreatedAt = 200, old.CreatedAt
	}
	s.collections[name] = c
	writeJSON(r.w, status, c)
	return nil
}

func (s *Server) getCollection(r *request) *apiError {
	c := s.collections[r.params[0]]
	if c == nil {
		return notFound("collection %q does not exist", r.params[0])
	}
	writeJSON(r.w, 200, c)
	return nil
}

func (s *Server) listCollections(r *request) *apiError {
	names := make([]string, 0, len(s.collections))
	for n := range s.collections {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]*collection, len(names))
	for i, n := range names {
		out[i] = s.collections[n]
	}
	writeJSON(r.w, 200, map[string]any{"collections": out})
	return nil
}

func (s *Server) deleteCollection(r *request) *apiError {
	name := r.params[0]
	if s.collections[name] == nil {
		return notFound("collection %q does not exist", name)
	}
	if name == "default" {
		return invalid(`the "default" collection always exists and cannot be deleted`)
	}
	delete(s.collections, name)
	delete(s.jobs, name)
	delete(s.schedules, name)
	r.w.WriteHeader(204)
	return nil
}

func (s *Server) putRoute(r *request) *apiError {
	name := r.params[0]
	if e := validID("route", name); e != nil {
		return e
	}
	var in struct {
		WebhookURL    string            `json:"webhook_url"`
		Headers       map[string]string `json:"headers"`
		SigningSecret string            `json:"signing_secret"`
		Timeout       string            `json:"timeout"`
		RateLimit     *rateLimit        `json:"rate_limit"`
		MaxInFlight   int               `json:"max_in_flight"`
		Batch         *batch            `json:"batch"`
		Pipeline      bool              `json:"pipeline"`
	}
	if e := strict(r.body, &in); e != nil {
		return e
	}
	if in.WebhookURL == "" {
		return invalid("webhook_url is missing")
	}
	if e := validTarget(in.WebhookURL, ""); e != nil {
		return invalid("webhook_url %q: want an absolute http or https URL", in.WebhookURL)
	}
	if e := validSecret("signing_secret", in.SigningSecret); e != nil {
		return e
	}
	if e := validDuration("timeout", in.Timeout); e != nil {
		return e
	}
	if in.RateLimit != nil && (in.RateLimit.PerSecond <= 0 || in.RateLimit.Burst < 0) {
		return invalid("rate_limit: per_second must be positive and burst not negative")
	}
	if in.MaxInFlight < 0 {
		return invalid("max_in_flight: must not be negative")
	}
	if in.Batch != nil {
		if in.Batch.MaxJobs < 1 || in.Batch.MaxJobs > 1000 {
			return invalid("batch.max_jobs: want 1 to 1000")
		}
		if e := validDuration("batch.max_wait", in.Batch.MaxWait); e != nil {
			return e
		}
		if in.Pipeline {
			return invalid("pipeline and batch do not combine")
		}
	}
	headers := map[string]string{}
	for k, v := range in.Headers {
		if strings.EqualFold(k, "Authorization") || strings.Contains(strings.ToLower(k), "token") || strings.Contains(strings.ToLower(k), "secret") {
			v = "<redacted>"
		}
		headers[k] = v
	}
	now := s.now().UnixMilli()
	rt := &route{Name: name, WebhookURL: in.WebhookURL, Headers: headers, Timeout: in.Timeout, RateLimit: in.RateLimit,
		MaxInFlight: in.MaxInFlight, Batch: in.Batch, Pipeline: in.Pipeline, secret: in.SigningSecret, SigningSecretSet: in.SigningSecret != "",
		CreatedAt: now, UpdatedAt: now}
	status := 201
	if old := s.routes[name]; old != nil {
		status, rt.CreatedAt = 200, old.CreatedAt
	}
	s.routes[name] = rt
	writeJSON(r.w, status, rt)
	return nil
}

func (s *Server) getRoute(r *request) *apiError {
	rt := s.routes[r.params[0]]
	if rt == nil {
		return notFound("route %q does not exist", r.params[0])
	}
	writeJSON(r.w, 200, rt)
	return nil
}

func (s *Server) listRoutes(r *request) *apiError {
	names := make([]string, 0, len(s.routes))
	for n := range s.routes {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]*route, len(names))
	for i, n := range names {
		out[i] = s.routes[n]
	}
	writeJSON(r.w, 200, map[string]any{"routes": out})
	return nil
}

func (s *Server) deleteRoute(r *request) *apiError {
	if s.routes[r.params[0]] == nil {
		return notFound("route %q does not exist", r.params[0])
	}
	delete(s.routes, r.params[0])
	r.w.WriteHeader(204)
	return nil
}

// validCron checks the shape of a 5-field cron expression (the fake does
// not compute its occurrences).
func validCron(expr string) *apiError {
	f := strings.Fields(expr)
	if len(f) != 5 {
		return invalid("cron %q: want 5 fields (minute hour day-of-month month day-of-week)", expr)
	}
	for _, field := range f {
		for _, c := range field {
			if !strings.ContainsRune("0123456789*/,-ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz?", c) {
				return invalid("cron %q: %q is not a cron field", expr, field)
			}
		}
	}
	return nil
}

func (s *Server) putSchedule(r *request) *apiError {
	coll, id := r.params[0], r.params[1]
	if s.collections[coll] == nil {
		return notFound("collection %q does not exist", coll)
	}
	if e := validID("schedule id", id); e != nil {
		return e
	}
	var in struct {
		Cron            string          `json:"cron"`
		Every           string          `json:"every"`
		Timezone        string          `json:"timezone"`
		CallbackURL     string          `json:"callback_url"`
		Route           string          `json:"route"`
		Meta            json.RawMessage `json:"meta"`
		RetryPolicy     json.RawMessage `json:"retry_policy"`
		CallbackTimeout string          `json:"callback_timeout"`
		StartAt         int64           `json:"start_at"`
		EndAt           int64           `json:"end_at"`
		Paused          bool            `json:"paused"`
	}
	if e := strict(r.body, &in); e != nil {
		return e
	}
	if (in.Cron == "") == (in.Every == "") {
		return invalid("give exactly one of cron and every")
	}
	if in.Cron != "" {
		if e := validCron(in.Cron); e != nil {
			return e
		}
	}
	var every time.Duration
	if in.Every != "" {
		if e := validDuration("every", in.Every); e != nil {
			return e
		}
		every, _ = time.ParseDuration(in.Every)
	}
	if in.Timezone != "" {
		if _, err := time.LoadLocation(in.Timezone); err != nil {
			return invalid("timezone %q: not an IANA time zone name like Europe/Berlin", in.Timezone)
		}
	}
	if e := validTarget(in.CallbackURL, in.Route); e != nil {
		return e
	}
	if e := validRetryPolicy(in.RetryPolicy); e != nil {
		return e
	}
	if e := validDuration("callback_timeout", in.CallbackTimeout); e != nil {
		return e
	}
	if in.EndAt != 0 && in.EndAt <= in.StartAt {
		return invalid("end_at must be after start_at")
	}
	now := s.now()
	sc := &schedule{ID: id, Collection: coll, Cron: in.Cron, Every: in.Every, Timezone: in.Timezone,
		CallbackURL: in.CallbackURL, Route: in.Route, Meta: in.Meta, RetryPolicy: in.RetryPolicy,
		CallbackTimeout: in.CallbackTimeout, StartAt: in.StartAt, EndAt: in.EndAt, Paused: in.Paused,
		Version: 1, CreatedAt: now.UnixMilli(), UpdatedAt: now.UnixMilli()}
	if string(sc.Meta) == "null" {
		sc.Meta = nil
	}
	if every > 0 && !in.Paused {
		next := now.Add(every).UnixMilli()
		if in.StartAt > now.UnixMilli() {
			next = in.StartAt
		}
		if in.EndAt == 0 || next < in.EndAt {
			sc.NextFireAt = next
		}
	}
	m := s.schedules[coll]
	if m == nil {
		m = map[string]*schedule{}
		s.schedules[coll] = m
	}
	status := 201
	if old := m[id]; old != nil {
		status = 200
		sc.Version, sc.CreatedAt, sc.LastFireAt, sc.LastStatus, sc.Missed = old.Version+1, old.CreatedAt, old.LastFireAt, old.LastStatus, old.Missed
	}
	m[id] = sc
	writeJSON(r.w, status, sc)
	return nil
}

func (s *Server) getSchedule(r *request) *apiError {
	sc := s.schedules[r.params[0]][r.params[1]]
	if sc == nil {
		return notFound("schedule %q does not exist in collection %q", r.params[1], r.params[0])
	}
	writeJSON(r.w, 200, sc)
	return nil
}

func (s *Server) deleteSchedule(r *request) *apiError {
	m := s.schedules[r.params[0]]
	if m[r.params[1]] == nil {
		return notFound("schedule %q does not exist in collection %q", r.params[1], r.params[0])
	}
	delete(m, r.params[1])
	r.w.WriteHeader(204)
	return nil
}

func (s *Server) listSchedules(r *request) *apiError {
	n, e := limit(r.r)
	if e != nil {
		return e
	}
	cursor := ""
	if c := r.r.URL.Query().Get("cursor"); c != "" {
		if cursor, e = decodeCursor(c); e != nil {
			return e
		}
	}
	m := s.schedules[r.params[0]]
	keys := make([]string, 0, len(m))
	for id := range m {
		keys = append(keys, id)
	}
	sort.Strings(keys)
	sel, next := page(keys, cursor, n)
	out := make([]*schedule, len(sel))
	for i, id := range sel {
		out[i] = m[id]
	}
	writeJSON(r.w, 200, map[string]any{"schedules": out, "next_cursor": next})
	return nil
}
