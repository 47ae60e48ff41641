package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/web"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// lattice is an nx×ny×nz lattice of points step apart, from 0.5.
func lattice(nx, ny, nz int, step [3]float32) *writer.PointCloud {
	var pos []float32
	for z := range nz {
		for y := range ny {
			for x := range nx {
				pos = append(pos, 0.5+float32(x)*step[0], 0.5+float32(y)*step[1], 0.5+float32(z)*step[2])
			}
		}
	}
	return &writer.PointCloud{Positions: pos}
}

// replaceableServer serves the viewer and store "s" (first) through a
// watching handle with the default --max-age, and replace, which writes
// next over the store and has the server serve it.
func replaceableServer(t *testing.T, first *writer.PointCloud) (ts *httptest.Server, replace func(next *writer.PointCloud)) {
	t.Helper()
	ctx := context.Background()
	mem := memStorage(t)
	write := func(pc *writer.PointCloud) {
		if _, err := writer.WritePoints(ctx, mem, "s", pc, writer.Options{ChunkShape: []float64{40, 40, 40}}); err != nil {
			t.Fatal(err)
		}
	}
	write(first)
	c := cache.New(16 << 20)
	h, err := zvf.OpenHandle(ctx, storage.Sub(mem, "s"), zvf.Options{Name: "s", Cache: c}, zvf.Watch{Enabled: true, Settle: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := apitest.New(t, api.Options{Handles: []*zvf.Handle{h}, Cache: c, MaxAge: time.Hour, UI: web.Handler(web.Options{})})
	ts = httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts, func(next *writer.PointCloud) {
		t.Helper()
		write(next)
		time.Sleep(20 * time.Millisecond) // past Settle
		if err := srv.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// serverVersion is the version store s's descriptor names now.
func serverVersion(t *testing.T, ts *httptest.Server) string {
	t.Helper()
	resp, err := http.Get(ts.URL + "/api/v1/stores/s")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var d struct {
		Version string `json:"version"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil || d.Version == "" {
		t.Fatalf("descriptor: %v, version %q", err, d.Version)
	}
	return d.Version
}

// TestViewerReloadAfterStoreReplacedInBrowser: after a store was replaced
// (and the server serves the new version), opening the viewer again
// showed the old points: the descriptor and the tiles came from the
// browser's cache (max-age=3600) under URLs that did not name the
// version. The descriptor is revalidated on every load and names the
// version, and the tiles are asked for under it.
func TestViewerReloadAfterStoreReplacedInBrowser(t *testing.T) {
	ts, replace := replaceableServer(t, lattice(8, 8, 8, [3]float32{10, 10, 10}))
	b := newBrowser(t)
	b.navigate(ts.URL + "/?stores=s")
	b.settle()
	var drawn map[string]int
	b.value(`__zvf.drawn`, &drawn)
	if drawn["s"] != 512 {
		t.Fatalf("before the change: %d points drawn, want the store's 512", drawn["s"])
	}
	replace(lattice(8, 8, 16, [3]float32{10, 10, 5}))
	v := serverVersion(t, ts)
	b.navigate(ts.URL + "/?stores=s")
	b.settle()
	b.value(`__zvf.drawn`, &drawn)
	var tiles []string
	b.value(`__zvf.requests.filter((r) => r.kind === 'tile').map((r) => r.url)`, &tiles)
	if drawn["s"] != 1024 {
		t.Errorf("opened again after the store was replaced: %d points drawn, want the new version's 1024", drawn["s"])
	}
	for _, u := range tiles {
		if !strings.Contains(u, "/s/v"+v+"/bbox?") {
			t.Errorf("a tile asked for at %s, not under the version served (%s)", u, v)
		}
	}
	b.noProblems()
}

// TestViewerOpenPageFollowsStoreReplacedInBrowser: a page open while its
// store is replaced asks for more of it (here a box query) under the old
// version, is answered 410, reads the descriptor again and draws the new
// version, and the box query's answer is the new version's.
func TestViewerOpenPageFollowsStoreReplacedInBrowser(t *testing.T) {
	ts, replace := replaceableServer(t, lattice(8, 8, 8, [3]float32{10, 10, 10}))
	b := newBrowser(t)
	b.navigate(ts.URL + "/?stores=s")
	b.settle()
	replace(lattice(8, 8, 16, [3]float32{10, 10, 5}))
	b.eval(`document.getElementById('bmin').value = '0,0,0'; document.getElementById('bmax').value = '100,100,100'; document.getElementById('bquery').click()`)
	b.wait(`__zvf.drawn.s === 1024 && __zvf.settled`)
	b.wait(`document.getElementById('bresult').textContent.includes('1,024')`)
	var gone int
	b.value(`__zvf.requests.filter((r) => r.status === 410).length`, &gone)
	if gone == 0 {
		t.Errorf("no request was answered 410: the page did not ask under the old version")
	}
}
