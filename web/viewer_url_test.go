package web_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/web"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// farServer serves "far": a 16×16×16 lattice of points 10 apart whose
// corner is at (10^6, 10^6, 10^6), as a store in nanometres far from the
// origin is.
func farServer(t *testing.T) *httptest.Server {
	t.Helper()
	ctx := context.Background()
	var pos []float32
	for i := range 4096 {
		pos = append(pos, float32(1e6+10*(i&15)), float32(1e6+10*(i>>4&15)), float32(1e6+10*(i>>8)))
	}
	mem := memStorage(t)
	if _, err := writer.WritePoints(ctx, mem, "far", &writer.PointCloud{Positions: pos}, writer.Options{ChunkShape: []float64{80, 80, 80}}); err != nil {
		t.Fatal(err)
	}
	c := cache.New(16 << 20)
	s, err := zvf.Open(ctx, storage.Sub(mem, "far"), zvf.Options{Name: "far", Cache: c})
	if err != nil {
		t.Fatal(err)
	}
	srv := apitest.New(t, api.Options{Stores: []*zvf.Store{s}, Cache: c, UI: web.Handler(web.Options{})})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts
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
