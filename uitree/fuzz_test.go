package uitree_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/uitree"
)

// checkTree checks what every tree Parse returns holds to.
func checkTree(t *testing.T, tree *uitree.Tree) {
	if len(tree.Nodes) > uitree.MaxNodes || tree.Rotation < 0 || tree.Rotation > 3 || tree.Scale < 1 || tree.Scale > uitree.MaxScale {
		t.Fatalf("%d nodes, rotation %d, scale %d", len(tree.Nodes), tree.Rotation, tree.Scale)
	}
	ios := tree.Platform == protocol.PlatformIOS
	if !ios && (tree.Platform != protocol.PlatformAndroid || tree.Scale != 1) || ios && tree.Rotation != 0 {
		t.Fatalf("platform %q, scale %d, rotation %d", tree.Platform, tree.Scale, tree.Rotation)
	}
	for i := range tree.Nodes {
		n := &tree.Nodes[i]
		if n.Index != i || n.Parent >= i || n.Parent < -1 || (n.Parent == -1) != (n.Depth == 0) || n.Depth >= uitree.MaxDepth {
			t.Fatalf("node %d: %+v", i, n)
		}
		// Only an iPhone's dump hides elements, and its first node, the
		// root, frames every other (when it has an area).
		if n.Hidden && !ios {
			t.Fatalf("node %d: %+v in a dump of platform %q", i, n, tree.Platform)
		}
		if r := tree.Nodes[0].Bounds; ios && i > 0 && r[2] > r[0] && r[3] > r[1] &&
			(n.Bounds[0] < r[0] || n.Bounds[1] < r[1] || n.Bounds[2] > r[2] || n.Bounds[3] > r[3]) {
			t.Fatalf("node %d: bounds %v outside the root's %v", i, n.Bounds, r)
		}
		if n.Parent >= 0 && tree.Nodes[n.Parent].Depth != n.Depth-1 {
			t.Fatalf("node %d at depth %d in node %d at depth %d", i, n.Depth, n.Parent, tree.Nodes[n.Parent].Depth)
		}
		for _, c := range n.Bounds {
			if c < -uitree.MaxCoord || c > uitree.MaxCoord {
				t.Fatalf("node %d: bounds %v", i, n.Bounds)
			}
		}
		// The descendants are the nodes that follow and are deeper, up
		// to the first that is not.
		d := tree.Descendants(n)
		for _, c := range d {
			if c.Depth <= n.Depth {
				t.Fatalf("node %d has descendant %d at depth %d", i, c.Index, c.Depth)
			}
		}
		if next := i + 1 + len(d); next < len(tree.Nodes) && tree.Nodes[next].Depth > n.Depth {
			t.Fatalf("node %d: descendants end before node %d at depth %d", i, next, tree.Nodes[next].Depth)
		}
	}
	els := tree.Elements()
	if len(els) > uitree.MaxElements {
		t.Fatalf("%d elements", len(els))
	}
	for i, e := range els {
		if e.Index != i || e.Bounds[2] <= e.Bounds[0] || e.Bounds[3] <= e.Bounds[1] ||
			e.Text == "" && e.ResourceID == "" && e.Description == "" && !e.Clickable {
			t.Fatalf("element %d: %+v", i, e)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(small.dump())
	f.Add([]byte(`<hierarchy><node text="x" clickable="true" bounds="[0,0][10,10]"><node content-desc="d" bounds="[1,1][2,2]"/></node></hierarchy>`))
	f.Add([]byte(`<node bounds="[0,0][-1,5]"/>`))
	f.Add([]byte(`<hierarchy rotation="3"><node><a><node bounds="[1,2][3,4]"/></a></node><node/></hierarchy>`))
	f.Add([]byte(shopListXCUI))
	f.Add([]byte(`<XCUIElementTypeApplication edgeagent-scale="2" edgeagent-bundle-id="b" x="0" y="0" width="10" height="20">` +
		`<XCUIElementTypeButton label="x" visible="false" x="-1.5" y="2" width="30" height="4"><a><XCUIElementTypeSwitch value="1" x="1" y="1" width="1" height="1"/></a></XCUIElementTypeButton>` +
		`<node text="n"/></XCUIElementTypeApplication>`))
	f.Add([]byte(`<XCUIElementTypeOther edgeagent-scale="5"/>`))
	f.Fuzz(func(t *testing.T, dump []byte) {
		tree, err := uitree.Parse(dump)
		if err != nil {
			if tree != nil || !strings.HasPrefix(err.Error(), "ui dump: ") {
				t.Fatalf("%v, %v", tree, err)
			}
			return
		}
		checkTree(t, tree)
	})
}

// naiveFind is Find for a selector without relative keys, the slow way.
func naiveFind(t *testing.T, sel protocol.Selector, tree *uitree.Tree) []int {
	var out []int
	for _, n := range tree.Nodes {
		ok := n.Visible()
		for _, f := range sel.Fields() {
			v := map[string]string{"text": n.Text, "id": n.ID, "desc": n.Desc, "class": n.Class, "package": n.Package}[f.Key]
			re, err := protocol.CompileSelectorValue(f.Value)
			if err != nil {
				t.Fatal(err)
			}
			ok = ok && (re == nil && v == f.Value || re != nil && re.MatchString(v))
		}
		for _, s := range []struct {
			want *bool
			got  bool
		}{{sel.Enabled, n.Enabled}, {sel.Checked, n.Checked}, {sel.Selected, n.Selected}} {
			ok = ok && (s.want == nil || *s.want == s.got)
		}
		if ok {
			out = append(out, n.Index)
		}
	}
	return out
}

// FuzzSelector: any dump and any selector never panic; every match is a
// visible node of the tree, once (without relative keys, exactly the
// nodes whose values and states match); Resolve gives the match Index picks or
// a NotFoundError when there is none, and Visible agrees.
func FuzzSelector(f *testing.F) {
	shop := small.dump()
	for _, sel := range []string{
		`{"text":"カートに入れる"}`,
		`{"text":"~¥[0-9,]+","index":1}`,
		`{"id":"com.example.shop:id/price","below":{"text":"抹茶ラテ 12本入り"}}`,
		`{"class":"android.widget.TextView","above":{"text":"~.+","child_of":{"id":"com.example.shop:id/bottom_bar"},"index":1}}`,
		`{"enabled":true,"left_of":{"class":"android.widget.TextView","child_of":{"id":"com.example.shop:id/related","above":{"text":"今すぐ購入"}}}}`,
		`{"text":"~(?i)buy.*","checked":false,"selected":false,"right_of":{"desc":"カート"}}`,
		`{"text":"カートにいれる"}`,
	} {
		f.Add(shop, []byte(sel))
	}
	f.Add([]byte(`<hierarchy><node text="a" bounds="[0,0][9,9]"><node text="a" bounds="[0,9][9,18]"/></node></hierarchy>`), []byte(`{"text":"a","below":{"text":"a"}}`))
	for _, sel := range []string{
		`{"id":"~(com\.example\.shop:id/)?price","below":{"text":"ほうじ茶 500ml"}}`,
		`{"id":"com.example.shop:id/product"}`,
		`{"class":"XCUIElementTypeSwitch","checked":true,"package":"com.example.shop"}`,
		`{"text":"黒豆茶 30袋"}`,
		`{"id":"price","child_of":{"id":"product","selected":true}}`,
	} {
		f.Add([]byte(shopListXCUI), []byte(sel))
	}
	f.Fuzz(func(t *testing.T, dump, selJSON []byte) {
		var sel protocol.Selector
		if json.Unmarshal(selJSON, &sel) != nil {
			return
		}
		m, err := uitree.Compile(sel)
		if err != nil {
			return
		}
		tree, err := uitree.Parse(dump)
		if err != nil {
			return
		}
		found := m.Find(tree)
		seen := map[*uitree.Node]bool{}
		for _, n := range found {
			if n != &tree.Nodes[n.Index] || !n.Visible() || seen[n] {
				t.Fatalf("Find %s: %+v", sel, n)
			}
			seen[n] = true
		}
		if len(sel.Relatives()) == 0 {
			if want := naiveFind(t, sel, tree); !slices.Equal(indexes(found), want) {
				t.Fatalf("Find %s = %v, want %v", sel, indexes(found), want)
			}
		}
		n, err := m.Resolve(tree)
		if err == nil {
			if sel.Index >= len(found) || n != found[sel.Index] {
				t.Fatalf("Resolve %s = node %d, not match %d of %v", sel, n.Index, sel.Index, found)
			}
		} else {
			var nf *uitree.NotFoundError
			if n != nil || !errors.As(err, &nf) || sel.Index < len(found) || !strings.Contains(err.Error(), sel.String()) {
				t.Fatalf("Resolve %s = %v, %v with %d matches", sel, n, err, len(found))
			}
			if len(nf.Closest) > uitree.MaxClosest {
				t.Fatalf("%d closest", len(nf.Closest))
			}
			for _, c := range nf.Closest {
				if !tree.Nodes[c.Index].Visible() || len(c.Fields) == 0 {
					t.Fatalf("candidate %+v", c)
				}
			}
		}
		if m.Visible(tree) != (err == nil) {
			t.Fatalf("Visible %s = %v, Resolve's error %v", sel, m.Visible(tree), err)
		}
	})
}
