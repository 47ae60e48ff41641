package web_test

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/writer"
)

// testPickPosition: the pick box gives the picked vertex's stored
// position, as the server holds it, not the quantized one the tile drew
// (precision=), which is up to the precision away.
func testPickPosition(t *testing.T, e *viewerEnv) {
	b := e.open(t, "stores=axons")
	var at struct {
		X, Y float64
		Pos  [3]float32
	}
	b.value(`__zvf.vertexOnScreen("axons")`, &at)
	b.pick(at.X, at.Y)
	var tol float64
	b.value(`Math.max(0, ...__zvf.requests.filter((r) => r.kind === 'tile').map((r) => +(new URL(r.url, location.href).searchParams.get('precision') || 0)))`, &tol)
	i := findNear(e.sc.Axons.Positions, at.Pos, tol)
	if i < 0 {
		t.Fatalf("no axon vertex within %g of the drawn %v", tol, at.Pos)
	}
	stored := e.sc.Axons.Positions[3*i : 3*i+3]
	if stored[0] == at.Pos[0] && stored[1] == at.Pos[1] && stored[2] == at.Pos[2] {
		t.Fatalf("the vertex at %v was drawn where it is stored; this test needs one moved by precision %g", at.Pos, tol)
	}
	var parts []string
	for _, v := range stored {
		parts = append(parts, strconv.FormatFloat(float64(v), 'g', -1, 32))
	}
	want := "position " + strings.Join(parts, ", ")
	if text := b.text("#picked"); !strings.Contains(text, want) {
		t.Errorf("pick box %q; want %q (drawn at %v, precision %g)", text, want, at.Pos, tol)
	}
	if text := b.text("#picked"); strings.Contains(text, fmt.Sprintf("position %s,", strconv.FormatFloat(float64(at.Pos[0]), 'g', -1, 32))) && at.Pos[0] != stored[0] {
		t.Errorf("pick box %q still gives the quantized position %v", text, at.Pos)
	}
	b.noProblems()
}

// TestViewerPickFilterInBrowser: a pick on a filtered layer lists only
// the vertices that layer draws. The "twins" store holds
// every point twice, once of kind 1 (an even object) and once of kind 2
// (the next, odd, object); filtered to kind 1, a pick named both, with the
// hidden twin's object and kind.
func TestViewerPickFilterInBrowser(t *testing.T) {
	var pos []float32
	var oid []int64
	var kind []int32
	for i := range 512 {
		p := [3]float32{float32(10 * (i & 7)), float32(10 * (i >> 3 & 7)), float32(10 * (i >> 6))}
		for k := range 2 {
			pos = append(pos, p[:]...)
			oid = append(oid, int64(2*i+k))
			kind = append(kind, int32(k+1))
		}
	}
	ts := pointsServer(t, "twins", &writer.PointCloud{Positions: pos, ObjectIDs: oid, Attributes: []writer.Attribute{writer.Int32Attribute("kind", 1, kind)}}, 40)
	b := newChrome(t).tab(t, 1280, 800)
	for _, tc := range []struct{ query, want, hidden string }{
		{"f.twins=" + url.QueryEscape("kind = 1"), "kind = 1", "kind = 2"},
		{"f.twins=" + url.QueryEscape("kind = 2"), "kind = 2", "kind = 1"},
	} {
		b.navigate(ts.URL + "/?stores=twins&size=3&" + tc.query)
		b.settle()
		var drawn map[string]int
		b.value(`__zvf.drawn`, &drawn)
		if drawn["twins"] != 512 {
			t.Fatalf("%s: %d twins drawn; want 512", tc.query, drawn["twins"])
		}
		var at struct{ X, Y float64 }
		b.value(`__zvf.vertexOnScreen("twins")`, &at)
		b.pick(at.X, at.Y)
		text := b.text("#picked")
		if !strings.Contains(text, tc.want) || strings.Contains(text, tc.hidden) || strings.Contains(text, "vertices at this position") {
			t.Errorf("%s: pick box %q; want the one drawn vertex's %q, not its hidden twin's %q", tc.query, text, tc.want, tc.hidden)
		}
		var asked string
		b.value(`__zvf.requests.filter((r) => r.kind === 'pick').at(-1).url`, &asked)
		if !strings.Contains(asked, "filter=") {
			t.Errorf("%s: the pick asked %s, without the layer's filter", tc.query, asked)
		}
	}
	b.noProblems()
}
