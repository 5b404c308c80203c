package recur

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/timemachine-db/timemachine/model"
)

// MinEvery is the shortest interval an "every" schedule may have.
const MinEvery = time.Second

// maxSkipScan bounds how many cron occurrences Latest walks to count missed
// ones; past it the count is an estimate from the last two (it only feeds
// the "missed" statistic, never a fire).
const maxSkipScan = 100_000

// ErrInvalid wraps every parse and validation error.
var ErrInvalid = errors.New("invalid schedule")

// Spec is a parsed schedule. The zero value is not usable; build one with
// New.
type Spec struct {
	every  time.Duration
	anchor int64 // ms; occurrences of an "every" schedule are anchor + k*every
	cron   *cron.SpecSchedule
	fixed  bool // a fixed-time cron expression: cron's daylight-saving rules apply (dst.go)
	loc    *time.Location
	start  int64 // ms, 0: none
	end    int64 // ms, 0: none
}

// Params are the user's fields. Exactly one of Cron and Every is set.
// Anchor is where an "every" schedule without StartAt counts from (the
// time it was created or last changed): its first occurrence is one
// interval later. With StartAt the first occurrence is StartAt itself.
type Params struct {
	Cron     string
	Every    time.Duration
	Timezone string // IANA name; "" is UTC
	StartAt  int64  // ms, 0: none
	EndAt    int64  // ms, 0: none
	Anchor   int64  // ms
}

// ParseCron parses a 5-field cron expression (or a descriptor such as
// @daily) for time zone loc. "@every" and "TZ=" prefixes are refused: the
// schedule's own fields say those things.
func ParseCron(expr string, loc *time.Location) (cron.Schedule, error) {
	e := strings.TrimSpace(expr)
	if e == "" {
		return nil, fmt.Errorf("%w: cron: empty expression", ErrInvalid)
	}
	if len(e) > 256 {
		return nil, fmt.Errorf("%w: cron: expression is %d bytes; at most 256 are allowed", ErrInvalid, len(e))
	}
	if strings.HasPrefix(e, "@every") {
		return nil, fmt.Errorf("%w: cron: @every is not supported here; use the \"every\" field", ErrInvalid)
	}
	if strings.HasPrefix(e, "TZ=") || strings.HasPrefix(e, "CRON_TZ=") {
		return nil, fmt.Errorf("%w: cron: give the time zone in the \"timezone\" field, not in the expression", ErrInvalid)
	}
	s, err := cron.ParseStandard(sundayAsZero(e))
	if err != nil {
		return nil, fmt.Errorf("%w: cron %q: %v (want 5 fields: minute hour day-of-month month day-of-week)", ErrInvalid, e, err)
	}
	spec, ok := s.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("%w: cron %q: not a calendar expression", ErrInvalid, e)
	}
	spec.Location = loc
	return spec, nil
}

// sundayAsZero rewrites the day-of-week field of a 5-field expression so
// that 7 means Sunday, as in crontab(5) ("0 9 * * 7", "1-7"): the parser
// knows Sunday only as 0. An item that names 7 ("7", "5-7", "1-7/2") is
// written out as the days it covers, 7 as 0; everything else is left for
// the parser to accept or refuse.
func sundayAsZero(expr string) string {
	f := strings.Fields(expr)
	if len(f) != 5 || !strings.Contains(f[4], "7") {
		return expr
	}
	items := strings.Split(f[4], ",")
	for i, it := range items {
		rng, step, hasStep := strings.Cut(it, "/")
		lo, hi, isRange := strings.Cut(rng, "-")
		if !isRange {
			hi = lo
		}
		a, errA := strconv.Atoi(lo)
		b, errB := strconv.Atoi(hi)
		st := 1
		if hasStep {
			var err error
			if st, err = strconv.Atoi(step); err != nil || st <= 0 || !isRange {
				continue
			}
		}
		if errA != nil || errB != nil || b != 7 || a < 0 || a > 7 {
			continue
		}
		var days []string
		for d := a; d <= b; d += st {
			days = append(days, strconv.Itoa(d%7))
		}
		items[i] = strings.Join(days, ",")
	}
	f[4] = strings.Join(items, ",")
	return strings.Join(f, " ")
}

// LoadLocation resolves an IANA time zone name; "" is UTC. "Local" is
// refused: it would mean a different zone on each node.
func LoadLocation(name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return time.UTC, nil
	}
	if name == "Local" {
		return nil, fmt.Errorf("%w: timezone \"Local\" is not allowed; name an IANA zone such as Europe/Berlin", ErrInvalid)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("%w: timezone %q is not a known IANA time zone (like Europe/Berlin or America/New_York)", ErrInvalid, name)
	}
	return loc, nil
}

// New validates p and returns the schedule it describes.
func New(p Params) (*Spec, error) {
	if (p.Cron == "") == (p.Every == 0) {
		return nil, fmt.Errorf("%w: give exactly one of \"cron\" and \"every\"", ErrInvalid)
	}
	if p.EndAt != 0 && p.StartAt != 0 && p.EndAt < p.StartAt {
		return nil, fmt.Errorf("%w: end_at is before start_at", ErrInvalid)
	}
	loc, err := loadCached(p.Timezone)
	if err != nil {
		return nil, err
	}
	s := &Spec{loc: loc, start: p.StartAt, end: p.EndAt}
	if p.Every != 0 {
		if p.Every < MinEvery {
			return nil, fmt.Errorf("%w: every: must be at least %s, got %s", ErrInvalid, MinEvery, p.Every)
		}
		if p.Every%time.Millisecond != 0 {
			return nil, fmt.Errorf("%w: every: must be a whole number of milliseconds, got %s", ErrInvalid, p.Every)
		}
		s.every = p.Every
		s.anchor = p.Anchor
		if p.StartAt != 0 {
			s.anchor = p.StartAt
		}
		return s, nil
	}
	c, err := ParseCron(p.Cron, loc)
	if err != nil {
		return nil, err
	}
	s.cron, s.fixed = c.(*cron.SpecSchedule), fixedTime(p.Cron)
	return s, nil
}

// Next is the first occurrence strictly after after (ms), or 0 when there
// is none (past end_at, or a cron expression that never matches).
func (s *Spec) Next(after int64) int64 {
	var n int64
	if s.every > 0 {
		n = s.nextEvery(after)
	} else {
		if s.start != 0 && after < s.start-1 {
			after = s.start - 1
		}
		t := s.cronNext(time.UnixMilli(after).In(s.loc))
		if t.IsZero() {
			return 0
		}
		n = t.UnixMilli()
	}
	if s.end != 0 && n > s.end {
		return 0
	}
	return n
}

func (s *Spec) nextEvery(after int64) int64 {
	e := s.every.Milliseconds()
	if s.start != 0 && after < s.start {
		return s.start
	}
	if after < s.anchor {
		// An anchor without start_at is the creation time: the first
		// occurrence is one interval after it.
		if s.start == 0 {
			return s.anchor + e
		}
		return s.anchor
	}
	k := (after-s.anchor)/e + 1
	return s.anchor + k*e
}

// Latest is the latest occurrence at or before now, starting from next (an
// occurrence that is due: next <= now), and how many occurrences before it
// were skipped. It implements the catch-up rule: after an outage only the
// most recent missed occurrence fires. following is the occurrence after
// the returned one (0: none).
func (s *Spec) Latest(next, now int64) (occ, skipped, following int64) {
	if next > now || next == 0 {
		return 0, 0, next
	}
	if s.every > 0 {
		e := s.every.Milliseconds()
		k := (now - next) / e
		occ = next + k*e
		if s.end != 0 && occ > s.end {
			k = (s.end - next) / e
			occ = next + k*e
		}
		return occ, k, s.Next(occ)
	}
	occ = next
	for i := 0; ; i++ {
		n := s.Next(occ)
		if n == 0 || n > now {
			return occ, skipped, n
		}
		if i >= maxSkipScan {
			// Estimate the rest from the spacing of the last two.
			if gap := n - occ; gap > 0 {
				skipped += (now - n) / gap
			}
			return s.latestFrom(n, now, skipped+1)
		}
		occ = n
		skipped++
	}
}

// latestFrom finds the last occurrence at or before now by doubling
// strides, after the scan limit was hit.
func (s *Spec) latestFrom(occ, now, skipped int64) (int64, int64, int64) {
	// Jump close to now, then walk the few occurrences left.
	t := time.UnixMilli(now).In(s.loc).Add(-48 * time.Hour).UnixMilli()
	if t > occ {
		if n := s.Next(t); n != 0 && n <= now {
			occ = n
		}
	}
	for {
		n := s.Next(occ)
		if n == 0 || n > now {
			return occ, skipped, n
		}
		occ = n
	}
}

// locations caches loaded time zones: time.LoadLocation reads the zoneinfo
// database on every call, and the slot leader evaluates many schedules per
// second.
var locations sync.Map // name → *time.Location

func loadCached(name string) (*time.Location, error) {
	if v, ok := locations.Load(name); ok {
		return v.(*time.Location), nil
	}
	loc, err := LoadLocation(name)
	if err != nil {
		return nil, err
	}
	locations.Store(name, loc)
	return loc, nil
}

// FromSchedule builds the Spec of a stored schedule spec, whose "every"
// schedule counts from anchor.
func FromSchedule(s *model.ScheduleSpec, anchor int64) (*Spec, error) {
	if _, err := loadCached(s.Timezone); err != nil {
		return nil, err
	}
	return New(Params{Cron: s.Cron, Every: time.Duration(s.EveryMs) * time.Millisecond, Timezone: s.Timezone,
		StartAt: s.StartAt, EndAt: s.EndAt, Anchor: anchor})
}
