package protocol

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Selector names an element on the phone's screen instead of coordinates
// (docs/selectors.md). Every set field must hold for an element to match.
//
// The string fields compare against the element's attribute of the same
// meaning in the UI dump: Text (text), ID (resource-id), Desc
// (content-desc), Class (class) and Package (package). A value is matched
// exactly; a value starting with "~" is an RE2 regular expression that must
// match the whole attribute ("~¥[0-9,]+" matches "¥1,280", not
// "税込¥1,280"). An exact value that itself starts with "~" is written as
// the expression "~\~…".
//
// Enabled, Checked and Selected, when set, require the attribute's state.
//
// Below, Above, RightOf and LeftOf keep the elements on that side of the
// element the nested selector resolves to (its first match), nearest
// first; ChildOf keeps the elements inside it in the tree (descendants).
// Without a relative key, matches are in document order. Index picks
// among the matches, from 0.
type Selector struct {
	Text     string    `json:"text,omitempty" yaml:"text,omitempty"`
	ID       string    `json:"id,omitempty" yaml:"id,omitempty"`
	Desc     string    `json:"desc,omitempty" yaml:"desc,omitempty"`
	Class    string    `json:"class,omitempty" yaml:"class,omitempty"`
	Package  string    `json:"package,omitempty" yaml:"package,omitempty"`
	Index    int       `json:"index,omitempty" yaml:"index,omitempty"`
	Enabled  *bool     `json:"enabled,omitempty" yaml:"enabled,omitempty"`
	Checked  *bool     `json:"checked,omitempty" yaml:"checked,omitempty"`
	Selected *bool     `json:"selected,omitempty" yaml:"selected,omitempty"`
	Below    *Selector `json:"below,omitempty" yaml:"below,omitempty"`
	Above    *Selector `json:"above,omitempty" yaml:"above,omitempty"`
	RightOf  *Selector `json:"right_of,omitempty" yaml:"right_of,omitempty"`
	LeftOf   *Selector `json:"left_of,omitempty" yaml:"left_of,omitempty"`
	ChildOf  *Selector `json:"child_of,omitempty" yaml:"child_of,omitempty"`
}

// Limits of a selector, checked by Validate.
const (
	// MaxSelectorValue bounds each string field (a regular expression
	// included), in bytes.
	MaxSelectorValue = 512
	// MaxSelectorDepth bounds the nesting of relative selectors
	// (below: {right_of: {…}} is depth 3).
	MaxSelectorDepth = 4
	// MaxSelectorIndex bounds Index.
	MaxSelectorIndex = 1000
)

// SelectorField is one string field of a selector, by its wire name.
type SelectorField struct {
	Key   string
	Value string
}

// Fields returns the set string fields in a fixed order (text, id, desc,
// class, package).
func (s Selector) Fields() []SelectorField {
	var out []SelectorField
	for _, f := range []SelectorField{{"text", s.Text}, {"id", s.ID}, {"desc", s.Desc}, {"class", s.Class}, {"package", s.Package}} {
		if f.Value != "" {
			out = append(out, f)
		}
	}
	return out
}

// Relatives returns the set relative keys with their selectors, in a fixed
// order (below, above, right_of, left_of, child_of).
func (s Selector) Relatives() []struct {
	Key string
	Sel *Selector
} {
	var out []struct {
		Key string
		Sel *Selector
	}
	for _, r := range []struct {
		Key string
		Sel *Selector
	}{{"below", s.Below}, {"above", s.Above}, {"right_of", s.RightOf}, {"left_of", s.LeftOf}, {"child_of", s.ChildOf}} {
		if r.Sel != nil {
			out = append(out, r)
		}
	}
	return out
}

// Validate reports the first rule the selector breaks, naming the field
// ("element.below.text: …"): it must name at least one attribute or state
// (an index or a relative key alone selects nothing in particular), every
// regular expression must compile, values and nesting are bounded.
func (s Selector) Validate() error { return s.validate("element", 1) }

func (s Selector) validate(path string, depth int) error {
	if depth > MaxSelectorDepth {
		return fmt.Errorf("%s: selectors nest at most %d deep", path, MaxSelectorDepth)
	}
	fields := s.Fields()
	if len(fields) == 0 && s.Enabled == nil && s.Checked == nil && s.Selected == nil {
		return fmt.Errorf("%s: empty selector: name at least one of text, id, desc, class, package, enabled, checked, selected", path)
	}
	for _, f := range fields {
		if len(f.Value) > MaxSelectorValue {
			return fmt.Errorf("%s.%s: %d bytes, at most %d", path, f.Key, len(f.Value), MaxSelectorValue)
		}
		if _, err := CompileSelectorValue(f.Value); err != nil {
			return fmt.Errorf("%s.%s: %w", path, f.Key, err)
		}
	}
	if s.Index < 0 || s.Index > MaxSelectorIndex {
		return fmt.Errorf("%s.index: %d is not in 0…%d", path, s.Index, MaxSelectorIndex)
	}
	for _, r := range s.Relatives() {
		if err := r.Sel.validate(path+"."+r.Key, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// CompileSelectorValue returns the expression a selector value matches
// with: nil for an exact value, the anchored expression for "~…". The
// error names what is wrong with the expression.
func CompileSelectorValue(v string) (*regexp.Regexp, error) {
	expr, ok := strings.CutPrefix(v, "~")
	if !ok {
		return nil, nil
	}
	if expr == "" {
		return nil, fmt.Errorf("empty regular expression after ~")
	}
	// The expression must stand on its own before it is anchored: "a)|(b"
	// would otherwise anchor as "^(?:a)|(b)$", matching any value that
	// begins with a or ends with b.
	if _, err := regexp.Compile(expr); err != nil {
		return nil, fmt.Errorf("bad regular expression: %v", strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	}
	re, err := regexp.Compile(`^(?:` + expr + `)$`)
	if err != nil { // an unterminated \Q takes the anchoring in
		return nil, fmt.Errorf("bad regular expression: %v", strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	}
	return re, nil
}

// String renders the selector compactly and deterministically, as logs,
// errors and observations quote it: `text="Buy" below{id="…/name"} index=1`.
func (s Selector) String() string {
	var b strings.Builder
	sep := func() {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
	}
	for _, f := range s.Fields() {
		sep()
		b.WriteString(f.Key)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(f.Value))
	}
	for _, st := range []struct {
		k string
		v *bool
	}{{"enabled", s.Enabled}, {"checked", s.Checked}, {"selected", s.Selected}} {
		if st.v != nil {
			sep()
			b.WriteString(st.k + "=" + strconv.FormatBool(*st.v))
		}
	}
	for _, r := range s.Relatives() {
		sep()
		b.WriteString(r.Key + "{" + r.Sel.String() + "}")
	}
	if s.Index != 0 {
		sep()
		b.WriteString("index=" + strconv.Itoa(s.Index))
	}
	return b.String()
}
