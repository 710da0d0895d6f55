package schedule

import (
	"math/rand/v2"
	"time"
)

// A cron schedule is evaluated on wall times: the expression is matched
// against the clock reading of the schedule's time zone, computed as a
// UTC time with that reading (UTC has no clock changes), and each wall
// time it matches is then placed on the time line by the rule of
// docs/schedules.md, "Clock changes":
//
//   - a wall time the zone skips (spring forward: 02:30 on the day New
//     York goes from 02:00 to 03:00) fires once, at the first instant after
//     the gap (03:00 EDT); several skipped slots of one gap, and a slot at
//     the end of the gap, are that one slot;
//   - a wall time the zone repeats (fall back: 02:30 on the day Berlin
//     goes from 03:00 back to 02:00) fires once, at its first occurrence
//     (02:30 CEST), never again at 02:30 CET.
//
// The cron library is never asked about a time zone: left to itself it
// matches the wall times of both occurrences of a repeated hour.

// wall is t's clock reading in loc, as the UTC time with that reading.
func wall(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), time.UTC)
}

// offset is the zone offset of loc at instant t, in seconds.
func offset(t time.Time, loc *time.Location) int {
	_, off := t.In(loc).Zone()
	return off
}

// instant places the wall time w of loc on the time line: its first
// occurrence, or, when loc skips it, the first instant after the gap.
func instant(w time.Time, loc *time.Location) time.Time {
	t := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), loc)
	// The offsets in effect around t: its own and those of the periods
	// before and after it.
	offs := []int{offset(t, loc)}
	start, end := t.In(loc).ZoneBounds()
	if !start.IsZero() {
		offs = append(offs, offset(start.Add(-time.Nanosecond), loc))
	}
	if !end.IsZero() {
		offs = append(offs, offset(end, loc))
	}
	var best time.Time
	for _, o := range offs {
		c := w.Add(-time.Duration(o) * time.Second)
		if wall(c, loc).Equal(w) && (best.IsZero() || c.Before(best)) {
			best = c
		}
	}
	if !best.IsZero() {
		return best
	}
	// w lies in a gap: the instant the clock jumps over it.
	for _, o := range offs {
		c := w.Add(-time.Duration(o) * time.Second)
		s, _ := c.In(loc).ZoneBounds()
		if !s.IsZero() && wall(s, loc).After(w) && wall(s.Add(-time.Nanosecond), loc).Before(w) {
			return s.UTC()
		}
	}
	return t.UTC() // not reached with the zones Go knows
}

// nextWall is the first wall time after w the cron expression matches,
// zero when there is none within the library's search range.
func (s Spec) nextWall(w time.Time) time.Time { return s.cron.Next(w) }

// lookBack is how far before an instant the wall times are searched for
// slots that fall after it: further than any clock change goes back.
const lookBack = 3 * time.Hour

// Next returns the first slot strictly after a, in UTC; zero when the
// schedule has none (past its end, or a cron expression that no date
// matches any more).
func (s Spec) Next(a time.Time) time.Time {
	var n time.Time
	if s.Interval > 0 {
		iv := s.Interval.Nanoseconds()
		k := a.UnixNano() / iv
		if a.UnixNano() < 0 && a.UnixNano()%iv != 0 {
			k--
		}
		n = time.Unix(0, (k+1)*iv).UTC()
	} else {
		n = s.nextCron(a)
	}
	if n.IsZero() || !s.End.IsZero() && n.After(s.End) {
		return time.Time{}
	}
	return n
}

func (s Spec) nextCron(a time.Time) time.Time {
	from := a
	if start, _ := a.In(s.Zone).ZoneBounds(); !start.IsZero() && a.Sub(start) < lookBack {
		// Just after a clock change that went back, wall times before a's
		// reading can still lie after a.
		from = a.Add(-lookBack)
	}
	w := wall(from, s.Zone)
	for range 100000 {
		if w = s.nextWall(w); w.IsZero() {
			return time.Time{}
		}
		if t := instant(w, s.Zone); t.After(a) {
			return t
		}
	}
	return time.Time{}
}

// Upcoming lists the next n slots after a.
func (s Spec) Upcoming(a time.Time, n int) []time.Time {
	var out []time.Time
	for len(out) < n {
		if a = s.Next(a); a.IsZero() {
			break
		}
		out = append(out, a)
	}
	return out
}

// MaxMissedListed is how many missed slots an evaluation records one by
// one, the most recent ones; older ones are recorded as one run.
const MaxMissedListed = 100

// Run is a stretch of missed slots recorded as one: Count slots from
// First to Last.
type Run struct {
	Count int64
	First time.Time
	Last  time.Time
}

// Plan is what an evaluation at now does with the slots from next (the
// first slot not handled yet) up to now.
type Plan struct {
	// Fire is the slot to fire, zero when none: the latest slot due, when
	// it is no more than catch_up late.
	Fire time.Time
	// Missed are the older due slots (and the latest when too late),
	// oldest first, at most MaxMissedListed; Folded the earlier ones.
	Missed []time.Time
	Folded Run
	// Next is the first slot after now; zero when the schedule has ended.
	Next time.Time
}

// Due returns every slot from next to now, the most recent
// MaxMissedListed+1 of them one by one and the earlier ones as a Run.
func (s Spec) due(next, now time.Time) (listed []time.Time, folded Run) {
	if next.IsZero() || next.After(now) {
		return nil, Run{}
	}
	if s.Interval > 0 {
		// Slots are next + k·every: count them instead of listing.
		n := int64(now.Sub(next)/s.Interval) + 1
		if !s.End.IsZero() && s.End.Before(now) {
			if s.End.Before(next) {
				return nil, Run{}
			}
			n = int64(s.End.Sub(next)/s.Interval) + 1
		}
		keep := min(n, MaxMissedListed+1)
		if n > keep {
			folded = Run{Count: n - keep, First: next, Last: next.Add(time.Duration(n-keep-1) * s.Interval)}
		}
		for k := n - keep; k < n; k++ {
			listed = append(listed, next.Add(time.Duration(k)*s.Interval))
		}
		return listed, folded
	}
	for t := next; !t.IsZero() && !t.After(now); t = s.Next(t) {
		listed = append(listed, t)
		if len(listed) > MaxMissedListed+1 {
			if folded.Count == 0 {
				folded.First = listed[0]
			}
			folded.Count++
			folded.Last = listed[0]
			listed = listed[1:]
		}
	}
	return listed, folded
}

// Plan decides what an evaluation at now does: the slots due since next
// are the latest, fired when it is at most catch_up late, and the older
// ones, recorded as missed.
func (s Spec) Plan(next, now time.Time) Plan {
	listed, folded := s.due(next, now)
	p := Plan{Folded: folded, Next: s.Next(now)}
	if len(listed) == 0 {
		if next.After(now) {
			p.Next = next
		}
		return p
	}
	last := listed[len(listed)-1]
	if now.Sub(last) <= s.CatchUpIn {
		p.Fire = last
		listed = listed[:len(listed)-1]
	}
	p.Missed = listed
	return p
}

// Offsets spreads n jobs of one slot over the jitter window: the i-th
// job's delay after the slot. The jobs take the window's n equal parts
// in a random order, each at the same random point of its part, so the
// first and the last are (n-1)/n of the window apart and no two share a
// moment. All zero without jitter.
func (s Spec) Offsets(n int) []time.Duration {
	out := make([]time.Duration, n)
	if s.JitterFor <= 0 || n == 0 {
		return out
	}
	u := rand.Float64()
	for i, p := range rand.Perm(n) {
		out[i] = time.Duration((float64(p) + u) / float64(n) * float64(s.JitterFor))
	}
	return out
}
