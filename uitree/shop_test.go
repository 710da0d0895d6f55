package uitree_test

import (
	"fmt"
	"strings"
)

// The product page of a shop app, as uiautomator dumps it, laid out for
// a 720×1280 screen (base) and for 1440×3040: twice the size, with the
// extra height given to the scrolling content and the bottom bar kept at
// the bottom.

// anchor is how a node's bounds follow a taller screen.
type anchor uint8

const (
	top     anchor = iota // both edges scale
	bottom                // both edges keep their distance to the screen's bottom
	stretch               // the top edge scales, the bottom keeps its distance to the bottom
)

type shopNode struct {
	class, id, text, desc string
	// flags: space-separated attributes set to true (clickable, checkable,
	// checked, selected, scrollable, focusable, focused) or "disabled".
	flags string
	b     [4]int // in 720×1280
	at    anchor
	kids  []shopNode
}

const pkg = "com.example.shop"

func id(s string) string { return pkg + ":id/" + s }

// shopPage is the page's layout: the index comments are Node.Index.
var shopPage = shopNode{class: "android.widget.FrameLayout", b: [4]int{0, 0, 720, 1280}, at: stretch, kids: []shopNode{ // 0
	{class: "android.widget.LinearLayout", b: [4]int{0, 0, 720, 1280}, at: stretch, kids: []shopNode{ // 1
		{class: "android.view.ViewGroup", id: id("toolbar"), b: [4]int{0, 48, 720, 160}, kids: []shopNode{ // 2
			{class: "android.widget.ImageButton", desc: "戻る", flags: "clickable focusable", b: [4]int{0, 48, 112, 160}},                    // 3
			{class: "android.widget.TextView", id: id("title"), text: "商品詳細", b: [4]int{112, 72, 400, 136}},                                // 4
			{class: "android.widget.ImageButton", id: id("cart"), desc: "カート", flags: "clickable focusable", b: [4]int{608, 48, 720, 160}}, // 5
		}},
		{class: "android.widget.ScrollView", id: id("scroll"), flags: "scrollable focusable", b: [4]int{0, 160, 720, 1120}, at: stretch, kids: []shopNode{ // 6
			{class: "android.widget.LinearLayout", b: [4]int{0, 160, 720, 1120}, at: stretch, kids: []shopNode{ // 7
				{class: "android.widget.ImageView", id: id("image"), desc: "商品画像", b: [4]int{0, 160, 720, 640}},                                         // 8
				{class: "android.widget.TextView", id: id("name"), text: "抹茶ラテ 12本入り", b: [4]int{32, 664, 688, 728}},                                    // 9
				{class: "android.widget.TextView", id: id("price"), text: "¥1,280", b: [4]int{32, 744, 300, 800}},                                       // 10
				{class: "android.widget.TextView", id: id("tax"), text: "1,280円 (税込)", b: [4]int{316, 752, 560, 792}},                                   // 11
				{class: "android.widget.CheckBox", id: id("gift"), text: "ギフト包装", flags: "clickable checkable focusable", b: [4]int{32, 816, 688, 880}}, // 12
				{class: "android.widget.LinearLayout", id: id("quantity"), b: [4]int{32, 896, 688, 976}, kids: []shopNode{ // 13
					{class: "android.widget.Button", id: id("minus"), text: "−", desc: "減らす", flags: "clickable disabled", b: [4]int{32, 896, 132, 976}},  // 14
					{class: "android.widget.TextView", id: id("qty"), text: "1", b: [4]int{132, 896, 232, 976}},                                           // 15
					{class: "android.widget.Button", id: id("plus"), text: "+", desc: "増やす", flags: "clickable focusable", b: [4]int{232, 896, 332, 976}}, // 16
				}},
				{class: "android.widget.TextView", id: id("related_title"), text: "関連商品", b: [4]int{32, 1000, 688, 1048}}, // 17
				{class: "android.widget.LinearLayout", id: id("related"), flags: "clickable", b: [4]int{32, 1056, 360, 1120}, kids: []shopNode{ // 18
					{class: "android.widget.TextView", id: id("related_name"), text: "ほうじ茶ラテ", b: [4]int{48, 1064, 344, 1090}},    // 19
					{class: "android.widget.TextView", id: id("related_price"), text: "税込¥1,280", b: [4]int{48, 1092, 344, 1118}}, // 20
				}},
				{class: "android.widget.LinearLayout", id: id("related"), flags: "clickable selected", b: [4]int{360, 1056, 688, 1120}, kids: []shopNode{ // 21
					{class: "android.widget.TextView", id: id("related_name"), text: "抹茶ラテ 6本入り", b: [4]int{376, 1064, 672, 1090}}, // 22
					{class: "android.widget.TextView", id: id("related_price"), text: "¥680", b: [4]int{376, 1092, 672, 1118}},     // 23
				}},
				// In stock, but the label is collapsed: nothing of it shows.
				{class: "android.widget.TextView", id: id("stock"), text: "在庫あり", b: [4]int{32, 1120, 688, 1120}}, // 24
			}},
		}},
		{class: "android.widget.LinearLayout", id: id("bottom_bar"), b: [4]int{0, 1120, 720, 1280}, at: bottom, kids: []shopNode{ // 25
			{class: "android.widget.Button", id: id("add_to_cart"), text: "カートに入れる", flags: "clickable focusable", b: [4]int{16, 1136, 352, 1264}, at: bottom}, // 26
			{class: "android.widget.Button", id: id("buy_now"), text: "今すぐ購入", flags: "clickable focusable", b: [4]int{368, 1136, 704, 1264}, at: bottom},      // 27
		}},
	}},
	{class: "android.widget.RadioButton", id: id("subscribe"), text: "定期便", flags: "clickable checkable checked", b: [4]int{0, 0, 0, 0}}, // 28: no bounds
}}

// screen is a screen size the page is dumped for.
type screen struct{ w, h int }

var (
	small = screen{720, 1280}
	large = screen{1440, 3040}
)

// bounds are b (720×1280) on the screen.
func (s screen) bounds(b [4]int, at anchor) [4]int {
	k := s.w / 720
	extra := s.h - 1280*k
	out := [4]int{b[0] * k, b[1] * k, b[2] * k, b[3] * k}
	switch at {
	case bottom:
		out[1] += extra
		out[3] += extra
	case stretch:
		out[3] += extra
	}
	return out
}

// dump is the page's uiautomator XML on the screen.
func (s screen) dump() []byte {
	var b strings.Builder
	b.WriteString(`<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>` + "\n" + `<hierarchy rotation="0">`)
	s.write(&b, shopPage, 0)
	b.WriteString(`</hierarchy>`)
	return []byte(b.String())
}

func (s screen) write(b *strings.Builder, n shopNode, sibling int) {
	has := func(f string) bool { return strings.Contains(" "+n.flags+" ", " "+f+" ") }
	bb := s.bounds(n.b, n.at)
	bounds := fmt.Sprintf("[%d,%d][%d,%d]", bb[0], bb[1], bb[2], bb[3])
	if n.b == [4]int{} {
		bounds = "" // as a broken dump may have it
	}
	fmt.Fprintf(b, `<node index="%d" text="%s" resource-id="%s" class="%s" package="%s" content-desc="%s" `+
		`checkable="%t" checked="%t" clickable="%t" enabled="%t" focusable="%t" focused="%t" `+
		`scrollable="%t" long-clickable="false" password="false" selected="%t" bounds="%s"`,
		sibling, esc(n.text), n.id, n.class, pkg, esc(n.desc),
		has("checkable"), has("checked"), has("clickable"), !has("disabled"), has("focusable"), has("focused"),
		has("scrollable"), has("selected"), bounds)
	if len(n.kids) == 0 {
		b.WriteString(" />")
		return
	}
	b.WriteString(">")
	for i, k := range n.kids {
		s.write(b, k, i)
	}
	b.WriteString("</node>")
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
