package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/internal/redact"
	"github.com/edgeagent/edgeagent/observe"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/uitree"
)

// OpRecordObservation is the session step that records a value the caller
// read off the phone's screen as an observation of the dataset
// (docs/sessions.md, "Recording observations"). The coordinator runs it:
// it is never sent to the agent and is not in the operation log.
const OpRecordObservation = "record_observation"

// Step is one step of a session: a step of a job file (protocol.Step), run
// on the phone, or a record_observation, run by the coordinator, which
// takes Name, Parse, Currency and Tax of protocol.Step and the fields
// below.
type Step struct {
	protocol.Step
	// Raw is the text exactly as the screen shows it, as the caller read
	// it.
	Raw string `json:"raw,omitempty"`
	// ElementIndex is the index of the element the value was read from,
	// among the elements of the session's latest UI dump (uitree's list,
	// the one MCP list_elements shows): its bounds and app are recorded.
	ElementIndex *int `json:"element_index,omitempty"`
	// Bounds are left, top, right, bottom in pixels of where the value
	// was read, when no element is named.
	Bounds *[4]int `json:"bounds,omitempty"`
}

// Recorded is what a record_observation recorded (StepResult.Observation).
type Recorded struct {
	// Step is the seq of the session's last step when it was recorded:
	// the row's step.
	Step     int    `json:"step"`
	Name     string `json:"name"`
	Raw      string `json:"raw"`
	Value    string `json:"value"`
	Parse    string `json:"parse"`
	Currency string `json:"currency,omitempty"`
	Tax      string `json:"tax,omitempty"`
	Bounds   [4]int `json:"bounds"`
	// AppPackage is the app of the element named, "" without one.
	AppPackage string `json:"app_package,omitempty"`
	// Evidence is the session's latest screenshot and UI dump, as
	// registered under its token.
	Evidence []jobstore.ObservationEvidence `json:"evidence"`
}

// ErrRefused wraps the error of a record_observation the store refused
// under the session's token (its lease moved, expired or ended): the
// attempt is a refused write in write_events, the session is found lost or
// ended, and the error also wraps its *LostError or *EndedError.
var ErrRefused = errors.New("the store refused the observation under the session's token (recorded as a refused write)")

// ErrNoObservations answers a record_observation on a coordinator whose
// store keeps no observations.
var ErrNoObservations = errors.New("this coordinator's store does not keep observations")

// ObservationRecorder is what record_observation needs of the store
// (jobstore.ObservationStore has it); a store without it answers
// ErrNoObservations.
type ObservationRecorder interface {
	RecordObservations(ctx context.Context, tok fencing.Token, obs []protocol.Observation) error
}

var (
	observationNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]{0,63}$`)
	currencyRE        = regexp.MustCompile(`^[A-Z]{3}$`)
)

// checkObservationStep checks a record_observation as hostile input,
// sizes before anything else, and reads its raw as its parse says
// (observe.Read): the value recorded, or an *InputError naming the field.
func checkObservationStep(field string, st Step) (observe.Value, error) {
	for _, f := range []struct {
		name, v string
		max     int
	}{
		{"name", st.Name, 64}, {"raw", st.Raw, protocol.MaxObservedBytes},
		{"parse", st.Parse, 16}, {"currency", st.Currency, 8}, {"tax", st.Tax, 16},
	} {
		switch {
		case len(f.v) > f.max:
			return observe.Value{}, inputErr(field+"."+f.name, "%d bytes, at most %d", len(f.v), f.max)
		case !utf8.ValidString(f.v):
			return observe.Value{}, inputErr(field+"."+f.name, "not UTF-8")
		case strings.IndexByte(f.v, 0) >= 0:
			return observe.Value{}, inputErr(field+"."+f.name, "holds a NUL byte")
		}
	}
	rest := st.Step
	rest.Op, rest.Name, rest.Parse, rest.Currency, rest.Tax = "", "", "", "", ""
	switch {
	case rest.Element != nil:
		return observe.Value{}, inputErr(field+".element", "%s names its element by element_index (an index of the latest UI dump's elements) or gives bounds, not by a selector", OpRecordObservation)
	case rest != protocol.Step{}:
		return observe.Value{}, inputErr(field, "%s takes name, raw, element_index or bounds, parse, currency and tax only", OpRecordObservation)
	case !observationNameRE.MatchString(st.Name):
		return observe.Value{}, inputErr(field+".name", "the observation's name is required: a letter, then up to 63 letters, digits, _ . or -")
	case st.Raw == "":
		return observe.Value{}, inputErr(field+".raw", "required: the text exactly as the screen shows it")
	case st.ElementIndex != nil && st.Bounds != nil:
		return observe.Value{}, inputErr(field+".element_index", "give element_index or bounds, not both")
	case st.ElementIndex != nil && (*st.ElementIndex < 0 || *st.ElementIndex >= uitree.MaxElements):
		return observe.Value{}, inputErr(field+".element_index", "%d is out of range 0 to %d", *st.ElementIndex, uitree.MaxElements-1)
	}
	if st.Bounds != nil {
		for i, b := range st.Bounds {
			if b < -jobstore.MaxBound || b > jobstore.MaxBound {
				return observe.Value{}, inputErr(fmt.Sprintf("%s.bounds[%d]", field, i), "%d is out of range ±%d", b, jobstore.MaxBound)
			}
		}
	}
	parse := st.Parse
	if parse == "" {
		parse = protocol.ParseText
	}
	switch {
	case parse != protocol.ParseText && parse != protocol.ParseNumber && parse != protocol.ParsePrice:
		return observe.Value{}, inputErr(field+".parse", "%q is not one of text, number, price", parse)
	case (st.Currency != "" || st.Tax != "") && parse != protocol.ParsePrice:
		return observe.Value{}, inputErr(field+".currency", "currency and tax are for parse price")
	case st.Currency != "" && !currencyRE.MatchString(st.Currency):
		return observe.Value{}, inputErr(field+".currency", "%q is not an ISO 4217 code (three capital letters, such as JPY)", st.Currency)
	case st.Tax != "" && st.Tax != protocol.TaxIncluded && st.Tax != protocol.TaxExcluded:
		return observe.Value{}, inputErr(field+".tax", "%q is not one of included, excluded", st.Tax)
	}
	v, err := observe.Read(st.Raw, observe.Options{Parse: parse, Currency: st.Currency, Tax: st.Tax})
	if err != nil {
		return observe.Value{}, inputErr(field+".raw", "%v", err)
	}
	return v, nil
}

// record runs a record_observation on session s (its turn held): the
// value read from Raw, the session's latest screenshot and UI dump as
// evidence, the element's bounds and app when one is named, stored with
// RecordObservations under the session's token.
func (m *Manager) record(ctx context.Context, s *session, field string, st Step) (StepResult, error) {
	start := time.Now()
	rec, ok := m.store.(ObservationRecorder)
	if !ok {
		return StepResult{}, ErrNoObservations
	}
	v, err := checkObservationStep(field, st)
	if err != nil {
		return StepResult{}, err
	}
	arts, err := m.store.Artifacts(ctx, s.tok.JobID, s.tok.Generation)
	if err != nil {
		return StepResult{}, fmt.Errorf("%s: read the session's artifacts: %w", OpRecordObservation, err)
	}
	shot, dump := latestEvidence(s.tok, arts)
	if shot == nil {
		return StepResult{}, inputErr(field, "the session has no screenshot to record as evidence: take one first (a screenshot step; the screenshot tool over MCP)")
	}
	parse := st.Parse
	if parse == "" {
		parse = protocol.ParseText
	}
	s.mu.Lock()
	step := s.info.LastStep
	s.mu.Unlock()
	o := protocol.Observation{Step: step, Name: st.Name, Raw: st.Raw, Value: v.Value, Parse: parse, Currency: v.Currency, Tax: v.Tax,
		ObservedAt: shot.CreatedAt.UTC(), Evidence: []protocol.Evidence{{Name: shot.Name, SHA256: shot.SHA256}}}
	if dump != nil {
		o.Evidence = append(o.Evidence, protocol.Evidence{Name: dump.Name, SHA256: dump.SHA256})
	}
	if st.Bounds != nil {
		o.Bounds = *st.Bounds
	}
	if st.ElementIndex != nil {
		if dump == nil {
			return StepResult{}, inputErr(field+".element_index", "the session has no UI dump to take the element from: make one first (a ui_dump step; list_elements over MCP), or give bounds")
		}
		els, err := m.elementsOf(ctx, s, field, *dump)
		if err != nil {
			return StepResult{}, err
		}
		i := *st.ElementIndex
		if i >= len(els) {
			return StepResult{}, inputErr(field+".element_index", "%d is not an index of the %d elements of the latest UI dump, %s", i, len(els), dump.Name)
		}
		o.Bounds = els[i].Bounds
		if jobstore.ValidAppPackage(els[i].Package) {
			o.App = &protocol.AppVersion{Package: els[i].Package}
		}
	}
	m.provenance(ctx, s, &o)
	if err := rec.RecordObservations(ctx, s.tok, []protocol.Observation{o}); err != nil {
		if !errors.Is(err, fencing.ErrStale) && !errors.Is(err, jobstore.ErrNotFound) {
			return StepResult{}, fmt.Errorf("%s on session %s: %w", OpRecordObservation, s.info.ID, err)
		}
		// The fence refused the session's token: the job moved on, ended,
		// or its lease expired before it was reclaimed.
		cerr := m.check(ctx, s)
		if cerr == nil {
			cerr = m.markLost(ctx, s, "the session's lease expired: its agent stopped renewing it")
		}
		return StepResult{}, fmt.Errorf("%s: %w: %w", OpRecordObservation, ErrRefused, cerr)
	}
	out := &Recorded{Step: o.Step, Name: o.Name, Raw: o.Raw, Value: o.Value, Parse: o.Parse, Currency: o.Currency, Tax: o.Tax, Bounds: o.Bounds}
	if o.App != nil {
		out.AppPackage = o.App.Package
	}
	for _, e := range o.Evidence {
		out.Evidence = append(out.Evidence, jobstore.ObservationEvidence{Name: e.Name, Key: s.tok.ObjectKey(e.Name), SHA256: e.SHA256})
	}
	m.log.Info().Str("session_id", s.info.ID).Str("name", o.Name).Int("step", o.Step).Msg("observation recorded")
	return StepResult{Op: OpRecordObservation, Outcome: protocol.OutcomeOK, DurationMS: float64(time.Since(start).Microseconds()) / 1000,
		Captures: []Capture{}, Observation: out}, nil
}

// provenance fills in what the session's phone last told of itself in its
// facts, as its agent reported them (docs/observations.md, Provenance):
// its locale and time zone, and the installed version of the observation's
// app when the facts list it. Facts not known leave them empty.
func (m *Manager) provenance(ctx context.Context, s *session, o *protocol.Observation) {
	s.mu.Lock()
	agentID, serial := s.info.Agent, s.info.Phone.Serial
	s.mu.Unlock()
	if agentID == "" {
		agentID, _, _ = fencing.SplitOwner(s.tok.Owner)
	}
	if agentID == "" || serial == "" {
		return
	}
	a, err := m.store.GetAgent(ctx, agentID)
	if err != nil {
		return
	}
	i := slices.IndexFunc(a.Devices, func(d protocol.Device) bool { return d.Serial == serial })
	if i < 0 || a.Devices[i].Facts == nil {
		return
	}
	// The agent's report is checked like any of its input: a value the
	// dataset would refuse is left out rather than refuse the observation.
	short := func(v string) string {
		if len(v) > jobstore.MaxObservationShort || !utf8.ValidString(v) || strings.IndexFunc(v, unicode.IsControl) >= 0 {
			return ""
		}
		return v
	}
	f := a.Devices[i].Facts
	o.Locale, o.TimeZone = short(f.Locale), short(f.TimeZone)
	if o.App != nil {
		if v, ok := f.App(o.App.Package); ok && v.VersionCode >= 0 {
			o.App.VersionName, o.App.VersionCode = short(v.VersionName), v.VersionCode
		}
	}
}

var sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// latestEvidence returns the newest screenshot (.png) and UI dump (.xml)
// registered under tok, nil when there is none. Only an artifact under the
// token's own prefix with a sha256 of 64 lowercase hex digits counts.
func latestEvidence(tok fencing.Token, arts []jobstore.ArtifactRecord) (shot, dump *jobstore.ArtifactRecord) {
	for i := range arts {
		a := &arts[i]
		if a.Key != tok.ObjectKey(a.Name) || protocol.CheckOwnKey(tok, a.Key) != nil || !sha256RE.MatchString(a.SHA256) {
			continue
		}
		switch contentType(a.Key) {
		case "image/png":
			shot = a
		case "application/xml":
			dump = a
		}
	}
	return shot, dump
}

// dumpElements are the elements of one UI dump, by its object key.
type dumpElements struct {
	key string
	els []uitree.Element
}

// elementsOf returns the elements of the UI dump a (uitree's list), read
// back through its presigned URL: at most uitree.MaxDumpBytes, its sha256
// the one registered. The session keeps the last one read.
func (m *Manager) elementsOf(ctx context.Context, s *session, field string, a jobstore.ArtifactRecord) ([]uitree.Element, error) {
	if s.dump.key == a.Key {
		return s.dump.els, nil
	}
	if m.opts.Presigner == nil {
		return nil, inputErr(field+".element_index", "the coordinator has no storage configured (storage section), so the UI dump cannot be read back: give bounds instead")
	}
	u, err := m.opts.Presigner.PresignGet(ctx, a.Key, time.Minute)
	if err != nil {
		return nil, fmt.Errorf("read UI dump %s: %w", a.Name, redact.Error(err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("read UI dump %s: %w", a.Name, redact.Error(err))
	}
	resp, err := m.opts.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read UI dump %s: %w", a.Name, redact.Error(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read UI dump %s: storage answered %s", a.Name, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, uitree.MaxDumpBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read UI dump %s: %w", a.Name, redact.Error(err))
	}
	if len(b) > uitree.MaxDumpBytes {
		return nil, fmt.Errorf("read UI dump %s: larger than %d bytes", a.Name, uitree.MaxDumpBytes)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != a.SHA256 {
		return nil, fmt.Errorf("read UI dump %s: the object in storage is not the one registered (its sha256 differs)", a.Name)
	}
	tree, err := uitree.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("read UI dump %s: %w", a.Name, err)
	}
	els := tree.Elements()
	s.dump = dumpElements{key: a.Key, els: els}
	return els, nil
}
