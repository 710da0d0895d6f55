package observe

import (
	"fmt"
	"unicode"

	"github.com/edgeagent/edgeagent/protocol"
)

// A unit is one amount as shown: a number with the signs written next to
// it (¥1,280; 1,280円; US$ 12.99 USD), its minus and its tax wording.
type unit struct {
	num        int // index of the kNum mark
	start, end int // runes, signs included
	signs      []*sign
	neg        bool
	tax        string
	taxText    string
}

// units groups the marks into amounts and refuses what is not one amount
// as written: magnitudes (1万円, $10k), ▲/▼ differences, ranges, and, when
// reading a price, currencies Read does not handle. loose are the signs
// that belong to no number.
func (s *scan) units(price bool) (us []unit, loose []*mark, why string) {
	noun := "number"
	if price {
		noun = "price"
	}
	ms := s.marks
	for i := range ms {
		if ms[i].k == kMagnitude {
			return nil, nil, fmt.Sprintf("the number is written with %q: not read as a %s", ms[i].text, noun)
		}
	}
	// nextNum[i]: the first kNum mark at or after i.
	nextNum := make([]int, len(ms)+1)
	nextNum[len(ms)] = -1
	for i := len(ms) - 1; i >= 0; i-- {
		nextNum[i] = nextNum[i+1]
		if ms[i].k == kNum {
			nextNum[i] = i
		}
	}
	unitOf := make([]int, len(ms)) // kNum mark index to unit index
	for i := range ms {
		if ms[i].k == kNum {
			unitOf[i] = len(us)
			us = append(us, unit{num: i, start: ms[i].start, end: ms[i].end})
		}
	}
	// Signs first, then the currencies Read does not handle: a code of
	// one (100 SEK) is refused next to a number that has no sign of its
	// own, or touching one (SEK100), while TOP 1,280円 reads as yen; a
	// symbol (¢, ₽) is refused wherever it is.
	for _, pass := range []kind{kSign, kBadSign} {
		if why := s.bindSigns(us, unitOf, nextNum, pass, price, &loose); why != "" {
			return nil, nil, why
		}
	}
	// k is the first unit starting at or after the end of mark i (marks
	// and units are in order, so it only moves forward).
	k := 0
	for i := range ms {
		m := &ms[i]
		for k < len(us) && us[k].start < m.end {
			k++
		}
		switch m.k {
		case kDash:
			if m.used {
				continue
			}
			// Between two amounts, a range (1,000-2,000円, $10 - $20)
			// unless it touches only the second (1,280円 -200円: a
			// minus); before one alone, a minus (-¥200, - ¥200).
			l := k - 1
			lfill := l >= 0 && s.filler(us[l].end, m.start)
			rfill := k < len(us) && s.filler(m.end, us[k].start)
			switch {
			case lfill && rfill && !(us[l].end < m.start && m.end == us[k].start):
				return nil, nil, "a range, not one " + noun
			case k < len(us) && s.ws(m.end, us[k].start):
				if us[k].neg {
					return nil, nil, "two minus signs"
				}
				us[k].neg = true
			}
		case kRange:
			if (k > 0 && s.filler(us[k-1].end, m.start)) || (k < len(us) && s.filler(m.end, us[k].start)) {
				return nil, nil, "a range, not one " + noun
			}
		case kPlus:
			// 999+, ¥1,000+: at least that much. 1+1 is two numbers.
			if k > 0 && us[k-1].end == m.start && !(k < len(us) && s.ws(m.end, us[k].start)) {
				return nil, nil, "a range, not one " + noun
			}
		case kApprox:
			if price && ((k > 0 && s.filler(us[k-1].end, m.start)) || (k < len(us) && s.filler(m.end, us[k].start))) {
				return nil, nil, fmt.Sprintf("%s marks an approximate price, not one shown exactly", m.text)
			}
		case kDiff:
			if k < len(us) && s.ws(m.end, us[k].start) {
				return nil, nil, fmt.Sprintf("%s marks a difference, not a %s", m.text, noun)
			}
		}
	}
	return us, loose, ""
}

// bindTax gives each tax wording to the amount it qualifies: the only one
// there is; the one before it when it stands alone in brackets
// (1,408円（税込）); the one not behind a bracket (税込 1,408円 (税抜
// 1,280円)); else the nearer, the one after it when as near (1,280円 税込
// 1,408円). It refuses wording Read does not know and an amount worded
// both ways.
func (s *scan) bindTax(us []unit) string {
	if len(us) == 0 {
		return ""
	}
	k := 0 // the first unit starting at or after the end of the mark
	for i := range s.marks {
		m := &s.marks[i]
		if m.k == kTaxWord {
			return fmt.Sprintf("tax wording %q not understood", m.text)
		}
		if m.k != kTax {
			continue
		}
		for k < len(us) && us[k].start < m.end {
			k++
		}
		l := k - 1
		var u *unit
		switch {
		case l < 0:
			u = &us[k]
		case k == len(us):
			u = &us[l]
		case s.aloneInBrackets(m):
			u = &us[l]
		default:
			bl, br := s.bracketed(us[l].end, m.start), s.bracketed(m.end, us[k].start)
			switch {
			case bl && !br:
				u = &us[k]
			case br && !bl:
				u = &us[l]
			case m.start-us[l].end < us[k].start-m.end:
				u = &us[l]
			default:
				u = &us[k]
			}
		}
		if u.tax != "" && u.tax != m.tax {
			return fmt.Sprintf("one amount is worded both %q and %q", u.taxText, m.text)
		}
		u.tax, u.taxText = m.tax, m.text
	}
	return ""
}

// aloneInBrackets reports whether m stands by itself in brackets, spaces
// and full stops aside: (税込), （tax incl.）.
func (s *scan) aloneInBrackets(m *mark) bool {
	rs := s.rs
	p := m.start - 1
	for p >= 0 && unicode.IsSpace(rs[p]) {
		p--
	}
	q := m.end
	for q < len(rs) && (unicode.IsSpace(rs[q]) || rs[q] == '.') {
		q++
	}
	return p >= 0 && isOpen(rs[p]) && q < len(rs) && isClose(rs[q])
}

// taxName is how messages name a tax flag.
func taxName(t string) string {
	if t == protocol.TaxIncluded {
		return "tax-included"
	}
	return "tax-excluded"
}

// bindSigns gives the signs of kind pass (kSign or kBadSign) to the number
// they are written next to, spaces apart: before it (¥1,280, with a minus
// between: ¥-200) or after it (1,280円); a sign between two numbers goes
// to the one it touches, the next when it touches both or neither. Signs
// next to no number are added to loose; kBadSign ones are refused as said
// in units.
func (s *scan) bindSigns(us []unit, unitOf, nextNum []int, pass kind, price bool, loose *[]*mark) string {
	ms := s.marks
	prevNum := -1
	for i := range ms {
		m := &ms[i]
		if m.k == kNum {
			prevNum = i
			continue
		}
		if m.k != pass {
			continue
		}
		pos := either
		if m.sign != nil {
			pos = m.sign.pos
		}
		left := prevNum >= 0 && pos != before && s.ws(ms[prevNum].end, m.start)
		right, dash := false, -1
		if next := nextNum[i]; next >= 0 && pos != after {
			switch {
			case s.ws(m.end, ms[next].start):
				right = true
			case next-1 > i && ms[next-1].k == kDash && ms[next-1].end == ms[next].start && s.ws(m.end, ms[next-1].start):
				right, dash = true, next-1 // ¥-200, ¥ -200
			}
		}
		touchLeft := left && ms[prevNum].end == m.start
		touchRight := right && (m.end == ms[nextNum[i]].start || dash >= 0)
		if m.k == kBadSign {
			if !price {
				continue
			}
			if m.symbol || touchLeft || touchRight ||
				left && len(us[unitOf[prevNum]].signs) == 0 ||
				right && len(us[unitOf[nextNum[i]]].signs) == 0 {
				return fmt.Sprintf("%s is a currency this reader does not handle", m.text)
			}
			continue
		}
		if left && right {
			right = !touchLeft || touchRight
			left = !right
		}
		switch {
		case left:
			u := &us[unitOf[prevNum]]
			u.signs = append(u.signs, m.sign)
			u.end = m.end
		case right:
			u := &us[unitOf[nextNum[i]]]
			u.signs = append(u.signs, m.sign)
			u.start = min(u.start, m.start)
			if dash >= 0 {
				ms[dash].used = true
				u.neg = true
			}
		default:
			*loose = append(*loose, m)
		}
	}
	return ""
}

// inBrackets reports whether amount i of two stands in brackets of its
// own, the other outside them: the （税込1,408円） of 1,280円（税込1,408円）.
func (s *scan) inBrackets(us []unit, i int) bool {
	lo, hi := 0, len(s.rs)
	if i > 0 {
		lo = us[i-1].end
	}
	if i+1 < len(us) {
		hi = us[i+1].start
	}
	open, cls := false, false
	for p := us[i].start - 1; p >= lo; p-- {
		if isBracket(s.rs[p]) {
			open = isOpen(s.rs[p])
			break
		}
	}
	for p := us[i].end; p < hi; p++ {
		if isBracket(s.rs[p]) {
			cls = isClose(s.rs[p])
			break
		}
	}
	return open && cls
}
