package mcp

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"strconv"
	"strings"

	xdraw "image/draw"
)

// Element is one element on screen, from a uiautomator dump.
type Element struct {
	Index       int    `json:"index" jsonschema:"the number to pass to tap or long_press as element"`
	Text        string `json:"text,omitempty"`
	ResourceID  string `json:"resource_id,omitempty"`
	Description string `json:"content_description,omitempty"`
	Class       string `json:"class,omitempty"`
	Clickable   bool   `json:"clickable"`
	// Bounds are left, top, right, bottom in screen pixels.
	Bounds [4]int `json:"bounds" jsonschema:"left, top, right, bottom in screen pixels"`
}

// Centre is the point a tap on the element hits.
func (e Element) Centre() (int, int) {
	return (e.Bounds[0] + e.Bounds[2]) / 2, (e.Bounds[1] + e.Bounds[3]) / 2
}

// MaxElements bounds the list one dump gives.
const MaxElements = 500

// ParseElements lists the elements of a uiautomator dump worth showing: a
// node with text, a resource id, a content description, or clickable, and
// an area on screen. Indexes count from 0 in document order.
func ParseElements(dump []byte) ([]Element, error) {
	dec := xml.NewDecoder(bytes.NewReader(dump))
	var out []Element
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("parse ui dump: %w", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok || se.Name.Local != "node" {
			continue
		}
		var e Element
		var bounds string
		for _, a := range se.Attr {
			switch a.Name.Local {
			case "text":
				e.Text = a.Value
			case "resource-id":
				e.ResourceID = a.Value
			case "content-desc":
				e.Description = a.Value
			case "class":
				e.Class = a.Value
			case "clickable":
				e.Clickable = a.Value == "true"
			case "bounds":
				bounds = a.Value
			}
		}
		b, ok := parseBounds(bounds)
		if !ok || b[2] <= b[0] || b[3] <= b[1] {
			continue
		}
		e.Bounds = b
		if e.Text == "" && e.ResourceID == "" && e.Description == "" && !e.Clickable {
			continue
		}
		e.Index = len(out)
		out = append(out, e)
		if len(out) == MaxElements {
			break
		}
	}
	return out, nil
}

// parseBounds reads "[l,t][r,b]".
func parseBounds(s string) ([4]int, bool) {
	var b [4]int
	s = strings.TrimPrefix(s, "[")
	s = strings.TrimSuffix(s, "]")
	a, c, ok := strings.Cut(s, "][")
	if !ok {
		return b, false
	}
	for i, pair := range []string{a, c} {
		x, y, ok := strings.Cut(pair, ",")
		if !ok {
			return b, false
		}
		xi, err1 := strconv.Atoi(x)
		yi, err2 := strconv.Atoi(y)
		if err1 != nil || err2 != nil {
			return b, false
		}
		b[2*i], b[2*i+1] = xi, yi
	}
	return b, true
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
		if e.Class != "" {
			fmt.Fprintf(&b, " class=%s", e.Class[strings.LastIndex(e.Class, ".")+1:])
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
