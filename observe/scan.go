package observe

import (
	"fmt"
	"unicode"

	"golang.org/x/text/currency"
	"golang.org/x/text/unicode/norm"
	"golang.org/x/text/width"

	"github.com/edgeagent/edgeagent/protocol"
)

// kind is what a mark in a displayed string is.
type kind uint8

const (
	kNum       kind = iota + 1 // digits with their separators
	kSign                      // a currency sign, word or code Read knows
	kBadSign                   // a currency Read does not handle
	kTax                       // 税込, 税抜, tax incl., …
	kTaxWord                   // 税 or tax in wording Read does not know
	kRange                     // 〜, から, from, …
	kDash                      // a minus or the dash of a range
	kDiff                      // ▲, ▼: a difference, not an amount
	kMagnitude                 // 万, k: the number is not written out
	kApprox                    // 約, approx.: an amount not exact
	kPlus                      // +, which after an amount makes a range (999+)
)

// A mark is a span of runes that means something to a reader; the runes
// between marks are other text.
type mark struct {
	k          kind
	start, end int
	sign       *sign
	tax        string
	symbol     bool   // kBadSign: a currency symbol, refused wherever it is
	text       string // as shown, for messages
	used       bool   // kDash: the minus inside a price (¥-200)
}

// scan is a displayed string, prepared, and its marks.
type scan struct {
	rs       []rune
	marks    []mark
	nonSpace []int // nonSpace[i]: how many of rs[:i] are not spaces
	parens   []int // parens[i]: how many of rs[:i] are brackets
	// nonFill[i]: how many of rs[:i] are neither spaces nor brackets nor
	// in tax wording (what may stand between a price and its 〜).
	nonFill []int
}

// prepare folds a displayed string for reading: NFC, full-width forms to
// their ASCII and narrow equivalents (golang.org/x/text/width.Fold:
// ￥１，２８０ is ¥1,280, the ideographic space U+3000 a space, （ a
// parenthesis, ～ a tilde) and format characters (Unicode Cf: zero-width
// spaces, direction marks, soft hyphens) dropped. It refuses numerals
// other than ASCII digits once folded (٣, ३, ², ½, ①): Read does not read
// them, and skipping them could misread $12⁹⁹ as 12.
func prepare(raw string) ([]rune, string) {
	s := norm.NFC.String(width.Fold.String(raw))
	rs := make([]rune, 0, len(s))
	for _, r := range s {
		if unicode.Is(unicode.Cf, r) {
			continue
		}
		if unicode.IsNumber(r) && !isDigit(r) {
			return nil, fmt.Sprintf("a numeral other than 0-9 (%q), not read", r)
		}
		rs = append(rs, r)
	}
	return rs, ""
}

func isDigit(r rune) bool { return '0' <= r && r <= '9' }

// isNumSep reports whether r, between digits, belongs to the number: a
// decimal mark or a thousands separator (comma, full stop, apostrophe as in
// CHF 1'299.50, and the no-break, narrow no-break and thin spaces of
// 1 299,00 €). A plain space is not one: 1 280 is two numbers.
func isNumSep(r rune) bool {
	switch r {
	case ',', '.', '\'', '’', '\u00a0', '\u202f', '\u2009':
		return true
	}
	return false
}

func isDash(r rune) bool {
	switch r {
	case '-', '\u2010', '\u2011', '\u2012', '\u2013', '\u2014', '\u2015', '\u2212', '\ufe58', '\ufe63':
		return true
	}
	return false
}

func isBracket(r rune) bool {
	switch r {
	case '(', ')', '[', ']', '【', '】', '〔', '〕':
		return true
	}
	return false
}

func isOpen(r rune) bool  { return r == '(' || r == '[' || r == '【' || r == '〔' }
func isClose(r rune) bool { return r == ')' || r == ']' || r == '】' || r == '〕' }

// isLatin reports whether r is a letter of an alphabet written in words
// separated by spaces (Latin, Greek, Cyrillic and the like), as opposed to
// the CJK scripts, which are read by their characters.
func isLatin(r rune) bool { return r < 0x2E80 && unicode.IsLetter(r) }

// cjk are the words read in the CJK scripts, longest first where one
// starts another.
var cjk = []struct {
	text []rune
	k    kind
	tax  string
	sign *sign
}{
	{text: []rune("税込み"), k: kTax, tax: protocol.TaxIncluded},
	{text: []rune("税込"), k: kTax, tax: protocol.TaxIncluded},
	{text: []rune("内税"), k: kTax, tax: protocol.TaxIncluded},
	{text: []rune("税抜き"), k: kTax, tax: protocol.TaxExcluded},
	{text: []rune("税抜"), k: kTax, tax: protocol.TaxExcluded},
	{text: []rune("税別"), k: kTax, tax: protocol.TaxExcluded},
	{text: []rune("外税"), k: kTax, tax: protocol.TaxExcluded},
	{text: []rune("税"), k: kTaxWord},
	{text: []rune("から"), k: kRange},
	{text: []rune("より"), k: kRange},
	{text: []rune("以上"), k: kRange},
	{text: []rune("以下"), k: kRange},
	{text: []rune("起"), k: kRange},
	{text: []rune("부터"), k: kRange},
	{text: []rune("이상"), k: kRange},
	{text: []rune("約"), k: kApprox},
	{text: []rune("およそ"), k: kApprox},
	{text: []rune("程度"), k: kApprox},
	{text: []rune("前後"), k: kApprox},
	{text: []rune("円"), k: kSign, sign: wordSigns['円']},
	{text: []rune("元"), k: kSign, sign: wordSigns['元']},
	{text: []rune("원"), k: kSign, sign: wordSigns['원']},
}

// kanjiMagnitude are the numerals that multiply a number written before
// them (1万円 is 10,000 yen).
func kanjiMagnitude(r rune) bool {
	switch r {
	case '十', '百', '千', '万', '萬', '億', '兆':
		return true
	}
	return false
}

// latinMagnitude are the letters that multiply a number written before
// them ($10k, 5M).
var latinMagnitude = map[string]bool{"k": true, "m": true, "b": true, "bn": true, "mn": true, "mil": true, "mio": true, "mrd": true}

// taxWords are words about tax that, outside the phrases Read knows, it
// refuses rather than skip.
var taxWords = map[string]bool{"tax": true, "taxes": true, "vat": true, "gst": true, "mwst": true}

// phrases are the tax and range wordings Read knows in Latin letters,
// matched word by word regardless of case, the words separated by spaces,
// full stops or hyphens ("Tax incl.", "incl. tax", "tax-excluded").
var phrases = []struct {
	words []string
	k     kind
	tax   string
}{
	{[]string{"tax", "not", "included"}, kTax, protocol.TaxExcluded},
	{[]string{"tax", "included"}, kTax, protocol.TaxIncluded},
	{[]string{"tax", "inclusive"}, kTax, protocol.TaxIncluded},
	{[]string{"tax", "incl"}, kTax, protocol.TaxIncluded},
	{[]string{"tax", "inc"}, kTax, protocol.TaxIncluded},
	{[]string{"incl", "tax"}, kTax, protocol.TaxIncluded},
	{[]string{"inc", "tax"}, kTax, protocol.TaxIncluded},
	{[]string{"including", "tax"}, kTax, protocol.TaxIncluded},
	{[]string{"vat", "included"}, kTax, protocol.TaxIncluded},
	{[]string{"vat", "incl"}, kTax, protocol.TaxIncluded},
	{[]string{"incl", "vat"}, kTax, protocol.TaxIncluded},
	{[]string{"including", "vat"}, kTax, protocol.TaxIncluded},
	{[]string{"inkl", "mwst"}, kTax, protocol.TaxIncluded},
	{[]string{"tax", "excluded"}, kTax, protocol.TaxExcluded},
	{[]string{"tax", "exclusive"}, kTax, protocol.TaxExcluded},
	{[]string{"tax", "excl"}, kTax, protocol.TaxExcluded},
	{[]string{"excl", "tax"}, kTax, protocol.TaxExcluded},
	{[]string{"ex", "tax"}, kTax, protocol.TaxExcluded},
	{[]string{"excluding", "tax"}, kTax, protocol.TaxExcluded},
	{[]string{"plus", "tax"}, kTax, protocol.TaxExcluded},
	{[]string{"before", "tax"}, kTax, protocol.TaxExcluded},
	{[]string{"vat", "excluded"}, kTax, protocol.TaxExcluded},
	{[]string{"vat", "excl"}, kTax, protocol.TaxExcluded},
	{[]string{"excl", "vat"}, kTax, protocol.TaxExcluded},
	{[]string{"excluding", "vat"}, kTax, protocol.TaxExcluded},
	{[]string{"plus", "vat"}, kTax, protocol.TaxExcluded},
	{[]string{"zzgl", "mwst"}, kTax, protocol.TaxExcluded},
	{[]string{"starting", "at"}, kRange, ""},
	{[]string{"starting", "from"}, kRange, ""},
	{[]string{"starts", "at"}, kRange, ""},
	{[]string{"up", "to"}, kRange, ""},
	{[]string{"and", "up"}, kRange, ""},
	{[]string{"or", "more"}, kRange, ""},
	{[]string{"or", "less"}, kRange, ""},
	{[]string{"from"}, kRange, ""},
	{[]string{"to"}, kRange, ""},
	{[]string{"ab"}, kRange, ""},
	{[]string{"desde"}, kRange, ""},
	{[]string{"a", "partir", "de"}, kRange, ""},
	{[]string{"à", "partir", "de"}, kRange, ""},
	{[]string{"approximately"}, kApprox, ""},
	{[]string{"approx"}, kApprox, ""},
	{[]string{"circa"}, kApprox, ""},
	{[]string{"ca"}, kApprox, ""},
}

// lex finds the marks of a prepared string, in order; it refuses a number
// written right after a separator (.5, Ver.5), which it could only guess.
// Every rune is looked at a bounded number of times: linear in the input.
func lex(rs []rune) (*scan, string) {
	s := &scan{rs: rs, nonSpace: make([]int, len(rs)+1), parens: make([]int, len(rs)+1)}
	for i, r := range rs {
		s.nonSpace[i+1] = s.nonSpace[i]
		if !unicode.IsSpace(r) {
			s.nonSpace[i+1]++
		}
		s.parens[i+1] = s.parens[i]
		if isBracket(r) {
			s.parens[i+1]++
		}
	}
	n := len(rs)
	for i := 0; i < n; {
		r := rs[i]
		switch {
		case isDigit(r):
			if i > 0 && (rs[i-1] == '.' || rs[i-1] == ',') {
				return nil, fmt.Sprintf("a number starts with %q: not read", rs[i-1])
			}
			j := i
			for j < n && isDigit(rs[j]) {
				j++
			}
			for j+1 < n && isNumSep(rs[j]) && isDigit(rs[j+1]) {
				j++
				for j < n && isDigit(rs[j]) {
					j++
				}
			}
			s.add(mark{k: kNum, start: i, end: j})
			i = j
		case isDash(r):
			s.add(mark{k: kDash, start: i, end: i + 1, text: string(r)})
			i++
		case r == '~' || r == '〜' || r == '∼':
			s.add(mark{k: kRange, start: i, end: i + 1, text: string(r)})
			i++
		case r == '+':
			s.add(mark{k: kPlus, start: i, end: i + 1, text: "+"})
			i++
		case r == '≈':
			s.add(mark{k: kApprox, start: i, end: i + 1, text: "≈"})
			i++
		case r == '▲' || r == '△' || r == '▼' || r == '▽':
			s.add(mark{k: kDiff, start: i, end: i + 1, text: string(r)})
			i++
		case isLatin(r):
			i = s.word(i)
		case unicode.Is(unicode.Sc, r):
			if sg := symbolSigns[r]; sg != nil {
				s.add(mark{k: kSign, start: i, end: i + 1, sign: sg, text: sg.text})
			} else {
				s.add(mark{k: kBadSign, start: i, end: i + 1, symbol: true, text: string(r)})
			}
			i++
		default:
			i = s.cjk(i)
		}
	}
	fill := make([]bool, n)
	for i, r := range rs {
		fill[i] = unicode.IsSpace(r) || isBracket(r)
	}
	for _, m := range s.marks {
		if m.k == kTax {
			for i := m.start; i < m.end; i++ {
				fill[i] = true
			}
		}
	}
	s.nonFill = make([]int, n+1)
	for i, f := range fill {
		s.nonFill[i+1] = s.nonFill[i]
		if !f {
			s.nonFill[i+1]++
		}
	}
	return s, ""
}

func (s *scan) add(m mark) { s.marks = append(s.marks, m) }

// ws reports whether rs[a:b] holds only spaces (or nothing).
func (s *scan) ws(a, b int) bool { return a <= b && s.nonSpace[b] == s.nonSpace[a] }

// filler reports whether rs[a:b] holds only spaces, brackets and tax
// wording (or nothing): 1,280円（税込）〜 is a range.
func (s *scan) filler(a, b int) bool { return a <= b && s.nonFill[b] == s.nonFill[a] }

// bracketed reports whether a bracket stands in rs[a:b].
func (s *scan) bracketed(a, b int) bool { return a < b && s.parens[b] != s.parens[a] }

// plusBefore returns where a plus sign stands before i, spaces apart
// (1,280円+税, $12 + tax), or -1.
func (s *scan) plusBefore(i int) int {
	p := i - 1
	for p >= 0 && unicode.IsSpace(s.rs[p]) {
		p--
	}
	if p >= 0 && s.rs[p] == '+' {
		return p
	}
	return -1
}

// dropPlus forgets the plus sign at p, the last mark, now part of tax
// wording.
func (s *scan) dropPlus(p int) {
	if n := len(s.marks); n > 0 && s.marks[n-1].k == kPlus && s.marks[n-1].start == p {
		s.marks = s.marks[:n-1]
	}
}

// cjk reads the CJK word at i, if any, and returns where reading goes on.
func (s *scan) cjk(i int) int {
	rs := s.rs
	if kanjiMagnitude(rs[i]) {
		if i > 0 && isDigit(rs[i-1]) {
			s.add(mark{k: kMagnitude, start: i, end: i + 1, text: string(rs[i])})
		}
		return i + 1
	}
	for _, w := range cjk {
		if !hasRunes(rs[i:], w.text) {
			continue
		}
		m := mark{k: w.k, start: i, end: i + len(w.text), tax: w.tax, sign: w.sign, text: string(w.text)}
		if w.k == kTaxWord {
			if p := s.plusBefore(i); p >= 0 {
				s.dropPlus(p)
				m = mark{k: kTax, start: p, end: i + 1, tax: protocol.TaxExcluded, text: "+税"}
			}
		}
		s.add(m)
		return m.end
	}
	return i + 1
}

func hasRunes(rs, prefix []rune) bool {
	if len(rs) < len(prefix) {
		return false
	}
	for i, r := range prefix {
		if rs[i] != r {
			return false
		}
	}
	return true
}

// word reads the run of letters at i and returns where reading goes on.
func (s *scan) word(i int) int {
	rs, n := s.rs, len(s.rs)
	j := i
	for j < n && isLatin(rs[j]) {
		j++
	}
	w := string(rs[i:j])
	if j < n && (rs[j] == '$' || rs[j] == '¥') && j-i <= 3 && upperASCII(w) {
		t := w + string(rs[j])
		if sg := prefixedSigns[t]; sg != nil {
			s.add(mark{k: kSign, start: i, end: j + 1, sign: sg, text: t})
		} else {
			s.add(mark{k: kBadSign, start: i, end: j + 1, symbol: true, text: t})
		}
		return j + 1
	}
	// HK $88: a country of two letters, one space apart (A $10 is English).
	if j+1 < n && j-i == 2 && unicode.IsSpace(rs[j]) && (rs[j+1] == '$' || rs[j+1] == '¥') {
		if sg := prefixedSigns[w+string(rs[j+1])]; sg != nil {
			s.add(mark{k: kSign, start: i, end: j + 2, sign: sg, text: sg.text})
			return j + 2
		}
	}
	for _, p := range phrases {
		if end, ok := s.phrase(i, p.words); ok {
			if end < n && rs[end] == '.' { // approx., tax incl.
				end++
			}
			s.add(mark{k: p.k, start: i, end: end, tax: p.tax, text: string(rs[i:end])})
			return end
		}
	}
	if sg := codeSigns[w]; sg != nil {
		s.add(mark{k: kSign, start: i, end: j, sign: sg, text: w})
		return j
	}
	if sg := latinSigns[w]; sg != nil {
		if w == "Rs" && j < n && rs[j] == '.' {
			j++
		}
		s.add(mark{k: kSign, start: i, end: j, sign: sg, text: w})
		return j
	}
	if len(w) == 3 && upperASCII(w) {
		if _, err := currency.ParseISO(w); err == nil {
			s.add(mark{k: kBadSign, start: i, end: j, text: w})
			return j
		}
	}
	if unsupportedWords[w] {
		s.add(mark{k: kBadSign, start: i, end: j, text: w})
		return j
	}
	lw := lower(w)
	if i > 0 && isDigit(rs[i-1]) && latinMagnitude[lw] {
		s.add(mark{k: kMagnitude, start: i, end: j, text: w})
		return j
	}
	if taxWords[lw] {
		if p := s.plusBefore(i); p >= 0 {
			s.dropPlus(p)
			s.add(mark{k: kTax, start: p, end: j, tax: protocol.TaxExcluded, text: string(rs[p:j])})
		} else {
			s.add(mark{k: kTaxWord, start: i, end: j, text: w})
		}
	}
	return j
}

// phrase matches words at i and returns where the match ends.
func (s *scan) phrase(i int, words []string) (int, bool) {
	rs, n := s.rs, len(s.rs)
	p := i
	for k, w := range words {
		if k > 0 {
			q := p
			for q < n && (unicode.IsSpace(rs[q]) || rs[q] == '.' || rs[q] == '-') {
				q++
			}
			if q == p {
				return 0, false
			}
			p = q
		}
		for _, c := range w {
			if p >= n || unicode.ToLower(rs[p]) != c {
				return 0, false
			}
			p++
		}
		if p < n && isLatin(rs[p]) {
			return 0, false
		}
	}
	return p, true
}

func upperASCII(w string) bool {
	if w == "" {
		return false
	}
	for i := 0; i < len(w); i++ {
		if w[i] < 'A' || w[i] > 'Z' {
			return false
		}
	}
	return true
}

func lower(w string) string {
	b := []rune(w)
	for i, r := range b {
		b[i] = unicode.ToLower(r)
	}
	return string(b)
}
