package jobstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// ObservationStore is implemented by stores that keep the observations a
// result carries (docs/dataset.md): the values the extract steps of a job
// read off the phone's screen, stored by the transaction that accepts the
// result, and kept labelled as refused when the result is refused.
//
// A Store that wraps another hides it; the Server then refuses results that
// carry observations (503) rather than accept them without.
type ObservationStore interface {
	// CommitObserved accepts a result like Commit, and like CommitOutbox
	// when c.OutboxKey is set, and returns its manifest like
	// CommitManifest. The observations are written in the same
	// transaction, linked to the write_events row of the attempt:
	//
	//   - accepted: every observation, Accepted true, AcceptedAt the
	//     database clock of the write event;
	//   - refused (fencing.ErrStale): the observations are kept with
	//     Accepted false, while the job holds fewer than
	//     MaxRefusedObservations refused rows (a result that would pass it
	//     keeps none); the error is the refusal, as Commit's;
	//   - unknown job (ErrNotFound): only the write event is recorded.
	//
	// An observation is stored once per token and position in the
	// result: a result sent again under the same token (its reply was
	// lost) adds no rows. c.Observations are checked with
	// CheckObservations before anything is written; an invalid one is an
	// error wrapping ErrInvalidObservation and writes nothing, not even
	// the write event.
	CommitObserved(ctx context.Context, tok fencing.Token, c ObservedResult) ([]string, error)
	// RecordObservations records observations read under tok outside any
	// result: the values an AI session reads off its phone
	// (docs/sessions.md, record_observation). In one transaction it
	// applies the fence of Renew — tok is the job's current token, the
	// job IN_PROGRESS and its lease not expired on the database clock —
	// records the attempt in write_events (verb VerbObserve) and writes
	// the observations linked to that row:
	//
	//   - accepted: every observation, Accepted true, AcceptedAt the
	//     database clock of the write event;
	//   - refused (fencing.ErrStale: the lease moved, expired or ended,
	//     or a token that never held the job): the observations are kept
	//     with Accepted false under the bound of CommitObserved
	//     (MaxRefusedObservations per job); the error is the refusal, as
	//     Renew's;
	//   - unknown job (ErrNotFound): only the write event is recorded.
	//
	// Each call adds rows: a token's recorded observations take the
	// positions from RecordedPosition up, after those it recorded
	// before, so that they never meet the positions of its result. A
	// token records at most MaxRecordedObservations: an accepted call
	// that would pass it writes nothing and is an error wrapping
	// ErrObservationLimit. obs (1 to protocol.MaxObservations) are
	// checked with CheckObservations before anything is written; an
	// invalid one is an error wrapping ErrInvalidObservation and writes
	// nothing, not even the write event.
	RecordObservations(ctx context.Context, tok fencing.Token, obs []protocol.Observation) error
	// ListObservations lists the observations of f.Project that f selects,
	// by id ascending (descending with f.Desc), at most f.Limit (1 to
	// MaxObservationPage).
	ListObservations(ctx context.Context, f ObservationFilter) ([]ObservationRow, error)
}

// ObservedResult is a result with its observations.
type ObservedResult struct {
	Result       json.RawMessage
	Observations []protocol.Observation
	// OutboxKey, when set, writes the outbox message that publishes the
	// accepted result in the same transaction (CommitOutbox).
	OutboxKey string
}

// ObservationRow is one stored observation: a row of the dataset
// (docs/dataset.md, in its column order).
type ObservationRow struct {
	ID             int64 // monotonic; the cursor of a listing
	Project        string
	JobID          string
	Generation     int64
	Owner          string // the token's owner, <agent_id>/<boot_id>
	AgentID        string
	PhoneSerial    string // the phone the job's grant named (or its selector pinned); "" unknown
	PhoneModel     string // from the agent's last report of that phone; "" unknown
	PhoneSDK       int    // likewise; 0 unknown
	PhonePlatform  string // android or ios, from the agent's last report (none: android), else the selector's; "" unknown
	PhoneOSVersion string // the Android version, or an iPhone's iOS version, from the agent's last report; "" unknown
	Step           int
	Name           string
	Raw            string
	Value          string
	Parse          string
	Currency       string
	Tax            string
	Bounds         [4]int
	Selector       string
	AppPackage     string
	AppVersion     string // version name
	AppCode        int64  // version code; 0 unknown
	Locale         string
	TimeZone       string
	ObservedAt     time.Time // the PC's clock, as the agent sent it, to the millisecond; zero unknown
	AcceptedAt     time.Time // the database clock of the write event
	Evidence       []ObservationEvidence
	Accepted       bool  // false: the result was refused (a stale holder)
	WriteEvent     int64 // the write_events row of the attempt
}

// ObservationEvidence is one artifact that proves an observation: its
// name, the object key the token's generation stores it under
// (fencing.Token.ObjectKey) and its sha256 as the agent reported it.
type ObservationEvidence struct {
	Name   string `json:"name"`
	Key    string `json:"key"`
	SHA256 string `json:"sha256"`
}

// ObservationFilter selects observations of one project. Empty fields
// select everything.
type ObservationFilter struct {
	Project string // required
	Name    string
	JobID   string
	Phone   string // phone serial
	App     string // app package
	// Since and Until bound AcceptedAt: Since ≤ accepted_at < Until.
	Since, Until time.Time
	// All lists the refused rows too; without it only accepted ones.
	All bool
	// After is the cursor: rows with an id above it.
	After int64
	// Before, above zero, selects rows with an id below it: the cursor of
	// a listing newest first (Desc).
	Before int64
	// Desc lists by id descending: the newest rows first.
	Desc bool
	// Limit is 1 to MaxObservationPage.
	Limit int
}

// Bounds of the observations a store keeps.
const (
	// MaxObservationPage bounds one ListObservations call.
	MaxObservationPage = 5000
	// MaxRefusedObservations bounds the refused rows one job keeps: a
	// stale holder's observations beyond it are not stored (its write
	// event still is).
	MaxRefusedObservations = 4 * protocol.MaxObservations
	// MaxObservationText bounds the selector and every short string of an
	// observation other than raw and value (protocol.MaxObservedBytes).
	MaxObservationText = 1024
	// MaxObservationShort bounds the locale, time zone and app version
	// name (parse and tax are bounded to 16 bytes, currency to 8, before
	// their values are checked).
	MaxObservationShort = 128
	// MaxBound is the largest coordinate of an element's bounds, in
	// pixels, either side of zero.
	MaxBound = 1 << 20
	// RecordedPosition is the position of the first observation a token
	// records with RecordObservations: a result's observations take the
	// positions below it (0 to protocol.MaxObservations-1).
	RecordedPosition = protocol.MaxObservations
	// MaxRecordedObservations bounds the observations one token records
	// with RecordObservations (an AI session, ten full results).
	MaxRecordedObservations = 10 * protocol.MaxObservations
)

// ErrInvalidObservation marks an observation CheckObservations refused.
var ErrInvalidObservation = errors.New("invalid observation")

// ErrObservationLimit: the token recorded MaxRecordedObservations
// observations already; nothing more is recorded under it.
var ErrObservationLimit = errors.New("the token recorded the most observations one token may")

// CheckRecorded checks the observations of one RecordObservations call
// before anything is stored: at least one, then CheckObservations.
func CheckRecorded(obs []protocol.Observation) error {
	if len(obs) == 0 {
		return fmt.Errorf("%w: observations: none to record", ErrInvalidObservation)
	}
	return CheckObservations(obs)
}

// ValidAppPackage reports whether p is an app package an observation may
// name ([A-Za-z0-9_.], 1 to 255), as CheckObservations requires.
func ValidAppPackage(p string) bool { return packageRE.MatchString(p) }

var (
	packageRE = regexp.MustCompile(`^[A-Za-z0-9_.]{1,255}$`)
	sha256RE  = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// CheckObservations checks the observations of one result as hostile
// input, before anything is stored: at most protocol.MaxObservations,
// each valid (protocol.Observation.Validate), every string bounded, UTF-8
// and free of NUL, a step number and bounds in range, evidence names that
// are artifact names with a sha256 of 64 lowercase hex digits, an app
// package of [A-Za-z0-9_.], an observed_at within years 1970 to 9999 (or
// unset). Sizes are checked before any other rule, so that an error never
// quotes a long input. The error wraps ErrInvalidObservation and names
// the field: "observations[3].raw: 5000 bytes, at most 4096".
func CheckObservations(obs []protocol.Observation) error {
	if len(obs) > protocol.MaxObservations {
		return fmt.Errorf("%w: observations: %d, at most %d", ErrInvalidObservation, len(obs), protocol.MaxObservations)
	}
	for i, o := range obs {
		if err := checkObservation(o); err != nil {
			return fmt.Errorf("%w: observations[%d].%v", ErrInvalidObservation, i, err)
		}
	}
	return nil
}

func checkObservation(o protocol.Observation) error {
	type field struct {
		name string
		v    string
		max  int
	}
	fields := []field{
		{"name", o.Name, 64},
		{"raw", o.Raw, protocol.MaxObservedBytes},
		{"value", o.Value, protocol.MaxObservedBytes},
		{"parse", o.Parse, 16},
		{"currency", o.Currency, 8},
		{"tax", o.Tax, 16},
		{"selector", o.Selector, MaxObservationText},
		{"locale", o.Locale, MaxObservationShort},
		{"time_zone", o.TimeZone, MaxObservationShort},
	}
	if o.App != nil {
		fields = append(fields, field{"app.package", o.App.Package, 255}, field{"app.version_name", o.App.VersionName, MaxObservationShort})
	}
	for i, e := range o.Evidence {
		if i >= 8 {
			break // Validate refuses more
		}
		fields = append(fields, field{fmt.Sprintf("evidence[%d].name", i), e.Name, 200}, field{fmt.Sprintf("evidence[%d].sha256", i), e.SHA256, 64})
	}
	for _, f := range fields {
		if len(f.v) > f.max {
			return fmt.Errorf("%s: %d bytes, at most %d", f.name, len(f.v), f.max)
		}
		if !utf8.ValidString(f.v) {
			return fmt.Errorf("%s: not UTF-8", f.name)
		}
		if strings.IndexByte(f.v, 0) >= 0 {
			return fmt.Errorf("%s: holds a NUL byte", f.name)
		}
	}
	if err := o.Validate(); err != nil {
		return err
	}
	if o.Step < 0 || o.Step > 1<<20 {
		return fmt.Errorf("step: %d is out of range 0..%d", o.Step, 1<<20)
	}
	for i, b := range o.Bounds {
		if b < -MaxBound || b > MaxBound {
			return fmt.Errorf("bounds[%d]: %d is out of range ±%d", i, b, MaxBound)
		}
	}
	if !o.ObservedAt.IsZero() && (o.ObservedAt.Year() < 1970 || o.ObservedAt.Year() > 9999) {
		return fmt.Errorf("observed_at: year %d is out of range 1970..9999", o.ObservedAt.Year())
	}
	if o.App != nil {
		if !packageRE.MatchString(o.App.Package) {
			return fmt.Errorf("app.package: not an app package ([A-Za-z0-9_.], 1 to 255)")
		}
		if o.App.VersionCode < 0 {
			return fmt.Errorf("app.version_code: %d is negative", o.App.VersionCode)
		}
	}
	for i, e := range o.Evidence {
		if err := protocol.ValidateArtifactName(e.Name); err != nil {
			return fmt.Errorf("evidence[%d].name: %v", i, err)
		}
		if !sha256RE.MatchString(e.SHA256) {
			return fmt.Errorf("evidence[%d].sha256: want 64 lowercase hex digits", i)
		}
	}
	return nil
}

// ObservationRecord is an observation as a store writes it: the row's
// fields that come from the agent, with the evidence's object keys made
// from the token. Stores marshal a result's records to one JSON array
// (ObservationRecords) and insert its elements.
type ObservationRecord struct {
	Position   int                   `json:"position"` // index in the result
	Step       int                   `json:"step"`
	Name       string                `json:"name"`
	Raw        string                `json:"raw"`
	Value      string                `json:"value"`
	Parse      string                `json:"parse"`
	Currency   string                `json:"currency"`
	Tax        string                `json:"tax"`
	Bounds     string                `json:"bounds"` // "[l,t,r,b]"
	Selector   string                `json:"selector"`
	AppPackage string                `json:"app_package"`
	AppVersion string                `json:"app_version"`
	AppCode    int64                 `json:"app_version_code"`
	Locale     string                `json:"locale"`
	TimeZone   string                `json:"time_zone"`
	ObservedAt *time.Time            `json:"observed_at"` // UTC, whole milliseconds; nil unknown
	Evidence   []ObservationEvidence `json:"evidence"`
}

// ObservationRecords returns the records of obs under tok, in order.
func ObservationRecords(tok fencing.Token, obs []protocol.Observation) []ObservationRecord {
	out := make([]ObservationRecord, len(obs))
	for i, o := range obs {
		r := ObservationRecord{
			Position: i, Step: o.Step, Name: o.Name, Raw: o.Raw, Value: o.Value, Parse: o.Parse,
			Currency: o.Currency, Tax: o.Tax, Bounds: FormatBounds(o.Bounds), Selector: o.Selector,
			Locale: o.Locale, TimeZone: o.TimeZone, Evidence: make([]ObservationEvidence, 0, len(o.Evidence)),
		}
		if o.App != nil {
			r.AppPackage, r.AppVersion, r.AppCode = o.App.Package, o.App.VersionName, o.App.VersionCode
		}
		if !o.ObservedAt.IsZero() {
			t := o.ObservedAt.UTC().Truncate(time.Millisecond)
			r.ObservedAt = &t
		}
		for _, e := range o.Evidence {
			r.Evidence = append(r.Evidence, ObservationEvidence{Name: e.Name, Key: tok.ObjectKey(e.Name), SHA256: e.SHA256})
		}
		out[i] = r
	}
	return out
}

// FormatBounds is bounds as stored and exported: "[l,t,r,b]".
func FormatBounds(b [4]int) string {
	return fmt.Sprintf("[%d,%d,%d,%d]", b[0], b[1], b[2], b[3])
}

// ParseBounds reads FormatBounds (it runs for every row a listing reads).
func ParseBounds(s string) ([4]int, error) {
	var b [4]int
	rest, ok := strings.CutPrefix(s, "[")
	rest, ok2 := strings.CutSuffix(rest, "]")
	if !ok || !ok2 {
		return b, fmt.Errorf("parse bounds %q: not [l,t,r,b]", s)
	}
	for i := range b {
		var f string
		if i < 3 {
			var found bool
			if f, rest, found = strings.Cut(rest, ","); !found {
				return b, fmt.Errorf("parse bounds %q: not [l,t,r,b]", s)
			}
		} else {
			f = rest
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			return b, fmt.Errorf("parse bounds %q: %w", s, err)
		}
		b[i] = n
	}
	return b, nil
}

// CheckObservationFilter checks a filter before a store reads with it.
func CheckObservationFilter(f ObservationFilter) error {
	if err := CheckProject(f.Project); err != nil {
		return fmt.Errorf("project: %w", err)
	}
	if f.Limit < 1 || f.Limit > MaxObservationPage {
		return fmt.Errorf("limit: %d is out of range 1..%d", f.Limit, MaxObservationPage)
	}
	if f.After < 0 {
		return fmt.Errorf("after: %d is negative", f.After)
	}
	if f.Before < 0 {
		return fmt.Errorf("before: %d is negative", f.Before)
	}
	return nil
}
