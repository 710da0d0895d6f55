package observe

// A currency the reader knows: its ISO 4217 code, its minor unit (how many
// decimals an amount may have) and the separator that, written once and
// followed by exactly three digits, groups thousands in that currency's
// usual notation (',' in ¥1,280; '.' in R$ 1.299). group is 0 where the
// currency's countries write it both ways (EUR: 1.299 € in Germany, €1,299
// in Ireland), so that such an amount is refused as ambiguous.
type currencyInfo struct {
	minor int
	group rune
}

// currencies are the ones Read handles. The minor units are ISO 4217's
// (a test checks them against the CLDR data of golang.org/x/text).
var currencies = map[string]currencyInfo{
	"JPY": {0, ','},
	"KRW": {0, ','},
	"CNY": {2, ','},
	"TWD": {2, ','},
	"HKD": {2, ','},
	"USD": {2, ','},
	"CAD": {2, ','},
	"AUD": {2, ','},
	"NZD": {2, ','},
	"SGD": {2, ','},
	"MXN": {2, ','},
	"GBP": {2, ','},
	"INR": {2, ','},
	"THB": {2, ','},
	"BRL": {2, '.'},
	"EUR": {2, 0},
	"CHF": {2, 0},
}

// Where a sign may stand relative to its number.
type position uint8

const (
	either position = iota
	before          // R$ 12,99; Rs 100
	after           // 1,280円; 12,000원
)

// A sign is how a screen shows a currency: a symbol, a word or a code. in
// lists the currencies it may stand for, def the one it reads as when the
// step names none (empty: the step must name one).
type sign struct {
	text string
	in   []string
	def  string
	pos  position
	word bool // a word that also occurs inside other words (円高, 회원)
}

var dollars = []string{"USD", "CAD", "AUD", "NZD", "SGD", "HKD", "TWD", "MXN"}

// symbolSigns are the currency symbols (Unicode category Sc) Read knows,
// after full-width folding (￥ is ¥, ＄ is $, ￦ is ₩, ￡ is £).
var symbolSigns = map[rune]*sign{
	'¥': {text: "¥", in: []string{"JPY", "CNY"}, def: "JPY"},
	'$': {text: "$", in: dollars, def: "USD"},
	'€': {text: "€", in: []string{"EUR"}, def: "EUR"},
	'£': {text: "£", in: []string{"GBP"}, def: "GBP"},
	'₩': {text: "₩", in: []string{"KRW"}, def: "KRW"},
	'₹': {text: "₹", in: []string{"INR"}, def: "INR"},
	'฿': {text: "฿", in: []string{"THB"}, def: "THB"},
}

// prefixedSigns are a symbol with letters before it that name the country.
var prefixedSigns = map[string]*sign{
	"US$": {text: "US$", in: []string{"USD"}, def: "USD"},
	"HK$": {text: "HK$", in: []string{"HKD"}, def: "HKD"},
	"C$":  {text: "C$", in: []string{"CAD"}, def: "CAD"},
	"CA$": {text: "CA$", in: []string{"CAD"}, def: "CAD"},
	"A$":  {text: "A$", in: []string{"AUD"}, def: "AUD"},
	"AU$": {text: "AU$", in: []string{"AUD"}, def: "AUD"},
	"NZ$": {text: "NZ$", in: []string{"NZD"}, def: "NZD"},
	"S$":  {text: "S$", in: []string{"SGD"}, def: "SGD"},
	"SG$": {text: "SG$", in: []string{"SGD"}, def: "SGD"},
	"NT$": {text: "NT$", in: []string{"TWD"}, def: "TWD"},
	"MX$": {text: "MX$", in: []string{"MXN"}, def: "MXN"},
	"R$":  {text: "R$", in: []string{"BRL"}, def: "BRL", pos: before},
	"JP¥": {text: "JP¥", in: []string{"JPY"}, def: "JPY"},
	"CN¥": {text: "CN¥", in: []string{"CNY"}, def: "CNY"},
}

// wordSigns are written after the number, in the CJK scripts.
var wordSigns = map[rune]*sign{
	'円': {text: "円", in: []string{"JPY"}, def: "JPY", pos: after, word: true},
	'元': {text: "元", in: []string{"CNY", "TWD", "HKD"}, def: "CNY", pos: after, word: true},
	'원': {text: "원", in: []string{"KRW"}, def: "KRW", pos: after, word: true},
}

// latinSigns are currency words in Latin letters other than ISO codes.
var latinSigns = map[string]*sign{
	"Rs":  {text: "Rs", in: []string{"INR"}, def: "INR", pos: before},
	"RMB": {text: "RMB", in: []string{"CNY"}, def: "CNY"},
}

// unsupportedWords are currency words next to a number that Read refuses
// rather than skip (a price in kronor must not be read as the step's
// currency). ISO codes it does not handle are found with x/text/currency.
var unsupportedWords = map[string]bool{
	"kr": true, "Kr": true, "zł": true, "Rp": true, "RM": true, "Kč": true,
	"Ft": true, "lei": true, "руб": true, "лв": true,
}

// codeSigns are the ISO codes of currencies, as a sign.
var codeSigns = func() map[string]*sign {
	m := make(map[string]*sign, len(currencies))
	for c := range currencies {
		m[c] = &sign{text: c, in: []string{c}, def: c}
	}
	return m
}()

func (s *sign) has(code string) bool {
	for _, c := range s.in {
		if c == code {
			return true
		}
	}
	return false
}
