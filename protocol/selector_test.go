package protocol

import (
	"strings"
	"testing"
)

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
