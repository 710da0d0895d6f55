package uitree

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/edgeagent/edgeagent/protocol"
)

// maxFuzzyRunes bounds the strings an edit distance is computed on, so
// that a dump of long texts costs a not-found error little.
const maxFuzzyRunes = 64

// maxFuzzyCells bounds the edit-distance work of one not-found error (in
// cells of the distance table, a few nanoseconds each): past it, values
// are compared only for equality and for holding one another.
const maxFuzzyCells = 4 << 20

// miss is a field's distance when the node's value is nowhere near.
const miss = 1 << 20

// closest returns up to MaxClosest visible nodes nearest to m's field
// values: for each field, a node's value (case folded) that equals it, or
// holds it or is held by it, or is within a few edits of it comes near;
// for a regular expression the same is asked of its literal prefix (the
// text every value it matches begins with), held anywhere in the value.
// A node comes nearer the more of the selector's fields it comes near and
// the nearer they are; ties are in document order.
func (m *Matcher) closest(t *Tree) []Candidate {
	if t == nil {
		return nil
	}
	type want struct {
		fm     *fieldMatcher
		folded string
		runes  int
	}
	var wants []want
	for i := range m.fields {
		fm := &m.fields[i]
		if fm.fuzzy == "" {
			continue
		}
		f := strings.ToLower(fm.fuzzy)
		wants = append(wants, want{fm, f, utf8.RuneCountInString(f)})
	}
	if len(wants) == 0 {
		return nil
	}
	var out []Candidate
	budget := maxFuzzyCells
	for i := range t.Nodes {
		n := &t.Nodes[i]
		if !n.Visible() {
			continue
		}
		total, near := 0, 0
		var fields []protocol.SelectorField
		for _, w := range wants {
			v := w.fm.attr.of(n)
			d := miss
			if v != "" {
				if w.fm.re != nil {
					d = prefixDistance(w.folded, v)
				} else {
					d = distance(w.folded, w.runes, v, &budget)
				}
			}
			if d < miss {
				near++
				fields = append(fields, protocol.SelectorField{Key: w.fm.key, Value: shorten(v)})
			}
			total += d
		}
		if near == 0 {
			continue
		}
		c := Candidate{Index: n.Index, Bounds: n.Bounds, Fields: fields, distance: total}
		for _, s := range m.states {
			if got := s.get(n); got != s.want {
				c.Unlike = append(c.Unlike, s.key+"="+strconv.FormatBool(got))
			}
		}
		// Keep the MaxClosest nearest, in order; a later node of equal
		// distance stays after the earlier.
		at, _ := slices.BinarySearchFunc(out, c.distance, func(e Candidate, d int) int {
			if e.distance <= d {
				return -1
			}
			return 1
		})
		if at < MaxClosest {
			out = slices.Insert(out, at, c)
			if len(out) > MaxClosest {
				out = out[:MaxClosest]
			}
		}
	}
	return out
}

// distance is how far the node's value v is from the exact selector value
// want (case folded, wantRunes runes): 0 for the same text but for case,
// the difference in length when one holds the other (and both have 2
// runes or more), else the edit distance when it is at most a third of
// want's length (at least 2) and budget allows computing it; miss
// otherwise.
func distance(want string, wantRunes int, v string, budget *int) int {
	got := strings.ToLower(v)
	if got == want {
		return 0
	}
	gotRunes := utf8.RuneCountInString(got)
	if min(gotRunes, wantRunes) >= 2 && (strings.Contains(got, want) || strings.Contains(want, got)) {
		return abs(gotRunes - wantRunes)
	}
	limit := max(2, wantRunes/3)
	cells := gotRunes * wantRunes
	if abs(gotRunes-wantRunes) > limit || gotRunes > maxFuzzyRunes || wantRunes > maxFuzzyRunes || cells > *budget {
		return miss
	}
	*budget -= cells
	if d := levenshtein(want, got); d <= limit {
		return d
	}
	return miss
}

// prefixDistance is how far the value v is from a regular expression's
// literal prefix (case folded): 1 when v begins with it (the expression
// failed on the rest), 2 when v holds it elsewhere, miss otherwise.
func prefixDistance(prefix, v string) int {
	got := strings.ToLower(v)
	switch {
	case strings.HasPrefix(got, prefix):
		return 1
	case strings.Contains(got, prefix):
		return 2
	}
	return miss
}

// MaxCandidateRunes bounds a value a Candidate quotes: a longer one is
// cut, ending in "…".
const MaxCandidateRunes = 100

// shorten cuts v to MaxCandidateRunes.
func shorten(v string) string {
	n := 0
	for i := range v {
		if n == MaxCandidateRunes {
			return v[:i] + "…"
		}
		n++
	}
	return v
}

// levenshtein is the edit distance between a and b in runes.
func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
