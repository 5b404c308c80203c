package recur

import (
	"errors"
	"testing"
	"time"
)

func ms(t *testing.T, s string) int64 {
	t.Helper()
	x, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return x.UnixMilli()
}

func TestCronNext(t *testing.T) {
	for _, c := range []struct {
		name, tz, expr, from string
		want                 []string // RFC 3339, in the zone's offset
	}{
		// Daylight saving time as cron does it (dst.go): a fixed time in
		// the spring-forward gap runs at the transition; a fixed time in
		// the repeated span of a fall back runs once, in the first pass;
		// wildcard expressions run on real time as it comes.
		{"berlin spring gap: 02:30 runs at the change, 03:00 CEST", "Europe/Berlin", "30 2 * * *", "2026-03-28T12:00:00+01:00",
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00", "2026-03-31T02:30:00+02:00"}},
		{"berlin spring gap: every 15 min jumps 01:45 -> 03:00", "Europe/Berlin", "*/15 * * * *", "2026-03-29T01:40:00+01:00",
			[]string{"2026-03-29T01:45:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T03:15:00+02:00"}},
		{"berlin spring gap: a wildcard hour skips the missing 02:30", "Europe/Berlin", "30 * * * *", "2026-03-29T01:10:00+01:00",
			[]string{"2026-03-29T01:30:00+01:00", "2026-03-29T03:30:00+02:00"}},
		{"berlin spring gap: an hour range is a fixed time", "Europe/Berlin", "15 1-3 * * *", "2026-03-29T00:00:00+01:00",
			[]string{"2026-03-29T01:15:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T03:15:00+02:00", "2026-03-30T01:15:00+02:00"}},
		{"berlin spring gap: not on a day the expression skips", "Europe/Berlin", "30 2 * * 1", "2026-03-28T12:00:00+01:00",
			[]string{"2026-03-30T02:30:00+02:00"}},
		{"berlin spring gap: @daily is midnight, untouched", "Europe/Berlin", "@daily", "2026-03-28T12:00:00+01:00",
			[]string{"2026-03-29T00:00:00+01:00", "2026-03-30T00:00:00+02:00"}},
		{"berlin fall back: 02:30 runs once, in the first pass", "Europe/Berlin", "30 2 * * *", "2026-10-24T12:00:00+02:00",
			[]string{"2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"}},
		{"berlin fall back: an hour range skips the second pass", "Europe/Berlin", "15 1-3 * * *", "2026-10-25T00:00:00+02:00",
			[]string{"2026-10-25T01:15:00+02:00", "2026-10-25T02:15:00+02:00", "2026-10-25T03:15:00+01:00"}},
		{"berlin fall back: @hourly runs every real hour", "Europe/Berlin", "@hourly", "2026-10-25T01:30:00+02:00",
			[]string{"2026-10-25T02:00:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T03:00:00+01:00"}},
		{"berlin fall back: a wildcard minute runs in both passes", "Europe/Berlin", "*/30 2 * * *", "2026-10-25T01:50:00+02:00",
			[]string{"2026-10-25T02:00:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T02:30:00+01:00", "2026-10-26T02:00:00+01:00"}},
		{"new york spring gap", "America/New_York", "30 2 * * *", "2026-03-07T12:00:00-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00", "2026-03-10T02:30:00-04:00"}},
		{"new york fall back: 01:30 once", "America/New_York", "30 1 * * *", "2026-10-31T12:00:00-04:00",
			[]string{"2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"}},
		{"feb 29 only in leap years", "UTC", "0 0 29 2 *", "2026-01-01T00:00:00Z",
			[]string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
		{"*/7 restarts each hour", "UTC", "*/7 * * * *", "2026-01-01T00:50:00Z",
			[]string{"2026-01-01T00:56:00Z", "2026-01-01T01:00:00Z", "2026-01-01T01:07:00Z"}},
		{"daily 09:00 in berlin", "Europe/Berlin", "0 9 * * *", "2026-01-01T10:00:00+01:00",
			[]string{"2026-01-02T09:00:00+01:00", "2026-01-03T09:00:00+01:00"}},
		{"descriptor @hourly", "", "@hourly", "2026-01-01T10:20:00Z",
			[]string{"2026-01-01T11:00:00Z", "2026-01-01T12:00:00Z"}},
		// crontab(5): day of week 0 and 7 are both Sunday (2026-01-01 is a Thursday).
		{"7 is sunday", "UTC", "0 9 * * 7", "2026-01-01T10:00:00Z",
			[]string{"2026-01-04T09:00:00Z", "2026-01-11T09:00:00Z"}},
		{"a range up to 7: friday to sunday", "UTC", "0 9 * * 5-7", "2026-01-01T10:00:00Z",
			[]string{"2026-01-02T09:00:00Z", "2026-01-03T09:00:00Z", "2026-01-04T09:00:00Z", "2026-01-09T09:00:00Z"}},
		{"a stepped range up to 7: monday, thursday, sunday", "UTC", "0 9 * * 1-7/3", "2026-01-01T10:00:00Z",
			[]string{"2026-01-04T09:00:00Z", "2026-01-05T09:00:00Z", "2026-01-08T09:00:00Z"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := New(Params{Cron: c.expr, Timezone: c.tz})
			if err != nil {
				t.Fatal(err)
			}
			at := ms(t, c.from)
			for i, w := range c.want {
				at = s.Next(at)
				if want := ms(t, w); at != want {
					t.Fatalf("occurrence %d: got %s, want %s", i, time.UnixMilli(at).UTC().Format(time.RFC3339), w)
				}
			}
		})
	}
}

func TestStartEnd(t *testing.T) {
	start, end := ms(t, "2026-01-01T10:00:00Z"), ms(t, "2026-01-01T12:00:00Z")
	s, err := New(Params{Cron: "0 * * * *", StartAt: start, EndAt: end})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Next(ms(t, "2026-01-01T00:00:00Z")); got != start {
		t.Fatalf("first = %d, want start_at %d", got, start)
	}
	if got := s.Next(start); got != start+3600_000 {
		t.Fatalf("second = %d", got)
	}
	if got := s.Next(start + 3600_000); got != end {
		t.Fatalf("end_at itself is an occurrence: got %d", got)
	}
	if got := s.Next(end); got != 0 {
		t.Fatalf("after end_at: got %d, want 0", got)
	}
	// A start_at that is not on the expression: the first match after it.
	s, _ = New(Params{Cron: "0 * * * *", StartAt: start + 1})
	if got := s.Next(0); got != start+3600_000 {
		t.Fatalf("off-grid start: got %d", got)
	}
}

func TestEvery(t *testing.T) {
	anchor := ms(t, "2026-01-01T00:00:00Z")
	s, err := New(Params{Every: time.Second, Anchor: anchor})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ after, want int64 }{
		{anchor - 5000, anchor + 1000}, // created at anchor: first one interval later
		{anchor, anchor + 1000},
		{anchor + 1, anchor + 1000},
		{anchor + 999, anchor + 1000},
		{anchor + 1000, anchor + 2000},
	} {
		if got := s.Next(c.after); got != c.want {
			t.Errorf("Next(%d) = %d, want %d", c.after-anchor, got-anchor, c.want-anchor)
		}
	}
	// With start_at the first occurrence is start_at itself.
	s, _ = New(Params{Every: 30 * time.Second, Anchor: anchor, StartAt: anchor + 500, EndAt: anchor + 60_500})
	want := []int64{anchor + 500, anchor + 30_500, anchor + 60_500, 0}
	at := anchor - 1
	for i, w := range want {
		at = s.Next(at)
		if at != w {
			t.Fatalf("occurrence %d: got %d, want %d", i, at, w)
		}
		if at == 0 {
			break
		}
	}
}

func TestLatest(t *testing.T) {
	anchor := ms(t, "2026-01-01T00:00:00Z")
	s, _ := New(Params{Every: time.Second, Anchor: anchor})
	occ, skipped, following := s.Latest(anchor+1000, anchor+10_500)
	if occ != anchor+10_000 || skipped != 9 || following != anchor+11_000 {
		t.Fatalf("every: got %d skipped %d following %d", occ-anchor, skipped, following-anchor)
	}
	occ, skipped, _ = s.Latest(anchor+1000, anchor+1000)
	if occ != anchor+1000 || skipped != 0 {
		t.Fatalf("on time: got %d skipped %d", occ-anchor, skipped)
	}
	if occ, _, _ := s.Latest(anchor+1000, anchor+999); occ != 0 {
		t.Fatalf("not due yet: got %d", occ)
	}
	c, _ := New(Params{Cron: "*/7 * * * *"})
	occ, skipped, following = c.Latest(ms(t, "2026-01-01T00:00:00Z"), ms(t, "2026-01-01T01:08:00Z"))
	if occ != ms(t, "2026-01-01T01:07:00Z") || skipped != 10 || following != ms(t, "2026-01-01T01:14:00Z") {
		t.Fatalf("cron: got %s skipped %d", time.UnixMilli(occ).UTC(), skipped)
	}
	// Ended while down: the last occurrence before end_at fires, no following.
	e, _ := New(Params{Every: time.Second, Anchor: anchor, EndAt: anchor + 5000})
	occ, skipped, following = e.Latest(anchor+1000, anchor+60_000)
	if occ != anchor+5000 || skipped != 4 || following != 0 {
		t.Fatalf("ended: got %d skipped %d following %d", occ-anchor, skipped, following)
	}
	// A long outage of a minutely cron: bounded work, right answer.
	m, _ := New(Params{Cron: "* * * * *"})
	from := ms(t, "2026-01-01T00:00:00Z")
	now := ms(t, "2026-12-01T00:00:30Z")
	occ, skipped, _ = m.Latest(from, now)
	if occ != ms(t, "2026-12-01T00:00:00Z") || skipped < maxSkipScan {
		t.Fatalf("long outage: got %s skipped %d", time.UnixMilli(occ).UTC(), skipped)
	}
}

func TestInvalid(t *testing.T) {
	for _, p := range []Params{
		{},
		{Cron: "* * * * *", Every: time.Second},
		{Every: 999 * time.Millisecond},
		{Every: time.Second + time.Microsecond},
		{Cron: "* * * *"},
		{Cron: "61 * * * *"},
		{Cron: "0 9 * * 8"},
		{Cron: "0 9 * * 7/2"},
		{Cron: "@every 1s"},
		{Cron: "TZ=UTC * * * * *"},
		{Cron: "* * * * *", Timezone: "Mars/Olympus"},
		{Cron: "* * * * *", Timezone: "Local"},
		{Cron: "* * * * *", StartAt: 10, EndAt: 5},
	} {
		if _, err := New(p); !errors.Is(err, ErrInvalid) {
			t.Errorf("New(%+v): err = %v, want ErrInvalid", p, err)
		}
	}
}

// FuzzParse: the parser wrapper never panics, and whatever it accepts
// yields strictly increasing occurrences.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"* * * * *", "*/7 * * * *", "0 0 29 2 *", "30 2 * * 0", "@daily", "0-59/5 1,2 L * MON-FRI", "", "@every 5s", "* * * * * *"} {
		f.Add(s, "Europe/Berlin")
	}
	f.Fuzz(func(t *testing.T, expr, tz string) {
		s, err := New(Params{Cron: expr, Timezone: tz})
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			return
		}
		at := int64(1767225600000)
		for i := 0; i < 3; i++ {
			n := s.Next(at)
			if n == 0 {
				return
			}
			if n <= at {
				t.Fatalf("%q: Next(%d) = %d, not after", expr, at, n)
			}
			at = n
		}
	})
}

// The catch-up rule walks the same occurrences as Next, daylight saving
// included: after an outage over the spring-forward day, the occurrence at
// the change (03:00 CEST) counts as one of the missed ones.
func TestLatestOverTheSpringGap(t *testing.T) {
	s, err := New(Params{Cron: "30 2 * * *", Timezone: "Europe/Berlin"})
	if err != nil {
		t.Fatal(err)
	}
	next := ms(t, "2026-03-28T02:30:00+01:00")
	occ, skipped, following := s.Latest(next, ms(t, "2026-03-30T12:00:00+02:00"))
	if want := ms(t, "2026-03-30T02:30:00+02:00"); occ != want {
		t.Fatalf("latest %s, want %s", time.UnixMilli(occ).UTC().Format(time.RFC3339), time.UnixMilli(want).UTC().Format(time.RFC3339))
	}
	if skipped != 2 { // 03-28 02:30 CET and 03-29 03:00 CEST
		t.Fatalf("skipped %d, want 2", skipped)
	}
	if want := ms(t, "2026-03-31T02:30:00+02:00"); following != want {
		t.Fatalf("following %d, want %d", following, want)
	}
}

func TestSundayAsZero(t *testing.T) {
	for in, want := range map[string]string{
		"0 9 * * 7":       "0 9 * * 0",
		"0 9 * * 1-7":     "0 9 * * 1,2,3,4,5,6,0",
		"0 9 * * 1,7":     "0 9 * * 1,0",
		"0 9 * * 0-7/2":   "0 9 * * 0,2,4,6",
		"0 9 * * 7-7":     "0 9 * * 0",
		"7 7 7 7 *":       "7 7 7 7 *",
		"0 9 * * MON-FRI": "0 9 * * MON-FRI",
		"0 9 * * 7/2":     "0 9 * * 7/2",
		"@daily":          "@daily",
	} {
		if got := sundayAsZero(in); got != want {
			t.Errorf("sundayAsZero(%q) = %q, want %q", in, got, want)
		}
	}
}
