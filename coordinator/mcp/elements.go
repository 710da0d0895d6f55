package mcp

import (
	"bytes"
	"fmt"
	"image"
	"image/png"
	"strings"

	xdraw "image/draw"

	"github.com/edgeagent/edgeagent/uitree"
)

// Element is one element on screen, from a UI dump (uiautomator's, or an
// iPhone's: docs/selectors.md, "iPhones"): the elements
// uitree.Tree.Elements lists, in its JSON shape.
type Element struct {
	Index       int    `json:"index" jsonschema:"the number to pass to tap or long_press as element"`
	Text        string `json:"text,omitempty"`
	ResourceID  string `json:"resource_id,omitempty"`
	Description string `json:"content_description,omitempty"`
	Class       string `json:"class,omitempty"`
	Clickable   bool   `json:"clickable"`
	// Bounds are left, top, right, bottom in screen pixels.
	Bounds [4]int `json:"bounds" jsonschema:"left, top, right, bottom in screen pixels"`
	// Package is the app the element belongs to.
	Package string `json:"package,omitempty" jsonschema:"the app the element belongs to"`
}

// Centre is the point a tap on the element hits.
func (e Element) Centre() (int, int) {
	return uitree.Element(e).Centre()
}

// parseElements lists the elements of a UI dump worth showing
// (uitree.Tree.Elements: at most uitree.MaxElements). The dump was read
// back from storage: uitree.Parse bounds it.
func parseElements(dump []byte) ([]Element, error) {
	tree, err := uitree.Parse(dump)
	if err != nil {
		return nil, err
	}
	var out []Element // nil for none, as before: "elements": null
	for _, e := range tree.Elements() {
		out = append(out, Element(e))
	}
	return out, nil
}

// formatElements is the compact text a model reads.
func formatElements(els []Element) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d elements (tap one with element=INDEX):\n", len(els))
	for _, e := range els {
		fmt.Fprintf(&b, "[%d]", e.Index)
		if e.Text != "" {
			fmt.Fprintf(&b, " text=%q", e.Text)
		}
		if e.Description != "" {
			fmt.Fprintf(&b, " desc=%q", e.Description)
		}
		if e.ResourceID != "" {
			fmt.Fprintf(&b, " id=%s", e.ResourceID)
		}
		// The class's last part: Button for android.widget.Button and for
		// an iPhone's XCUIElementTypeButton.
		if c := strings.TrimPrefix(e.Class[strings.LastIndex(e.Class, ".")+1:], "XCUIElementType"); c != "" {
			fmt.Fprintf(&b, " class=%s", c)
		}
		if e.Clickable {
			b.WriteString(" clickable")
		}
		fmt.Fprintf(&b, " bounds=[%d,%d][%d,%d]\n", e.Bounds[0], e.Bounds[1], e.Bounds[2], e.Bounds[3])
	}
	return b.String()
}

// Bounds of an image the endpoint decodes (docs/security.md, "Images read
// back from storage"): a phone's screen is a few megapixels; these leave
// room for any tablet and bound one decode to a few hundred MB.
const (
	// MaxImageSide is the most pixels either side of an image may declare.
	MaxImageSide = 16384
	// MaxImagePixels is the most pixels (width × height) it may declare.
	MaxImagePixels = 40_000_000
)

// checkImageSize refuses a declared size beyond MaxImageSide or
// MaxImagePixels.
func checkImageSize(w, h int) error {
	if w <= 0 || h <= 0 || w > MaxImageSide || h > MaxImageSide || int64(w)*int64(h) > MaxImagePixels {
		return fmt.Errorf("the image declares %dx%d pixels, over the limit of %d per side and %d in all: not decoded",
			w, h, MaxImageSide, MaxImagePixels)
	}
	return nil
}

// scalePNG returns the PNG png scaled down to at most maxWidth pixels wide
// (keeping the aspect ratio, each pixel the average of the area it
// covers), and the size of the result. maxWidth ≤ 0 or not smaller than
// the image returns it as it is, reading only its header (decoding a
// full-size screenshot would be most of a screenshot call's cost on the
// coordinator: docs/benchmarks.md, "MCP tool-call round trip").
//
// The PNG comes back from storage, where an agent (or anyone who can
// write the bucket) put it: its declared size is checked against
// MaxImageSide and MaxImagePixels before anything is decoded, so a small
// file declaring a huge image is refused instead of allocated
// (docs/security.md, "Images read back from storage").
func scalePNG(data []byte, maxWidth int) ([]byte, int, int, error) {
	cfg, err := png.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, 0, 0, fmt.Errorf("decode screenshot: %w", err)
	}
	if err := checkImageSize(cfg.Width, cfg.Height); err != nil {
		return nil, 0, 0, fmt.Errorf("decode screenshot: %w", err)
	}
	if maxWidth <= 0 || maxWidth >= cfg.Width {
		return data, cfg.Width, cfg.Height, nil
	}
	src, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, 0, 0, fmt.Errorf("decode screenshot: %w", err)
	}
	sb := src.Bounds()
	w, h := sb.Dx(), sb.Dy()
	nw := maxWidth
	nh := max(1, h*nw/w)
	rgba := image.NewRGBA(sb)
	xdraw.Draw(rgba, sb, src, sb.Min, xdraw.Src)
	dst := image.NewRGBA(image.Rect(0, 0, nw, nh))
	for y := range nh {
		y0, y1 := y*h/nh, max((y+1)*h/nh, y*h/nh+1)
		for x := range nw {
			x0, x1 := x*w/nw, max((x+1)*w/nw, x*w/nw+1)
			var r, g, bl, a, n int
			for yy := y0; yy < y1; yy++ {
				off := rgba.PixOffset(sb.Min.X+x0, sb.Min.Y+yy)
				for xx := x0; xx < x1; xx++ {
					r += int(rgba.Pix[off])
					g += int(rgba.Pix[off+1])
					bl += int(rgba.Pix[off+2])
					a += int(rgba.Pix[off+3])
					n++
					off += 4
				}
			}
			o := dst.PixOffset(x, y)
			dst.Pix[o], dst.Pix[o+1], dst.Pix[o+2], dst.Pix[o+3] = uint8(r/n), uint8(g/n), uint8(bl/n), uint8(a/n)
		}
	}
	var out bytes.Buffer
	if err := png.Encode(&out, dst); err != nil {
		return nil, 0, 0, fmt.Errorf("encode scaled screenshot: %w", err)
	}
	return out.Bytes(), nw, nh, nil
}
