package protocol

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// Observation is one value read off the phone's screen by an extract step
// (or recorded by an AI session), with what proves it (docs/observations.md).
// It travels with the fenced result and is stored only when the result is
// accepted.
type Observation struct {
	// Step is the number of the step that read it (its seq in the
	// operation log).
	Step int `json:"step"`
	// Name is the extract step's name ("price").
	Name string `json:"name"`
	// Raw is the string exactly as the phone displayed it.
	Raw string `json:"raw"`
	// Value is Raw normalised as Parse says: the text itself, or a decimal
	// string ("1280", "12.99"), never a float.
	Value string `json:"value"`
	// Parse is how Value was read: ParseText, ParseNumber or ParsePrice.
	Parse string `json:"parse"`
	// Currency is the ISO 4217 code of a price.
	Currency string `json:"currency,omitempty"`
	// Tax says whether a price includes tax (TaxIncluded, TaxExcluded),
	// when the screen said so.
	Tax string `json:"tax,omitempty"`
	// Bounds are the element's left, top, right and bottom in pixels.
	Bounds [4]int `json:"bounds"`
	// Selector is the step's selector as Selector.String renders it.
	Selector string `json:"selector,omitempty"`
	// ObservedAt is when the dump it was read from was taken, on the PC's
	// clock.
	ObservedAt time.Time `json:"observed_at"`
	// Evidence is the UI dump and the screenshot taken in the same step:
	// artifact names of the job, each with its sha256.
	Evidence []Evidence `json:"evidence,omitempty"`
	// App is the app in the foreground when the value was read, with its
	// version, when known.
	App *AppVersion `json:"app,omitempty"`
	// Locale and TimeZone are the phone's, when known.
	Locale   string `json:"locale,omitempty"`
	TimeZone string `json:"time_zone,omitempty"`
}

// Evidence is one artifact that proves an observation.
type Evidence struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
}

// AppVersion is an installed app's package and version.
type AppVersion struct {
	Package     string `json:"package"`
	VersionName string `json:"version_name,omitempty"`
	VersionCode int64  `json:"version_code,omitempty"`
}

// Bounds of what one result may carry.
const (
	MaxObservations  = 1000
	MaxObservedBytes = 4096 // Raw and Value each
)

// Validate checks an observation as the coordinator receives it: a valid
// name, bounded strings, a known parse.
func (o Observation) Validate() error {
	if !observationNameRE.MatchString(o.Name) {
		return fmt.Errorf("name: %q is not an observation name", o.Name)
	}
	for _, f := range []struct{ k, v string }{{"raw", o.Raw}, {"value", o.Value}} {
		if len(f.v) > MaxObservedBytes {
			return fmt.Errorf("%s: %d bytes, at most %d", f.k, len(f.v), MaxObservedBytes)
		}
		if !utf8.ValidString(f.v) {
			return fmt.Errorf("%s: not UTF-8", f.k)
		}
	}
	if err := oneOf("parse", o.Parse, ParseText, ParseNumber, ParsePrice); err != nil {
		return err
	}
	if o.Currency != "" && !currencyRE.MatchString(o.Currency) {
		return fmt.Errorf("currency: %q is not an ISO 4217 code", o.Currency)
	}
	if err := oneOf("tax", o.Tax, TaxIncluded, TaxExcluded); err != nil {
		return err
	}
	if len(o.Evidence) > 8 {
		return fmt.Errorf("evidence: %d items, at most 8", len(o.Evidence))
	}
	return nil
}
