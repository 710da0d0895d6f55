package protocol

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The rules a task and its steps follow are listed in docs/protocol.md
// section 5 (Task and steps). Step.Validate checks one step on its own (the
// step verb); Task.Validate adds the rules between steps.

// Validate checks one step on its own: a known op, the fields its op needs
// (package, text, key non-empty), non-negative coordinates and duration, a
// valid artifact name and a valid effect mark. Errors name the field.
func (s Step) Validate() error {
	if s.DurationMS < 0 {
		return fmt.Errorf("duration_ms: %d is negative", s.DurationMS)
	}
	switch s.Op {
	case OpLaunch:
		if s.Package == "" {
			return fmt.Errorf("package: launch needs package")
		}
	case OpWaitFor, OpAssert, OpScrollUntil, OpExtract:
		if s.Element == nil {
			return fmt.Errorf("element: %s needs element", s.Op)
		}
		if err := s.validateElementStep(); err != nil {
			return err
		}
	case OpText:
		if s.Text == "" {
			return fmt.Errorf("text: text step needs non-empty text")
		}
		if err := CheckTypable(s.Text); err != nil {
			return fmt.Errorf("text: %w", err)
		}
	case OpKey:
		if s.Key == "" {
			return fmt.Errorf("key: key step needs non-empty key")
		}
	case OpTap, OpSwipe, OpLongPress:
		if s.Element != nil && s.Op != OpSwipe {
			if s.X != 0 || s.Y != 0 {
				return fmt.Errorf("element: %s takes an element or x/y, not both", s.Op)
			}
			break
		}
		for _, c := range []struct {
			field string
			v     int
		}{{"x", s.X}, {"y", s.Y}, {"x2", s.X2}, {"y2", s.Y2}} {
			if c.v < 0 && (s.Op == OpSwipe || c.field == "x" || c.field == "y") {
				return fmt.Errorf("%s: coordinate %d is negative", c.field, c.v)
			}
		}
	case OpForceStop, OpClearData:
		if s.Package == "" {
			return fmt.Errorf("package: %s needs package", s.Op)
		}
	case OpOpenURL:
		if err := ValidateURL(s.URL); err != nil {
			return fmt.Errorf("url: %w", err)
		}
	case OpRotate:
		if !slices.Contains(Orientations, s.Orientation) {
			return fmt.Errorf("orientation: %q is not one of %s", s.Orientation, strings.Join(Orientations, ", "))
		}
	case OpInstallApp:
		if err := ValidateAPKHash(s.APK); err != nil {
			return fmt.Errorf("apk: %w", err)
		}
	case OpWait, OpScreenshot, OpUIDump, OpRecordStart, OpRecordStop, OpWake, OpUnlock:
	case "":
		return fmt.Errorf("op: missing")
	default:
		return fmt.Errorf("op: unknown op %q", s.Op)
	}
	if s.Element != nil {
		switch s.Op {
		case OpTap, OpLongPress, OpText, OpWaitFor, OpAssert, OpScrollUntil, OpExtract:
		default:
			return fmt.Errorf("element: %s takes no element", s.Op)
		}
		if err := s.Element.Validate(); err != nil {
			return err
		}
	}
	if s.Op == OpExtract {
		// The name of an extract step is the observation's.
	} else if s.Name != "" {
		if err := ValidateArtifactName(s.Name); err != nil {
			return fmt.Errorf("name: %w", err)
		}
		if prefix, ext := captureKind(s.Op); ext != "" {
			if err := ValidateArtifactName(CaptureName(s.Name, prefix, 0, ext)); err != nil {
				return fmt.Errorf("name: with %s appended: %w", ext, err)
			}
		}
	}
	if s.Effect != nil {
		if err := s.validateEffect(); err != nil {
			return fmt.Errorf("effect: %w", err)
		}
	}
	return nil
}

// MaxURLLength bounds the url of an open_url step.
const MaxURLLength = 2000

var schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*$`)

// ValidateURL accepts the url of an open_url step: an absolute URL (a
// scheme, then anything the scheme allows: https://host/path, a deep link
// such as myapp://item/42, market://details?id=…) of at most MaxURLLength
// bytes, without spaces or control characters (percent-encode them); an
// http or https URL has a host. The error names what is wrong, without
// quoting the URL.
func ValidateURL(raw string) error {
	if raw == "" {
		return fmt.Errorf("open_url needs url")
	}
	if len(raw) > MaxURLLength {
		return fmt.Errorf("url of %d bytes is longer than %d", len(raw), MaxURLLength)
	}
	if !utf8.ValidString(raw) {
		return fmt.Errorf("url is not valid UTF-8")
	}
	for i, r := range raw {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return fmt.Errorf("url has a space or control character at byte %d: percent-encode it", i+1)
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("url does not parse: %w", errors.Unwrap(err))
	}
	if u.Scheme == "" || !schemeRE.MatchString(u.Scheme) {
		return fmt.Errorf("url has no scheme: want an absolute URL such as https://example.com/ or myapp://path")
	}
	if (strings.EqualFold(u.Scheme, "http") || strings.EqualFold(u.Scheme, "https")) && u.Host == "" {
		return fmt.Errorf("url: an %s URL needs a host", u.Scheme)
	}
	return nil
}

// CaptureName is the artifact name a capture step produces: name with ext
// appended unless it already ends with it, or "<prefix>-NNN<ext>" without
// a name, NNN being the step's number seq zero-padded to three digits.
func CaptureName(name, prefix string, seq int, ext string) string {
	if name == "" {
		name = fmt.Sprintf("%s-%03d", prefix, seq)
	}
	if !strings.HasSuffix(strings.ToLower(name), ext) {
		name += ext
	}
	return name
}

// captureKind returns the default name prefix and the extension of the
// artifact an op captures (record_start: that of its recording), or "" for
// ops that capture nothing.
func captureKind(op string) (prefix, ext string) {
	switch op {
	case OpScreenshot:
		return "screenshot", ".png"
	case OpUIDump:
		return "ui_dump", ".xml"
	case OpRecordStart, OpRecordStop:
		return "recording", ".mp4"
	}
	return "", ""
}

// validateSequence checks the rules between the steps of a task, the steps
// numbered 1, 2, … in task order: recordings pair up (a record_stop follows
// a record_start, and a record_start does not start while another
// recording runs), and each artifact name is produced once.
func validateSequence(steps []Step, beforeAfter bool) error {
	// Capture names end in .png, .xml or .mp4, so never oplog.jsonl.
	names := map[string]int{}
	rec := -1 // index of the record_start whose recording runs
	for i, s := range steps {
		prefix, ext := captureKind(s.Op)
		name := s.Name
		seq := i + 1
		if beforeAfter && IsBeforeAfterOp(s.Op) {
			before, after := BeforeAfterNames(seq)
			for _, n := range []string{before, after} {
				if j, dup := names[n]; dup {
					return fmt.Errorf("steps[%d]: artifact name %q is already produced by steps[%d]", i, n, j)
				}
				names[n] = i
			}
		}
		switch s.Op {
		case OpRecordStart:
			if rec >= 0 {
				return fmt.Errorf("steps[%d]: record_start while the recording of steps[%d] runs (one recording at a time)", i, rec)
			}
			rec = i
			continue
		case OpRecordStop:
			if rec < 0 {
				return fmt.Errorf("steps[%d]: record_stop without a record_start before it", i)
			}
			if name == "" {
				name = steps[rec].Name
			}
			// Unnamed, a recording takes its record_start's number.
			seq = rec + 1
			rec = -1
		}
		if ext == "" {
			continue
		}
		n := CaptureName(name, prefix, seq, ext)
		if j, dup := names[n]; dup {
			return fmt.Errorf("steps[%d]: artifact name %q is already produced by steps[%d]", i, n, j)
		}
		names[n] = i
	}
	return nil
}

// Defaults and bounds of element steps (docs/selectors.md).
const (
	DefaultWaitForMS = 5000
	MaxWaitForMS     = 10 * 60 * 1000
	DefaultMaxSwipes = 10
	MaxMaxSwipes     = 100
)

// Values of Step.State, Step.Direction, Step.Attr, Step.Parse and Step.Tax.
const (
	StateVisible = "visible"
	StateGone    = "gone"

	AttrText   = "text"
	AttrDesc   = "desc"
	AttrBounds = "bounds"

	ParseText   = "text"
	ParseNumber = "number"
	ParsePrice  = "price"

	TaxIncluded = "included"
	TaxExcluded = "excluded"
)

// PriceCurrencies are the ISO 4217 codes a price is read in
// (docs/observations.md): an extract step's currency is one of them.
var PriceCurrencies = []string{"AUD", "BRL", "CAD", "CHF", "CNY", "EUR", "GBP", "HKD", "INR", "JPY", "KRW", "MXN", "NZD", "SGD", "THB", "TWD", "USD"}

// Directions of a scroll_until step.
var Directions = []string{"down", "up", "left", "right"}

var (
	observationNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]{0,63}$`)
	currencyRE        = regexp.MustCompile(`^[A-Z]{3}$`)
)

// oneOf checks that v, when set, is one of allowed.
func oneOf(field, v string, allowed ...string) error {
	if v != "" && !slices.Contains(allowed, v) {
		return fmt.Errorf("%s: %q is not one of %s", field, v, strings.Join(allowed, ", "))
	}
	return nil
}

// validateElementStep checks the fields of wait_for, assert, scroll_until
// and extract.
func (s Step) validateElementStep() error {
	if s.TimeoutMS < 0 || s.TimeoutMS > MaxWaitForMS {
		return fmt.Errorf("timeout_ms: %d is not in 0…%d", s.TimeoutMS, MaxWaitForMS)
	}
	if s.TimeoutMS != 0 && s.Op != OpWaitFor {
		return fmt.Errorf("timeout_ms: only wait_for takes timeout_ms")
	}
	if s.State != "" && s.Op != OpWaitFor && s.Op != OpAssert {
		return fmt.Errorf("state: only wait_for and assert take state")
	}
	if err := oneOf("state", s.State, StateVisible, StateGone); err != nil {
		return err
	}
	if s.Matches != "" {
		if s.Op != OpAssert {
			return fmt.Errorf("matches: only assert takes matches")
		}
		if s.State == StateGone {
			return fmt.Errorf("matches: an element asserted gone has no text to match")
		}
		if len(s.Matches) > MaxSelectorValue {
			return fmt.Errorf("matches: %d bytes, at most %d", len(s.Matches), MaxSelectorValue)
		}
		if _, err := CompileSelectorValue("~" + s.Matches); err != nil {
			return fmt.Errorf("matches: %w", err)
		}
	}
	if (s.Direction != "" || s.MaxSwipes != 0) && s.Op != OpScrollUntil {
		return fmt.Errorf("direction, max_swipes: only scroll_until takes them")
	}
	if err := oneOf("direction", s.Direction, Directions...); err != nil {
		return err
	}
	if s.MaxSwipes < 0 || s.MaxSwipes > MaxMaxSwipes {
		return fmt.Errorf("max_swipes: %d is not in 0…%d", s.MaxSwipes, MaxMaxSwipes)
	}
	if s.Op != OpExtract {
		if s.Attr != "" || s.Parse != "" || s.Currency != "" || s.Tax != "" || s.Required != nil {
			return fmt.Errorf("attr, parse, currency, tax, required: only extract takes them")
		}
		return nil
	}
	if !observationNameRE.MatchString(s.Name) {
		return fmt.Errorf("name: extract needs the observation's name: a letter, then up to 63 letters, digits, _ . or -")
	}
	if err := oneOf("attr", s.Attr, AttrText, AttrDesc, AttrBounds); err != nil {
		return err
	}
	if err := oneOf("parse", s.Parse, ParseText, ParseNumber, ParsePrice); err != nil {
		return err
	}
	if s.Attr == AttrBounds && s.Parse != "" && s.Parse != ParseText {
		return fmt.Errorf("parse: bounds are read as text")
	}
	if (s.Currency != "" || s.Tax != "") && s.Parse != ParsePrice {
		return fmt.Errorf("currency, tax: only parse: price takes them")
	}
	if s.Currency != "" && !currencyRE.MatchString(s.Currency) {
		return fmt.Errorf("currency: %q is not an ISO 4217 code (three capital letters, such as JPY)", s.Currency)
	}
	if s.Currency != "" && !slices.Contains(PriceCurrencies, s.Currency) {
		return fmt.Errorf("currency: %s is not one prices are read in (%s)", s.Currency, strings.Join(PriceCurrencies, ", "))
	}
	return oneOf("tax", s.Tax, TaxIncluded, TaxExcluded)
}
