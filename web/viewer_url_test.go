package web_test

import (
	"fmt"
	"math"
	"net/http/httptest"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/writer"
)

// farServer serves "far": a 16×16×16 lattice of points 10 apart whose
// corner is at (10^6, 10^6, 10^6), as a store in nanometres far from the
// origin is.
func farServer(t *testing.T) *httptest.Server {
	t.Helper()
	var pos []float32
	for i := range 4096 {
		pos = append(pos, float32(1e6+10*(i&15)), float32(1e6+10*(i>>4&15)), float32(1e6+10*(i>>8)))
	}
	return pointsServer(t, "far", &writer.PointCloud{Positions: pos}, 80)
}

// TestViewerFarFromOriginInBrowser: a store far from the origin is drawn
// when the view comes close. The view's matrices were float32, whose
// planes at 10^6 are off by hundreds of units: zoomed to 50 units from
// the lattice's middle, no tile was in view and nothing was drawn.
func TestViewerFarFromOriginInBrowser(t *testing.T) {
	ts := farServer(t)
	ch := newChrome(t)
	b := ch.tab(t, 1280, 800)
	b.navigate(ts.URL + "/?stores=far")
	b.settle()
	for _, dist := range []float64{400, 50, 12} {
		b.eval(`__zvf.setCamera({yaw: 0.3, pitch: 0.2, dist: ` + fmt.Sprint(dist) + `, target: [1e6 + 73.5, 1e6 + 71.5, 1e6 + 75.5]})`)
		b.settle()
		var drawn map[string]int
		b.value(`__zvf.drawn`, &drawn)
		var cover map[string]int
		b.value(`__zvf.coverage()`, &cover)
		b.shot("far-" + fmt.Sprint(dist) + ".png")
		if drawn["far"] == 0 || cover["far"] == 0 {
			t.Errorf("%g units from the middle of a lattice at 10^6: %d points drawn covering %d pixels; want the points in view drawn", dist, drawn["far"], cover["far"])
		}
	}
	b.noProblems()
}

// TestViewerFarCameraLinkInBrowser: a link to a close view of a store far
// from the origin reopens on the same place. The URL's camera centre had 6
// significant digits, a whole unit at 10^6: a view 50 units away
// reopened 3.5 units off.
func TestViewerFarCameraLinkInBrowser(t *testing.T) {
	ts := farServer(t)
	ch := newChrome(t)
	b := ch.tab(t, 1280, 800)
	b.navigate(ts.URL + "/?stores=far")
	b.settle()
	want := camera{Yaw: 0.3, Pitch: 0.2, Dist: 12.5, Target: [3]float64{1e6 + 123.456, 1e6 + 45.678, 1e6 + 30.5}}
	b.eval(`__zvf.setCamera({yaw: 0.3, pitch: 0.2, dist: 12.5, target: [1e6 + 123.456, 1e6 + 45.678, 1e6 + 30.5]})`)
	b.wait(`(new URLSearchParams(location.search).get('cam') || '').split(',')[2] === '12.5'`)
	link := b.search()
	b2 := ch.tab(t, 1280, 800)
	b2.navigate(ts.URL + "/" + link)
	b2.settle()
	var got camera
	b2.value(`__zvf.camera()`, &got)
	off := 0.0
	for i := range 3 {
		off = math.Max(off, math.Abs(got.Target[i]-want.Target[i]))
	}
	if off > want.Dist/1000 || math.Abs(got.Dist-want.Dist) > want.Dist/1000 || math.Abs(got.Yaw-want.Yaw) > 1e-5 || math.Abs(got.Pitch-want.Pitch) > 1e-5 {
		t.Errorf("the link %s reopened the camera %+v; want %+v (its centre %.3g units off, in a view %g away)", link, got, want, off, want.Dist)
	}
	b.noProblems()
	b2.noProblems()
}
