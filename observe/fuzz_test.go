package observe

import (
	"errors"
	"math/big"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/edgeagent/edgeagent/protocol"
)

// decimalRE is a Value of a number or a price: no grouping, no leading
// zeros, no minus on zero (checked apart).
var decimalRE = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?$`)

var (
	fuzzParses     = []string{protocol.ParseText, protocol.ParseNumber, protocol.ParsePrice, ""}
	fuzzCurrencies = []string{"", "JPY", "USD", "EUR", "KRW", "BRL", "CHF", "CNY"}
	fuzzTaxes      = []string{"", protocol.TaxIncluded, protocol.TaxExcluded}
)

// FuzzRead reads hostile strings every way a step may ask: Read must not
// panic, must refuse with a *ReadError or return a value of the right form,
// one that an observation carries (protocol.Observation.Validate) and that
// reads back the same when written out plainly.
func FuzzRead(f *testing.F) {
	for _, cs := range [][]readCase{priceCases, numberCases, textCases} {
		for _, c := range cs {
			f.Add(c.raw, uint8(indexOf(fuzzParses, c.o.Parse)), uint8(indexOf(fuzzCurrencies, c.o.Currency)), uint8(indexOf(fuzzTaxes, c.o.Tax)))
		}
	}
	f.Fuzz(func(t *testing.T, raw string, parse, cur, tax uint8) {
		o := Options{
			Parse:    fuzzParses[int(parse)%len(fuzzParses)],
			Currency: fuzzCurrencies[int(cur)%len(fuzzCurrencies)],
			Tax:      fuzzTaxes[int(tax)%len(fuzzTaxes)],
		}
		v, err := Read(raw, o)
		if err != nil {
			var re *ReadError
			if !errors.As(err, &re) || re.Raw != raw || re.Reason == "" {
				t.Fatalf("Read(%q, %+v): %v, not a *ReadError with the raw string and a reason", raw, o, err)
			}
			if v != (Value{}) {
				t.Fatalf("Read(%q, %+v) refused with a value %+v", raw, o, v)
			}
			return
		}
		obs := protocol.Observation{Name: "value", Raw: raw, Value: v.Value, Parse: o.Parse, Currency: v.Currency, Tax: v.Tax, ObservedAt: time.Now()}
		if obs.Parse == "" {
			obs.Parse = protocol.ParseText
		}
		if err := obs.Validate(); err != nil {
			t.Fatalf("Read(%q, %+v) = %+v, which an observation cannot carry: %v", raw, o, v, err)
		}
		switch obs.Parse {
		case protocol.ParseText:
			if v.Value != strings.TrimFunc(raw, unicode.IsSpace) || v.Currency != "" || v.Tax != "" {
				t.Fatalf("Read(%q, text) = %+v", raw, v)
			}
		case protocol.ParseNumber:
			checkDecimal(t, raw, v.Value)
			if v.Currency != "" || v.Tax != "" {
				t.Fatalf("Read(%q, number) = %+v", raw, v)
			}
			if again, err := Read(v.Value, o); err != nil || again != v {
				t.Fatalf("Read(%q, number) = %+v, but reading %q gives %+v, %v", raw, v, v.Value, again, err)
			}
		case protocol.ParsePrice:
			checkDecimal(t, raw, v.Value)
			info, ok := currencies[v.Currency]
			if !ok {
				t.Fatalf("Read(%q, %+v): currency %q not one the reader handles", raw, o, v.Currency)
			}
			if o.Currency != "" && v.Currency != o.Currency {
				t.Fatalf("Read(%q, %+v): currency %s, the step's is %s", raw, o, v.Currency, o.Currency)
			}
			if o.Tax != "" && v.Tax != "" && v.Tax != o.Tax {
				t.Fatalf("Read(%q, %+v): tax %s, the step asks for %s", raw, o, v.Tax, o.Tax)
			}
			if _, frac, _ := strings.Cut(v.Value, "."); len(frac) > info.minor {
				t.Fatalf("Read(%q, %+v) = %+v: more decimals than %s has", raw, o, v, v.Currency)
			}
			plain := v.Value + " " + v.Currency
			again, err := Read(plain, Options{Parse: protocol.ParsePrice})
			if err != nil || again.Value != v.Value || again.Currency != v.Currency || again.Tax != "" {
				t.Fatalf("Read(%q, %+v) = %+v, but reading %q gives %+v, %v", raw, o, v, plain, again, err)
			}
		}
	})
}

func checkDecimal(t *testing.T, raw, v string) {
	t.Helper()
	if !decimalRE.MatchString(v) || v == "-0" || strings.HasPrefix(v, "-0.") && strings.Trim(v[3:], "0") == "" {
		t.Fatalf("Read(%q): value %q is not a plain decimal", raw, v)
	}
	if _, ok := new(big.Rat).SetString(v); !ok {
		t.Fatalf("Read(%q): value %q does not parse as a decimal", raw, v)
	}
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return 0
}

func BenchmarkReadPrice(b *testing.B) {
	o := Options{Parse: protocol.ParsePrice, Tax: protocol.TaxIncluded}
	for _, c := range []struct{ name, shown string }{
		{"yen", "¥1,280"},
		{"both-taxes", "税込 1,408円 (税抜 1,280円)"},
		{"euro", "€1.299,00"},
		{"range", "1,000〜2,000円"},
		{"4KB", strings.Repeat("¥1,280 ", protocol.MaxObservedBytes/len("¥1,280 "))},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Read(c.shown, o)
			}
		})
	}
}
