package uitree_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/uitree"
)

// benchNodes is the size of the benchmarks' dump: a long product list,
// bigger than most screens dump.
const benchNodes = 5000

// listDump is a shop's product list at 1440×3040 with exactly nodes
// nodes: the window's frames down to a RecyclerView (depth 7), then
// product cards of 14 nodes each, nested down to depth 15, in two
// columns. Card i shows "商品 i 抹茶ラテ" (the last one "ほうじ茶ラテ"),
// its price and tax, and two buttons. It returns the dump and the last
// card's name.
func listDump(nodes int) ([]byte, string) {
	var b strings.Builder
	count := 0
	open := func(class, id, text, desc string, clickable bool, l, t, r, bt int, leaf bool) {
		count++
		fmt.Fprintf(&b, `<node index="0" text="%s" resource-id="%s" class="%s" package="com.example.shop" content-desc="%s" `+
			`checkable="false" checked="false" clickable="%t" enabled="true" focusable="%t" focused="false" scrollable="false" `+
			`long-clickable="false" password="false" selected="false" bounds="[%d,%d][%d,%d]"`,
			esc(text), id, class, esc(desc), clickable, clickable, l, t, r, bt)
		if leaf {
			b.WriteString(" />")
		} else {
			b.WriteString(">")
		}
	}
	sid := func(s string) string { return "com.example.shop:id/" + s }
	b.WriteString(`<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation="0">`)
	frames := []string{"android.widget.FrameLayout", "android.widget.LinearLayout", "android.widget.FrameLayout",
		"androidx.constraintlayout.widget.ConstraintLayout", "androidx.coordinatorlayout.widget.CoordinatorLayout",
		"androidx.viewpager.widget.ViewPager", "android.widget.FrameLayout", "androidx.recyclerview.widget.RecyclerView"}
	for _, f := range frames {
		open(f, "", "", "", false, 0, 0, 1440, 3040, false)
	}
	const perCard = 14
	cards := (nodes - len(frames)) / perCard
	last := ""
	for i := range cards {
		x, y := (i%2)*720, 160+(i/2)*960
		name := fmt.Sprintf("商品 %d 抹茶ラテ", i)
		if i == cards-1 {
			name = fmt.Sprintf("商品 %d ほうじ茶ラテ", i)
			last = name
		}
		price := 980 + 10*i
		open("androidx.cardview.widget.CardView", sid("card"), "", "", true, x+8, y+8, x+712, y+952, false)                                        // 8
		open("androidx.constraintlayout.widget.ConstraintLayout", "", "", "", false, x+8, y+8, x+712, y+952, false)                                // 9
		open("android.widget.LinearLayout", "", "", "", false, x+24, y+24, x+696, y+936, false)                                                    // 10
		open("android.widget.ImageView", sid("image"), "", "商品画像", false, x+24, y+24, x+696, y+520, true)                                          // 11
		open("android.widget.LinearLayout", "", "", "", false, x+24, y+536, x+696, y+936, false)                                                   // 11
		open("android.widget.TextView", sid("name"), name, "", false, x+24, y+536, x+696, y+616, true)                                             // 12
		open("android.widget.LinearLayout", "", "", "", false, x+24, y+632, x+696, y+712, false)                                                   // 12
		open("android.widget.TextView", sid("price"), fmt.Sprintf("¥%d,%03d", price/1000, price%1000), "", false, x+24, y+632, x+320, y+712, true) // 13
		open("android.widget.FrameLayout", "", "", "", false, x+336, y+632, x+696, y+712, false)                                                   // 13
		open("android.widget.LinearLayout", "", "", "", false, x+336, y+640, x+696, y+704, false)                                                  // 14
		open("android.widget.TextView", sid("tax"), "(税込)", "", false, x+336, y+640, x+696, y+704, true)                                           // 15
		b.WriteString("</node></node></node>")
		open("android.widget.LinearLayout", "", "", "", false, x+24, y+728, x+696, y+936, false)                  // 12
		open("android.widget.Button", sid("add_to_cart"), "カートに入れる", "", true, x+24, y+728, x+520, y+936, true)   // 13
		open("android.widget.ImageButton", sid("favourite"), "", "お気に入り", true, x+536, y+728, x+696, y+936, true) // 13
		b.WriteString("</node></node></node></node></node>")
	}
	for count < nodes {
		open("android.view.View", "", "", "", false, 0, 0, 1, 1, true)
	}
	b.WriteString(strings.Repeat("</node>", len(frames)) + "</hierarchy>")
	return []byte(b.String()), last
}

// TestListDump checks the benchmarks' dump and what their selectors find.
func TestListDump(t *testing.T) {
	dump, last := listDump(benchNodes)
	tree := mustParse(t, dump)
	depth := 0
	for _, n := range tree.Nodes {
		depth = max(depth, n.Depth)
	}
	if len(tree.Nodes) != benchNodes || depth != 15 {
		t.Fatalf("%d nodes, %d deep", len(tree.Nodes), depth)
	}
	for _, s := range benchSelectors(last) {
		n, err := compile(t, s.sel).Resolve(tree)
		if err != nil || n.Text != s.want {
			t.Errorf("%s: %+v, %v; want %q", s.name, n, err, s.want)
		}
	}
}

type benchSelector struct{ name, sel, want string }

func benchSelectors(last string) []benchSelector {
	lastPrice := fmt.Sprintf("¥%d,%03d", (980+10*355)/1000, (980+10*355)%1000)
	return []benchSelector{
		// The last card's name: every node is looked at.
		{"text", fmt.Sprintf(`{"text":%q}`, last), last},
		// No literal prefix, but a text every match holds: the
		// expression runs only where the text is.
		{"regex", `{"text":"~.*ほうじ茶ラテ"}`, last},
		// Nothing every match holds: the expression runs on every text.
		{"regex-every-text", `{"text":"~(?i).*houjicha.*|.*ほうじ茶ラテ"}`, last},
		// The last card's price: the anchor is looked for through the
		// tree, then every node is measured against it and sorted.
		{"below", fmt.Sprintf(`{"id":"com.example.shop:id/price","below":{"text":%q}}`, last), lastPrice},
	}
}

// reportP99 reports the 99th percentile of the latencies.
func reportP99(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[(len(lat)*99)/100].Nanoseconds()), "p99-ns/op")
}

// BenchmarkResolve resolves selectors in a 5,000-node dump; besides the
// mean (ns/op) it reports the 99th percentile of single resolutions.
func BenchmarkResolve(b *testing.B) {
	dump, last := listDump(benchNodes)
	tree := mustParse(b, dump)
	for _, s := range benchSelectors(last) {
		b.Run(s.name, func(b *testing.B) {
			m := compile(b, s.sel)
			lat := make([]time.Duration, 0, 1<<16)
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				n, err := m.Resolve(tree)
				lat = append(lat, time.Since(start))
				if err != nil || n.Text != s.want {
					b.Fatalf("%+v, %v", n, err)
				}
			}
			reportP99(b, lat)
		})
	}
}

// BenchmarkParse parses the same dump.
func BenchmarkParse(b *testing.B) {
	dump, _ := listDump(benchNodes)
	b.SetBytes(int64(len(dump)))
	b.ReportAllocs()
	lat := make([]time.Duration, 0, 1<<12)
	for b.Loop() {
		start := time.Now()
		tree, err := uitree.Parse(dump)
		lat = append(lat, time.Since(start))
		if err != nil || len(tree.Nodes) != benchNodes {
			b.Fatal(err)
		}
	}
	reportP99(b, lat)
}
