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

// docSections reads docs/selectors.md split at its "## " headings, by
// heading ("" for what comes before the first).
func docSections(t *testing.T) map[string]string {
	t.Helper()
	doc, err := os.ReadFile("../docs/selectors.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for i, part := range strings.Split("\n"+string(doc), "\n## ") {
		if i == 0 {
			out[""] = part
			continue
		}
		title, body, _ := strings.Cut(part, "\n")
		out[title] = body
	}
	return out
}

// TestSelectorDocExamples: every step of docs/selectors.md's YAML examples
// is valid, and its element resolves (or, for state: gone, does not): on
// the shop page at both screen sizes, and in the section "iPhones" on the
// shop's list on an iPhone and on an Android phone alike. The not-found
// errors quoted are the engine's, on the same screens.
func TestSelectorDocExamples(t *testing.T) {
	page := []*uitree.Tree{mustParse(t, small.dump()), mustParse(t, large.dump())}
	list := []*uitree.Tree{mustParse(t, []byte(shopListXCUI)), mustParse(t, small.dumpOf(shopList))}
	yamlBlock := regexp.MustCompile("(?s)```yaml\n(.*?)```")
	blocks, elements, iphone, quoted := 0, 0, 0, 0
	for title, body := range docSections(t) {
		trees := page
		// The selectors whose errors the section quotes.
		errSels := []string{`{"id":"com.example.shop:id/related","index":2}`, `{"id":"com.example.shop:id/price","below":{"text":"抹茶ラテ"}}`}
		if title == "iPhones" {
			trees = list
			errSels = []string{`{"id":"com.example.shop:id/product"}`}
		}
		for _, b := range yamlBlock.FindAllStringSubmatch(body, -1) {
			blocks++
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
						t.Errorf("%s (%s, state %q) on the %s dump: visible %v", s.Element, s.Op, s.State, tree.Platform, m.Visible(tree))
					}
					if tree.Platform == protocol.PlatformIOS {
						iphone++
					}
				}
			}
		}
		for _, line := range strings.Split(body, "\n") {
			if !strings.HasPrefix(line, "no element matches") || !strings.Contains(line, "com.example.shop") {
				continue
			}
			quoted++
			found := false
			for _, sel := range errSels {
				if _, err := compile(t, sel).Resolve(trees[0]); err != nil && err.Error() == line {
					found = true
				}
			}
			if !found {
				t.Errorf("docs/selectors.md, %q, quotes an error the engine does not give: %s", title, line)
			}
		}
	}
	if blocks < 3 || elements < 15 || iphone < 4 || quoted < 3 {
		t.Errorf("%d YAML examples, %d steps with an element, %d resolved on an iPhone, %d errors quoted", blocks, elements, iphone, quoted)
	}
}

// TestSelectorDocIPhones: docs/selectors.md's table of an iPhone's
// attributes has a row for each key of the table of keys that is an
// attribute or a state, and each of its examples resolves on the shop's
// list on an iPhone.
func TestSelectorDocIPhones(t *testing.T) {
	sections := docSections(t)
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)`")
	var keys []string
	for _, m := range row.FindAllStringSubmatch(sections["Keys"], -1) {
		keys = append(keys, m[1])
	}
	iphones, ok := sections["iPhones"]
	if !ok {
		t.Fatal(`docs/selectors.md has no section "iPhones"`)
	}
	tree := mustParse(t, []byte(shopListXCUI))
	rows := map[string]string{}
	for _, line := range strings.Split(iphones, "\n") {
		if m := row.FindStringSubmatch(line); m != nil {
			rows[m[1]] = line
		}
	}
	want := 0
	for _, k := range keys {
		if k == "index" {
			break // the keys after it are not attributes
		}
		want++
		line, ok := rows[k]
		if !ok {
			t.Errorf("the iPhones table has no row for %s", k)
			continue
		}
		cols := strings.Split(line, "|")
		examples := regexp.MustCompile("`(\\{[^`]*\\})`").FindAllStringSubmatch(cols[len(cols)-2], -1)
		if len(examples) == 0 {
			t.Errorf("the iPhones row of %s has no example", k)
		}
		for _, e := range examples {
			var sel protocol.Selector
			if err := yaml.UnmarshalWithOptions([]byte(e[1]), &sel, yaml.Strict(), yaml.DisallowUnknownField()); err != nil {
				t.Errorf("%s: %s: %v", k, e[1], err)
				continue
			}
			if !strings.Contains(e[1], k+":") {
				t.Errorf("the example %s of %s does not use it", e[1], k)
			}
			m, err := uitree.Compile(sel)
			if err != nil {
				t.Errorf("%s: %s: %v", k, e[1], err)
				continue
			}
			if _, err := m.Resolve(tree); err != nil {
				t.Errorf("%s: %s on the iPhone: %v", k, e[1], err)
			}
		}
	}
	if want != 8 || len(rows) != want {
		t.Errorf("%d keys are attributes or states, the iPhones table has %d rows", want, len(rows))
	}
}
