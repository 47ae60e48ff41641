package web_test

import (
	"bytes"
	"image/png"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/writer"
)

// TestViewerRGBAttributeInBrowser: a point cloud's colours, a 3-channel
// uint8 attribute (as the reference points_bins' "color"), draw as the
// colours they are. The page coloured by the first channel through
// viridis: red points yellow, blue ones purple, with a bar from 0 to 255.
func TestViewerRGBAttributeInBrowser(t *testing.T) {
	var pos []float32
	var rgb []uint8
	for i := range 1000 {
		pos = append(pos, float32(10*(i%10)), float32(10*(i/10%10)), float32(10*(i/100)))
		if i%10 < 5 {
			rgb = append(rgb, 255, 0, 0)
		} else {
			rgb = append(rgb, 0, 0, 255)
		}
	}
	ts := pointsServer(t, "rgb", &writer.PointCloud{Positions: pos, Attributes: []writer.Attribute{writer.Uint8Attribute("color", 3, rgb)}}, 50)
	b := newChrome(t).tab(t, 1280, 800)
	b.navigate(ts.URL + "/?stores=rgb&c.rgb=color&size=3")
	b.settle()
	shot := b.shot("viewer-rgb.png")
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatal(err)
	}
	// Points are shaded (darker to their rims): count pixels by the
	// channel that dominates.
	var red, blue, other int
	bd := img.Bounds()
	for y := bd.Min.Y; y < bd.Max.Y-40; y++ {
		for x := bd.Min.X; x < bd.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			r, g, bl = r>>8, g>>8, bl>>8
			switch {
			case r+g+bl < 120:
				// the background, axis lines, dark rims
			case r > 2*g && r > 2*bl:
				red++
			case bl > 2*g && bl > 2*r:
				blue++
			default:
				other++
			}
		}
	}
	t.Logf("red %d, blue %d, other %d pixels", red, blue, other)
	if red < 500 || blue < 500 || other > (red+blue)/4 {
		t.Errorf("points stored red and blue drew %d red, %d blue and %d other pixels; want them red and blue", red, blue, other)
	}
	legend := b.text(`.layer[data-store="rgb"] .legend`)
	if !strings.Contains(legend, "RGB") || b.truthy(`!!document.querySelector('.layer[data-store="rgb"] .legend .bar')`) {
		t.Errorf("legend %q: want it to say the colours are the stored RGB, with no colour bar", legend)
	}
	var option string
	b.value(`document.querySelector('.layer[data-store="rgb"] .colour').selectedOptions[0].textContent`, &option)
	if option != "color · RGB" {
		t.Errorf("the colour menu offers %q; want it to say the attribute is RGB", option)
	}
	if s := b.search(); strings.Contains(s, "range.rgb") {
		t.Errorf("URL %q holds a colour range for an RGB colouring", s)
	}
	b.noProblems()
}

// truthy is the boolean value of expr.
func (b *browser) truthy(expr string) bool {
	b.t.Helper()
	var v bool
	b.value(expr, &v)
	return v
}
