package uitree

import (
	"testing"

	"github.com/edgeagent/edgeagent/protocol"
)

// TestRegexPrefilter: the texts a field turns away before running its
// expression are texts the expression does not match.
func TestRegexPrefilter(t *testing.T) {
	values := []string{"", "¥1,280", "税込¥1,280", "1,280円 (税込)", "abcabc", "ab", "ABC", "xabcx", "ほうじ茶ラテ", "商品 355 ほうじ茶ラテ",
		"抹茶ラテ", "a.b", "a\nb", "Buy now", "buy NOW", "~セール~", "K", "\u212a"}
	for _, tc := range []struct{ expr, contains string }{
		{"¥[0-9,]+", "¥"},
		{".*ほうじ茶ラテ", "ほうじ茶ラテ"},
		{"(?i).*houjicha.*|.*ほうじ茶ラテ", ""},
		{"(abc)+", "abc"},
		{"(abc)*", ""},
		{"x?(abc){2,3}", "abc"},
		{"(?:abc){0,3}", ""},
		{"a.b|ab", "a"}, // the parser factors the a out
		{"[0-9,]+円 \\(税込\\)", "円 (税込)"},
		{"(?i)buy now", ""},
		{"(?i)k", ""},
		{"Buy(?i) now", "Buy"},
		{"\\~セール~", "~セール~"},
		{"(?s)a.b", "a"},
		{"ab(c|d)ef+", "ab"},
	} {
		re, err := protocol.CompileSelectorValue("~" + tc.expr)
		if err != nil {
			t.Fatal(err)
		}
		m, err := Compile(protocol.Selector{Text: "~" + tc.expr})
		if err != nil {
			t.Fatal(err)
		}
		f := &m.fields[0]
		if f.contains != tc.contains {
			t.Errorf("%s: must contain %q, want %q", tc.expr, f.contains, tc.contains)
		}
		var memo regexMemo
		for range 2 { // the second time from the memo
			for _, v := range values {
				if got, want := memo.match(f, v), re.MatchString(v); got != want {
					t.Errorf("%s on %q: %v, want %v", tc.expr, v, got, want)
				}
			}
		}
	}
}
