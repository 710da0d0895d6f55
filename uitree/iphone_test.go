package uitree_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/uitree"
)

// TestParseXCUI reads an iPhone's dump: the nodes are the XCUIElementType…
// elements, their bounds are points times the root's scale in pixels,
// and the attributes stand for uiautomator's as docs/selectors.md,
// "iPhones", says.
func TestParseXCUI(t *testing.T) {
	tree := mustParse(t, []byte(shopListXCUI))
	if tree.Platform != protocol.PlatformIOS || tree.Scale != 3 || tree.Rotation != 0 || len(tree.Nodes) != 35 {
		t.Fatalf("platform %q, scale %d, rotation %d, %d nodes; want ios, 3, 0, 35", tree.Platform, tree.Scale, tree.Rotation, len(tree.Nodes))
	}
	checkTree(t, tree)
	// A fractional size in points rounds to whole pixels.
	price := tree.Nodes[16]
	want := uitree.Node{Index: 16, Parent: 14, Depth: 5, Text: "税込 1,408円 (税抜 1,280円)", ID: "price", Desc: "税込 1,408円 (税抜 1,280円)",
		Class: "XCUIElementTypeStaticText", Package: pkg, Bounds: [4]int{60, 1227, 707, 1348}, Enabled: true}
	if !sameNode(price, want) {
		t.Errorf("price node\n%+v, want\n%+v", price, want)
	}
	if root := tree.Nodes[0]; root.Text != "ショップ" || root.ID != "ショップ" || root.Bounds != [4]int{0, 0, 1179, 2556} || root.Parent != -1 || len(tree.Descendants(&root)) != 34 {
		t.Errorf("application %+v", root)
	}
	// The search field has no label: its text is its value, and it has no
	// description.
	if f := tree.Nodes[6]; f.Text != "ほうじ茶" || f.Desc != "" || f.ID != "input" || !f.Clickable || f.Class != "XCUIElementTypeSearchField" {
		t.Errorf("search field %+v", f)
	}
	if b := tree.Nodes[5]; b.Text != "カート" || b.Desc != "カート" || !b.Clickable || !b.Visible() {
		t.Errorf("cart button %+v", b)
	}
	if row := tree.Nodes[14]; !row.Selected || !row.Clickable || row.Bounds != [4]int{0, 1077, 1179, 1383} || row.Text != "" {
		t.Errorf("selected row %+v", row)
	}
	if tbl := tree.Nodes[7]; !tbl.Scrollable || tbl.Clickable {
		t.Errorf("table %+v", tbl)
	}
	if sw := tree.Nodes[33]; !sw.Checked || !sw.Clickable || sw.Text != "在庫ありのみ" || sw.Bounds != [4]int{48, 2331, 558, 2463} {
		t.Errorf("switch %+v", sw)
	}
	if b := tree.Nodes[34]; b.Enabled || b.Checked || !b.Visible() {
		t.Errorf("disabled button %+v", b)
	}
	// The row under the toolbar is on the screen but not visible; the one
	// past the bottom is cut to the screen's edge too.
	if row := tree.Nodes[26]; !row.Hidden || row.Visible() || row.Bounds != [4]int{0, 2301, 1179, 2556} {
		t.Errorf("hidden row %+v", row)
	}
	if row := tree.Nodes[29]; !row.Hidden || row.Visible() || row.Bounds != [4]int{0, 2556, 1179, 2556} {
		t.Errorf("row past the screen %+v", row)
	}
	for i := range tree.Nodes {
		if n := &tree.Nodes[i]; n.Package != pkg || n.Hidden != (i >= 26 && i <= 31) {
			t.Errorf("node %d: package %q, hidden %v", i, n.Package, n.Hidden)
		}
	}
}

// TestParseXCUIAttributes: the root's scale and bundle id, coordinates
// in points, the type, visibility and checked state, element by element.
func TestParseXCUIAttributes(t *testing.T) {
	el := func(attrs string) string { return `<XCUIElementTypeOther ` + attrs + `/>` }
	app := func(rootAttrs string, kids ...string) []byte {
		return []byte(`<XCUIElementTypeApplication type="XCUIElementTypeApplication" ` + rootAttrs + `>` + strings.Join(kids, "") + `</XCUIElementTypeApplication>`)
	}
	// Without a root frame nothing is clipped: the bounds are as read.
	for _, tc := range []struct {
		name, root, el string
		scale          int
		bounds         [4]int
	}{
		{"no scale: points are pixels", ``, `x="1" y="2" width="3" height="4"`, 1, [4]int{1, 2, 4, 6}},
		{"scale 2", `edgeagent-scale="2"`, `x="1" y="2" width="3" height="4"`, 2, [4]int{2, 4, 8, 12}},
		{"each edge rounds", `edgeagent-scale="3"`, `x="20.5" y="0.1" width="0.5" height="20.333333333333332"`, 3, [4]int{62, 0, 63, 61}},
		{"negative", `edgeagent-scale="3"`, `x="-10" y="-0.5" width="5" height="1"`, 3, [4]int{-30, -2, -15, 2}},
		{"exponent", `edgeagent-scale="1"`, `x="1e2" y="0" width="1E1" height="1"`, 1, [4]int{100, 0, 110, 1}},
		{"missing height", `edgeagent-scale="3"`, `x="1" y="2" width="3"`, 3, [4]int{}},
		{"empty x", `edgeagent-scale="3"`, `x="" y="2" width="3" height="4"`, 3, [4]int{}},
		{"NaN", `edgeagent-scale="3"`, `x="NaN" y="2" width="3" height="4"`, 3, [4]int{}},
		{"Inf", `edgeagent-scale="3"`, `x="1" y="Inf" width="3" height="4"`, 3, [4]int{}},
		{"out of float range", `edgeagent-scale="3"`, `x="1" y="1e400" width="3" height="4"`, 3, [4]int{}},
		{"hex", `edgeagent-scale="3"`, `x="0x10" y="2" width="3" height="4"`, 3, [4]int{}},
		{"underscore", `edgeagent-scale="3"`, `x="1_0" y="2" width="3" height="4"`, 3, [4]int{}},
		{"spaces", `edgeagent-scale="3"`, `x=" 1" y="2" width="3" height="4"`, 3, [4]int{}},
		{"a later bad value", `edgeagent-scale="3"`, `x="1" y="2" width="3" height="4" x="a"`, 3, [4]int{}},
		{"within MaxCoord", `edgeagent-scale="4"`, `x="0" y="0" width="4194304" height="1"`, 4, [4]int{0, 0, uitree.MaxCoord, 4}},
		{"beyond MaxCoord once scaled", `edgeagent-scale="4"`, `x="0" y="0" width="4194305" height="1"`, 4, [4]int{}},
		{"beyond MaxCoord", `edgeagent-scale="1"`, `x="16777217" y="0" width="1" height="1"`, 1, [4]int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tree := mustParse(t, app(tc.root, el(tc.el)))
			if tree.Scale != tc.scale || tree.Platform != protocol.PlatformIOS || len(tree.Nodes) != 2 {
				t.Fatalf("scale %d, platform %q, %d nodes", tree.Scale, tree.Platform, len(tree.Nodes))
			}
			if got := tree.Nodes[1].Bounds; got != tc.bounds {
				t.Errorf("bounds %v, want %v", got, tc.bounds)
			}
		})
	}

	// A scale that is not a whole number from 1 to MaxScale is refused,
	// naming it.
	for _, v := range []string{"0", "5", "-3", "2.5", "three", "", " 3", strings.Repeat("9", 200)} {
		tree, err := uitree.Parse(app(`edgeagent-scale="` + v + `"`))
		want := fmt.Sprintf("ui dump: edgeagent-scale %q is not a whole number from 1 to %d", v, uitree.MaxScale)
		if len(v) > uitree.MaxCandidateRunes {
			want = fmt.Sprintf("ui dump: edgeagent-scale %q is not", v[:uitree.MaxCandidateRunes]+"…")
		}
		if tree != nil || err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("scale %q: %v, %v; want %q", v, tree, err, want)
		}
	}
	// Only the root's scale and bundle id count.
	tree := mustParse(t, app(`x="0" y="0" width="100" height="100"`, el(`edgeagent-scale="3" edgeagent-bundle-id="x" x="1" y="1" width="1" height="1"`)))
	if tree.Scale != 1 || tree.Nodes[1].Bounds != [4]int{1, 1, 2, 2} || tree.Nodes[1].Package != "" {
		t.Errorf("scale %d, child %+v", tree.Scale, tree.Nodes[1])
	}

	// The root's frame keeps the others within it.
	tree = mustParse(t, app(`edgeagent-scale="2" x="0" y="0" width="100" height="200"`,
		el(`x="-10" y="190" width="20" height="20"`), // across the corner
		el(`x="100" y="0" width="10" height="10"`),   // right of the screen
		el(`x="10" y="10" width="-5" height="5"`),    // negative width
	))
	for i, want := range [][4]int{{0, 0, 200, 400}, {0, 380, 20, 400}, {200, 0, 200, 20}, {20, 20, 10, 30}} {
		if got := tree.Nodes[i].Bounds; got != want {
			t.Errorf("node %d: bounds %v, want %v", i, got, want)
		}
	}
	if !tree.Nodes[1].Visible() || tree.Nodes[2].Visible() || tree.Nodes[3].Visible() {
		t.Errorf("visible: %v %v %v", tree.Nodes[1].Visible(), tree.Nodes[2].Visible(), tree.Nodes[3].Visible())
	}

	// Visibility, type, text and checked state.
	tree = mustParse(t, app(`edgeagent-bundle-id="com.example.shop"`,
		`<XCUIElementTypeButton label="a" x="0" y="0" width="9" height="9"/>`,                                              // 1: no visible attribute, no type
		el(`type="XCUIElementTypeSwitch" value="1" visible="true" x="0" y="0" width="9" height="9"`),                       // 2: the type attribute wins
		el(`type="XCUIElementTypeSwitch" value="0" visible="false" x="0" y="0" width="9" height="9"`),                      // 3
		el(`type="XCUIElementTypeCheckBox" value="1" visible="TRUE" x="0" y="0" width="9" height="9"`),                     // 4
		el(`type="XCUIElementTypeToggle" value="1" enabled="true" x="0" y="0" width="9" height="9"`),                       // 5
		el(`type="XCUIElementTypeStaticText" value="1" label="" selected="true" focused="true"`),                           // 6
		el(`type="XCUIElementTypeTextField" label="名前" value="山田" x="0" y="0" width="9" height="9"`),                       // 7
		`<foo><XCUIElementTypeCell name="c" x="0" y="0" width="9" height="9"><node text="n"/></XCUIElementTypeCell></foo>`, // 8, in foo
	))
	if len(tree.Nodes) != 9 {
		t.Fatalf("%d nodes", len(tree.Nodes))
	}
	n := tree.Nodes
	switch {
	case n[1].Class != "XCUIElementTypeButton" || !n[1].Visible() || !n[1].Clickable || n[1].Text != "a" || n[1].Enabled:
		t.Errorf("button %+v", n[1])
	case n[2].Class != "XCUIElementTypeSwitch" || !n[2].Checked || !n[2].Visible():
		t.Errorf("switch on %+v", n[2])
	case n[3].Checked || !n[3].Hidden || n[3].Visible():
		t.Errorf("hidden switch off %+v", n[3])
	case !n[4].Checked || !n[4].Hidden:
		t.Errorf("checkbox, visible=TRUE %+v", n[4])
	case !n[5].Checked || !n[5].Enabled:
		t.Errorf("toggle %+v", n[5])
	case n[6].Checked || n[6].Text != "1" || !n[6].Selected || !n[6].Focused || n[6].Visible():
		t.Errorf("static text %+v", n[6])
	case n[7].Text != "名前" || n[7].Desc != "名前" || !n[7].Clickable:
		t.Errorf("text field %+v", n[7])
	case n[8].Parent != 0 || n[8].Depth != 1 || n[8].ID != "c" || len(tree.Descendants(&n[8])) != 0:
		t.Errorf("cell in another element %+v", n[8])
	}
	for i := range n {
		if n[i].Package != "com.example.shop" {
			t.Errorf("node %d: package %q", i, n[i].Package)
		}
	}

	// The dialect is the root's: uiautomator's nodes are not an iPhone's,
	// nor the other way round.
	if tree := mustParse(t, []byte(`<hierarchy><XCUIElementTypeButton label="a"/><node text="b"/></hierarchy>`)); tree.Platform != protocol.PlatformAndroid ||
		tree.Scale != 1 || len(tree.Nodes) != 1 || tree.Nodes[0].Text != "b" {
		t.Errorf("android dump %+v", tree)
	}
}

// TestXCUISurvey resolves the price survey's selectors
// (examples/surveys/price-check.yaml), written to work on both platforms,
// on the shop's list on an iPhone and on an Android phone: the same
// elements, in pixels on each.
func TestXCUISurvey(t *testing.T) {
	ios := mustParse(t, []byte(shopListXCUI))
	android := mustParse(t, small.dumpOf(shopList))
	for _, tc := range []struct {
		op, sel    string
		ios        [4]int // the node's bounds on the iPhone
		text, name string // its text, and its id's last part
	}{
		{"wait_for", `{"id":"~(com\\.example\\.shop:id/)?product"}`, [4]int{0, 465, 1179, 771}, "", "product"},
		{"scroll_until", `{"text":"ほうじ茶 500ml"}`, [4]int{60, 1107, 1119, 1227}, "ほうじ茶 500ml", "name"},
		{"tap", `{"text":"ほうじ茶 500ml"}`, [4]int{60, 1107, 1119, 1227}, "ほうじ茶 500ml", "name"},
		{"extract", `{"id":"~(com\\.example\\.shop:id/)?price","below":{"text":"ほうじ茶 500ml"}}`, [4]int{60, 1227, 707, 1348}, "税込 1,408円 (税抜 1,280円)", "price"},
	} {
		m := compile(t, tc.sel)
		n, err := m.Resolve(ios)
		if err != nil || n.Bounds != tc.ios || n.Text != tc.text || n.ID != tc.name {
			t.Errorf("%s %s on the iPhone: %+v, %v", tc.op, m, n, err)
		}
		n, err = m.Resolve(android)
		if err != nil || n.Text != tc.text || n.ID != id(tc.name) {
			t.Errorf("%s %s on the Android phone: %+v, %v", tc.op, m, n, err)
		}
	}
	// Nearest first below the name, the hidden rows left out.
	if got := indexes(compile(t, `{"id":"price","below":{"text":"ほうじ茶 500ml"}}`).Find(ios)); !slices.Equal(got, []int{16, 19, 22, 25}) {
		t.Errorf("prices below ほうじ茶 500ml: %v", got)
	}
	// Products further down are not on screen, whether under the toolbar
	// or past the bottom, until the list scrolls: scroll_until goes on.
	for _, sel := range []string{`{"text":"黒豆茶 30袋"}`, `{"text":"抹茶 40g"}`, `{"id":"price","child_of":{"id":"product","index":6}}`} {
		m := compile(t, sel)
		if n, err := m.Resolve(ios); err == nil || m.Visible(ios) {
			t.Errorf("%s resolves to a hidden node %+v", m, n)
		}
	}
}

// TestXCUIAndroidOnlyID: an Android resource id is not an iPhone's
// accessibility identifier, and the error lists the elements whose
// identifier it holds.
func TestXCUIAndroidOnlyID(t *testing.T) {
	tree := mustParse(t, []byte(shopListXCUI))
	_, err := compile(t, `{"id":"com.example.shop:id/product"}`).Resolve(tree)
	want := `no element matches id="com.example.shop:id/product" (closest: id="product" at [0,465][1179,771], id="product" at [0,771][1179,1077], id="product" at [0,1077][1179,1383])`
	if err == nil || err.Error() != want {
		t.Errorf("error %v\nwant %s", err, want)
	}
	_, err = compile(t, `{"id":"com.example.shop:id/price","below":{"text":"ほうじ茶 500ml"}}`).Resolve(tree)
	var nf *uitree.NotFoundError
	if !errors.As(err, &nf) || len(nf.Closest) != uitree.MaxClosest || nf.Visible != 29 {
		t.Fatalf("%v", err)
	}
	for _, c := range nf.Closest {
		if len(c.Fields) != 1 || c.Fields[0] != (protocol.SelectorField{Key: "id", Value: "price"}) || tree.Nodes[c.Index].Hidden {
			t.Errorf("candidate %+v", c)
		}
	}
	// A hidden element is no candidate either.
	_, err = compile(t, `{"text":"黒豆茶 30"}`).Resolve(tree)
	if !errors.As(err, &nf) || len(nf.Closest) != 0 {
		t.Errorf("a hidden candidate: %v", err)
	}
}

// TestXCUIKeys runs each selector key on the iPhone's list (node numbers
// as in shopListXCUI's comment).
func TestXCUIKeys(t *testing.T) {
	tree := mustParse(t, []byte(shopListXCUI))
	for _, tc := range []struct {
		name, sel string
		find      []int
	}{
		{"text is the label", `{"text":"カート"}`, []int{5}},
		{"text is the value without a label", `{"text":"ほうじ茶"}`, []int{6}},
		{"desc is the label", `{"desc":"カート"}`, []int{5}},
		{"desc is not the value", `{"desc":"ほうじ茶"}`, nil},
		{"id is the name", `{"id":"cart"}`, []int{5}},
		{"id of hidden rows", `{"id":"product"}`, []int{8, 11, 14, 17, 20, 23}},
		{"class is the type", `{"class":"XCUIElementTypeSwitch"}`, []int{33}},
		{"package is the bundle id", `{"package":"com.example.shop","text":"比較"}`, []int{34}},
		{"enabled", `{"enabled":false}`, []int{34}},
		{"checked", `{"checked":true}`, []int{33}},
		{"checked false", `{"class":"XCUIElementTypeSwitch","checked":false}`, nil},
		{"selected", `{"selected":true}`, []int{14}},
		{"child_of", `{"id":"price","child_of":{"id":"product","selected":true}}`, []int{16}},
		{"right_of", `{"class":"XCUIElementTypeButton","right_of":{"id":"in_stock"}}`, []int{34}},
		{"above", `{"class":"XCUIElementTypeSearchField","above":{"class":"XCUIElementTypeTable"}}`, []int{6}},
		{"one selector, both platforms", `{"id":"~(com\\.example\\.shop:id/)?cart"}`, []int{5}},
	} {
		m := compile(t, tc.sel)
		if got := indexes(m.Find(tree)); !slices.Equal(got, tc.find) && (len(got) > 0 || len(tc.find) > 0) {
			t.Errorf("%s: Find %s = %v, want %v", tc.name, m, got, tc.find)
		}
	}
}

// TestXCUIElements: the elements an iPhone's dump lists for the MCP
// list_elements tool and the dashboard: visible, with text, an
// identifier or a control; the label once.
func TestXCUIElements(t *testing.T) {
	els := mustParse(t, []byte(shopListXCUI)).Elements()
	var got []string
	for _, e := range els {
		got = append(got, e.Text+"|"+e.Description+"#"+e.ResourceID)
	}
	want := "ショップ|#ショップ,|#商品一覧,商品一覧|#title,カート|#cart,ほうじ茶|#input,|#products," +
		"|#product,抹茶ラテ 12本入り|#name,税込 2,838円 (税抜 2,580円)|#price," +
		"|#product,煎茶ティーバッグ 50袋|#name,税込 968円 (税抜 880円)|#price," +
		"|#product,ほうじ茶 500ml|#name,税込 1,408円 (税抜 1,280円)|#price," +
		"|#product,ほうじ茶 2L|#name,税込 2,178円 (税抜 1,980円)|#price," +
		"|#product,玄米茶 1kg|#name,税込 1,848円 (税抜 1,680円)|#price," +
		"|#product,麦茶 500ml ×24本|#name,税込 3,564円 (税抜 3,240円)|#price," +
		"|#Toolbar,在庫ありのみ|#in_stock,比較|#compare"
	if strings.Join(got, ",") != want {
		t.Errorf("elements:\n%s\nwant\n%s", strings.Join(got, ","), want)
	}
	at := slices.IndexFunc(els, func(e uitree.Element) bool { return e.Text == "税込 1,408円 (税抜 1,280円)" })
	if at < 0 || els[at].Bounds != [4]int{60, 1227, 707, 1348} || els[at].Class != "XCUIElementTypeStaticText" || els[at].Package != pkg || els[at].Clickable {
		t.Errorf("price element %+v", els[at])
	}
	if e := els[3]; !e.Clickable || e.Class != "XCUIElementTypeButton" {
		t.Errorf("cart element %+v", e)
	}
	// A field with a label lists the label, once.
	els = mustParse(t, []byte(`<XCUIElementTypeApplication><XCUIElementTypeTextField label="名前" value="山田" x="0" y="0" width="9" height="9"/></XCUIElementTypeApplication>`)).Elements()
	if len(els) != 1 || els[0].Text != "名前" || els[0].Description != "" {
		t.Errorf("text field elements %+v", els)
	}
}
