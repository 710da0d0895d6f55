package uitree_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/uitree"
)

// parseSelector reads a selector as a job carries it.
func parseSelector(t testing.TB, js string) protocol.Selector {
	t.Helper()
	var sel protocol.Selector
	dec := json.NewDecoder(strings.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sel); err != nil {
		t.Fatalf("selector %s: %v", js, err)
	}
	return sel
}

func compile(t testing.TB, js string) *uitree.Matcher {
	t.Helper()
	m, err := uitree.Compile(parseSelector(t, js))
	if err != nil {
		t.Fatalf("compile %s: %v", js, err)
	}
	return m
}

func indexes(nodes []*uitree.Node) []int {
	out := make([]int, len(nodes))
	for i, n := range nodes {
		out[i] = n.Index
	}
	return out
}

// TestFind runs every selector key on the shop page at both screen sizes:
// the same layout gives the same nodes in the same order. The node
// numbers are those of the comments in shop_test.go.
func TestFind(t *testing.T) {
	for _, tc := range []struct {
		name, sel string
		find      []int // Find's nodes in order
		resolve   int   // Resolve's node, -1 for none
	}{
		// Each attribute, exact.
		{"text", `{"text":"カートに入れる"}`, []int{26}, 26},
		{"text is exact", `{"text":"カートに"}`, nil, -1},
		{"text is case-sensitive", `{"text":"¥680 "}`, nil, -1},
		{"id", `{"id":"com.example.shop:id/price"}`, []int{10}, 10},
		{"id, twice", `{"id":"com.example.shop:id/related_name"}`, []int{19, 22}, 19},
		{"desc", `{"desc":"カート"}`, []int{5}, 5},
		{"class", `{"class":"android.widget.Button"}`, []int{14, 16, 26, 27}, 14},
		{"package", `{"package":"com.example.shop","text":"今すぐ購入"}`, []int{27}, 27},
		{"another package", `{"package":"com.example.other"}`, nil, -1},
		{"every field", `{"text":"+","id":"com.example.shop:id/plus","desc":"増やす","class":"android.widget.Button","package":"com.example.shop"}`, []int{16}, 16},
		{"one field differs", `{"text":"+","id":"com.example.shop:id/plus","desc":"減らす"}`, nil, -1},

		// Regular expressions match the whole value.
		{"regex price", `{"text":"~¥[0-9,]+"}`, []int{10, 23}, 10},
		{"regex is anchored at the start", `{"text":"~¥1,280"}`, []int{10}, 10},
		{"regex is anchored at the end", `{"text":"~1,280円"}`, nil, -1},
		{"regex with the rest", `{"text":"~1,280円.*"}`, []int{11}, 11},
		{"regex alternation is anchored whole", `{"text":"~¥680|ほうじ茶"}`, []int{23}, 23},
		{"regex on id", `{"id":"~.*:id/related_(name|price)"}`, []int{19, 20, 22, 23}, 19},
		{"regex on desc", `{"desc":"~.*やす"}`, []int{16}, 16},
		{"regex case-insensitive", `{"text":"~(?i)抹茶ラテ.*本入り"}`, []int{9, 22}, 9},
		{"regex matching an empty value", `{"text":"~()","class":"android.widget.ImageButton"}`, []int{3, 5}, 3},
		{"regex that may be empty", `{"text":"~.*","class":"android.widget.ImageButton"}`, []int{3, 5}, 3},
		{"regex that may not be empty", `{"text":"~.+","class":"android.widget.ImageButton"}`, nil, -1},

		// Index.
		{"index", `{"text":"~¥[0-9,]+","index":1}`, []int{10, 23}, 23},
		{"index past the matches", `{"text":"~¥[0-9,]+","index":2}`, []int{10, 23}, -1},

		// States.
		{"enabled false", `{"enabled":false}`, []int{14}, 14},
		{"enabled true", `{"class":"android.widget.Button","enabled":true}`, []int{16, 26, 27}, 16},
		{"checked false", `{"class":"android.widget.CheckBox","checked":false}`, []int{12}, 12},
		{"checked true: the only one has no bounds", `{"checked":true}`, nil, -1},
		{"selected", `{"selected":true}`, []int{21}, 21},
		{"selected false", `{"id":"com.example.shop:id/related","selected":false}`, []int{18}, 18},

		// Only visible nodes match.
		{"collapsed", `{"text":"在庫あり"}`, nil, -1},
		{"no bounds", `{"text":"定期便"}`, nil, -1},

		// below: nearest first.
		{"below", `{"id":"com.example.shop:id/price","below":{"id":"com.example.shop:id/name"}}`, []int{10}, 10},
		{"below, nearest first", `{"class":"android.widget.TextView","below":{"text":"抹茶ラテ 12本入り"}}`, []int{10, 11, 15, 17, 19, 22, 20, 23}, 10},
		{"below, nothing visible", `{"class":"android.widget.TextView","below":{"text":"¥680"}}`, nil, -1},
		{"below, index", `{"class":"android.widget.TextView","below":{"text":"抹茶ラテ 12本入り"},"index":1}`, []int{10, 11, 15, 17, 19, 22, 20, 23}, 11},
		// above: the cards' edge at 352 against the button's 352 is no
		// overlap; ties (the buttons of the quantity row) in document order.
		{"above", `{"class":"android.widget.TextView","above":{"text":"カートに入れる"}}`, []int{20, 19, 17, 15, 10, 11, 9, 4}, 20},
		{"above, ties", `{"class":"android.widget.Button","above":{"text":"カートに入れる"}}`, []int{14, 16}, 14},
		{"above, touching", `{"id":"com.example.shop:id/related","above":{"id":"com.example.shop:id/bottom_bar"}}`, []int{18, 21}, 18},
		// right_of and left_of need a vertical overlap.
		{"right_of", `{"class":"android.widget.TextView","right_of":{"id":"com.example.shop:id/price"}}`, []int{11}, 11},
		{"right_of, nearest first", `{"class":"android.widget.Button","right_of":{"id":"com.example.shop:id/minus"}}`, []int{16}, 16},
		{"right_of, touching", `{"enabled":true,"right_of":{"id":"com.example.shop:id/minus"}}`, []int{15, 16}, 15},
		{"left_of", `{"class":"android.widget.TextView","left_of":{"id":"com.example.shop:id/tax"}}`, []int{10}, 10},
		{"left_of, nearest first", `{"class":"~.*Button","left_of":{"id":"com.example.shop:id/cart"}}`, []int{3}, 3},
		{"left_of, two", `{"text":"~.+","left_of":{"text":"今すぐ購入"}}`, []int{26}, 26},
		// child_of: descendants, in document order.
		{"child_of", `{"enabled":true,"child_of":{"id":"com.example.shop:id/quantity"}}`, []int{15, 16}, 15},
		{"child_of, all descendants", `{"class":"android.widget.Button","child_of":{"class":"android.widget.ScrollView"}}`, []int{14, 16}, 14},
		{"child_of is not the anchor itself", `{"id":"com.example.shop:id/quantity","child_of":{"id":"com.example.shop:id/quantity"}}`, nil, -1},
		{"child_of, the anchor's index", `{"id":"com.example.shop:id/related_price","child_of":{"id":"com.example.shop:id/related","index":1}}`, []int{23}, 23},
		{"child_of, the first anchor", `{"id":"com.example.shop:id/related_price","child_of":{"id":"com.example.shop:id/related"}}`, []int{20}, 20},

		// Nesting: the anchor is itself relative.
		{"nested", `{"text":"~¥.*","right_of":{"id":"com.example.shop:id/related_price","below":{"text":"ほうじ茶ラテ"}}}`, []int{23}, 23},
		{"nested three deep", `{"enabled":true,"left_of":{"class":"android.widget.TextView","child_of":{"id":"com.example.shop:id/related","above":{"text":"今すぐ購入"}}}}`, []int{18, 19}, 18},
		{"nested anchor with an index", `{"class":"android.widget.TextView","above":{"text":"~.+","child_of":{"id":"com.example.shop:id/bottom_bar"},"index":1}}`, []int{23, 22, 17, 11, 9, 4}, 23},
		{"two relative keys", `{"class":"android.widget.TextView","below":{"text":"関連商品"},"right_of":{"text":"ほうじ茶ラテ"}}`, []int{22}, 22},
		{"below and child_of", `{"enabled":true,"below":{"text":"関連商品"},"child_of":{"id":"com.example.shop:id/related","index":1}}`, []int{22, 23}, 22},

		// No anchor, no matches.
		{"anchor not there", `{"enabled":true,"below":{"text":"抹茶ラテ"}}`, nil, -1},
		{"anchor not visible", `{"enabled":true,"below":{"text":"在庫あり"}}`, nil, -1},
		{"anchor index past its matches", `{"enabled":true,"child_of":{"id":"com.example.shop:id/related","index":2}}`, nil, -1},
	} {
		for _, s := range []screen{small, large} {
			t.Run(fmt.Sprintf("%s/%dx%d", tc.name, s.w, s.h), func(t *testing.T) {
				tree := mustParse(t, s.dump())
				m := compile(t, tc.sel)
				got := m.Find(tree)
				if !slices.Equal(indexes(got), tc.find) && (len(got) > 0 || len(tc.find) > 0) {
					t.Errorf("Find %s = %v, want %v", m, indexes(got), tc.find)
				}
				n, err := m.Resolve(tree)
				switch {
				case tc.resolve < 0:
					var nf *uitree.NotFoundError
					if n != nil || !errors.As(err, &nf) {
						t.Errorf("Resolve %s = %+v, %v; want a NotFoundError", m, n, err)
					}
				case err != nil || n == nil || n.Index != tc.resolve:
					t.Errorf("Resolve %s = %+v, %v; want node %d", m, n, err, tc.resolve)
				case n != &tree.Nodes[n.Index]:
					t.Errorf("Resolve %s returned a copy of node %d", m, n.Index)
				}
				if m.Visible(tree) != (tc.resolve >= 0) {
					t.Errorf("Visible %s = %v", m, m.Visible(tree))
				}
			})
		}
	}
}

// TestRelativeGeometry places boxes around an anchor to check the edges
// of each relative key: which side, the overlap across, the gap.
func TestRelativeGeometry(t *testing.T) {
	// The anchor is [100,100][200,200]; each box is named by where it is.
	boxes := []struct {
		name string
		b    [4]int
	}{
		{"anchor", [4]int{100, 100, 200, 200}},
		{"below-touching", [4]int{150, 200, 160, 210}},
		{"below-far", [4]int{100, 300, 200, 310}},
		{"below-near", [4]int{199, 250, 260, 260}},      // overlaps by one pixel
		{"below-edge-only", [4]int{200, 220, 260, 230}}, // shares the right edge only
		{"below-wide", [4]int{0, 250, 1000, 260}},       // spans past both edges, as near as below-near
		{"below-overlapping", [4]int{150, 199, 160, 240}},
		{"above-near", [4]int{100, 80, 101, 95}},
		{"above-left-edge", [4]int{50, 80, 100, 90}},
		{"right-touching", [4]int{200, 190, 210, 300}},
		{"right-far", [4]int{500, 0, 600, 101}},
		{"right-edge-only", [4]int{300, 200, 310, 210}},
		{"left-near", [4]int{90, 150, 99, 151}},
		{"left-far", [4]int{0, 199, 10, 1000}},
		{"inside", [4]int{120, 120, 180, 180}},
		{"diagonal", [4]int{250, 250, 260, 260}},
	}
	var b strings.Builder
	b.WriteString(`<hierarchy rotation="0"><node text="screen" bounds="[0,0][1000,1000]">`)
	for _, x := range boxes {
		fmt.Fprintf(&b, `<node text="%s" bounds="[%d,%d][%d,%d]"/>`, x.name, x.b[0], x.b[1], x.b[2], x.b[3])
	}
	b.WriteString(`</node></hierarchy>`)
	tree := mustParse(t, []byte(b.String()))
	for key, want := range map[string]string{
		"below":    "below-touching below-near below-wide below-far",
		"above":    "above-near",
		"right_of": "right-touching right-far",
		"left_of":  "left-near left-far",
		"child_of": "",
	} {
		sel := fmt.Sprintf(`{"text":"~.+-.+", %q: {"text":"anchor"}}`, key)
		var got []string
		for _, n := range compile(t, sel).Find(tree) {
			got = append(got, n.Text)
		}
		if strings.Join(got, " ") != want {
			t.Errorf("%s: %q, want %q", key, strings.Join(got, " "), want)
		}
	}
	// Everything is inside the screen, in document order.
	got := compile(t, `{"text":"~.+","child_of":{"text":"screen"}}`).Find(tree)
	if len(got) != len(boxes) || got[0].Text != "anchor" || got[len(got)-1].Text != "diagonal" {
		t.Errorf("child_of the screen: %v", indexes(got))
	}
}

// TestRegexEscape: an exact value starting with "~" is written as the
// expression "~\~…".
func TestRegexEscape(t *testing.T) {
	tree := mustParse(t, []byte(`<hierarchy><node text="~セール~" bounds="[0,0][10,10]"/><node text="セール" bounds="[0,10][10,20]"/></hierarchy>`))
	for sel, want := range map[string][]int{
		`{"text":"~\\~セール~"}`: {0},
		`{"text":"~セール~"}`:    nil,
		`{"text":"~~セール~"}`:   {0}, // "~" itself is no special character
		`{"text":"~セール"}`:     {1},
		`{"text":"~\\~.*"}`:   {0},
		`{"text":"~.*セール.*"}`: {0, 1},
	} {
		if got := indexes(compile(t, sel).Find(tree)); !slices.Equal(got, want) && len(got)+len(want) > 0 {
			t.Errorf("%s: %v, want %v", sel, got, want)
		}
	}
}

func TestCompileRefusesInvalidSelectors(t *testing.T) {
	deep := `{"text":"a"}`
	for range protocol.MaxSelectorDepth {
		deep = `{"text":"a","below":` + deep + `}`
	}
	for sel, want := range map[string]string{
		`{}`:                                   "element: empty selector",
		`{"index":1}`:                          "element: empty selector",
		`{"text":"~("}`:                        "element.text: bad regular expression",
		`{"text":"~"}`:                         "element.text: empty regular expression",
		`{"text":"a","below":{"id":"~[z-a]"}}`: "element.below.id: bad regular expression",
		`{"text":"a","index":-1}`:              "element.index",
		`{"text":"a","index":1001}`:            "element.index",
		deep:                                   "nest at most",
		fmt.Sprintf(`{"desc":%q}`, strings.Repeat("x", protocol.MaxSelectorValue+1)): "element.desc: 513 bytes",
	} {
		m, err := uitree.Compile(parseSelector(t, sel))
		if err == nil || !strings.Contains(err.Error(), want) || m != nil {
			t.Errorf("%.60s: %v, %v; want an error containing %q", sel, m, err, want)
		}
	}
}

// TestNotFound: the error names the selector and the closest elements on
// screen.
func TestNotFound(t *testing.T) {
	english := []byte(`<hierarchy rotation="0"><node class="android.widget.FrameLayout" bounds="[0,0][720,1280]">` +
		`<node text="Buy Now" resource-id="shop:id/buy" class="android.widget.Button" clickable="true" enabled="true" bounds="[10,20][200,80]"/>` +
		`<node text="Buy" class="android.widget.Button" clickable="true" enabled="true" bounds="[210,20][400,80]"/>` +
		`<node text="Bye now" enabled="true" bounds="[10,100][200,160]"/>` +
		`<node text="Buy now!" enabled="true" bounds="[0,0][0,0]"/>` +
		`<node text="Cancel" enabled="false" bounds="[10,200][200,260]"/>` +
		`<node text="Sell now" enabled="true" bounds="[10,300][200,360]"/>` +
		`<node text="buy now" enabled="true" bounds="[10,400][200,460]"/>` +
		`</node></hierarchy>`)
	shop := small.dump()
	for _, tc := range []struct {
		dump  []byte
		sel   string
		err   string
		check func(*testing.T, *uitree.NotFoundError)
	}{
		{english, `{"text":"Buy now","class":"android.widget.Button"}`,
			`no element matches text="Buy now" class="android.widget.Button" (closest: text="Buy Now" class="android.widget.Button" at [10,20][200,80], text="Buy" class="android.widget.Button" at [210,20][400,80], text="buy now" at [10,400][200,460])`,
			func(t *testing.T, e *uitree.NotFoundError) {
				if len(e.Closest) != 3 || e.Closest[0].Index != 1 || e.Closest[2].Index != 7 || e.Matches != 0 || e.Visible != 7 {
					t.Errorf("%+v", e)
				}
			}},
		{english, `{"text":"Buy now"}`,
			`no element matches text="Buy now" (closest: text="Buy Now" at [10,20][200,80], text="buy now" at [10,400][200,460], text="Bye now" at [10,100][200,160])`, nil},
		{english, `{"text":"Cancel","enabled":true}`,
			`no element matches text="Cancel" enabled=true (closest: text="Cancel" at [10,200][200,260] but enabled=false)`,
			func(t *testing.T, e *uitree.NotFoundError) {
				if len(e.Closest) != 1 || len(e.Closest[0].Unlike) != 1 || e.Closest[0].Fields[0] != (protocol.SelectorField{Key: "text", Value: "Cancel"}) {
					t.Errorf("%+v", e.Closest)
				}
			}},
		{english, `{"text":"Checkout"}`, `no element matches text="Checkout" (nothing similar among 7 visible elements)`, nil},
		{english, `{"text":"~(?i)sell.*","enabled":false}`, `no element matches text="~(?i)sell.*" enabled=false (nothing similar among 7 visible elements)`, nil},
		{english, `{"text":"~Sell [a-z]+!"}`, `no element matches text="~Sell [a-z]+!" (closest: text="Sell now" at [10,300][200,360])`, nil},
		{shop, `{"text":"カートにいれる"}`, `no element matches text="カートにいれる" (closest: text="カートに入れる" at [16,1136][352,1264])`, nil},
		{shop, `{"text":"~¥[0-9]{4,}"}`,
			`no element matches text="~¥[0-9]{4,}" (closest: text="¥1,280" at [32,744][300,800], text="¥680" at [376,1092][672,1118], text="税込¥1,280" at [48,1092][344,1118])`, nil},
		{shop, `{"id":"com.example.shop:id/related","index":2}`,
			`no element matches id="com.example.shop:id/related" index=2: 2 elements match without the index, which counts from 0`,
			func(t *testing.T, e *uitree.NotFoundError) {
				if e.Matches != 2 || e.Closest != nil {
					t.Errorf("%+v", e)
				}
			}},
		{shop, `{"text":"今すぐ購入","index":1}`, `no element matches text="今すぐ購入" index=1: 1 element matches without the index, which counts from 0`, nil},
		{shop, `{"id":"com.example.shop:id/price","below":{"text":"抹茶ラテ"}}`,
			`no element matches id="com.example.shop:id/price" below{text="抹茶ラテ"}: below: no element matches text="抹茶ラテ" (closest: text="抹茶ラテ 6本入り" at [376,1064][672,1090], text="抹茶ラテ 12本入り" at [32,664][688,728])`,
			func(t *testing.T, e *uitree.NotFoundError) {
				if e.Anchor != "below" || e.AnchorErr == nil || len(e.AnchorErr.Closest) != 2 || e.Closest != nil {
					t.Errorf("%+v", e)
				}
			}},
		{shop, `{"enabled":true,"child_of":{"text":"在庫あり"}}`,
			`no element matches enabled=true child_of{text="在庫あり"}: child_of: no element matches text="在庫あり" (nothing similar among 27 visible elements)`, nil},
		{shop, `{"text":"¥1,280","right_of":{"text":"1,280円 (税込)"}}`,
			`no element matches text="¥1,280" right_of{text="1,280円 (税込)"} (closest: text="¥1,280" at [32,744][300,800], text="税込¥1,280" at [48,1092][344,1118])`, nil},
	} {
		m := compile(t, tc.sel)
		n, err := m.Resolve(mustParse(t, tc.dump))
		var nf *uitree.NotFoundError
		if n != nil || !errors.As(err, &nf) {
			t.Errorf("%s: %+v, %v; want a NotFoundError", tc.sel, n, err)
			continue
		}
		if err.Error() != tc.err {
			t.Errorf("%s:\n got %s\nwant %s", tc.sel, err, tc.err)
		}
		if tc.check != nil {
			tc.check(t, nf)
		}
	}
	// A long value is quoted cut.
	long := strings.Repeat("抹", uitree.MaxCandidateRunes+50)
	_, err := compile(t, `{"text":"抹抹抹"}`).Resolve(mustParse(t, []byte(`<hierarchy><node text="`+long+`" bounds="[0,0][1,1]"/></hierarchy>`)))
	if want := `(closest: text="` + long[:3*uitree.MaxCandidateRunes] + `…" at [0,0][1,1])`; err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("long value: %v", err)
	}
	// A nil tree has nothing.
	if n, err := compile(t, `{"text":"x"}`).Resolve(nil); n != nil || err == nil {
		t.Errorf("nil tree: %v, %v", n, err)
	}
}
