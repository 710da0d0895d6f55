package observe

import (
	"fmt"
	"strings"
)

// A reading says what a lone ',' or '.' followed by exactly three digits
// is, the one case where a separator does not tell by itself: group is the
// separator read as grouping thousands there (0: neither), and
// otherDecimal whether the other one is then a decimal mark (true) or
// ambiguous (false).
type reading struct {
	group        rune
	otherDecimal bool
}

// numberReading is ParseNumber's: 1,280 is 1280 and 1.280 is 1.280, as
// written in Japan and in English.
var numberReading = reading{group: ',', otherDecimal: true}

// decimal reads the number mark t (digits and separators, as lex found
// them) as an integer part and a fraction, digits only, without the
// grouping. The rules, in order:
//
//   - no separator: an integer;
//   - a ',' or '.' written once, last, after another kind of separator:
//     the decimal mark, the others grouping (1.299,50; 1,299.50;
//     1'299.50; 1 299,50);
//   - one kind of separator, written more than once or not a ',' or '.':
//     grouping (1,299,000; 1.299.000; 1'299);
//   - a lone ',' or '.': a decimal mark unless exactly three digits follow
//     it and the digits before could be a group (1 to 3, not starting with
//     0): then it is as r says.
//
// Grouping must be regular: a first group of 1 to 3 digits not starting
// with 0, then groups of 3 (or the Indian 1,23,456: groups of 2 then a
// last of 3). Anything else is refused.
func decimal(t []rune, r reading) (intPart, frac, why string) {
	var groups []string
	var seps []rune
	start := 0
	for i, c := range t {
		if !isDigit(c) {
			groups = append(groups, string(t[start:i]))
			seps = append(seps, c)
			start = i + 1
		}
	}
	groups = append(groups, string(t[start:]))
	n := len(seps)
	if n == 0 {
		return groups[0], "", ""
	}
	last := seps[n-1]
	isDec := last == ',' || last == '.'
	lastCount := 0
	for _, c := range seps {
		if c == last {
			lastCount++
		}
	}
	asWritten := string(t)
	switch {
	case isDec && lastCount == 1 && n >= 2:
		for _, c := range seps[:n-1] {
			if c != seps[0] {
				return "", "", fmt.Sprintf("%s mixes separators", asWritten)
			}
		}
		if !grouped(groups[:n]) {
			return "", "", fmt.Sprintf("%s is not grouped in thousands", asWritten)
		}
		return strings.Join(groups[:n], ""), groups[n], ""
	case isDec && n == 1:
		a, b := groups[0], groups[1]
		if len(b) != 3 || len(a) > 3 || a[0] == '0' {
			return a, b, ""
		}
		if last == r.group {
			return a + b, "", ""
		}
		if r.otherDecimal {
			return a, b, ""
		}
		return "", "", fmt.Sprintf("%s is ambiguous: %s%s or %s.%s", asWritten, a, b, a, b)
	}
	for _, c := range seps {
		if c != last {
			return "", "", fmt.Sprintf("%s mixes separators", asWritten)
		}
	}
	if !grouped(groups) {
		return "", "", fmt.Sprintf("%s is not grouped in thousands", asWritten)
	}
	return strings.Join(groups, ""), "", ""
}

// grouped reports whether digit groups are thousands as written: a first
// group of 1 to 3 digits not starting with 0, then groups of 3, or the
// Indian 12,34,567 (a first of 1 or 2, groups of 2, a last of 3).
func grouped(groups []string) bool {
	g0 := groups[0]
	if len(g0) == 0 || len(g0) > 3 || g0[0] == '0' {
		return false
	}
	western := true
	for _, g := range groups[1:] {
		if len(g) != 3 {
			western = false
			break
		}
	}
	if western {
		return true
	}
	n := len(groups)
	if n < 3 || len(g0) > 2 || len(groups[n-1]) != 3 {
		return false
	}
	for _, g := range groups[1 : n-1] {
		if len(g) != 2 {
			return false
		}
	}
	return true
}

// format writes an amount as a decimal string: a minus if negative and not
// zero, the integer part without leading zeros, the fraction as shown.
func format(neg bool, intPart, frac string) string {
	intPart = strings.TrimLeft(intPart, "0")
	if intPart == "" {
		intPart = "0"
	}
	v := intPart
	if frac != "" {
		v += "." + frac
	}
	if neg && strings.Trim(intPart+frac, "0") != "" {
		v = "-" + v
	}
	return v
}
