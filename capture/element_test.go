package capture

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/protocol"
)

// shopCatalogue is a shop list with Japanese names and the price strings
// Japanese shops show.
var shopCatalogue = []SimProduct{
	{Name: "抹茶ラテ 350ml", Price: "¥1,280"},
	{Name: "ほうじ茶 500ml", Price: "税込 1,408円 (税抜 1,280円)"},
	{Name: "玄米茶ティーバッグ", Price: "980円(税込)"},
	{Name: "煎茶 100g", Price: "￥２，１６０"},
	{Name: "麦茶 2L", Price: "¥1,280〜"},
	{Name: "ジャスミン茶", Price: "1,080円"},
	{Name: "ルイボスティー", Price: "1,500円"},
	{Name: "緑茶ボトル", Price: "¥160"},
	{Name: "紅茶セット", Price: "¥3,240"},
	{Name: "玉露 50g", Price: "¥4,320"},
	{Name: "番茶 200g", Price: "¥540"},
	{Name: "抹茶パウダー", Price: "¥2,700"},
	{Name: "最後の商品", Price: "¥99"},
}

func shopPhone(t *testing.T, w, h int) (*Simulated, *Runner) {
	t.Helper()
	sim := NewSimulated(SimOptions{Width: w, Height: h, Catalogue: shopCatalogue})
	if err := sim.Launch(context.Background(), SimShop); err != nil {
		t.Fatal(err)
	}
	r := NewRunner(context.Background(), sim, RunnerOptions{})
	t.Cleanup(r.Close)
	return sim, r
}

func sel(s protocol.Selector) *protocol.Selector { return &s }

// nodeCentre finds the centre of the first node of the phone's dump whose
// text is text, read from the XML independently of the selector engine.
func nodeCentre(t *testing.T, sim *Simulated, text string) (int, int) {
	t.Helper()
	dump, err := sim.UIDump(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(dump), `text="`+text+`"`)
	if i < 0 {
		t.Fatalf("%q not in the dump", text)
	}
	rest := string(dump[i:])
	j := strings.Index(rest, `bounds="`)
	var l, tp, r, b int
	if _, err := fmt.Sscanf(rest[j:], `bounds="[%d,%d][%d,%d]"`, &l, &tp, &r, &b); err != nil {
		t.Fatal(err)
	}
	return (l + r) / 2, (tp + b) / 2
}

// An element tap lands on the centre of that element's bounds, whatever
// the screen size; an extract reads the price under the named product.
func TestElementStepsOnTwoScreenSizes(t *testing.T) {
	for _, size := range [][2]int{{720, 1280}, {1440, 3040}} {
		t.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(t *testing.T) {
			sim, r := shopPhone(t, size[0], size[1])
			wantX, wantY := nodeCentre(t, sim, "ほうじ茶 500ml")
			ctx := context.Background()
			steps := []protocol.Step{
				{Op: protocol.OpWaitFor, Element: sel(protocol.Selector{Text: "~ほうじ茶.*"})},
				{Op: protocol.OpTap, Element: sel(protocol.Selector{Text: "ほうじ茶 500ml"})},
				{Op: protocol.OpExtract, Name: "price", Parse: protocol.ParsePrice, Tax: protocol.TaxIncluded,
					Element: sel(protocol.Selector{ID: "com.example.shop:id/price", Below: &protocol.Selector{Text: "ほうじ茶 500ml"}})},
			}
			var outs []StepOutcome
			for _, s := range steps {
				out, err := r.RunStep(ctx, s)
				if err != nil {
					t.Fatalf("%s: %v", s.Op, err)
				}
				outs = append(outs, out)
			}
			var taps []SimCall
			for _, c := range sim.History() {
				if c.Op == protocol.OpTap {
					taps = append(taps, c)
				}
			}
			if len(taps) != 1 || taps[0].X != wantX || taps[0].Y != wantY {
				t.Fatalf("taps %+v, want one at the element's centre (%d,%d)", taps, wantX, wantY)
			}
			o := outs[2].Observation
			if o == nil {
				t.Fatal("extract recorded no observation")
			}
			if o.Raw != "税込 1,408円 (税抜 1,280円)" || o.Value != "1408" || o.Currency != "JPY" || o.Tax != protocol.TaxIncluded {
				t.Fatalf("observation %+v", o)
			}
			if o.App == nil || o.App.Package != SimShop || o.Step != 3 || o.Name != "price" {
				t.Fatalf("observation provenance %+v", o)
			}
			if len(outs[2].Artifacts) != 2 || len(o.Evidence) != 2 {
				t.Fatalf("evidence %+v, artifacts %d: want the dump and a screenshot", o.Evidence, len(outs[2].Artifacts))
			}
			for i, want := range []string{"price-003.xml", "price-003.png"} {
				if a := outs[2].Artifacts[i]; a.Name != want || o.Evidence[i].Name != want || o.Evidence[i].SHA256 != a.SHA256 || a.SHA256 == "" {
					t.Errorf("evidence %d: %+v, artifact %s %s, want %s with its sha256", i, o.Evidence[i], a.Name, a.SHA256, want)
				}
			}
		})
	}
}

// Steps that fail name what went wrong, with the error the agent
// classifies the job failure by.
func TestElementStepFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		step protocol.Step
		is   error
		msg  string
	}{
		{"tap on an element that is not there", protocol.Step{Op: protocol.OpTap, Element: sel(protocol.Selector{Text: "ほうじ茶 5OOml"})},
			ErrElementNotFound, `ほうじ茶 500ml`},
		{"wait_for times out", protocol.Step{Op: protocol.OpWaitFor, TimeoutMS: 300, Element: sel(protocol.Selector{Text: "カートに入れる"})},
			ErrElementNotFound, "after 300ms"},
		{"wait_for gone while it stays", protocol.Step{Op: protocol.OpWaitFor, TimeoutMS: 300, State: protocol.StateGone, Element: sel(protocol.Selector{Text: "抹茶ラテ 350ml"})},
			ErrAssertion, "still on screen"},
		{"assert visible fails", protocol.Step{Op: protocol.OpAssert, Element: sel(protocol.Selector{Text: "在庫なし"})},
			ErrAssertion, "在庫なし"},
		{"assert text does not match", protocol.Step{Op: protocol.OpAssert, Matches: `¥[0-9,]+`, Element: sel(protocol.Selector{ID: "com.example.shop:id/price", Below: &protocol.Selector{Text: "ほうじ茶 500ml"}})},
			ErrAssertion, "does not match"},
		{"assert gone fails", protocol.Step{Op: protocol.OpAssert, State: protocol.StateGone, Element: sel(protocol.Selector{Text: "抹茶ラテ 350ml"})},
			ErrAssertion, "expected gone"},
		{"extract a range", protocol.Step{Op: protocol.OpExtract, Name: "price", Parse: protocol.ParsePrice, Element: sel(protocol.Selector{ID: "com.example.shop:id/price", Below: &protocol.Selector{Text: "麦茶 2L"}})},
			ErrExtract, "range"},
		{"extract two tax prices without tax", protocol.Step{Op: protocol.OpExtract, Name: "price", Parse: protocol.ParsePrice, Element: sel(protocol.Selector{ID: "com.example.shop:id/price", Below: &protocol.Selector{Text: "ほうじ茶 500ml"}})},
			ErrExtract, "tax"},
		{"scroll_until past the end of the list", protocol.Step{Op: protocol.OpScrollUntil, MaxSwipes: 50, Element: sel(protocol.Selector{Text: "存在しない商品"})},
			ErrElementNotFound, "stopped moving"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, r := shopPhone(t, 720, 1280)
			_, err := r.RunStep(context.Background(), tc.step)
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want %v mentioning %q", err, tc.is, tc.msg)
			}
		})
	}
}

// Steps that hold go on: assert with a matching text, wait_for gone, an
// optional extract of an absent element, scroll_until reaching a row below
// the screen.
func TestElementStepsThatHold(t *testing.T) {
	sim, r := shopPhone(t, 720, 1280)
	ctx := context.Background()
	no := false
	for _, s := range []protocol.Step{
		{Op: protocol.OpAssert, Matches: `¥[0-9,]+`, Element: sel(protocol.Selector{ID: "com.example.shop:id/price", Below: &protocol.Selector{Text: "抹茶ラテ 350ml"}})},
		{Op: protocol.OpAssert, State: protocol.StateGone, Element: sel(protocol.Selector{Text: "在庫なし"})},
		{Op: protocol.OpWaitFor, State: protocol.StateGone, Element: sel(protocol.Selector{Text: "在庫なし"})},
		{Op: protocol.OpExtract, Name: "stock", Required: &no, Element: sel(protocol.Selector{Text: "在庫なし"})},
		{Op: protocol.OpScrollUntil, Element: sel(protocol.Selector{Text: "最後の商品"})},
		{Op: protocol.OpExtract, Name: "last_price", Parse: protocol.ParsePrice, Element: sel(protocol.Selector{ID: "com.example.shop:id/price", Below: &protocol.Selector{Text: "最後の商品"}})},
	} {
		out, err := r.RunStep(ctx, s)
		if err != nil {
			t.Fatalf("%s %s: %v", s.Op, s.Element, err)
		}
		switch s.Name {
		case "stock":
			if out.Observation != nil || !strings.Contains(out.Warning, "nothing recorded") {
				t.Fatalf("optional extract of an absent element: %+v, warning %q", out.Observation, out.Warning)
			}
		case "last_price":
			if out.Observation == nil || out.Observation.Value != "99" || out.Observation.Currency != "JPY" {
				t.Fatalf("price of the last row: %+v", out.Observation)
			}
		}
	}
	swipes := 0
	for _, c := range sim.History() {
		if c.Op == protocol.OpSwipe {
			swipes++
			if c.Y2 >= c.Y {
				t.Errorf("scrolling down swiped %+v: the finger must move up", c)
			}
		}
	}
	if swipes == 0 {
		t.Fatal("the last row was reached without scrolling")
	}
}
