package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"

	cron "github.com/netresearch/go-cron"
)

// Fields are the timing keys of a schedule file (docs/schedules.md): when
// a schedule fires and what it does about late and overlapping slots. The
// job it fires is the file's job key, checked by the API package.
type Fields struct {
	// Cron is a five-field cron expression (minute hour day-of-month month
	// day-of-week) or a descriptor such as @daily, read in TimeZone.
	Cron string `json:"cron,omitempty"`
	// TimeZone is the IANA time zone of Cron; default UTC.
	TimeZone string `json:"time_zone,omitempty"`
	// Every is a fixed interval (a Go duration such as 2h), the slots
	// being its multiples since the Unix epoch. Exactly one of Cron and
	// Every is given.
	Every string `json:"every,omitempty"`
	// Jitter spreads the jobs of a slot over this window after it.
	Jitter string `json:"jitter,omitempty"`
	// Overlap is what a slot does while jobs of an earlier slot are still
	// queued or running: skip (default), buffer_one, allow,
	// cancel_previous.
	Overlap string `json:"overlap,omitempty"`
	// CatchUp is how late a slot may still fire: after an outage the most
	// recent slot within it fires once, older ones are recorded as missed.
	// Default DefaultCatchUp.
	CatchUp string `json:"catch_up,omitempty"`
	// End is when the schedule stops: no slot after it fires.
	End time.Time `json:"end,omitzero"`
}

// Overlap policies.
const (
	OverlapSkip           = "skip"
	OverlapBufferOne      = "buffer_one"
	OverlapAllow          = "allow"
	OverlapCancelPrevious = "cancel_previous"
)

// Overlaps lists the overlap policies, the default first.
var Overlaps = []string{OverlapSkip, OverlapBufferOne, OverlapAllow, OverlapCancelPrevious}

// Limits of a schedule's timing.
const (
	// DefaultMinEvery is the shortest interval accepted (every, and the
	// gap between two cron slots is at least a minute anyway). A
	// coordinator's schedules.min_every can lower it for tests, down to
	// MinEveryFloor.
	DefaultMinEvery = time.Minute
	// MinEveryFloor is the lowest min_every a coordinator accepts.
	MinEveryFloor = time.Second
	// MaxEvery is the longest interval accepted.
	MaxEvery = 366 * 24 * time.Hour
	// DefaultCatchUp is the catch_up of a schedule without one.
	DefaultCatchUp = 5 * time.Minute
	// MaxCatchUp is the longest catch_up accepted.
	MaxCatchUp = 366 * 24 * time.Hour
	// MaxJitter is the longest jitter accepted.
	MaxJitter = 24 * time.Hour
	// MaxCronLen bounds the cron expression.
	MaxCronLen = 200
)

// Limits are the coordinator's bounds on schedules.
type Limits struct {
	// MinEvery is the shortest every accepted; 0 means DefaultMinEvery.
	MinEvery time.Duration
}

func (l Limits) minEvery() time.Duration {
	if l.MinEvery <= 0 {
		return DefaultMinEvery
	}
	return l.MinEvery
}

// FieldError is a schedule that cannot be accepted: Field names the key
// at fault ("cron", "time_zone", "every").
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Err: fmt.Errorf(format, args...)}
}

// Spec is a checked schedule timing: Parse's result.
type Spec struct {
	Fields
	Zone      *time.Location
	Interval  time.Duration // Every; 0 for a cron schedule
	JitterFor time.Duration
	CatchUpIn time.Duration
	Policy    string // the overlap policy, default applied

	cron *cron.SpecSchedule // the expression, evaluated on wall times in UTC (slots.go)
}

// cronParser reads the five standard fields and the descriptors, with the
// classic rule that a day matches when its day of month or its day of
// week does (when both are restricted).
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor | cron.DowOrDom)

// Parse checks f against lim: exactly one of cron and every, a cron
// expression that parses and fires at least once, a known time zone, an
// interval between lim's minimum and MaxEvery, a known overlap policy,
// and jitter and catch_up within their bounds. Errors are *FieldError.
func Parse(f Fields, lim Limits) (Spec, error) {
	s := Spec{Fields: f, Zone: time.UTC, CatchUpIn: DefaultCatchUp, Policy: OverlapSkip}
	f.Cron = strings.TrimSpace(f.Cron)
	s.Cron = f.Cron
	switch {
	case f.Cron == "" && f.Every == "":
		return Spec{}, fieldErr("cron", "one of cron (with time_zone) or every is required")
	case f.Cron != "" && f.Every != "":
		return Spec{}, fieldErr("every", "give cron or every, not both")
	}
	if f.TimeZone != "" {
		if f.Every != "" {
			return Spec{}, fieldErr("time_zone", "applies to cron only: every counts from the Unix epoch")
		}
		if len(f.TimeZone) > 64 || strings.HasPrefix(f.TimeZone, "/") || strings.Contains(f.TimeZone, "..") || strings.EqualFold(f.TimeZone, "local") {
			return Spec{}, fieldErr("time_zone", "%q is not an IANA time zone name such as Asia/Tokyo", trim(f.TimeZone))
		}
		loc, err := time.LoadLocation(f.TimeZone)
		if err != nil {
			return Spec{}, fieldErr("time_zone", "unknown time zone %q: want an IANA name such as Asia/Tokyo or Europe/Berlin", f.TimeZone)
		}
		s.Zone = loc
	}
	if f.Cron != "" {
		c, err := parseCron(f.Cron)
		if err != nil {
			return Spec{}, &FieldError{Field: "cron", Err: err}
		}
		s.cron = c
		if s.nextWall(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() && s.nextWall(time.Now().UTC()).IsZero() {
			return Spec{}, fieldErr("cron", "%q never fires", f.Cron)
		}
	}
	if f.Every != "" {
		d, err := time.ParseDuration(f.Every)
		switch {
		case err != nil:
			return Spec{}, fieldErr("every", "%q is not a duration such as 2h or 30m", trim(f.Every))
		case d < lim.minEvery():
			return Spec{}, fieldErr("every", "%s is shorter than the minimum interval %s", d, lim.minEvery())
		case d > MaxEvery:
			return Spec{}, fieldErr("every", "%s is longer than %s", d, MaxEvery)
		case d%time.Second != 0:
			return Spec{}, fieldErr("every", "%s is not a whole number of seconds", d)
		}
		s.Interval = d
	}
	if f.Jitter != "" {
		d, err := time.ParseDuration(f.Jitter)
		switch {
		case err != nil || d < 0:
			return Spec{}, fieldErr("jitter", "%q is not a duration such as 10m", trim(f.Jitter))
		case d > MaxJitter:
			return Spec{}, fieldErr("jitter", "%s is longer than %s", d, MaxJitter)
		case s.Interval > 0 && d >= s.Interval:
			return Spec{}, fieldErr("jitter", "%s is not shorter than every (%s): a slot's jobs would start after the next slot", d, s.Interval)
		}
		s.JitterFor = d
	}
	if f.CatchUp != "" {
		d, err := time.ParseDuration(f.CatchUp)
		switch {
		case err != nil || d <= 0:
			return Spec{}, fieldErr("catch_up", "%q is not a positive duration such as 1h", trim(f.CatchUp))
		case d > MaxCatchUp:
			return Spec{}, fieldErr("catch_up", "%s is longer than %s", d, MaxCatchUp)
		}
		s.CatchUpIn = d
	}
	if f.Overlap != "" {
		known := false
		for _, o := range Overlaps {
			known = known || f.Overlap == o
		}
		if !known {
			return Spec{}, fieldErr("overlap", "%q: want one of %s", trim(f.Overlap), strings.Join(Overlaps, ", "))
		}
		s.Policy = f.Overlap
	}
	if !f.End.IsZero() {
		s.End = f.End.UTC()
	}
	return s, nil
}

// parseCron parses a cron expression: five fields or a descriptor, the
// time zone being its own key.
func parseCron(expr string) (*cron.SpecSchedule, error) {
	if len(expr) > MaxCronLen {
		return nil, fmt.Errorf("longer than %d characters", MaxCronLen)
	}
	up := strings.ToUpper(expr)
	if strings.HasPrefix(up, "TZ=") || strings.HasPrefix(up, "CRON_TZ=") {
		return nil, errors.New("give the time zone in time_zone, not as a TZ= prefix")
	}
	if strings.HasPrefix(expr, "@every") {
		return nil, errors.New("@every is not a cron slot: use the every key (every: 2h)")
	}
	if !strings.HasPrefix(expr, "@") && len(strings.Fields(expr)) != 5 {
		return nil, fmt.Errorf("%q: want five fields (minute hour day-of-month month day-of-week), such as \"0 9 * * *\"", expr)
	}
	sch, err := cronParser.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("%q: %v", expr, err)
	}
	c, ok := sch.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("%q is not a cron expression", expr)
	}
	c.Location = time.UTC // matched against wall times (slots.go)
	return c, nil
}

// trim shortens a value quoted in an error.
func trim(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
