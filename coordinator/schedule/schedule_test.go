package schedule_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/schedule"
)

func mustParse(t *testing.T, f schedule.Fields) schedule.Spec {
	t.Helper()
	s, err := schedule.Parse(f, schedule.Limits{})
	if err != nil {
		t.Fatalf("parse %+v: %v", f, err)
	}
	return s
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func times(ts []time.Time) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.UTC().Format(time.RFC3339)
	}
	return out
}

// The slots around each clock change, as UTC instants. Every case has a
// slot whose local time the zone skips or repeats that day; the expected
// instants are the rule's (the first instant after a gap, the first
// occurrence of a repeated time), not what a zone without clock changes
// would give.
func TestSlotsAcrossClockChanges(t *testing.T) {
	cases := []struct {
		name, cron, zone, from string
		want                   []string
	}{{
		// New York springs forward on 2026-03-08 at 02:00 EST to 03:00
		// EDT: 02:30 does not exist that day and fires at 03:00 EDT.
		name: "new york spring forward", cron: "30 2 * * *", zone: "America/New_York", from: "2026-03-06T12:00:00Z",
		want: []string{"2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"},
	}, {
		// Four skipped slots of one gap are one slot.
		name: "new york gap with several slots", cron: "*/15 2 * * *", zone: "America/New_York", from: "2026-03-08T06:00:00Z",
		want: []string{"2026-03-08T07:00:00Z", "2026-03-09T06:00:00Z", "2026-03-09T06:15:00Z"},
	}, {
		// A slot in the gap and one at its end are one slot.
		name: "new york gap and its end", cron: "0,30 2-3 * * *", zone: "America/New_York", from: "2026-03-08T05:00:00Z",
		want: []string{"2026-03-08T07:00:00Z", "2026-03-08T07:30:00Z", "2026-03-09T06:00:00Z"},
	}, {
		// New York falls back on 2026-11-01 at 02:00 EDT to 01:00 EST:
		// 01:30 occurs twice and fires at its first occurrence only.
		name: "new york fall back", cron: "30 1 * * *", zone: "America/New_York", from: "2026-10-31T12:00:00Z",
		want: []string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"},
	}, {
		// An hourly schedule: 01:00 fires once (EDT), the next slot is
		// 02:00 EST, two hours later.
		name: "new york fall back hourly", cron: "0 * * * *", zone: "America/New_York", from: "2026-11-01T03:30:00Z",
		want: []string{"2026-11-01T04:00:00Z", "2026-11-01T05:00:00Z", "2026-11-01T07:00:00Z", "2026-11-01T08:00:00Z"},
	}, {
		// Berlin springs forward on 2026-03-29 at 02:00 CET to 03:00 CEST.
		name: "berlin spring forward", cron: "30 2 * * *", zone: "Europe/Berlin", from: "2026-03-27T12:00:00Z",
		want: []string{"2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"},
	}, {
		// Berlin falls back on 2026-10-25 at 03:00 CEST to 02:00 CET:
		// a 02:00 schedule fires once that night, at 02:00 CEST.
		name: "berlin fall back", cron: "0 2 * * *", zone: "Europe/Berlin", from: "2026-10-23T12:00:00Z",
		want: []string{"2026-10-24T00:00:00Z", "2026-10-25T00:00:00Z", "2026-10-26T01:00:00Z"},
	}, {
		// Asked from inside the repeated hour (02:10 CET, the second
		// occurrence), 02:30 that night has passed already.
		name: "berlin from the repeated hour", cron: "30 2 * * *", zone: "Europe/Berlin", from: "2026-10-25T01:10:00Z",
		want: []string{"2026-10-26T01:30:00Z", "2026-10-27T01:30:00Z"},
	}, {
		name: "tokyo", cron: "0 9 * * *", zone: "Asia/Tokyo", from: "2026-12-04T23:00:00Z",
		want: []string{"2026-12-05T00:00:00Z", "2026-12-06T00:00:00Z"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := mustParse(t, schedule.Fields{Cron: c.cron, TimeZone: c.zone})
			got := times(s.Upcoming(utc(c.from), len(c.want)))
			if !slices.Equal(got, c.want) {
				t.Errorf("slots of %q in %s after %s:\n got %v\nwant %v", c.cron, c.zone, c.from, got, c.want)
			}
		})
	}
}

// Next from any instant of a day with a clock change returns the same
// slots as the listing: no slot is returned twice however the
// evaluations fall.
func TestNextFromEveryMinuteOfAClockChangeDay(t *testing.T) {
	for _, z := range []struct{ zone, day string }{
		{"America/New_York", "2026-11-01T00:00:00Z"}, {"America/New_York", "2026-03-08T00:00:00Z"},
		{"Europe/Berlin", "2026-10-24T20:00:00Z"}, {"Europe/Berlin", "2026-03-28T20:00:00Z"},
	} {
		s := mustParse(t, schedule.Fields{Cron: "*/10 * * * *", TimeZone: z.zone})
		start := utc(z.day)
		fired := map[time.Time]bool{}
		for a := start; a.Before(start.Add(12 * time.Hour)); a = a.Add(time.Minute) {
			fired[s.Next(a)] = true
		}
		want := map[time.Time]bool{}
		for _, n := range s.Upcoming(start.Add(-time.Nanosecond), 200) {
			if !n.After(start.Add(12 * time.Hour)) {
				want[n] = true
			}
		}
		for n := range fired {
			if !want[n] && !n.After(start.Add(12*time.Hour)) {
				t.Errorf("%s: Next returned %s, not a listed slot", z.zone, n)
			}
		}
		var walls []string
		for n := range want {
			walls = append(walls, n.In(mustZone(t, z.zone)).Format("15:04"))
		}
		slices.Sort(walls)
		if len(slices.Compact(walls)) != len(walls) {
			t.Errorf("%s: a local time fires twice: %v", z.zone, walls)
		}
	}
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestEverySlotsCountFromTheEpoch(t *testing.T) {
	s := mustParse(t, schedule.Fields{Every: "2h"})
	got := times(s.Upcoming(utc("2026-12-05T09:30:00Z"), 3))
	want := []string{"2026-12-05T10:00:00Z", "2026-12-05T12:00:00Z", "2026-12-05T14:00:00Z"}
	if !slices.Equal(got, want) {
		t.Errorf("every 2h after 09:30: %v, want %v", got, want)
	}
	// A slot is not after itself.
	if n := s.Next(utc("2026-12-05T10:00:00Z")); !n.Equal(utc("2026-12-05T12:00:00Z")) {
		t.Errorf("next after the 10:00 slot: %s", n)
	}
}

func TestEndStopsTheSlots(t *testing.T) {
	s := mustParse(t, schedule.Fields{Every: "1h", End: utc("2026-12-05T12:00:00Z")})
	got := times(s.Upcoming(utc("2026-12-05T09:30:00Z"), 10))
	want := []string{"2026-12-05T10:00:00Z", "2026-12-05T11:00:00Z", "2026-12-05T12:00:00Z"}
	if !slices.Equal(got, want) {
		t.Errorf("slots before the end: %v, want %v", got, want)
	}
}

func TestParseNamesTheField(t *testing.T) {
	cases := []struct {
		f     schedule.Fields
		field string
		msg   string
	}{
		{schedule.Fields{}, "cron", "required"},
		{schedule.Fields{Cron: "0 9 * * *", Every: "1h"}, "every", "not both"},
		{schedule.Fields{Cron: "0 9 * *"}, "cron", "five fields"},
		{schedule.Fields{Cron: "61 9 * * *"}, "cron", "61"},
		{schedule.Fields{Cron: "0 9 30 2 *"}, "cron", "never fires"},
		{schedule.Fields{Cron: "TZ=Asia/Tokyo 0 9 * * *"}, "cron", "time_zone"},
		{schedule.Fields{Cron: "@every 1h"}, "cron", "every"},
		{schedule.Fields{Cron: "0 9 * * *", TimeZone: "Mars/Olympus"}, "time_zone", "unknown time zone"},
		{schedule.Fields{Cron: "0 9 * * *", TimeZone: "Local"}, "time_zone", "IANA"},
		{schedule.Fields{Every: "1h", TimeZone: "Asia/Tokyo"}, "time_zone", "cron only"},
		{schedule.Fields{Every: "30s"}, "every", "minimum interval 1m0s"},
		{schedule.Fields{Every: "soon"}, "every", "not a duration"},
		{schedule.Fields{Every: "1h", Jitter: "1h"}, "jitter", "not shorter"},
		{schedule.Fields{Every: "1h", Jitter: "-1m"}, "jitter", "not a duration"},
		{schedule.Fields{Every: "1h", CatchUp: "0s"}, "catch_up", "positive"},
		{schedule.Fields{Every: "1h", Overlap: "queue"}, "overlap", "skip, buffer_one, allow, cancel_previous"},
	}
	for _, c := range cases {
		_, err := schedule.Parse(c.f, schedule.Limits{})
		var fe *schedule.FieldError
		if !errors.As(err, &fe) {
			t.Errorf("%+v: error %v, want a field error", c.f, err)
			continue
		}
		if fe.Field != c.field || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%+v: field %q error %q, want field %q mentioning %q", c.f, fe.Field, err, c.field, c.msg)
		}
	}
}

// A coordinator's lower minimum (for tests) lets second-scale intervals
// through.
func TestLowerMinimumInterval(t *testing.T) {
	if _, err := schedule.Parse(schedule.Fields{Every: "1s"}, schedule.Limits{MinEvery: time.Second}); err != nil {
		t.Fatalf("every 1s with a 1s minimum: %v", err)
	}
}

func TestDefaults(t *testing.T) {
	s := mustParse(t, schedule.Fields{Cron: "0 9 * * *"})
	if s.Policy != schedule.OverlapSkip || s.CatchUpIn != schedule.DefaultCatchUp || s.Zone != time.UTC {
		t.Errorf("defaults: overlap %q catch_up %s zone %s", s.Policy, s.CatchUpIn, s.Zone)
	}
}

// A coordinator down for three slots with catch_up 1h fires the latest
// once and records the two older ones as missed.
func TestPlanAfterAnOutage(t *testing.T) {
	s := mustParse(t, schedule.Fields{Every: "20m", CatchUp: "1h"})
	p := s.Plan(utc("2026-12-05T10:00:00Z"), utc("2026-12-05T10:45:00Z"))
	if !p.Fire.Equal(utc("2026-12-05T10:40:00Z")) {
		t.Errorf("fire %s, want the 10:40 slot", p.Fire)
	}
	if got := times(p.Missed); !slices.Equal(got, []string{"2026-12-05T10:00:00Z", "2026-12-05T10:20:00Z"}) {
		t.Errorf("missed %v", got)
	}
	if !p.Next.Equal(utc("2026-12-05T11:00:00Z")) || p.Folded.Count != 0 {
		t.Errorf("next %s folded %+v", p.Next, p.Folded)
	}
}

// A slot later than catch_up is missed too: nothing fires.
func TestPlanTooLate(t *testing.T) {
	s := mustParse(t, schedule.Fields{Every: "20m", CatchUp: "1m"})
	p := s.Plan(utc("2026-12-05T10:00:00Z"), utc("2026-12-05T10:45:00Z"))
	if !p.Fire.IsZero() || len(p.Missed) != 3 {
		t.Errorf("fire %s missed %v, want none fired and three missed", p.Fire, times(p.Missed))
	}
}

func TestPlanNothingDue(t *testing.T) {
	s := mustParse(t, schedule.Fields{Every: "20m"})
	next := utc("2026-12-05T11:00:00Z")
	p := s.Plan(next, utc("2026-12-05T10:45:00Z"))
	if !p.Fire.IsZero() || len(p.Missed) != 0 || !p.Next.Equal(next) {
		t.Errorf("plan before the next slot: %+v", p)
	}
}

// After a long outage the most recent missed slots are listed one by one
// and the older ones counted in one run, for intervals and cron alike.
func TestPlanFoldsALongOutage(t *testing.T) {
	for _, f := range []schedule.Fields{{Every: "1m", CatchUp: "1h"}, {Cron: "* * * * *", CatchUp: "1h"}} {
		s := mustParse(t, f)
		next := utc("2026-12-01T00:00:00Z")
		now := next.Add(1000*time.Minute + 30*time.Second)
		p := s.Plan(next, now)
		if !p.Fire.Equal(next.Add(1000 * time.Minute)) {
			t.Errorf("%+v: fire %s", f, p.Fire)
		}
		if len(p.Missed) != schedule.MaxMissedListed {
			t.Errorf("%+v: %d listed", f, len(p.Missed))
		}
		if got := p.Folded.Count + int64(len(p.Missed)) + 1; got != 1001 {
			t.Errorf("%+v: %d slots accounted for, want 1001", f, got)
		}
		if !p.Folded.First.Equal(next) || !p.Folded.Last.Add(time.Minute).Equal(p.Missed[0]) {
			t.Errorf("%+v: folded %+v, first listed %s", f, p.Folded, p.Missed[0])
		}
	}
}

func TestPlanEnded(t *testing.T) {
	s := mustParse(t, schedule.Fields{Every: "1h", End: utc("2026-12-05T10:00:00Z")})
	p := s.Plan(utc("2026-12-05T10:00:00Z"), utc("2026-12-05T10:00:30Z"))
	if !p.Fire.Equal(utc("2026-12-05T10:00:00Z")) || !p.Next.IsZero() {
		t.Errorf("last slot: fire %s next %s, want the 10:00 slot and no next", p.Fire, p.Next)
	}
}

// Forty jobs spread over the window: no two at one moment, the first and
// the last most of the window apart.
func TestOffsetsSpreadOverTheJitter(t *testing.T) {
	s := mustParse(t, schedule.Fields{Every: "1h", Jitter: "10m"})
	offs := s.Offsets(40)
	seen := map[time.Duration]bool{}
	for _, o := range offs {
		if o < 0 || o >= 10*time.Minute || seen[o] {
			t.Fatalf("offsets %v: %s out of the window or twice", offs, o)
		}
		seen[o] = true
	}
	if spread := slices.Max(offs) - slices.Min(offs); spread < 8*time.Minute {
		t.Errorf("spread %s, want at least 80%% of 10m", spread)
	}
	if offs := mustParse(t, schedule.Fields{Every: "1h"}).Offsets(3); slices.Max(offs) != 0 {
		t.Errorf("offsets without jitter: %v", offs)
	}
}
