package protocol

import (
	"encoding/json"
	"strings"
	"testing"
)

// Element steps are checked at the door: each bad field is named.
func TestElementStepValidation(t *testing.T) {
	for _, tc := range []struct {
		step string
		want string // "" = valid
	}{
		{`{"op":"tap","element":{"text":"Buy"}}`, ""},
		{`{"op":"tap","element":{"text":"~¥[0-9,]+","below":{"id":"com.example.shop:id/name"}},"effect":{"key":"buy-1"}}`, ""},
		{`{"op":"long_press","element":{"desc":"Menu"},"duration_ms":1500}`, ""},
		{`{"op":"long_press","x":10,"y":20}`, ""},
		{`{"op":"text","element":{"id":"q"},"text":"抹茶"}`, ""},
		{`{"op":"wait_for","element":{"id":"com.example.shop:id/price"},"timeout_ms":5000}`, ""},
		{`{"op":"wait_for","element":{"text":"Loading"},"state":"gone"}`, ""},
		{`{"op":"assert","element":{"id":"p"},"matches":"¥[0-9,]+"}`, ""},
		{`{"op":"scroll_until","element":{"text":"Last"},"direction":"up","max_swipes":20}`, ""},
		{`{"op":"extract","name":"price","element":{"id":"p"},"parse":"price","currency":"JPY","tax":"included"}`, ""},
		{`{"op":"extract","name":"title","element":{"id":"t"},"attr":"desc"}`, ""},
		{`{"op":"extract","name":"box","element":{"id":"t","enabled":true},"attr":"bounds","required":false}`, ""},

		{`{"op":"tap","element":{}}`, "element: empty selector"},
		{`{"op":"tap","element":{"index":2}}`, "element: empty selector"},
		{`{"op":"tap","element":{"text":"~("}}`, "element.text: bad regular expression"},
		{`{"op":"tap","element":{"text":"~"}}`, "element.text: empty regular expression"},
		{`{"op":"tap","element":{"text":"a","below":{"id":"~[z-a]"}}}`, "element.below.id: bad regular expression"},
		{`{"op":"tap","element":{"text":"a","below":{}}}`, "element.below: empty selector"},
		{`{"op":"tap","element":{"text":"a","index":-1}}`, "element.index"},
		{`{"op":"tap","element":{"text":"a"},"x":5,"y":5}`, "not both"},
		{`{"op":"swipe","element":{"text":"a"},"x":1,"y":1,"x2":2,"y2":2}`, "element: swipe takes no element"},
		{`{"op":"screenshot","element":{"text":"a"}}`, "element: screenshot takes no element"},
		{`{"op":"wait_for"}`, "element: wait_for needs element"},
		{`{"op":"wait_for","element":{"text":"a"},"timeout_ms":-1}`, "timeout_ms"},
		{`{"op":"wait_for","element":{"text":"a"},"timeout_ms":600001}`, "timeout_ms"},
		{`{"op":"wait_for","element":{"text":"a"},"state":"hidden"}`, `state: "hidden" is not one of visible, gone`},
		{`{"op":"assert","element":{"text":"a"},"matches":"("}`, "matches: bad regular expression"},
		{`{"op":"assert","element":{"text":"a"},"state":"gone","matches":"x"}`, "matches: an element asserted gone"},
		{`{"op":"assert","element":{"text":"a"},"timeout_ms":5}`, "timeout_ms: only wait_for"},
		{`{"op":"scroll_until","element":{"text":"a"},"direction":"sideways"}`, "direction"},
		{`{"op":"scroll_until","element":{"text":"a"},"max_swipes":101}`, "max_swipes"},
		{`{"op":"extract","element":{"id":"p"}}`, "name: extract needs the observation's name"},
		{`{"op":"extract","name":"9lives","element":{"id":"p"}}`, "name: extract needs"},
		{`{"op":"extract","name":"price","element":{"id":"p"},"parse":"money"}`, `parse: "money" is not one of`},
		{`{"op":"extract","name":"price","element":{"id":"p"},"currency":"JPY"}`, "currency, tax: only parse: price"},
		{`{"op":"extract","name":"price","element":{"id":"p"},"parse":"price","currency":"yen"}`, "currency: \"yen\" is not an ISO 4217 code"},
		{`{"op":"extract","name":"price","element":{"id":"p"},"parse":"price","tax":"maybe"}`, "tax"},
		{`{"op":"extract","name":"price","element":{"id":"p"},"parse":"price","currency":"SEK"}`, "currency: SEK is not one prices are read in"},
		{`{"op":"extract","name":"b","element":{"id":"p"},"attr":"bounds","parse":"number"}`, "parse: bounds are read as text"},
		{`{"op":"wait_for","element":{"text":"a"},"parse":"price"}`, "only extract takes them"},
		{`{"op":"wait_for","element":{"text":"a","below":{"text":"b","below":{"text":"c","below":{"text":"d","below":{"text":"e"}}}}}}`, "nest at most 4 deep"},
		{`{"op":"wait_for","element":{"text":"` + strings.Repeat("x", MaxSelectorValue+1) + `"}}`, "element.text: 513 bytes"},
	} {
		var s Step
		if err := json.Unmarshal([]byte(tc.step), &s); err != nil {
			t.Fatalf("%s: %v", tc.step, err)
		}
		err := s.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want valid", tc.step, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%.120s: err = %v, want %q", tc.step, err, tc.want)
		}
	}
}

// A selector renders deterministically, as errors and observations quote
// it.
func TestSelectorString(t *testing.T) {
	yes := true
	s := Selector{Text: "抹茶", ID: "~.*price", Enabled: &yes, Index: 2, Below: &Selector{Desc: "Header"}}
	want := `text="抹茶" id="~.*price" enabled=true below{desc="Header"} index=2`
	if got := s.String(); got != want {
		t.Fatalf("String() = %s, want %s", got, want)
	}
}

// A "~" value matches the whole attribute, never a part of it.
func TestSelectorValueIsAnchored(t *testing.T) {
	re, err := CompileSelectorValue("~¥[0-9,]+")
	if err != nil {
		t.Fatal(err)
	}
	for v, want := range map[string]bool{"¥1,280": true, "税込¥1,280": false, "¥1,280 (税込)": false} {
		if got := re.MatchString(v); got != want {
			t.Errorf("%q: match %v, want %v", v, got, want)
		}
	}
	if re, err := CompileSelectorValue("Buy"); re != nil || err != nil {
		t.Fatalf("an exact value compiled to %v, %v", re, err)
	}
}

// TestCompileSelectorValueAnchors: an expression matches the whole value,
// whatever it holds.
func TestCompileSelectorValueAnchors(t *testing.T) {
	for _, tc := range []struct {
		value string
		match []string
		not   []string
		err   string
	}{
		{value: "~¥[0-9,]+", match: []string{"¥1,280"}, not: []string{"税込¥1,280", "¥1,280 (税込)"}},
		{value: "~a|b", match: []string{"a", "b"}, not: []string{"ab", "xa", "bx"}},
		{value: `~\~x`, match: []string{"~x"}, not: []string{"x", "~xx"}},
		{value: "~a)|(b", err: "bad regular expression: unexpected )"},
		{value: "~(a", err: "bad regular expression: missing closing )"},
		{value: `~\Qa.b`, err: "bad regular expression"},
		{value: "~", err: "empty regular expression"},
	} {
		re, err := CompileSelectorValue(tc.value)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want an error containing %q", tc.value, err, tc.err)
			}
			continue
		}
		if err != nil || re == nil {
			t.Fatalf("%s: %v, %v", tc.value, re, err)
		}
		for _, v := range tc.match {
			if !re.MatchString(v) {
				t.Errorf("%s does not match %q", tc.value, v)
			}
		}
		for _, v := range tc.not {
			if re.MatchString(v) {
				t.Errorf("%s matches %q", tc.value, v)
			}
		}
	}
	if re, err := CompileSelectorValue("¥1,280"); re != nil || err != nil {
		t.Errorf("an exact value: %v, %v", re, err)
	}
}
