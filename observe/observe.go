// Package observe reads a value displayed on a phone's screen, the text of
// an element an extract step names, as the step's parse says: the text
// itself, a number, or a price with its currency and tax. The rules are
// those of docs/observations.md, section "Reading values"; in short, a
// string that does not show exactly one amount is refused, never guessed
// at: two prices (a sale), a range, an unknown currency, a separator that
// could be read two ways.
//
// Input is treated as hostile: at most protocol.MaxObservedBytes bytes of
// UTF-8, read in time linear in its length.
package observe

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/edgeagent/edgeagent/protocol"
)

// Options are an extract step's fields that say how to read its value
// (protocol.Step's Parse, Currency and Tax).
type Options struct {
	// Parse is protocol.ParseText (also when empty), ParseNumber or
	// ParsePrice.
	Parse string
	// Currency, for a price, is the ISO 4217 code of a price shown without
	// a sign, and the one a sign shown must agree with.
	Currency string
	// Tax, for a price, picks the tax-included (protocol.TaxIncluded) or
	// tax-excluded (protocol.TaxExcluded) price of a string showing both.
	Tax string
}

// Value is a value read: what protocol.Observation records besides the raw
// string.
type Value struct {
	// Value is the text, trimmed, or a decimal string: an optional minus,
	// digits without grouping or leading zeros, and the fraction digits as
	// shown ("1280", "12.50", "-200").
	Value string
	// Currency is a price's ISO 4217 code.
	Currency string
	// Tax is a price's protocol.TaxIncluded or TaxExcluded, when the
	// screen says which; empty otherwise.
	Tax string
}

// ReadError is why a displayed string could not be read as asked. Callers
// fail the job with it.
type ReadError struct {
	// Parse is how the string was to be read.
	Parse string
	// Raw is the string as displayed.
	Raw string
	// Reason says what was wrong with it.
	Reason string
}

// maxQuoted bounds how much of Raw an error message quotes.
const maxQuoted = 200

// Error is `read <parse> "<raw>": <reason>`, the raw string shortened to
// its first 200 bytes.
func (e *ReadError) Error() string {
	raw := e.Raw
	if len(raw) > maxQuoted {
		cut := maxQuoted
		for cut > 0 && !utf8.RuneStart(raw[cut]) {
			cut--
		}
		raw = raw[:cut] + "…"
	}
	return fmt.Sprintf("read %s %q: %s", e.Parse, raw, e.Reason)
}

// Read reads raw, the string an element displays, as o says (the rules of
// docs/observations.md, "Reading values"):
//
//   - text: raw without the white space around it (Unicode White_Space,
//     which includes the no-break spaces and the ideographic space U+3000);
//   - number: the one number raw shows, as a decimal string;
//   - price: the one price raw shows, as a decimal string with its ISO 4217
//     currency and, when the screen says, whether it includes tax.
//
// A string it cannot read so, or longer than protocol.MaxObservedBytes, or
// not UTF-8, is refused with a *ReadError.
func Read(raw string, o Options) (Value, error) {
	parse := o.Parse
	if parse == "" {
		parse = protocol.ParseText
	}
	fail := func(format string, args ...any) (Value, error) {
		return Value{}, &ReadError{Parse: parse, Raw: raw, Reason: fmt.Sprintf(format, args...)}
	}
	switch parse {
	case protocol.ParseText, protocol.ParseNumber, protocol.ParsePrice:
	default:
		return fail("parse is not %s, %s or %s", protocol.ParseText, protocol.ParseNumber, protocol.ParsePrice)
	}
	if len(raw) > protocol.MaxObservedBytes {
		return fail("%d bytes, at most %d", len(raw), protocol.MaxObservedBytes)
	}
	if !utf8.ValidString(raw) {
		return fail("not UTF-8")
	}
	var v Value
	var why string
	switch parse {
	case protocol.ParseText:
		return Value{Value: strings.TrimFunc(raw, unicode.IsSpace)}, nil
	case protocol.ParseNumber:
		v, why = readNumber(raw)
	default:
		v, why = readPrice(raw, o)
	}
	if why != "" {
		return fail("%s", why)
	}
	return v, nil
}

// readNumber reads the one number of raw, other text aside.
func readNumber(raw string) (Value, string) {
	rs, why := prepare(raw)
	if why != "" {
		return Value{}, why
	}
	s, why := lex(rs)
	if why != "" {
		return Value{}, why
	}
	us, _, why := s.units(false)
	switch {
	case why != "":
		return Value{}, why
	case len(us) == 0:
		return Value{}, "no number"
	case len(us) > 1:
		return Value{}, fmt.Sprintf("%d numbers, not one", len(us))
	}
	u := us[0]
	m := s.marks[u.num]
	intPart, frac, why := decimal(rs[m.start:m.end], numberReading)
	if why != "" {
		return Value{}, why
	}
	return Value{Value: format(u.neg, intPart, frac)}, ""
}

// readPrice reads the one price of raw, or the one of two that o.Tax picks.
func readPrice(raw string, o Options) (Value, string) {
	if o.Currency != "" {
		if _, ok := currencies[o.Currency]; !ok {
			return Value{}, fmt.Sprintf("the step's currency %q is not one this reader handles", o.Currency)
		}
	}
	switch o.Tax {
	case "", protocol.TaxIncluded, protocol.TaxExcluded:
	default:
		return Value{}, fmt.Sprintf("the step's tax %q is not %s or %s", o.Tax, protocol.TaxIncluded, protocol.TaxExcluded)
	}
	rs, why := prepare(raw)
	if why != "" {
		return Value{}, why
	}
	if free(rs) {
		if o.Currency == "" {
			return Value{}, "free, but the step sets no currency"
		}
		return Value{Value: "0", Currency: o.Currency}, ""
	}
	s, why := lex(rs)
	if why != "" {
		return Value{}, why
	}
	us, loose, why := s.units(true)
	if why != "" {
		return Value{}, why
	}
	if why := s.bindTax(us); why != "" {
		return Value{}, why
	}
	var u *unit
	switch len(us) {
	case 0:
		return Value{}, "no number"
	case 1:
		u = &us[0]
		if o.Tax != "" && u.tax != "" && u.tax != o.Tax {
			return Value{}, fmt.Sprintf("shows only a %s price, the step asks for tax: %s", taxName(u.tax), o.Tax)
		}
	case 2:
		a, b := &us[0], &us[1]
		both := a.tax != "" && b.tax != ""
		switch {
		case a.tax == "" && b.tax == "":
			if len(a.signs) > 0 && len(b.signs) > 0 {
				return Value{}, "two prices, not one (a sale price and a former one?)"
			}
			return Value{}, "two numbers, not one price"
		case a.tax == b.tax:
			return Value{}, fmt.Sprintf("two prices, both %s", taxName(a.tax))
		case !both && s.inBrackets(us, 0) == s.inBrackets(us, 1):
			// 1,280円(税込) → 980円 is a sale, not a price and its
			// counterpart: 1,280円（税込1,408円）.
			return Value{}, fmt.Sprintf("two prices, only one marked %s and neither in brackets beside the other (a sale?)", taxName(a.tax+b.tax))
		case o.Tax == "" && both:
			return Value{}, "shows both a tax-included and a tax-excluded price: set tax: included|excluded"
		case o.Tax == "":
			t := a.tax + b.tax
			return Value{}, fmt.Sprintf("two prices, one of them %s: set tax: %s to read that one", taxName(t), t)
		case a.tax == o.Tax:
			u = a
		case b.tax == o.Tax:
			u = b
		default:
			return Value{}, fmt.Sprintf("two prices, neither marked %s", taxName(o.Tax))
		}
		other := a
		if u == a {
			other = b
		}
		if len(other.signs) > 0 {
			c, why := currencyOf(other, o.Currency)
			if why != "" {
				return Value{}, why
			}
			loose = append(loose, &mark{text: c, sign: codeSigns[c]})
		}
	default:
		return Value{}, fmt.Sprintf("%d amounts, not one price", len(us))
	}
	cur, why := currencyOf(u, o.Currency)
	if why != "" {
		return Value{}, why
	}
	for _, m := range loose {
		if !m.sign.word && !m.sign.has(cur) {
			return Value{}, fmt.Sprintf("also shows %s, not %s", m.text, cur)
		}
	}
	info := currencies[cur]
	m := s.marks[u.num]
	intPart, frac, why := decimal(rs[m.start:m.end], reading{group: info.group})
	if why != "" {
		return Value{}, fmt.Sprintf("%s (%s)", why, cur)
	}
	if len(frac) > info.minor {
		if info.minor == 0 {
			return Value{}, fmt.Sprintf("%s has no minor unit, the price shows decimals (.%s)", cur, frac)
		}
		return Value{}, fmt.Sprintf("%d decimals, %s has %d", len(frac), cur, info.minor)
	}
	return Value{Value: format(u.neg, intPart, frac), Currency: cur, Tax: u.tax}, ""
}

// currencyOf is the currency of an amount: the step's, which its signs
// must allow, or the one its signs name, or their default ($ is USD, ¥
// JPY).
func currencyOf(u *unit, step string) (string, string) {
	if len(u.signs) == 0 {
		if step == "" {
			return "", "no currency shown and the step sets none"
		}
		return step, ""
	}
	shown := make([]string, len(u.signs))
	for i, sg := range u.signs {
		shown[i] = sg.text
	}
	var cands []string
	for _, c := range u.signs[0].in {
		all := true
		for _, sg := range u.signs[1:] {
			all = all && sg.has(c)
		}
		if all {
			cands = append(cands, c)
		}
	}
	if len(cands) == 0 {
		return "", fmt.Sprintf("the signs %s name different currencies", strings.Join(shown, " and "))
	}
	if step != "" {
		for _, c := range cands {
			if c == step {
				return step, ""
			}
		}
		return "", fmt.Sprintf("shows %s, not %s (the step's currency)", strings.Join(shown, " "), step)
	}
	if len(cands) == 1 {
		return cands[0], ""
	}
	for _, sg := range u.signs {
		for _, c := range cands {
			if c == sg.def {
				return c, ""
			}
		}
	}
	return "", fmt.Sprintf("%s may be %s: set currency", strings.Join(shown, " "), strings.Join(cands, " or "))
}

// free reports whether a prepared string says only that the price is
// nothing: 無料 or free, in any case, white space around it aside.
func free(rs []rune) bool {
	t := strings.TrimFunc(string(rs), unicode.IsSpace)
	return t == "無料" || strings.EqualFold(t, "free")
}
