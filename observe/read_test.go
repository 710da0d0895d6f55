package observe

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/protocol"
)

const (
	inc = protocol.TaxIncluded
	exc = protocol.TaxExcluded
)

type readCase struct {
	raw  string
	o    Options
	want Value
	err  string // a part of the refusal's reason; empty: read
}

func price(raw, value, cur, tax string) readCase {
	return readCase{raw: raw, o: Options{Parse: protocol.ParsePrice}, want: Value{Value: value, Currency: cur, Tax: tax}}
}

func priceIn(raw, stepCurrency, stepTax, value, cur, tax string) readCase {
	return readCase{raw: raw, o: Options{Parse: protocol.ParsePrice, Currency: stepCurrency, Tax: stepTax}, want: Value{Value: value, Currency: cur, Tax: tax}}
}

func refusedPrice(raw, stepCurrency, stepTax, err string) readCase {
	return readCase{raw: raw, o: Options{Parse: protocol.ParsePrice, Currency: stepCurrency, Tax: stepTax}, err: err}
}

func number(raw, value string) readCase {
	return readCase{raw: raw, o: Options{Parse: protocol.ParseNumber}, want: Value{Value: value}}
}

func refusedNumber(raw, err string) readCase {
	return readCase{raw: raw, o: Options{Parse: protocol.ParseNumber}, err: err}
}

var priceCases = []readCase{
	// Japanese shops.
	price("¥1,280", "1280", "JPY", ""),
	price("1,280円", "1280", "JPY", ""),
	price("￥１，２８０", "1280", "JPY", ""),
	price("１，２８０円", "1280", "JPY", ""),
	price("1280 円", "1280", "JPY", ""),
	price("¥ 1,280", "1280", "JPY", ""),
	price("\u3000¥1,280\u3000", "1280", "JPY", ""),
	price("¥1,280円", "1280", "JPY", ""),
	price("¥0", "0", "JPY", ""),
	price("税込1,408円", "1408", "JPY", inc),
	price("税込み1,408円", "1408", "JPY", inc),
	price("税込価格 1,408円", "1408", "JPY", inc),
	price("(税抜1,280円)", "1280", "JPY", exc),
	price("（税抜き 1,280円）", "1280", "JPY", exc),
	price("1,280円(税込)", "1280", "JPY", inc),
	price("1,408円（税込）", "1408", "JPY", inc),
	price("1,408円 ( 税込 )", "1408", "JPY", inc),
	price("（税込）1,408円", "1408", "JPY", inc),
	price("1,280円（税別）", "1280", "JPY", exc),
	price("1,280円+税", "1280", "JPY", exc),
	price("1,280円＋税", "1280", "JPY", exc),
	price("価格：¥1,280（税込）", "1280", "JPY", inc),
	price("¥1,280(税込)送料無料", "1280", "JPY", inc),
	price("内税 ¥1,408", "1408", "JPY", inc),
	price("\u200e¥1,280\u200f", "1280", "JPY", ""),
	price("¥1\u2009280", "1280", "JPY", ""),
	price("JPY 1,280", "1280", "JPY", ""),
	price("1,280 JPY", "1280", "JPY", ""),
	price("JP¥1,280", "1280", "JPY", ""),
	priceIn("税込 1,408円 (税抜 1,280円)", "", inc, "1408", "JPY", inc),
	priceIn("税込 1,408円 (税抜 1,280円)", "", exc, "1280", "JPY", exc),
	priceIn("税込 1,408円（税抜 1,280円）", "JPY", exc, "1280", "JPY", exc),
	priceIn("1,408円(税込) 1,280円(税抜)", "", exc, "1280", "JPY", exc),
	priceIn("1,280円（税抜） / 1,408円（税込）", "", inc, "1408", "JPY", inc),
	priceIn("1,408円税込 1,280円税抜", "", exc, "1280", "JPY", exc),
	priceIn("税込1,408円（本体1,280円）", "", inc, "1408", "JPY", inc),
	priceIn("1,280円（税込1,408円）", "", inc, "1408", "JPY", inc),
	priceIn("¥1,280 (税込¥1,408)", "", inc, "1408", "JPY", inc),
	priceIn("税抜1,280円(税込1,408円)", "", inc, "1408", "JPY", inc),
	priceIn("1,280", "JPY", "", "1280", "JPY", ""),
	priceIn("1,408（税込）", "JPY", inc, "1408", "JPY", inc),
	priceIn("¥1,280", "CNY", "", "1280", "CNY", ""),
	priceIn("1,280元", "TWD", "", "1280", "TWD", ""),
	price("1,280元", "1280", "CNY", ""),
	priceIn("無料", "JPY", "", "0", "JPY", ""),
	priceIn(" Free ", "USD", "", "0", "USD", ""),
	price("-¥200", "-200", "JPY", ""),
	price("¥-200", "-200", "JPY", ""),
	price("−￥200", "-200", "JPY", ""),
	price("-200円", "-200", "JPY", ""),
	// Elsewhere.
	price("$12.99", "12.99", "USD", ""),
	price("US$12.99", "12.99", "USD", ""),
	price("US$ 12.99", "12.99", "USD", ""),
	price("USD12.99", "12.99", "USD", ""),
	price("$1,299", "1299", "USD", ""),
	price("$12.5", "12.5", "USD", ""),
	price("$12.99 + tax", "12.99", "USD", exc),
	price("$12.99 (tax incl.)", "12.99", "USD", inc),
	price("Tax included: $12", "12", "USD", inc),
	price("$12.99 excl. VAT", "12.99", "USD", exc),
	priceIn("$12.99", "CAD", "", "12.99", "CAD", ""),
	price("C$12.99", "12.99", "CAD", ""),
	price("A$19.95", "19.95", "AUD", ""),
	price("NT$300", "300", "TWD", ""),
	price("€1.299,00", "1299.00", "EUR", ""),
	price("1.299,00 €", "1299.00", "EUR", ""),
	price("1\u00a0299,00\u00a0€", "1299.00", "EUR", ""),
	price("1\u202f299,00 €", "1299.00", "EUR", ""),
	price("€ 12,99", "12.99", "EUR", ""),
	price("12,99 €", "12.99", "EUR", ""),
	price("12,99 € inkl. MwSt.", "12.99", "EUR", inc),
	price("R$ 12,99", "12.99", "BRL", ""),
	price("R$ 1.299", "1299", "BRL", ""),
	price("R$ 1.299,90", "1299.90", "BRL", ""),
	price("£5", "5", "GBP", ""),
	price("£1,299.99", "1299.99", "GBP", ""),
	price("₩12,000", "12000", "KRW", ""),
	price("￦12,000", "12000", "KRW", ""),
	price("12,000원", "12000", "KRW", ""),
	price("12,000 원", "12000", "KRW", ""),
	price("HK$88", "88", "HKD", ""),
	price("HK $88", "88", "HKD", ""),
	price("TOP 1,280円", "1280", "JPY", ""),
	price("CHF 12.50", "12.50", "CHF", ""),
	price("CHF 1'299.50", "1299.50", "CHF", ""),
	price("₹1,00,000", "100000", "INR", ""),
	price("Rs. 499", "499", "INR", ""),
	price("฿350", "350", "THB", ""),

	// Refused.
	refusedPrice("1,280", "", "", "no currency shown and the step sets none"),
	refusedPrice("$12.99", "JPY", "", "shows $, not JPY (the step's currency)"),
	refusedPrice("€12.99", "CAD", "", "shows €, not CAD"),
	refusedPrice("¥1,280", "USD", "", "shows ¥, not USD"),
	refusedPrice("税込 1,408円 (税抜 1,280円)", "", "", "shows both a tax-included and a tax-excluded price: set tax: included|excluded"),
	refusedPrice("1,280円（税込1,408円）", "", "", "two prices, one of them tax-included: set tax: included to read that one"),
	refusedPrice("1,280円（税込1,408円）", "", exc, "two prices, neither marked tax-excluded"),
	refusedPrice("1,280円 税込1,408円", "", inc, "two prices, only one marked tax-included and neither in brackets beside the other"),
	refusedPrice("1,280円(税込) → 980円", "", inc, "only one marked"),
	refusedPrice("(1,280円)(税込1,408円)", "", inc, "only one marked"),
	refusedPrice("税込1,408円", "", exc, "shows only a tax-included price, the step asks for tax: excluded"),
	refusedPrice("1,408円(税込) 1,500円(税込)", "", inc, "two prices, both tax-included"),
	refusedPrice("税込 1,408円(税抜)", "", "", "worded both"),
	refusedPrice("¥1,280〜", "", "", "a range, not one price"),
	refusedPrice("〜¥1,280", "", "", "a range"),
	refusedPrice("1,000〜2,000円", "", "", "a range, not one price"),
	refusedPrice("1,000～2,000円", "", "", "a range"),
	refusedPrice("1,000-2,000円", "", "", "a range"),
	refusedPrice("$10 - $20", "", "", "a range"),
	refusedPrice("$10-$20", "", "", "a range"),
	refusedPrice("$10 – $20", "", "", "a range"),
	refusedPrice("from $10", "", "", "a range"),
	refusedPrice("Starting at $10", "", "", "a range"),
	refusedPrice("up to $20", "", "", "a range"),
	refusedPrice("1,000円から", "", "", "a range"),
	refusedPrice("1,000円以上", "", "", "a range"),
	refusedPrice("ab 12,99 €", "", "", "a range"),
	refusedPrice("à partir de 12,99 €", "", "", "a range"),
	refusedPrice("¥99起", "CNY", "", "a range"),
	refusedPrice("12,000원부터", "", "", "a range"),
	refusedPrice("$10+", "", "", "a range"),
	refusedPrice("約1,280円", "", "", "約 marks an approximate price"),
	refusedPrice("1,000円程度", "", "", "程度 marks an approximate price"),
	refusedPrice("approx. $10", "", "", "marks an approximate price"),
	refusedPrice("≈ €10", "", "", "≈ marks an approximate price"),
	refusedPrice("1,280円（税込）〜", "", "", "a range"),
	refusedPrice("1,000円(税込)～2,000円(税込)", "", inc, "a range"),
	refusedPrice("¥1,280 ¥980", "", "", "two prices, not one"),
	refusedPrice("¥1,280 $9", "", "", "two prices"),
	refusedPrice("1,280円 -200円", "", "", "two prices"),
	refusedPrice("¥1,280 x 3", "", "", "two numbers, not one price"),
	refusedPrice("¥1,280 ¥980 ¥500", "", "", "3 amounts"),
	refusedPrice("Free", "", "", "free, but the step sets no currency"),
	refusedPrice("送料無料", "JPY", "", "no number"),
	refusedPrice("¥", "", "", "no number"),
	refusedPrice("", "JPY", "", "no number"),
	refusedPrice("¥1.280", "", "", "1.280 is ambiguous: 1280 or 1.280 (JPY)"),
	refusedPrice("$1.299", "", "", "ambiguous"),
	refusedPrice("$3.499", "", "", "ambiguous"),
	refusedPrice("€1,299", "", "", "ambiguous"),
	refusedPrice("1.299 €", "", "", "ambiguous"),
	refusedPrice("¥12.5", "", "", "JPY has no minor unit, the price shows decimals (.5)"),
	refusedPrice("¥1,280.00", "", "", "JPY has no minor unit"),
	refusedPrice("$1,299.995", "", "", "3 decimals, USD has 2"),
	refusedPrice("1万円", "", "", "written with \"万\""),
	refusedPrice("¥1.2万", "", "", "written with"),
	refusedPrice("$10k", "", "", "written with \"k\""),
	refusedPrice("99¢", "USD", "", "¢ is a currency this reader does not handle"),
	refusedPrice("100 SEK", "", "", "SEK is a currency"),
	refusedPrice("kr 100", "", "", "kr is a currency"),
	refusedPrice("Z$100", "", "", "Z$ is a currency"),
	refusedPrice("$1,280円", "", "", "name different currencies"),
	refusedPrice("▲200円", "", "", "▲ marks a difference"),
	refusedPrice("免税 ¥1,280", "", "", "tax wording \"税\" not understood"),
	refusedPrice("$12.99 tax free", "", "", "tax wording \"tax\" not understood"),
	refusedPrice("Ver.5 ¥1,280", "", "", "a number starts with '.'"),
	refusedPrice("¥1,2800", "", "", "JPY has no minor unit, the price shows decimals (.2800)"),
	refusedPrice("¥12,34,5", "", "", "not grouped in thousands"),
	refusedPrice("٣٠٠ ¥", "", "", "a numeral other than 0-9 ('٣')"),
	refusedPrice("$12⁹⁹", "", "", "a numeral other than 0-9"),
	refusedPrice("¥1,280", "SEK", "", "the step's currency \"SEK\" is not one this reader handles"),
	refusedPrice("¥1,280", "", "both", "the step's tax \"both\""),
	refusedPrice("¥1,280 (JPY)", "USD", "", "not USD"),
	refusedPrice("Price in ¥: 1,280", "USD", "", "also shows ¥, not USD"),
}

var numberCases = []readCase{
	number("1,280", "1280"),
	number("１，２８０", "1280"),
	number("12.5", "12.5"),
	number("12.50", "12.50"),
	number("-3", "-3"),
	number("−3", "-3"),
	number("+3", "3"),
	number("1.299,50", "1299.50"),
	number("1,299.50", "1299.50"),
	number("1.234.567", "1234567"),
	number("1,234,567.89", "1234567.89"),
	number("1.280", "1.280"),
	number("12,5", "12.5"),
	number("0.125", "0.125"),
	number("007", "7"),
	number("-0", "0"),
	number("1\u00a0234", "1234"),
	number("1,280円", "1280"),
	number("約1,280件", "1280"),
	number("4.5★", "4.5"),
	number("(1,234)", "1234"),
	number("50% OFF", "50"),
	number("約1,280件", "1280"),
	refusedNumber("999+", "a range, not one number"),
	refusedNumber("1+1", "2 numbers"),
	number(" 42 ", "42"),
	refusedNumber("abc", "no number"),
	refusedNumber("", "no number"),
	refusedNumber("1 2", "2 numbers, not one"),
	refusedNumber("iPhone 15 128GB", "2 numbers"),
	refusedNumber("3〜5", "a range, not one number"),
	refusedNumber("3-5", "a range"),
	refusedNumber(".5", "a number starts with '.'"),
	refusedNumber("1,2,3", "not grouped in thousands"),
	refusedNumber("1.234,567.8", "mixes separators"),
	refusedNumber("1万", "written with \"万\""),
	refusedNumber("10k", "written with \"k\""),
	refusedNumber("٣", "a numeral other than 0-9"),
	refusedNumber("½", "a numeral other than 0-9"),
}

var textCases = []readCase{
	{raw: "  ¥1,280 \u3000", want: Value{Value: "¥1,280"}},
	{raw: "\u00a0\u2009\u202fabc\n\t", o: Options{Parse: protocol.ParseText}, want: Value{Value: "abc"}},
	{raw: "a  b", want: Value{Value: "a  b"}},
	{raw: "\u200bx", want: Value{Value: "\u200bx"}},
	{raw: " ", want: Value{Value: ""}},
	{raw: "１，２８０", want: Value{Value: "１，２８０"}},
	{raw: "x", o: Options{Parse: "words"}, err: "parse is not text, number or price"},
	{raw: "\xff", err: "not UTF-8"},
	{raw: strings.Repeat("a", protocol.MaxObservedBytes+1), err: "4097 bytes, at most 4096"},
	{raw: strings.Repeat("a", protocol.MaxObservedBytes), want: Value{Value: strings.Repeat("a", protocol.MaxObservedBytes)}},
}

func TestRead(t *testing.T) {
	for _, group := range []struct {
		name  string
		cases []readCase
	}{{"price", priceCases}, {"number", numberCases}, {"text", textCases}} {
		t.Run(group.name, func(t *testing.T) {
			for _, c := range group.cases {
				checkRead(t, c)
			}
		})
	}
}

func checkRead(t *testing.T, c readCase) {
	t.Helper()
	got, err := Read(c.raw, c.o)
	if c.err != "" {
		var re *ReadError
		switch {
		case err == nil:
			t.Errorf("Read(%q, %+v) = %+v, want a refusal with %q", c.raw, c.o, got, c.err)
		case !errors.As(err, &re):
			t.Errorf("Read(%q, %+v): %T %v, want a *ReadError", c.raw, c.o, err, err)
		case !strings.Contains(re.Reason, c.err):
			t.Errorf("Read(%q, %+v): %v, want the reason to say %q", c.raw, c.o, err, c.err)
		case got != Value{}:
			t.Errorf("Read(%q, %+v) refused with a value %+v", c.raw, c.o, got)
		}
		return
	}
	if err != nil || got != c.want {
		t.Errorf("Read(%q, %+v) = %+v, %v; want %+v", c.raw, c.o, got, err, c.want)
	}
}

func TestPriceTableIsLarge(t *testing.T) {
	if len(priceCases) < 40 {
		t.Errorf("%d price cases, want at least 40", len(priceCases))
	}
}

func TestReadErrorMessage(t *testing.T) {
	_, err := Read("1,000〜2,000円", Options{Parse: protocol.ParsePrice})
	if want := `read price "1,000〜2,000円": a range, not one price`; err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
	long := strings.Repeat("円", protocol.MaxObservedBytes)
	_, err = Read(long, Options{Parse: protocol.ParsePrice})
	var re *ReadError
	if !errors.As(err, &re) || re.Raw != long {
		t.Fatalf("error %v, want a *ReadError holding the raw string", err)
	}
	if msg := err.Error(); len(msg) > 300 || !strings.Contains(msg, "…") || !strings.Contains(msg, "at most 4096") {
		t.Errorf("message of a long string not shortened: %d bytes: %.80s", len(msg), msg)
	}
}

// The currencies an extract step may name at the door are exactly those
// the reader handles.
func TestStepCurrenciesAreTheReaders(t *testing.T) {
	var known []string
	for code := range currencies {
		known = append(known, code)
	}
	slices.Sort(known)
	if !slices.Equal(known, protocol.PriceCurrencies) {
		t.Fatalf("protocol.PriceCurrencies %v, the reader's %v", protocol.PriceCurrencies, known)
	}
}
