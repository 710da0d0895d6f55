package uitree_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/uitree"
)

func mustParse(t testing.TB, dump []byte) *uitree.Tree {
	t.Helper()
	tree, err := uitree.Parse(dump)
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

func TestParse(t *testing.T) {
	for _, s := range []screen{small, large} {
		t.Run(fmt.Sprintf("%dx%d", s.w, s.h), func(t *testing.T) {
			tree := mustParse(t, s.dump())
			if len(tree.Nodes) != 29 || tree.Rotation != 0 {
				t.Fatalf("%d nodes, rotation %d; want 29, 0", len(tree.Nodes), tree.Rotation)
			}
			for i, n := range tree.Nodes {
				if n.Index != i {
					t.Fatalf("node %d has index %d", i, n.Index)
				}
			}
			price := tree.Nodes[10]
			want := uitree.Node{Index: 10, Parent: 7, Depth: 4, Text: "¥1,280", ID: id("price"), Class: "android.widget.TextView",
				Package: pkg, Bounds: s.bounds([4]int{32, 744, 300, 800}, top), Enabled: true}
			if !sameNode(price, want) {
				t.Errorf("price node\n%+v, want\n%+v", price, want)
			}
			if x, y := price.Centre(); x != (32+300)/2*s.w/720 || y != (744+800)/2*s.w/720 {
				t.Errorf("price centre %d,%d", x, y)
			}
			minus := tree.Nodes[14]
			if minus.Text != "−" || minus.Desc != "減らす" || minus.Enabled || !minus.Clickable || minus.Parent != 13 || minus.Depth != 5 {
				t.Errorf("minus button %+v", minus)
			}
			if gift := tree.Nodes[12]; gift.Checked || !gift.Clickable || gift.Text != "ギフト包装" {
				t.Errorf("gift checkbox %+v", gift)
			}
			if card := tree.Nodes[21]; !card.Selected || card.Bounds != s.bounds([4]int{360, 1056, 688, 1120}, top) {
				t.Errorf("second related card %+v", card)
			}
			if scroll := tree.Nodes[6]; !scroll.Scrollable || scroll.Bounds[3] != s.h-160*s.w/720 {
				t.Errorf("scroll view %+v", scroll)
			}
			if buy := tree.Nodes[27]; buy.Bounds[3] != s.h-16*s.w/720 || buy.Parent != 25 {
				t.Errorf("buy now %+v", buy)
			}
			// The radio button without bounds and the collapsed label are
			// there, but not visible.
			if sub := tree.Nodes[28]; sub.Bounds != [4]int{} || sub.Visible() || !sub.Checked || sub.Parent != 0 || sub.Depth != 1 {
				t.Errorf("subscribe radio %+v", sub)
			}
			if tree.Nodes[24].Visible() || !tree.Nodes[23].Visible() {
				t.Errorf("visible: stock %v, ¥680 %v", tree.Nodes[24].Visible(), tree.Nodes[23].Visible())
			}
			if root := tree.Nodes[0]; root.Parent != -1 || root.Depth != 0 || len(tree.Descendants(&root)) != 28 {
				t.Errorf("root %+v has %d descendants", root, len(tree.Descendants(&root)))
			}
			var ids []string
			for _, d := range tree.Descendants(&tree.Nodes[13]) {
				ids = append(ids, strings.TrimPrefix(d.ID, pkg+":id/"))
			}
			if strings.Join(ids, ",") != "minus,qty,plus" {
				t.Errorf("descendants of the quantity row: %v", ids)
			}
			if d := tree.Descendants(&tree.Nodes[27]); len(d) != 0 {
				t.Errorf("a leaf has descendants %v", d)
			}
		})
	}
}

// sameNode compares the exported fields.
func sameNode(a, b uitree.Node) bool {
	return a.Index == b.Index && a.Parent == b.Parent && a.Depth == b.Depth && a.Text == b.Text && a.ID == b.ID &&
		a.Desc == b.Desc && a.Class == b.Class && a.Package == b.Package && a.Bounds == b.Bounds &&
		a.Enabled == b.Enabled && a.Checked == b.Checked && a.Selected == b.Selected &&
		a.Clickable == b.Clickable && a.Scrollable == b.Scrollable && a.Focused == b.Focused && a.Hidden == b.Hidden
}

func TestParseAttributes(t *testing.T) {
	dump := `<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>
<hierarchy rotation="1">
  <node text="a&lt;b &amp; &quot;c&quot;&#10;次の行" resource-id="x:id/t" bounds="[0,0][10,10]" focused="true" enabled="TRUE"/>
  <node bounds="[1,2][3]"/>
  <node bounds="1,2][3,4"/>
  <node bounds="[a,2][3,4]"/>
  <node bounds="[-5,-6][7,8]"/>
  <node bounds="[0,0][16777217,10]"/>
  <node bounds="[0,0][99999999999999999999999,10]"/>
  <node bounds=" [0,0][10,10]"/>
  <node bounds="[0,0][16777216,10]"/>
</hierarchy>`
	tree := mustParse(t, []byte(dump))
	if tree.Rotation != 1 || len(tree.Nodes) != 9 {
		t.Fatalf("rotation %d, %d nodes", tree.Rotation, len(tree.Nodes))
	}
	first := tree.Nodes[0]
	if first.Text != "a<b & \"c\"\n次の行" || !first.Focused || first.Enabled || first.Parent != -1 {
		t.Errorf("first node %+v", first)
	}
	wantBounds := [][4]int{{0, 0, 10, 10}, {}, {}, {}, {-5, -6, 7, 8}, {}, {}, {}, {0, 0, 1 << 24, 10}}
	for i, want := range wantBounds {
		if got := tree.Nodes[i].Bounds; got != want {
			t.Errorf("node %d: bounds %v, want %v", i, got, want)
		}
	}
}

func TestParseRefusesHostileDumps(t *testing.T) {
	nested := func(n int) []byte {
		return []byte("<hierarchy>" + strings.Repeat(`<node bounds="[0,0][1,1]">`, n) + strings.Repeat("</node>", n) + "</hierarchy>")
	}
	siblings := func(n int) []byte {
		return []byte("<hierarchy>" + strings.Repeat(`<node/>`, n) + "</hierarchy>")
	}
	// An iPhone's dump: its root is a node.
	const app = `<XCUIElementTypeApplication edgeagent-scale="3" x="0" y="0" width="393" height="852">`
	iosNested := func(n int) []byte {
		return []byte(app + strings.Repeat(`<XCUIElementTypeOther x="0" y="0" width="1" height="1">`, n-1) +
			strings.Repeat("</XCUIElementTypeOther>", n-1) + "</XCUIElementTypeApplication>")
	}
	iosSiblings := func(n int) []byte {
		return []byte(app + strings.Repeat(`<XCUIElementTypeOther/>`, n-1) + "</XCUIElementTypeApplication>")
	}
	for _, tc := range []struct {
		name  string
		dump  []byte
		err   string // "" accepts the dump
		nodes int
	}{
		{"over MaxDumpBytes", append(siblings(1), bytes.Repeat([]byte(" "), uitree.MaxDumpBytes)...), fmt.Sprintf("ui dump: %d bytes, over the limit of %d", uitree.MaxDumpBytes+30, uitree.MaxDumpBytes), 0},
		{"MaxDumpBytes", append(siblings(1), bytes.Repeat([]byte(" "), uitree.MaxDumpBytes-30)...), "", 1},
		{"nodes nested MaxDepth deep with the hierarchy", nested(uitree.MaxDepth - 1), "", uitree.MaxDepth - 1},
		{"nodes nested deeper", nested(uitree.MaxDepth), fmt.Sprintf("ui dump: elements nest deeper than %d", uitree.MaxDepth), 0},
		{"other elements nested deeper", []byte(strings.Repeat("<a>", uitree.MaxDepth+1) + strings.Repeat("</a>", uitree.MaxDepth+1)), "elements nest deeper than", 0},
		{"MaxNodes", siblings(uitree.MaxNodes), "", uitree.MaxNodes},
		{"too many nodes", siblings(uitree.MaxNodes + 1), fmt.Sprintf("ui dump: more than %d nodes", uitree.MaxNodes), 0},
		{"too many nodes, not closed", []byte("<hierarchy>" + strings.Repeat(`<node>`, 150) + strings.Repeat(`<node/>`, uitree.MaxNodes)), "more than 50000 nodes", 0},
		{"truncated", []byte(`<hierarchy><node text="x"`), "ui dump: XML syntax error", 0},
		{"unclosed", []byte(`<hierarchy><node text="x">`), "ui dump: XML syntax error", 0},
		{"mismatched", []byte(`<hierarchy><node></hierarchy></node>`), "ui dump: XML syntax error", 0},
		{"unknown entity", []byte(`<hierarchy><node text="&bomb;"/></hierarchy>`), "ui dump: XML syntax error", 0},
		{"binary", []byte("\x89PNG\r\n\x1a\n\x00\x00"), "ui dump:", 0},
		{"empty", nil, "ui dump: no XML element", 0},
		{"text only", []byte("ERROR: null root node returned by UiTestAutomationBridge."), "ui dump: no XML element", 0},
		{"entity declarations are not expanded", []byte(`<!DOCTYPE h [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]><hierarchy><node text="&b;"/></hierarchy>`), "ui dump: XML syntax error", 0},
		{"a node without a hierarchy", []byte(`<node text="x" bounds="[0,0][1,1]"/>`), "", 1},
		{"iPhone: nodes nested MaxDepth deep", iosNested(uitree.MaxDepth), "", uitree.MaxDepth},
		{"iPhone: nodes nested deeper", iosNested(uitree.MaxDepth + 1), fmt.Sprintf("ui dump: elements nest deeper than %d", uitree.MaxDepth), 0},
		{"iPhone: MaxNodes", iosSiblings(uitree.MaxNodes), "", uitree.MaxNodes},
		{"iPhone: too many nodes", iosSiblings(uitree.MaxNodes + 1), fmt.Sprintf("ui dump: more than %d nodes", uitree.MaxNodes), 0},
		{"iPhone: too many nodes, not closed", []byte(app + strings.Repeat(`<XCUIElementTypeOther>`, 150) + strings.Repeat(`<XCUIElementTypeOther/>`, uitree.MaxNodes)), "more than 50000 nodes", 0},
		{"iPhone: over MaxDumpBytes", append(iosSiblings(1), bytes.Repeat([]byte(" "), uitree.MaxDumpBytes)...), "ui dump: " + fmt.Sprint(uitree.MaxDumpBytes+len(iosSiblings(1))) + " bytes, over the limit", 0},
		{"iPhone: truncated", []byte(app + `<XCUIElementTypeButton label="x"`), "ui dump: XML syntax error", 0},
		{"iPhone: a bad scale", []byte(`<XCUIElementTypeApplication edgeagent-scale="1e3"/>`), `ui dump: edgeagent-scale "1e3" is not a whole number from 1 to 4`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tree, err := uitree.Parse(tc.dump)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || tree != nil {
					t.Fatalf("%v, %v; want an error containing %q", tree, err, tc.err)
				}
				return
			}
			if err != nil || len(tree.Nodes) != tc.nodes {
				t.Fatalf("%v; want %d nodes", err, tc.nodes)
			}
		})
	}
	// Nested nodes keep their depth, parent and descendants.
	tree := mustParse(t, nested(uitree.MaxDepth-1))
	last := tree.Nodes[len(tree.Nodes)-1]
	if last.Depth != uitree.MaxDepth-2 || last.Parent != len(tree.Nodes)-2 || len(tree.Descendants(&tree.Nodes[0])) != uitree.MaxDepth-2 {
		t.Fatalf("deepest node %+v", last)
	}
}

func TestElements(t *testing.T) {
	for _, s := range []screen{small, large} {
		els := mustParse(t, s.dump()).Elements()
		var got []string
		for i, e := range els {
			if e.Index != i {
				t.Fatalf("element %d has index %d", i, e.Index)
			}
			label := e.Text + "|" + e.Description
			if label == "|" {
				label = "#" + strings.TrimPrefix(e.ResourceID, pkg+":id/")
			}
			got = append(got, label)
		}
		// Not listed: the frames and layouts without an id (0, 1, 7), the
		// collapsed label and the radio button without bounds.
		want := "#toolbar,|戻る,商品詳細|,|カート,#scroll,|商品画像,抹茶ラテ 12本入り|,¥1,280|,1,280円 (税込)|,ギフト包装|,#quantity," +
			"−|減らす,1|,+|増やす,関連商品|,#related,ほうじ茶ラテ|,税込¥1,280|,#related,抹茶ラテ 6本入り|,¥680|,#bottom_bar,カートに入れる|,今すぐ購入|"
		if strings.Join(got, ",") != want {
			t.Errorf("%dx%d elements:\n%s\nwant\n%s", s.w, s.h, strings.Join(got, ","), want)
		}
		if e := els[0]; e.ResourceID != id("toolbar") || e.Class != "android.view.ViewGroup" || e.Clickable || e.Bounds != s.bounds([4]int{0, 48, 720, 160}, top) || e.Package != pkg {
			t.Errorf("toolbar element %+v", e)
		}
	}
	// The JSON shape the MCP list_elements tool returns.
	b, err := json.Marshal(uitree.Element{Index: 2, Text: "t", ResourceID: "r", Description: "d", Class: "c", Clickable: true, Bounds: [4]int{1, 2, 3, 4}, Package: "p"})
	if err != nil || string(b) != `{"index":2,"text":"t","resource_id":"r","content_description":"d","class":"c","clickable":true,"bounds":[1,2,3,4],"package":"p"}` {
		t.Errorf("element JSON %s, %v", b, err)
	}
	if b, _ := json.Marshal(uitree.Element{}); string(b) != `{"index":0,"clickable":false,"bounds":[0,0,0,0]}` {
		t.Errorf("empty element JSON %s", b)
	}
	if x, y := (uitree.Element{Bounds: [4]int{10, 20, 31, 41}}).Centre(); x != 20 || y != 30 {
		t.Errorf("centre %d,%d", x, y)
	}
	// At most MaxElements.
	var b2 strings.Builder
	b2.WriteString("<hierarchy>")
	for i := range uitree.MaxElements + 10 {
		fmt.Fprintf(&b2, `<node text="%d" bounds="[0,%d][10,%d]"/>`, i, i, i+1)
	}
	b2.WriteString("</hierarchy>")
	els := mustParse(t, []byte(b2.String())).Elements()
	if len(els) != uitree.MaxElements || els[len(els)-1].Text != fmt.Sprint(uitree.MaxElements-1) {
		t.Errorf("%d elements, the last %+v", len(els), els[len(els)-1])
	}
}
