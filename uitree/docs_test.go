package uitree_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/uitree"
)

// TestSelectorDocExamples: every step of docs/selectors.md's YAML examples
// is valid, and its element resolves on the shop page at both screen
// sizes (or, for state: gone, does not).
func TestSelectorDocExamples(t *testing.T) {
	doc, err := os.ReadFile("../docs/selectors.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(blocks) < 2 {
		t.Fatalf("%d YAML examples", len(blocks))
	}
	trees := []*uitree.Tree{mustParse(t, small.dump()), mustParse(t, large.dump())}
	elements := 0
	for _, b := range blocks {
		var job struct {
			Steps []protocol.Step `json:"steps"`
		}
		if err := yaml.UnmarshalWithOptions([]byte(b[1]), &job, yaml.Strict(), yaml.DisallowUnknownField()); err != nil {
			t.Fatalf("%s\n%v", b[1], err)
		}
		if err := (protocol.Task{Steps: job.Steps}).Validate(); err != nil {
			t.Errorf("%s\n%v", b[1], err)
		}
		for _, s := range job.Steps {
			if s.Element == nil {
				continue
			}
			elements++
			m, err := uitree.Compile(*s.Element)
			if err != nil {
				t.Errorf("%s: %v", s.Element, err)
				continue
			}
			for _, tree := range trees {
				if m.Visible(tree) == (s.State == protocol.StateGone) {
					t.Errorf("%s (%s, state %q): visible %v", s.Element, s.Op, s.State, m.Visible(tree))
				}
			}
		}
	}
	if elements < 10 {
		t.Errorf("%d steps with an element", elements)
	}
	// The not-found messages quoted are the engine's.
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "no element matches") && strings.Contains(line, "com.example.shop") {
			found := false
			for _, sel := range []string{`{"id":"com.example.shop:id/related","index":2}`, `{"id":"com.example.shop:id/price","below":{"text":"抹茶ラテ"}}`} {
				if _, err := compile(t, sel).Resolve(trees[0]); err != nil && err.Error() == line {
					found = true
				}
			}
			if !found {
				t.Errorf("docs/selectors.md quotes an error the engine does not give: %s", line)
			}
		}
	}
}
