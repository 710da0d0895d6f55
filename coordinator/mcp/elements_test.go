package mcp

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/uitree"
)

func TestParseElements(t *testing.T) {
	phone := capture.NewSimulated(capture.SimOptions{Width: 240, Height: 400})
	if err := phone.Launch(t.Context(), "com.example.shop"); err != nil {
		t.Fatal(err)
	}
	if err := phone.Text(t.Context(), `a<b & "c"`); err != nil {
		t.Fatal(err)
	}
	dump, err := phone.UIDump(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	els, err := parseElements(dump)
	if err != nil {
		t.Fatal(err)
	}
	var field *Element
	for i, e := range els {
		if e.Index != i {
			t.Fatalf("element %d has index %d", i, e.Index)
		}
		if e.ResourceID == "com.example.shop:id/input" {
			field = &els[i]
		}
	}
	if field == nil || field.Text != `a<b & "c"` || !field.Clickable || field.Class != "android.widget.EditText" {
		t.Fatalf("input field %+v in %+v", field, els)
	}
	if x, y := field.Centre(); x != (field.Bounds[0]+field.Bounds[2])/2 || y != (field.Bounds[1]+field.Bounds[3])/2 {
		t.Fatalf("centre %d,%d of %v", x, y, field.Bounds)
	}
	// The root frame (no text, id, description, not clickable) is left out.
	if strings.Contains(formatElements(els), "FrameLayout") {
		t.Fatalf("the root frame is listed:\n%s", formatElements(els))
	}

	for _, tc := range []struct {
		name, dump string
		want       int
		err        string
	}{
		{"empty bounds", `<hierarchy><node text="x" bounds="[5,5][5,9]"/></hierarchy>`, 0, ""},
		{"bad bounds", `<hierarchy><node text="x" bounds="[a,5][9,9]"/><node text="y" bounds="[1,2][3,4]"/></hierarchy>`, 1, ""},
		{"not xml", `<hierarchy><node text="x"`, 0, "ui dump: XML syntax error"},
		{"too deep", strings.Repeat("<node>", uitree.MaxDepth+1), 0, "ui dump: elements nest deeper than"},
	} {
		els, err := parseElements([]byte(tc.dump))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || len(els) != tc.want {
			t.Errorf("%s: %+v, %v; want %d elements", tc.name, els, err, tc.want)
		}
	}
}

// TestParseElementsIPhone: an iPhone's dump lists its visible elements
// with their label as text, their identifier as resource id and bounds in
// pixels (points times the dump's scale); a hidden element is left out.
func TestParseElementsIPhone(t *testing.T) {
	dump := `<?xml version="1.0" encoding="UTF-8"?>
<XCUIElementTypeApplication type="XCUIElementTypeApplication" name="ショップ" label="ショップ" enabled="true" visible="true" accessible="false" x="0" y="0" width="393" height="852" index="0" edgeagent-scale="3" edgeagent-bundle-id="com.example.shop">
  <XCUIElementTypeWindow type="XCUIElementTypeWindow" enabled="true" visible="true" accessible="false" x="0" y="0" width="393" height="852" index="0">
    <XCUIElementTypeButton type="XCUIElementTypeButton" name="cart" label="カート" enabled="true" visible="true" accessible="true" x="337" y="59" width="44" height="44" index="0"/>
    <XCUIElementTypeStaticText type="XCUIElementTypeStaticText" name="price" label="税込 1,408円" value="税込 1,408円" enabled="true" visible="true" accessible="true" x="16" y="200" width="200" height="24" index="1"/>
    <XCUIElementTypeStaticText type="XCUIElementTypeStaticText" name="price" label="税込 968円" value="税込 968円" enabled="true" visible="false" accessible="true" x="16" y="900" width="200" height="24" index="2"/>
  </XCUIElementTypeWindow>
</XCUIElementTypeApplication>`
	els, err := parseElements([]byte(dump))
	if err != nil {
		t.Fatal(err)
	}
	want := []Element{
		{Index: 0, Text: "ショップ", ResourceID: "ショップ", Class: "XCUIElementTypeApplication", Bounds: [4]int{0, 0, 1179, 2556}, Package: "com.example.shop"},
		{Index: 1, Text: "カート", ResourceID: "cart", Class: "XCUIElementTypeButton", Clickable: true, Bounds: [4]int{1011, 177, 1143, 309}, Package: "com.example.shop"},
		{Index: 2, Text: "税込 1,408円", ResourceID: "price", Class: "XCUIElementTypeStaticText", Bounds: [4]int{48, 600, 648, 672}, Package: "com.example.shop"},
	}
	if fmt.Sprint(els) != fmt.Sprint(want) {
		t.Fatalf("elements\n%+v\nwant\n%+v", els, want)
	}
	if got := formatElements(els); !strings.Contains(got, "\n[1] text=\"カート\" id=cart class=Button clickable bounds=[1011,177][1143,309]\n") {
		t.Errorf("formatted:\n%s", got)
	}
}

// TestElementJSON: list_elements' elements have the JSON shape of
// uitree's (the conversion between them ignores the field tags).
func TestElementJSON(t *testing.T) {
	u := uitree.Element{Index: 3, Text: "抹茶ラテ", ResourceID: "a:id/b", Description: "d", Class: "c", Clickable: true, Bounds: [4]int{1, 2, 3, 4}, Package: "com.example.shop"}
	for _, e := range []uitree.Element{u, {}} {
		want, err1 := json.Marshal(e)
		got, err2 := json.Marshal(Element(e))
		if err1 != nil || err2 != nil || string(got) != string(want) {
			t.Errorf("MCP element %s, uitree element %s (%v, %v)", got, want, err1, err2)
		}
	}
	if x, y := Element(u).Centre(); x != 2 || y != 3 {
		t.Errorf("centre %d,%d", x, y)
	}
	if els, err := parseElements([]byte(`<hierarchy><node bounds="[0,0][9,9]"/></hierarchy>`)); err != nil || els != nil {
		t.Errorf("no elements: %#v, %v; want nil", els, err)
	}
}

func TestScalePNG(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 40, 30))
	for y := range 30 {
		for x := range 40 {
			c := color.RGBA{0, 0, 0, 255}
			if x >= 20 {
				c = color.RGBA{255, 255, 255, 255}
			}
			img.Set(x, y, c)
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	out, w, h, err := scalePNG(buf.Bytes(), 10)
	if err != nil || w != 10 || h != 7 {
		t.Fatalf("scaled to %dx%d, %v; want 10x7", w, h, err)
	}
	got, err := png.Decode(bytes.NewReader(out))
	if err != nil || got.Bounds().Dx() != 10 || got.Bounds().Dy() != 7 {
		t.Fatalf("decoded %v, %v", got.Bounds(), err)
	}
	if r, _, _, _ := got.At(0, 0).RGBA(); r != 0 {
		t.Fatalf("left pixel %v, want black", got.At(0, 0))
	}
	if r, _, _, _ := got.At(9, 0).RGBA(); r != 0xffff {
		t.Fatalf("right pixel %v, want white", got.At(9, 0))
	}
	// No scaling asked, or the image is already narrow enough: as it is.
	for _, mw := range []int{0, 40, 100} {
		if same, w, h, err := scalePNG(buf.Bytes(), mw); err != nil || w != 40 || h != 30 || !bytes.Equal(same, buf.Bytes()) {
			t.Fatalf("max width %d: %dx%d, %v", mw, w, h, err)
		}
	}
	if _, _, _, err := scalePNG([]byte("not a png"), 10); err == nil || !strings.Contains(err.Error(), "decode screenshot") {
		t.Fatalf("not a png: %v", err)
	}
}

// declaredPNG is a small, well-formed PNG that declares a w×h grey image
// and holds the first few bytes of its pixels, as a hostile agent can
// store it: a decoder that trusts the header allocates w×h bytes.
func declaredPNG(w, h int) []byte {
	var out bytes.Buffer
	out.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(data)))
		out.Write(n[:])
		body := append([]byte(typ), data...)
		out.Write(body)
		binary.BigEndian.PutUint32(n[:], crc32.ChecksumIEEE(body))
		out.Write(n[:])
	}
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], uint32(w))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(h))
	ihdr[8] = 8 // bit depth; colour type 0 (grey), no interlace
	chunk("IHDR", ihdr)
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	_, _ = zw.Write(make([]byte, 8))
	_ = zw.Close()
	chunk("IDAT", z.Bytes())
	chunk("IEND", nil)
	return out.Bytes()
}

// TestScalePNGRefusesHugeDeclaredSize: a PNG whose header declares more
// than MaxImageSide pixels on a side or MaxImagePixels in all is refused
// with an error naming the size and the limit, before it is decoded, with
// or without scaling; a size within the limits is decoded as usual.
func TestScalePNGRefusesHugeDeclaredSize(t *testing.T) {
	for _, c := range []struct{ w, h int }{
		{MaxImageSide + 1, 1},
		{1, MaxImageSide + 1},
		{8000, MaxImagePixels/8000 + 1},
	} {
		data := declaredPNG(c.w, c.h)
		for _, mw := range []int{0, 100} {
			_, _, _, err := scalePNG(data, mw)
			want := fmt.Sprintf("declares %dx%d pixels, over the limit", c.w, c.h)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%dx%d, max width %d: %v; want an error containing %q", c.w, c.h, mw, err, want)
			}
		}
	}
	// Within the limits, the size is no reason to refuse: this one fails
	// only because its pixels are missing.
	_, _, _, err := scalePNG(declaredPNG(MaxImageSide, 2), 100)
	if err == nil || strings.Contains(err.Error(), "over the limit") {
		t.Errorf("%dx2: %v; want a decode error, not the size limit", MaxImageSide, err)
	}
}

func TestKeyName(t *testing.T) {
	for in, want := range map[string]string{
		"back": "KEYCODE_BACK", "HOME": "KEYCODE_HOME", "KEYCODE_ENTER": "KEYCODE_ENTER", "keycode_del": "KEYCODE_DEL",
		"4": "4", " app_switch ": "KEYCODE_APP_SWITCH", "": "",
	} {
		if got := keyName(in); got != want {
			t.Errorf("keyName(%q) = %q, want %q", in, got, want)
		}
	}
}
