package config

import (
	"slices"
	"strings"
	"testing"
)

// TestDecodeSleep: sleep.inhibit is true unless the file says false, and a
// value that is not a boolean or a misspelt key is refused with its place.
func TestDecodeSleep(t *testing.T) {
	if a, probs := decodeAgent(t, "agent_id: a\n", nil); len(probs) != 0 || !a.Sleep.Inhibit {
		t.Errorf("default: inhibit %v, problems %v; want true", a.Sleep.Inhibit, probs)
	}
	if a, probs := decodeAgent(t, "sleep:\n  inhibit: false\n", nil); len(probs) != 0 || a.Sleep.Inhibit {
		t.Errorf("inhibit: false: inhibit %v, problems %v", a.Sleep.Inhibit, probs)
	}
	for src, want := range map[string]string{
		"sleep:\n  inhibit: yes\n": `f.yaml:2:12: sleep.inhibit: expected true or false, got a string "yes"`,
		"sleep:\n  inhibt: true\n": `f.yaml:2:3: sleep: unknown field "inhibt" (did you mean "inhibit"?)`,
		"sleep: true\n":            `f.yaml:1:8: sleep: expected a mapping, got a boolean`,
	} {
		if _, probs := decodeAgent(t, src, nil); !slices.Equal(probs, []string{want}) {
			t.Errorf("%q: problems\n  %s\nwant\n  %s", src, strings.Join(probs, "\n  "), want)
		}
	}
}
