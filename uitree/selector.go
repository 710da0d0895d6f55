package uitree

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"

	"github.com/edgeagent/edgeagent/protocol"
)

// Matcher is a compiled selector: Compile checks it and compiles its
// regular expressions, so finding it in a tree compiles nothing. A
// Matcher is safe for concurrent use.
type Matcher struct {
	sel protocol.Selector
	// fields are the string fields in the selector's order; exact and
	// regexes the same, split by kind.
	fields         []fieldMatcher
	exact, regexes []*fieldMatcher
	states         []stateMatcher
	// sides are the below, above, right_of and left_of keys, in that
	// order; childOf is the child_of key.
	sides   []sideMatcher
	childOf *Matcher
}

// attr names a string attribute of a node.
type attr uint8

const (
	attrText attr = iota
	attrID
	attrDesc
	attrClass
	attrPackage
)

func (a attr) of(n *Node) string {
	switch a {
	case attrText:
		return n.Text
	case attrID:
		return n.ID
	case attrDesc:
		return n.Desc
	case attrClass:
		return n.Class
	default:
		return n.Package
	}
}

var attrOfKey = map[string]attr{"text": attrText, "id": attrID, "desc": attrDesc, "class": attrClass, "package": attrPackage}

// fieldMatcher is one string field of a selector.
type fieldMatcher struct {
	key   string
	attr  attr
	exact string         // when re is nil
	re    *regexp.Regexp // for a "~…" value
	// prefix is what every value re matches begins with, and contains
	// a text every value it matches holds (the longest it is sure of):
	// they turn most values away before the expression runs. fuzzy is
	// what a near miss is measured against (the exact value, or prefix).
	prefix, contains, fuzzy string
}

// requiredLiteral returns the longest text every string re matches holds,
// "" when it knows of none: a literal (not case-folded) that the
// expression cannot match without, found through concatenations,
// groups and repetitions of at least one.
func requiredLiteral(re *syntax.Regexp) string {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase == 0 {
			return string(re.Rune)
		}
	case syntax.OpCapture, syntax.OpPlus:
		return requiredLiteral(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return requiredLiteral(re.Sub[0])
		}
	case syntax.OpConcat:
		best := ""
		for _, sub := range re.Sub {
			if l := requiredLiteral(sub); len(l) > len(best) {
				best = l
			}
		}
		return best
	}
	return ""
}

// stateMatcher is one of enabled, checked, selected.
type stateMatcher struct {
	key  string
	want bool
	get  func(*Node) bool
}

// side is a relative key of geometry.
type side uint8

const (
	sideBelow side = iota
	sideAbove
	sideRightOf
	sideLeftOf
)

type sideMatcher struct {
	key  string
	side side
	m    *Matcher
}

// gap is how far c is from the anchor a on side s, and whether c is on
// that side at all: entirely past the anchor's edge on that side (it may
// touch it), and overlapping it across (below and above: the horizontal
// spans share more than an edge; right_of and left_of: the vertical
// spans). The gap is between the facing edges: 0 for an element that
// touches the anchor.
func gap(s side, c, a *[4]int) (int, bool) {
	switch s {
	case sideBelow:
		return c[1] - a[3], c[1] >= a[3] && c[0] < a[2] && a[0] < c[2]
	case sideAbove:
		return a[1] - c[3], c[3] <= a[1] && c[0] < a[2] && a[0] < c[2]
	case sideRightOf:
		return c[0] - a[2], c[0] >= a[2] && c[1] < a[3] && a[1] < c[3]
	default:
		return a[0] - c[2], c[2] <= a[0] && c[1] < a[3] && a[1] < c[3]
	}
}

// Compile checks sel (protocol.Selector.Validate, whose error it returns,
// naming the field) and compiles it, nested selectors included: each
// regular expression is compiled here for good (Validate compiles it only
// to check it), with what turns values away before it runs.
func Compile(sel protocol.Selector) (*Matcher, error) {
	if err := sel.Validate(); err != nil {
		return nil, err
	}
	return compile(sel)
}

func compile(sel protocol.Selector) (*Matcher, error) {
	m := &Matcher{sel: sel}
	for _, f := range sel.Fields() {
		fm := fieldMatcher{key: f.Key, attr: attrOfKey[f.Key], exact: f.Value, fuzzy: f.Value}
		re, err := protocol.CompileSelectorValue(f.Value)
		if err != nil { // Validate compiled it already
			return nil, fmt.Errorf("%s: %w", f.Key, err)
		}
		if re != nil {
			fm.re = re
			fm.prefix, _ = re.LiteralPrefix()
			fm.fuzzy = fm.prefix
			if parsed, err := syntax.Parse(re.String(), syntax.Perl); err == nil {
				fm.contains = requiredLiteral(parsed.Simplify())
			}
		}
		m.fields = append(m.fields, fm)
	}
	for i := range m.fields {
		if f := &m.fields[i]; f.re == nil {
			m.exact = append(m.exact, f)
		} else {
			m.regexes = append(m.regexes, f)
		}
	}
	for _, s := range []struct {
		key  string
		want *bool
		get  func(*Node) bool
	}{
		{"enabled", sel.Enabled, func(n *Node) bool { return n.Enabled }},
		{"checked", sel.Checked, func(n *Node) bool { return n.Checked }},
		{"selected", sel.Selected, func(n *Node) bool { return n.Selected }},
	} {
		if s.want != nil {
			m.states = append(m.states, stateMatcher{s.key, *s.want, s.get})
		}
	}
	for _, r := range sel.Relatives() {
		nested, err := compile(*r.Sel)
		if err != nil {
			return nil, err
		}
		switch r.Key {
		case "below":
			m.sides = append(m.sides, sideMatcher{r.Key, sideBelow, nested})
		case "above":
			m.sides = append(m.sides, sideMatcher{r.Key, sideAbove, nested})
		case "right_of":
			m.sides = append(m.sides, sideMatcher{r.Key, sideRightOf, nested})
		case "left_of":
			m.sides = append(m.sides, sideMatcher{r.Key, sideLeftOf, nested})
		case "child_of":
			m.childOf = nested
		}
	}
	return m, nil
}

// Selector returns the selector m was compiled from.
func (m *Matcher) Selector() protocol.Selector { return m.sel }

// String is the selector's String.
func (m *Matcher) String() string { return m.sel.String() }

// own reports whether n matches the selector's own keys: visible, its
// fields and its states. Exact values and states are compared first;
// an expression runs last, once per distinct value in one search (memo).
func (m *Matcher) own(n *Node, memo *regexMemo) bool {
	if !n.Visible() {
		return false
	}
	for _, f := range m.exact {
		if f.attr.of(n) != f.exact {
			return false
		}
	}
	for _, s := range m.states {
		if s.get(n) != s.want {
			return false
		}
	}
	for _, f := range m.regexes {
		if !memo.match(f, f.attr.of(n)) {
			return false
		}
	}
	return true
}

// regexMemo remembers what the expressions of one search answered: the
// values of a screen repeat (a button label on every card of a list).
type regexMemo map[memoKey]bool

type memoKey struct {
	f *fieldMatcher
	v string
}

func (memo *regexMemo) match(f *fieldMatcher, v string) bool {
	if !strings.HasPrefix(v, f.prefix) || !strings.Contains(v, f.contains) {
		return false
	}
	k := memoKey{f, v}
	if ok, seen := (*memo)[k]; seen {
		return ok
	}
	if *memo == nil {
		*memo = regexMemo{}
	}
	ok := f.re.MatchString(v)
	(*memo)[k] = ok
	return ok
}

// Find returns every node of t that matches, ignoring Index: in document
// order, or, with below, above, right_of or left_of, nearest to the
// anchors first (the sum of the gaps), ties in document order. A relative
// key's anchor is the node its nested selector resolves to (Resolve: its
// first match, or the one its index picks); a relative key whose anchor
// is not there matches nothing.
func (m *Matcher) Find(t *Tree) []*Node {
	nodes, _ := m.find(t, -1)
	return nodes
}

// find is Find stopping at limit matches (limit < 0: all) where the order
// allows; missing is the key of a relative whose anchor is not there.
func (m *Matcher) find(t *Tree, limit int) (nodes []*Node, missing string) {
	if t == nil {
		return nil, ""
	}
	candidates := t.Nodes
	if m.childOf != nil {
		a := m.childOf.resolve(t)
		if a == nil {
			return nil, "child_of"
		}
		candidates = t.Descendants(a)
	}
	var memo regexMemo
	if len(m.sides) == 0 {
		for i := range candidates {
			if n := &candidates[i]; m.own(n, &memo) {
				nodes = append(nodes, n)
				if len(nodes) == limit {
					break
				}
			}
		}
		return nodes, ""
	}
	var anchors [4]*Node
	for i, s := range m.sides {
		if anchors[i] = s.m.resolve(t); anchors[i] == nil {
			return nil, s.key
		}
	}
	type near struct {
		n *Node
		d int
	}
	var found []near
outer:
	for i := range candidates {
		n := &candidates[i]
		d := 0
		for j, s := range m.sides {
			g, ok := gap(s.side, &n.Bounds, &anchors[j].Bounds)
			if !ok {
				continue outer
			}
			d += g
		}
		if m.own(n, &memo) {
			found = append(found, near{n, d})
		}
	}
	slices.SortStableFunc(found, func(a, b near) int { return a.d - b.d })
	nodes = make([]*Node, len(found))
	for i, f := range found {
		nodes[i] = f.n
	}
	return nodes, ""
}

// resolve is Resolve without the error.
func (m *Matcher) resolve(t *Tree) *Node {
	limit := -1
	if len(m.sides) == 0 {
		limit = m.sel.Index + 1
	}
	nodes, _ := m.find(t, limit)
	if m.sel.Index < len(nodes) {
		return nodes[m.sel.Index]
	}
	return nil
}

// Resolve returns the match Index picks of Find's (the first without an
// index). When there is none the error is a *NotFoundError.
func (m *Matcher) Resolve(t *Tree) (*Node, error) {
	limit := -1
	if len(m.sides) == 0 {
		limit = m.sel.Index + 1
	}
	nodes, missing := m.find(t, limit)
	if m.sel.Index < len(nodes) {
		return nodes[m.sel.Index], nil
	}
	e := &NotFoundError{Selector: m.sel, Matches: len(nodes)}
	if t != nil {
		for i := range t.Nodes {
			if t.Nodes[i].Visible() {
				e.Visible++
			}
		}
	}
	switch {
	case missing != "":
		e.Anchor = missing
		if _, err := m.relative(missing).Resolve(t); err != nil {
			e.AnchorErr, _ = err.(*NotFoundError)
		}
	case len(nodes) == 0:
		e.Closest = m.closest(t)
	}
	return nil, e
}

// relative returns the nested matcher of a relative key.
func (m *Matcher) relative(key string) *Matcher {
	if key == "child_of" {
		return m.childOf
	}
	for _, s := range m.sides {
		if s.key == key {
			return s.m
		}
	}
	return nil
}

// Visible reports whether the selector resolves in t: the element it
// names is there, with a positive area (what wait_for waits for).
func (m *Matcher) Visible(t *Tree) bool { return m.resolve(t) != nil }

// NotFoundError is Resolve's error when nothing matches, or fewer than
// Index+1 nodes do.
type NotFoundError struct {
	// Selector is the selector that was not found.
	Selector protocol.Selector
	// Matches is how many nodes match without Index: more than 0 only
	// when Index is past them.
	Matches int
	// Anchor, when set, is the relative key (below, above, right_of,
	// left_of, child_of) whose nested selector matched nothing, and
	// AnchorErr why.
	Anchor    string
	AnchorErr *NotFoundError
	// Closest are up to MaxClosest visible nodes that come nearest to the
	// selector's values, nearest first, when nothing matches.
	Closest []Candidate
	// Visible is how many visible nodes the tree holds.
	Visible int
}

// MaxClosest bounds NotFoundError.Closest.
const MaxClosest = 3

// Candidate is a node that comes near a selector that found nothing.
type Candidate struct {
	// Index is the node's Index, Bounds its bounds.
	Index  int
	Bounds [4]int
	// Fields are the node's values of the selector's fields that come
	// near, in the selector's field order (Key text, id, desc, class or
	// package), each cut to MaxCandidateRunes.
	Fields []protocol.SelectorField
	// Unlike are the states the selector asks for that the node does not
	// have, as the node has them ("enabled=false").
	Unlike []string
	// distance orders candidates: smaller is nearer.
	distance int
}

func (c Candidate) String() string {
	var b strings.Builder
	for i, f := range c.Fields {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(f.Key + "=" + strconv.Quote(f.Value))
	}
	fmt.Fprintf(&b, " at [%d,%d][%d,%d]", c.Bounds[0], c.Bounds[1], c.Bounds[2], c.Bounds[3])
	if len(c.Unlike) > 0 {
		b.WriteString(" but " + strings.Join(c.Unlike, " "))
	}
	return b.String()
}

func (e *NotFoundError) Error() string {
	sel := e.Selector.String()
	switch {
	case e.Anchor != "":
		return fmt.Sprintf("no element matches %s: %s: %v", sel, e.Anchor, e.AnchorErr)
	case e.Matches == 1:
		return fmt.Sprintf("no element matches %s: 1 element matches without the index, which counts from 0", sel)
	case e.Matches > 1:
		return fmt.Sprintf("no element matches %s: %d elements match without the index, which counts from 0", sel, e.Matches)
	case len(e.Closest) == 0:
		return fmt.Sprintf("no element matches %s (nothing similar among %d visible elements)", sel, e.Visible)
	}
	var b strings.Builder
	b.WriteString("no element matches " + sel + " (closest: ")
	for i, c := range e.Closest {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(c.String())
	}
	b.WriteByte(')')
	return b.String()
}
