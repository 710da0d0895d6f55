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
func (s screen) dump() []byte { return s.dumpOf(shopPage) }

// dumpOf is the uiautomator XML of the layout root on the screen.
func (s screen) dumpOf(root shopNode) []byte {
	var b strings.Builder
	b.WriteString(`<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>` + "\n" + `<hierarchy rotation="0">`)
	s.write(&b, root, 0)
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

// shopList is the shop app's product list as the price survey
// (examples/surveys/price-check.yaml) leaves it on a 720×1280 Android
// phone: scrolled to ほうじ茶 500ml, which was tapped (selected). Its
// iPhone counterpart is shopListXCUI.
var shopList = shopNode{class: "android.widget.FrameLayout", b: [4]int{0, 0, 720, 1280}, at: stretch, kids: []shopNode{
	{class: "android.widget.TextView", id: id("title"), text: "商品一覧", b: [4]int{112, 72, 608, 136}},
	{class: "android.widget.ImageButton", id: id("cart"), desc: "カート", flags: "clickable focusable", b: [4]int{608, 48, 720, 160}},
	{class: "android.widget.EditText", id: id("input"), text: "ほうじ茶", flags: "clickable focusable focused", b: [4]int{32, 176, 688, 240}},
	{class: "androidx.recyclerview.widget.RecyclerView", id: id("products"), flags: "scrollable focusable", b: [4]int{0, 256, 720, 1120}, kids: []shopNode{
		listRow(256, "抹茶ラテ 12本入り", "税込 2,838円 (税抜 2,580円)", ""),
		listRow(400, "煎茶ティーバッグ 50袋", "税込 968円 (税抜 880円)", ""),
		listRow(544, "ほうじ茶 500ml", "税込 1,408円 (税抜 1,280円)", "selected"),
		listRow(688, "ほうじ茶 2L", "税込 2,178円 (税抜 1,980円)", ""),
		listRow(832, "玄米茶 1kg", "税込 1,848円 (税抜 1,680円)", ""),
		listRow(976, "麦茶 500ml ×24本", "税込 3,564円 (税抜 3,240円)", ""),
	}},
	{class: "android.widget.Switch", id: id("in_stock"), text: "在庫ありのみ", flags: "clickable checkable checked", b: [4]int{16, 1136, 352, 1264}, at: bottom},
	{class: "android.widget.Button", id: id("compare"), text: "比較", flags: "clickable disabled", b: [4]int{368, 1136, 704, 1264}, at: bottom},
}}

// listRow is a product of shopList: its name above its price, in a
// clickable row 144 pixels high from top.
func listRow(top int, name, price, flags string) shopNode {
	return shopNode{class: "android.widget.LinearLayout", id: id("product"), flags: "clickable " + flags, b: [4]int{0, top, 720, top + 144}, kids: []shopNode{
		{class: "android.widget.TextView", id: id("name"), text: name, b: [4]int{36, top + 14, 684, top + 72}},
		{class: "android.widget.TextView", id: id("price"), text: price, b: [4]int{36, top + 72, 432, top + 130}},
	}}
}

// shopListXCUI is the same list on an iPhone 15 (393×852 points, 3
// pixels a point), as WebDriverAgent's source gives it with the agent's
// scale and bundle id on the root. The rows are 102 points high from 155;
// the two after 麦茶 are under the toolbar or past the screen's bottom,
// and WebDriverAgent says they are not visible. In Node.Index order:
// the application 0, its window 1 and frame 2, the navigation bar 3 with
// the title 4 and the cart button 5, the search field 6, the table 7
// with the rows 8, 11, … 29 (each a cell, its name and its price:
// ほうじ茶 500ml is 14, 15, 16; the hidden rows 26 and 29), the toolbar
// 32 with the switch 33 and the disabled button 34.
const shopListXCUI = `<?xml version="1.0" encoding="UTF-8"?>
<XCUIElementTypeApplication type="XCUIElementTypeApplication" name="ショップ" label="ショップ" enabled="true" visible="true" accessible="false" x="0" y="0" width="393" height="852" index="0" edgeagent-scale="3" edgeagent-bundle-id="com.example.shop">
  <XCUIElementTypeWindow type="XCUIElementTypeWindow" enabled="true" visible="true" accessible="false" x="0" y="0" width="393" height="852" index="0">
    <XCUIElementTypeOther type="XCUIElementTypeOther" enabled="true" visible="true" accessible="false" x="0" y="0" width="393" height="852" index="0">
      <XCUIElementTypeNavigationBar type="XCUIElementTypeNavigationBar" name="商品一覧" enabled="true" visible="true" accessible="false" x="0" y="59" width="393" height="44" index="0">
        <XCUIElementTypeStaticText type="XCUIElementTypeStaticText" name="title" label="商品一覧" value="商品一覧" enabled="true" visible="true" accessible="true" x="156" y="70" width="81" height="22" index="0"/>
        <XCUIElementTypeButton type="XCUIElementTypeButton" name="cart" label="カート" enabled="true" visible="true" accessible="true" x="337" y="59" width="44" height="44" index="1"/>
      </XCUIElementTypeNavigationBar>
      <XCUIElementTypeSearchField type="XCUIElementTypeSearchField" name="input" label="" value="ほうじ茶" enabled="true" visible="true" accessible="true" x="16" y="111" width="361" height="36" index="1"/>
      <XCUIElementTypeTable type="XCUIElementTypeTable" name="products" enabled="true" visible="true" accessible="false" x="0" y="155" width="393" height="613" index="2">
        <XCUIElementTypeCell type="XCUIElementTypeCell" name="product" enabled="true" visible="true" accessible="false" x="0" y="155" width="393" height="102" index="0">
          <XCUIElementTypeStaticText type="XCUIElementTypeStaticText" name="name" label="抹茶ラテ 12本入り" value="抹茶ラテ 12本入り" enabled="true" visible="true" accessible="true" x="20" y="165" width="353" height="40" index="0"/>
          <XCUIElementTypeStaticText type="XCUIElementTypeStaticText" name="price" label="税込 2,838円 (税抜 2,580円)" value="税込 2,838円 (税抜 2,580円)" enabled="true" visible="true" accessible="true" x="20" y="205" width="236" height="40" index="1"/>
        </XCUIElementTypeCell>
        <XCUIElementTypeCell type="XCUIElementTypeCell" name="product" enabled="true" visible="true" accessible="false" x="0" y="257" width="393" height="102" index="1">
          <XCUIElementTypeStaticText type="XCUIElementTypeStaticText" name="name" label="煎茶ティーバッグ 50袋" value="煎茶ティーバッグ 50袋" enabled="true" visible="true" accessible="true" x="20" y="267" width="353" height="40" index="0"/>
          <XCUIElementTypeStaticText type="XCUIElementTypeStaticText" name="price" label="税込 968円 (税抜 880円)" value="税込 968円 (税抜 880円)" enabled="true" visible="true" accessible="true" x="20" y="307" width="198" height="40" index="1"/>
        </XCUIElementTypeCell>
        <XCUIElementTypeCell type="XCUIElementTypeCell" name="product" enabled="true" visible="true" accessible="false" selected="true" x="0" y="359" width="393" height="102" index="2">
          <XCUIElementTypeStaticText type="XCUIElementTypeStaticText" name="name" label="ほうじ茶 500ml" value="ほうじ茶 500ml" enabled="true" visible="true" accessible="true" x="20" y="369" width="353" height="40" index="0"/>
          <XCUIElementTypeStaticText type="XCUIElementTypeStaticText" name="price" label="税込 1,408円 (税抜 1,280円)" value="税込 1,408円 (税抜 1,280円)" enabled="true" visible="true" accessible="true" x="20" y="409" width="215.66666666666666" height="40.333333333333336" index="1"/>
        </XCUIElementTypeCell>
        <XCUIElementTypeCell type="XCUIElementTypeCell" name="product" enabled="true" visible="true" accessible="false" x="0" y="461" width="393" height="102" index="3">
          <XCUIElementTypeStaticText type="XCUIElementTypeStaticText" name="name" label="ほうじ茶 2L" value="ほうじ茶 2L" enabled="true" visible="true" accessible="true" x="20" y="471" width="353" height="40" index="0"/>
          <XCUIElementTypeStaticText type="XCUIElementTypeStaticText" name="price" label="税込 2,178円 (税抜 1,980円)" value="税込 2,178円 (税抜 1,980円)" enabled="true" visible="true" accessible="true" x="20" y="511" width="236" height="40" index="1"/>
        </XCUIElementTypeCell>
        <XCUIElementTypeCell type="XCUIElementTypeCell" name="product" enabled="true" visible="true" accessible="false" x="0" y="563" width="393" height="102" index="4">
          <XCUIElementTypeStaticText type="XCUIElementTypeStaticText" name="name" label="玄米茶 1kg" value="玄米茶 1kg" enabled="true" visible="true" accessible="true" x="20" y="573" width="353" height="40" index="0"/>
          <XCUIElementTypeStaticText type="XCUIElementTypeStaticText" name="price" label="税込 1,848円 (税抜 1,680円)" value="税込 1,848円 (税抜 1,680円)" enabled="true" visible="true" accessible="true" x="20" y="613" width="236" height="40" index="1"/>
        </XCUIElementTypeCell>
        <XCUIElementTypeCell type="XCUIElementTypeCell" name="product" enabled="true" visible="true" accessible="false" x="0" y="665" width="393" height="102" index="5">
          <XCUIElementTypeStaticText type="XCUIElementTypeStaticText" name="name" label="麦茶 500ml ×24本" value="麦茶 500ml ×24本" enabled="true" visible="true" accessible="true" x="20" y="675" width="353" height="40" index="0"/>
          <XCUIElementTypeStaticText type="XCUIElementTypeStaticText" name="price" label="税込 3,564円 (税抜 3,240円)" value="税込 3,564円 (税抜 3,240円)" enabled="true" visible="true" accessible="true" x="20" y="715" width="236" height="40" index="1"/>
        </XCUIElementTypeCell>
        <XCUIElementTypeCell type="XCUIElementTypeCell" name="product" enabled="true" visible="false" accessible="false" x="0" y="767" width="393" height="102" index="6">
          <XCUIElementTypeStaticText type="XCUIElementTypeStaticText" name="name" label="黒豆茶 30袋" value="黒豆茶 30袋" enabled="true" visible="false" accessible="true" x="20" y="777" width="353" height="40" index="0"/>
          <XCUIElementTypeStaticText type="XCUIElementTypeStaticText" name="price" label="税込 1,078円 (税抜 980円)" value="税込 1,078円 (税抜 980円)" enabled="true" visible="false" accessible="true" x="20" y="817" width="236" height="40" index="1"/>
        </XCUIElementTypeCell>
        <XCUIElementTypeCell type="XCUIElementTypeCell" name="product" enabled="true" visible="false" accessible="false" x="0" y="869" width="393" height="102" index="7">
          <XCUIElementTypeStaticText type="XCUIElementTypeStaticText" name="name" label="抹茶 40g" value="抹茶 40g" enabled="true" visible="false" accessible="true" x="20" y="879" width="353" height="40" index="0"/>
          <XCUIElementTypeStaticText type="XCUIElementTypeStaticText" name="price" label="税込 1,620円 (税抜 1,500円)" value="税込 1,620円 (税抜 1,500円)" enabled="true" visible="false" accessible="true" x="20" y="919" width="236" height="40" index="1"/>
        </XCUIElementTypeCell>
      </XCUIElementTypeTable>
      <XCUIElementTypeToolbar type="XCUIElementTypeToolbar" name="Toolbar" enabled="true" visible="true" accessible="false" x="0" y="768" width="393" height="84" index="3">
        <XCUIElementTypeSwitch type="XCUIElementTypeSwitch" name="in_stock" label="在庫ありのみ" value="1" enabled="true" visible="true" accessible="true" x="16" y="777" width="170" height="44" index="0"/>
        <XCUIElementTypeButton type="XCUIElementTypeButton" name="compare" label="比較" enabled="false" visible="true" accessible="true" x="207" y="777" width="170" height="44" index="1"/>
      </XCUIElementTypeToolbar>
    </XCUIElementTypeOther>
  </XCUIElementTypeWindow>
</XCUIElementTypeApplication>
`
