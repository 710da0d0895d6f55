package observe

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/text/currency"

	"github.com/edgeagent/edgeagent/protocol"
)

// TestDocExamples reads every row of the examples table of
// docs/observations.md as the row says and checks the row's result.
func TestDocExamples(t *testing.T) {
	doc, err := os.ReadFile("../docs/observations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, examples, ok := strings.Cut(string(doc), "\n### Examples\n")
	if !ok {
		t.Fatal("docs/observations.md has no section Examples")
	}
	examples, _, _ = strings.Cut(examples, "\n## ")
	rows := 0
	for _, line := range strings.Split(examples, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := splitRow(line)
		if len(cells) != 5 {
			t.Errorf("row %q: %d cells, want 5", line, len(cells))
			continue
		}
		rows++
		raw, err := strconv.Unquote(`"` + strings.Trim(cells[0], "`") + `"`)
		if err != nil {
			t.Errorf("row %q: shown %s: %v", line, cells[0], err)
			continue
		}
		o := Options{Parse: protocol.ParsePrice}
		if cells[1] != "" {
			for _, kv := range strings.Split(cells[1], ",") {
				k, v, _ := strings.Cut(strings.TrimSpace(kv), ": ")
				switch k {
				case "parse":
					o.Parse = v
				case "currency":
					o.Currency = v
				case "tax":
					o.Tax = v
				default:
					t.Errorf("row %q: step %q", line, kv)
				}
			}
		}
		c := readCase{raw: raw, o: o}
		if reason, refused := strings.CutPrefix(cells[2], "refused: "); refused {
			c.err = reason
			_, err := Read(raw, o)
			if re, ok := err.(*ReadError); !ok || re.Reason != reason {
				t.Errorf("row %q: Read says %v, the row %q", line, err, reason)
			}
		} else {
			c.want = Value{Value: strings.Trim(cells[2], "`"), Currency: cells[3], Tax: cells[4]}
		}
		checkRead(t, c)
	}
	if rows < 40 {
		t.Errorf("%d example rows, want at least 40", rows)
	}
}

// splitRow splits a Markdown table row into its cells, trimmed; \| is a
// pipe within a cell.
func splitRow(line string) []string {
	line = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(line), "|"), "|")
	var cells []string
	var cell strings.Builder
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line) && line[i+1] == '|':
			cell.WriteByte('|')
			i++
		case line[i] == '|':
			cells = append(cells, strings.TrimSpace(cell.String()))
			cell.Reset()
		default:
			cell.WriteByte(line[i])
		}
	}
	return append(cells, strings.TrimSpace(cell.String()))
}

// TestCurrencyTable checks the minor units of the currencies Read handles
// against CLDR's (x/text/currency) and that the documentation lists each.
func TestCurrencyTable(t *testing.T) {
	doc, err := os.ReadFile("../docs/observations.md")
	if err != nil {
		t.Fatal(err)
	}
	for code, info := range currencies {
		u, err := currency.ParseISO(code)
		if err != nil {
			t.Errorf("%s: %v", code, err)
			continue
		}
		if scale, _ := currency.Standard.Rounding(u); scale != info.minor {
			t.Errorf("%s: minor unit %d, CLDR says %d", code, info.minor, scale)
		}
		if !strings.Contains(string(doc), "\n| "+code+" | "+strconv.Itoa(info.minor)+" | ") {
			t.Errorf("docs/observations.md does not list %s with minor unit %d", code, info.minor)
		}
	}
	for _, sg := range []map[string]*sign{prefixedSigns, latinSigns, codeSigns} {
		for text, s := range sg {
			for _, c := range s.in {
				if _, ok := currencies[c]; !ok {
					t.Errorf("sign %s stands for %s, not a currency Read handles", text, c)
				}
			}
		}
	}
	for _, sg := range []map[rune]*sign{symbolSigns, wordSigns} {
		for _, s := range sg {
			if !s.has(s.def) {
				t.Errorf("sign %s defaults to %s, not one of its currencies", s.text, s.def)
			}
			for _, c := range s.in {
				if _, ok := currencies[c]; !ok {
					t.Errorf("sign %s stands for %s, not a currency Read handles", s.text, c)
				}
			}
		}
	}
}
