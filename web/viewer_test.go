package web_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/web"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/demo"
)

// viewerEnv is what the viewer's browser subtests share, made once: one
// Chromium (each subtest opens its own tab), the demo stores and the
// extra ones (newDemo), and a logged server over them.
type viewerEnv struct {
	ch     *chrome
	d      *demoStores
	lg     *logged
	ts     *httptest.Server
	sc     *demo.Scene
	level0 map[string]int // the demo layers' level-0 vertex counts
}

func newViewerEnv(t *testing.T) *viewerEnv {
	ch := newChrome(t)
	d := newDemo(t, true)
	lg := newLogged(d.handler(t, ""))
	ts := httptest.NewServer(lg)
	t.Cleanup(ts.Close)
	sc := d.scene
	return &viewerEnv{ch: ch, d: d, lg: lg, ts: ts, sc: sc, level0: map[string]int{
		"cells": len(sc.Cells.Positions) / 3, "axons": len(sc.Axons.Positions) / 3,
		"skeletons": len(sc.Skeletons.Positions) / 3, "meshes": len(sc.Meshes.Positions) / 3,
	}}
}

// open is a fresh 1280×800 tab on the viewer at ?query, settled.
func (e *viewerEnv) open(t *testing.T, query string) *browser {
	b := e.ch.tab(t, 1280, 800)
	b.navigate(e.ts.URL + "/?" + query)
	b.settle()
	return b
}

// search is the page's query string (the state it wrote to the URL).
func (b *browser) search() string {
	var s string
	b.value(`location.search`, &s)
	return s
}

// drawnLevels: each layer's vertices drawn, per level.
func (b *browser) drawnLevels() map[string]map[string]int {
	var levels map[string]map[string]int
	b.value(`__zvf.drawnLevels`, &levels)
	return levels
}

// pick clicks at (x, y) in the view and waits for the pick box to fill.
func (b *browser) pick(x, y float64) {
	b.click(x, y)
	b.wait(`document.getElementById('picked').textContent.startsWith('layer ') && !document.getElementById('picked').textContent.includes('loading')`)
}

// TestViewerInBrowser drives the viewer in headless Chromium against the
// real API over the demo stores (and a 2-million-point store, a damaged
// and a broken one): every item of the viewer's contract is a subtest, a
// function below that go test -run 'TestViewerInBrowser/<name>' runs
// alone (the browser and the stores are made once for all of them).
func TestViewerInBrowser(t *testing.T) {
	e := newViewerEnv(t)
	for _, tc := range []struct {
		name string
		run  func(*testing.T, *viewerEnv)
	}{
		{"layers", testLayers},
		{"streaming", testStreaming},
		{"tiles partition", testTilesPartition},
		{"cancelled requests", testCancelledRequests},
		{"budget across layers", testBudgetAcrossLayers},
		{"budget exact", testBudgetExact},
		{"picking", testPicking},
		{"failing stores", testFailingStores},
		{"find object", testFindObject},
		{"box query", testBoxQuery},
		{"stale state", testStaleState},
		{"neuroglancer link", testNeuroglancerLink},
		{"narrow window", testNarrowWindow},
		{"layer names", testLayerNames},
		{"colour range", testColourRange},
		{"request log", testRequestLog},
		{"measured bounds", testMeasuredBounds},
		{"filter", testFilter},
		{"filter example", testFilterExample},
		{"bad filter", testBadFilter},
		{"sample slider", testSampleSlider},
		{"selection in the URL", testSelectionURL},
		{"density overview", testDensityOverview},
		{"keyboard view", testKeyboardView},
		{"enter runs", testEnterRuns},
		{"pick position", testPickPosition},
		{"control names", testControlNames},
		{"box after filter", testBoxAfterFilter},
		{"keyboard pick", testKeyboardPick},
		{"escape draw box", testEscapeDrawBox},
		{"announcements", testAnnouncements},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, e) })
	}
}

// testLayers: all four demo layers at level 0: every vertex and edge once,
// each layer visible, legends, the axis box, lit meshes, the URL, old
// #store= links.
func testLayers(t *testing.T, e *viewerEnv) {
	b := e.open(t, "stores=cells,axons,skeletons,meshes&c.cells=cell_type&c.axons=fa")
	// The whole block at full detail: each layer drew every level-0
	// vertex exactly once (the tiles partition the store).
	var drawn map[string]int
	var levels map[string]map[string]int
	b.value(`__zvf.drawn`, &drawn)
	levels = b.drawnLevels()
	for name, n := range e.level0 {
		if drawn[name] != n || len(levels[name]) != 1 || levels[name]["0"] != n {
			t.Errorf("%s: drew %d vertices (levels %v); want all %d of level 0", name, drawn[name], levels[name], n)
		}
	}
	// Lines and meshes join across the seams between tiles: every edge
	// and face drawn once, from quantized coordinates like everything
	// else (precision=): the seams are decided on the quantization grid.
	var edges, faces map[string]int
	b.value(`__zvf.drawnEdges`, &edges)
	b.value(`__zvf.drawnFaces`, &faces)
	wantEdges := map[string]int{"axons": e.level0["axons"] - (len(e.sc.Axons.Offsets) - 1), "skeletons": len(e.sc.Skeletons.Edges) / 2}
	for name, n := range wantEdges {
		if edges[name] != n {
			t.Errorf("%s: drew %d edges; want all %d", name, edges[name], n)
		}
	}
	if want := len(e.sc.Meshes.Faces) / 3; faces["meshes"] != want {
		t.Errorf("meshes: drew %d faces; want all %d", faces["meshes"], want)
	}
	var tiles struct{ All, Precise int }
	b.value(`(() => { const t = __zvf.requests.filter((r) => r.kind === 'tile' || r.kind === 'seam');
		return {All: t.length, Precise: t.filter((r) => /[?&]precision=[0-9.e+-]+(&|$)/.test(r.url)).length}; })()`, &tiles)
	if tiles.All == 0 || tiles.Precise != tiles.All {
		t.Errorf("tile and seam requests %+v: want every one with a precision", tiles)
	}
	var fetched map[string]float64
	b.value(`__zvf.requests.reduce((o, r) => { o[r.kind] = (o[r.kind] || 0) + (r.bytes || 0); return o; }, {})`, &fetched)
	t.Logf("bytes fetched (decoded bodies): tiles %.0f, seams %.0f", fetched["tile"], fetched["seam"])
	// Dequantized on the GPU: the positions go up as the integers the
	// server sent (16 bits a value or fewer here, against 32 as float32)
	// and no tile was decoded on the CPU (nothing asked: no pick yet).
	var gpu map[string]struct{ Parts, Rows, Bytes, Decoded int }
	b.value(`__zvf.tiles().reduce((o, t) => { const x = o[t.layer] || (o[t.layer] = {Parts: 0, Rows: 0, Bytes: 0, Decoded: 0});
		x.Parts += t.parts; x.Rows += t.count; x.Bytes += t.posBytes; x.Decoded += t.decoded ? 1 : 0; return o; }, {})`, &gpu)
	for name := range e.level0 {
		g := gpu[name]
		t.Logf("%s: %d position bytes on the GPU for %d vertices (%.2f a vertex; float32: 12)", name, g.Bytes, g.Rows, float64(g.Bytes)/float64(g.Rows))
		// Lines and meshes carry their seams' extra vertices too.
		limit := 6.0
		if name != "cells" {
			limit = 7
		}
		// (and each plane of each part padded to 4 bytes)
		if g.Rows == 0 || float64(g.Bytes) > limit*float64(g.Rows)+9*float64(g.Parts) || g.Decoded != 0 {
			t.Errorf("%s: %+v; want at most %.0f position bytes a vertex on the GPU and no tile decoded on the CPU", name, g, limit)
		}
	}
	var cover map[string]int
	b.value(`__zvf.coverage()`, &cover)
	t.Logf("pixels per layer: %v", cover)
	for name := range e.level0 {
		if cover[name] < 2000 {
			t.Errorf("%s alone covers %d pixels", name, cover[name])
		}
	}
	all := b.shot("viewer-layers.png")
	if n, total, _ := pixels(t, all); n < total/8 {
		t.Errorf("the layered block covers %d of %d pixels", n, total)
	}
	// Legends: category names for cells, numbers on the colour bar for
	// fa, and which levels lack the attribute.
	legend := b.text(`.layer[data-store="cells"] .legend`)
	for _, c := range []string{"astrocyte", "microglia", "neuron", "oligodendrocyte", "levels 1, 2 hold no cell_type"} {
		if !strings.Contains(legend, c) {
			t.Errorf("cells legend %q lacks %q", legend, c)
		}
	}
	var ticks []string
	b.value(`[...document.querySelectorAll('.layer[data-store="axons"] .legend .ticks span')].map(e => e.textContent)`, &ticks)
	if len(ticks) != 3 {
		t.Errorf("fa colour bar numbers: %q", ticks)
	}
	for _, s := range ticks {
		if v, err := strconv.ParseFloat(s, 64); err != nil || v < 0 || v > 1 {
			t.Errorf("fa colour bar number %q is not a fractional anisotropy", s)
		}
	}
	// The axis box: a title and numbers for each axis and a scale bar,
	// all inside the view.
	var labels []struct {
		Text, Kind string
		X0, X1, Y  float64
	}
	b.value(`__zvf.labels()`, &labels)
	var size struct{ W, H float64 }
	b.value(`({W: document.getElementById('view').clientWidth, H: document.getElementById('view').clientHeight})`, &size)
	kinds := map[string]int{}
	for _, l := range labels {
		kinds[l.Kind]++
		if l.X0 < 0 || l.X1 > size.W || l.Y < 0 || l.Y > size.H {
			t.Errorf("label %q at %.0f..%.0f, %.0f is outside the %.0fx%.0f view", l.Text, l.X0, l.X1, l.Y, size.W, size.H)
		}
	}
	if kinds["axis"] != 3 || kinds["tick"] < 9 || kinds["scale"] != 1 {
		t.Errorf("overlay labels %v; want 3 axis titles, ticks on each axis and a scale bar", labels)
	}

	// Meshes alone: lit, so their pixels are not one flat colour.
	for _, name := range []string{"cells", "axons", "skeletons"} {
		b.eval(`document.querySelector('.layer[data-store="` + name + `"] .vis').click()`)
	}
	b.shot("viewer-meshes-lit.png")
	// Without the overlay's anti-aliased text, only the meshes count.
	b.eval(`document.getElementById('overlay').style.visibility = 'hidden'`)
	mesh := b.shot("viewer-meshes-only.png")
	b.eval(`document.getElementById('overlay').style.visibility = ''`)
	n, _, colours, top := shading(t, mesh)
	t.Logf("meshes: %d pixels in %d colours, the commonest on %.1f%% of them", n, colours, 100*top)
	if n < 1500 || colours < 40 || top > 0.2 {
		t.Errorf("meshes: %d pixels in %d colours, the commonest on %.1f%% of them; want a lit, shaded surface", n, colours, 100*top)
	}
	loc := b.search()
	if !strings.Contains(loc, "hide=cells,axons,skeletons") || !strings.Contains(loc, "c.cells=cell_type") {
		t.Errorf("URL %q does not carry the layers' state", loc)
	}
	// Links from the single-store viewer still open what they showed.
	b.navigate(e.ts.URL + "/#store=meshes&level=0")
	b.settle()
	levels = b.drawnLevels()
	loc = b.search()
	if len(levels) != 1 || levels["meshes"]["0"] != e.level0["meshes"] || !strings.HasPrefix(loc, "?stores=meshes&lvl.meshes=0") {
		t.Errorf("#store=meshes&level=0 opened %q drawing %v", loc, levels)
	}
	b.noProblems()
}

// testStreaming: the 2M-point store streams coarsest first within the
// budget, refines where the camera zooms, keeps tiles for going back, and
// draws every point under a larger budget.
func testStreaming(t *testing.T, e *viewerEnv) {
	b := e.ch.tab(t, 1280, 800)
	page := e.ts.URL + "/?stores=points"
	// Page load in a running browser: its GPU process already up (a
	// desktop browser's always is; a new headless one starts it, with
	// SwiftShader, on the first WebGL context, which takes seconds),
	// nothing in its HTTP cache.
	b.navigate("about:blank")
	b.eval(`document.createElement('canvas').getContext('webgl2').clear(0)`)
	if err := chromedp.Do(b.ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: true})
		return err
	})); err != nil {
		t.Fatal(err)
	}
	start := e.lg.len()
	b.navigate(page)
	b.settle()
	initial := e.lg.since(start)
	reqs := bboxRequests(t, initial)
	// Since the page began to load: the first tile in hand, the first
	// picture, and the steps of the start.
	var m struct {
		FirstTileMs, FirstPictureMs float64
		Marks                       [][2]any
		Log                         [][3]float64
	}
	b.value(`{firstTileMs: __zvf.firstTileMs, firstPictureMs: __zvf.firstPictureMs, marks: __zvf.marks, log: __zvf.requests.slice(0, 6).map(r => [r.level ?? -1, r.t0, r.ms])}`, &m)
	t.Logf("first requests [level, start, ms]: %v", m.Log)
	t.Logf("page load: first tile %.0f ms, first picture %.0f ms (startup marks %v); settled with %d tile requests, %.1f MB",
		m.FirstTileMs, m.FirstPictureMs, m.Marks, len(reqs), float64(sumBytes(initial))/1e6)
	var order []int
	b.value(`__zvf.requests.filter(r => r.kind === 'tile').map(r => r.level)`, &order)
	if len(order) < 3 || order[0] != 2 || order[1] != 1 {
		t.Errorf("the page asked for tiles of levels %v; want the coarsest first", order)
	}
	var drawn map[string]int
	var levels map[string]map[string]int
	b.value(`__zvf.drawn`, &drawn)
	levels = b.drawnLevels()
	if drawn["points"] > 1_000_000 || levels["points"]["0"] < 500_000 {
		t.Errorf("drew %d vertices (%v); want level 0 where the camera looks, within the 1,000,000 budget", drawn["points"], levels["points"])
	}
	var ms float64
	b.value(`__zvf.measureFrames(3)`, &ms)
	t.Logf("frame time with %d points drawn: %.0f ms (SwiftShader)", drawn["points"], ms)
	b.shot("viewer-points.png")

	// Zoom from straight above into the far corner: only level-0 tiles
	// there, and nothing elsewhere.
	var tilesBefore []tileInfo
	b.value(`__zvf.tiles()`, &tilesBefore)
	var before camera
	b.value(`__zvf.camera()`, &before)
	target := [3]float64{125, 875, 125}
	if lv := levelAt(tilesBefore, target); lv != 1 {
		t.Fatalf("before zooming, the corner is drawn at level %d; the test wants a coarse place", lv)
	}
	start = e.lg.len()
	b.eval(`__zvf.setCamera({target: [125, 875, 125], dist: 300, yaw: -Math.PI / 2, pitch: 1.5707})`)
	b.settle()
	zoom := e.lg.since(start)
	var cam camera
	b.value(`__zvf.camera()`, &cam)
	// What a camera 300 above the target sees down to z = 0, with room.
	half := (cam.Dist + target[2]) * math.Tan(cam.Fov/2) * 1.3
	halfX := half * cam.Width / cam.Height
	finer := 0
	for _, r := range bboxRequests(t, zoom) {
		if r.level != "0" {
			t.Errorf("after zooming in, a level-%s request %v..%v", r.level, r.min, r.max)
		}
		if r.max[0] < target[0]-halfX || r.min[0] > target[0]+halfX || r.max[1] < target[1]-half || r.min[1] > target[1]+half || r.min[2] > target[2]+cam.Dist {
			t.Errorf("after zooming in, a request outside the view: %v..%v", r.min, r.max)
		}
		if r.min[0] <= target[0] && target[0] <= r.max[0] && r.min[1] <= target[1] && target[1] <= r.max[1] && r.min[2] <= target[2] && target[2] <= r.max[2] {
			finer++
		}
	}
	var tilesAfter []tileInfo
	b.value(`__zvf.tiles()`, &tilesAfter)
	if finer == 0 || levelAt(tilesAfter, target) != 0 {
		t.Errorf("zooming into %v: %d requests cover it, drawn at level %d; want level 0", target, finer, levelAt(tilesAfter, target))
	}
	b.shot("viewer-points-zoomed.png")
	// Back out: the tiles seen before come from the page's cache.
	start = e.lg.len()
	js, _ := json.Marshal(before)
	b.eval(`__zvf.setCamera(` + string(js) + `)`)
	b.settle()
	back := e.lg.since(start)
	t.Logf("zoom sequence: whole store %d requests, zoom into a corner %.2f MB (%d requests), back out %.2f MB (%d)",
		len(reqs), float64(sumBytes(zoom))/1e6, len(bboxRequests(t, zoom)), float64(sumBytes(back))/1e6, len(bboxRequests(t, back)))
	if len(bboxRequests(t, back)) > 2 {
		t.Errorf("going back to the first view asked for %d tiles again; they should be kept", len(bboxRequests(t, back)))
	}
	// With a budget over the store, every vertex is drawn once.
	b.eval(`(() => { const e = document.getElementById('budget'); e.value = '2500000'; e.dispatchEvent(new Event('change')); })()`)
	b.settle()
	levels = b.drawnLevels()
	if levels["points"]["0"] != 2_000_000 || len(levels["points"]) != 1 {
		t.Errorf("with a 2.5M budget the page drew %v; want all 2,000,000 level-0 points", levels["points"])
	}
	b.noProblems()
}

// testTilesPartition: vertices on the faces tiles share are drawn once,
// not twice.
func testTilesPartition(t *testing.T, e *viewerEnv) {
	b := e.open(t, "stores=lattice")
	levels := b.drawnLevels()
	if want := 41 * 41 * 41; len(levels["lattice"]) != 1 || levels["lattice"]["0"] != want {
		t.Errorf("drew %v of the lattice; want its %d level-0 points once each", levels["lattice"], want)
	}
	b.noProblems()
}

// testCancelledRequests: moving the camera aborts the tile requests the
// new view does not need, and the server sees them cancelled.
func testCancelledRequests(t *testing.T, e *viewerEnv) {
	// Level-0 tiles of one corner are in flight when the camera moves
	// to the opposite one: those requests are aborted, the new corner
	// is loaded.
	b := e.ch.tab(t, 1280, 800)
	b.noCache()
	e.lg.hold(t)
	b.navigate(e.ts.URL + "/?stores=points&cam=-1.5708,1.5707,300,125,125,125")
	b.wait(`__zvf.requests.some(r => r.kind === 'tile' && r.level === 0)`)
	b.eval(`__zvf.setCamera({target: [875, 875, 875], dist: 300, yaw: -Math.PI / 2, pitch: 1.5707})`)
	b.wait(`__zvf.requests.some(r => r.kind === 'tile' && r.level === 0 && r.aborted)`)
	// The server learns of an abort when it reads the closed connection,
	// a moment after the page gives up: release the held requests only
	// once it has (or after a while, which the check below reports).
	e.lg.waitFor(10*time.Second, func(_ []served, cancelled []string) bool { return len(cancelled) > 0 })
	e.lg.release()
	b.settle()
	var aborted [][2][3]float64
	b.value(`__zvf.requests.filter(r => r.aborted).map(r => r.box)`, &aborted)
	for _, box := range aborted {
		if box[0][0] >= 500 || box[0][1] >= 500 {
			t.Errorf("aborted a tile at %v, which the new view needs", box)
		}
	}
	e.lg.mu.Lock()
	cancelled := len(e.lg.cancelled)
	e.lg.mu.Unlock()
	var tiles []tileInfo
	b.value(`__zvf.tiles()`, &tiles)
	if len(aborted) == 0 || cancelled == 0 || levelAt(tiles, [3]float64{875, 875, 875}) != 0 {
		t.Errorf("%d requests aborted by the page, %d seen cancelled by the server, the new corner drawn at level %d; want aborts and level 0",
			len(aborted), cancelled, levelAt(tiles, [3]float64{875, 875, 875}))
	}
	b.noProblems()
}

// testBudgetAcrossLayers: layers share the vertex budget; a fixed level
// keeps to it too.
func testBudgetAcrossLayers(t *testing.T, e *viewerEnv) {
	b := e.open(t, "stores=points,cells,axons&budget=300000")
	levels := b.drawnLevels()
	total := 0
	for name, lv := range levels {
		for _, n := range lv {
			total += n
		}
		if len(lv) == 0 {
			t.Errorf("%s drew nothing", name)
		}
	}
	if total > 330_000 || len(levels) != 3 || levels["points"]["1"] == 0 || levels["points"]["0"] == 0 {
		t.Errorf("with a 300,000 budget the layers drew %v (%d in all); want about the budget, coarse where it runs out", levels, total)
	}
	// A fixed level too: its tiles nearest the middle of the view.
	b.navigate(e.ts.URL + "/?stores=points&lvl.points=0&budget=300000")
	b.settle()
	levels = b.drawnLevels()
	if n := levels["points"]["0"]; n > 330_000 || n < 200_000 || len(levels["points"]) != 1 {
		t.Errorf("level 0 with a 300,000 budget: drew %v", levels["points"])
	}
	b.noProblems()
}

// testPicking: a click on a vertex shows its layer, level, object and
// attributes, as the generated scene has them.
func testPicking(t *testing.T, e *viewerEnv) {
	b := e.open(t, "stores=cells,axons&c.cells=cell_type")
	for _, tc := range []struct {
		layer     string
		positions []float32 // the layer's level-0 vertices, as generated
		want      func(i int) []string
	}{
		{"cells", e.sc.Cells.Positions, func(i int) []string {
			ct := e.sc.Cells.Attributes[0]
			return []string{fmt.Sprintf("object %d", e.sc.Cells.ObjectIDs[i]), fmt.Sprintf("cell_type = %q", ct.Categories[ct.Data[i]]),
				"intensity = " + strconv.FormatFloat(float64(f32(e.sc.Cells.Attributes[1].Data, i)), 'g', -1, 32)}
		}},
		{"axons", e.sc.Axons.Positions, func(i int) []string {
			line := 0
			for line+1 < len(e.sc.Axons.Offsets) && e.sc.Axons.Offsets[line+1] <= i {
				line++
			}
			return []string{fmt.Sprintf("object %d", line), "fa = " + strconv.FormatFloat(float64(f32(e.sc.Axons.Attributes[0].Data, i)), 'g', -1, 32)}
		}},
	} {
		var at struct {
			X, Y  float64
			Pos   [3]float32
			Level int
		}
		b.value(`__zvf.vertexOnScreen(`+strconv.Quote(tc.layer)+`)`, &at)
		b.eval(`document.getElementById('pickclose').click()`)
		b.pick(at.X, at.Y)
		var picked struct {
			Store string
			Level int
			Pos   [3]float32
			Oid   string // its decimal: ids past 2^53 are exact
		}
		b.value(`__zvf.picked()`, &picked)
		text := b.text("#picked")
		if picked.Store != tc.layer || picked.Pos != at.Pos || !strings.Contains(text, fmt.Sprintf("layer %s · level %d", tc.layer, at.Level)) {
			t.Fatalf("clicked a %s vertex at %v; picked %+v: %q", tc.layer, at.Pos, picked, text)
		}
		// Drawn from quantized coordinates (precision=): within the
		// precision the tiles asked for, never further.
		var tol float64
		b.value(`Math.max(0, ...__zvf.requests.filter((r) => r.kind === 'tile' && r.layer === `+strconv.Quote(tc.layer)+`).map((r) => +(new URL(r.url, location.href).searchParams.get('precision') || 0)))`, &tol)
		if tol <= 0 {
			t.Fatalf("the %s tiles asked for no precision", tc.layer)
		}
		i := findNear(tc.positions, picked.Pos, tol)
		if i < 0 {
			t.Fatalf("no %s vertex within %g of %v", tc.layer, tol, picked.Pos)
		}
		for _, w := range tc.want(i) {
			if !strings.Contains(text, w) {
				t.Errorf("picked %q lacks %q", text, w)
			}
		}
	}
	b.page("viewer-picked.png")
	b.noProblems()
}

// testFailingStores: a store that does not open, one that does not exist
// and a damaged tile are each their layer's error; the rest draws.
func testFailingStores(t *testing.T, e *viewerEnv) {
	b := e.open(t, "stores=cells,broken,nosuch,damaged,meshes")
	for name, want := range map[string]string{"broken": "422", "nosuch": "404", "damaged": "tile failed: level 0", "cells": "", "meshes": ""} {
		got := b.text(`.layer[data-store="` + name + `"] .lerr`)
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("%s layer error %q; want %q", name, got, want)
		}
	}
	if got := b.text(`.layer[data-store="damaged"] .lerr`); !strings.Contains(got, "422") {
		t.Errorf("the damaged tile's error %q does not say what the server answered", got)
	}
	var drawn map[string]int
	b.value(`__zvf.drawn`, &drawn)
	if drawn["cells"] != e.level0["cells"] || drawn["meshes"] != e.level0["meshes"] || drawn["damaged"] < e.level0["cells"]/2 || drawn["damaged"] >= e.level0["cells"] {
		t.Errorf("drawn %v: the healthy layers must draw whole, the damaged one all but its failed tile", drawn)
	}
	if c := b.text("#status"); strings.Contains(c, "error") {
		t.Errorf("status line %q: one layer's failure is not the page's", c)
	}
	b.page("viewer-failing.png")
	b.noProblems()
}

// testFindObject: an object is found, framed, highlighted, kept in the URL
// and cleared with its layer.
func testFindObject(t *testing.T, e *viewerEnv) {
	b := e.open(t, "stores=cells,axons")
	b.eval(`document.getElementById('olayer').value = 'axons'; document.getElementById('oid').value = '3'; document.getElementById('oquery').click()`)
	b.wait(`document.getElementById('oresult').textContent.startsWith('object 3 · axons · level 0')`)
	b.settle()
	if a := b.text("#oattrs"); !strings.Contains(a, "length") {
		t.Errorf("object attributes %q lack length", a)
	}
	if m := b.text("#manifest"); !strings.Contains(m, "blocks") || !strings.Contains(m, "chunk ") {
		t.Errorf("manifest panel %q", m)
	}
	// Framed: the object's box spans a good part of the view, inside it.
	var box [2][3]float64
	b.value(`__zvf.findBounds()`, &box)
	var cam camera
	b.value(`__zvf.camera()`, &cam)
	x0, y0, x1, y1 := math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)
	for i := 0; i < 8; i++ {
		var p struct{ X, Y float64 }
		b.value(fmt.Sprintf(`__zvf.project([%g, %g, %g])`, box[i&1][0], box[i>>1&1][1], box[i>>2&1][2]), &p)
		x0, y0, x1, y1 = math.Min(x0, p.X), math.Min(y0, p.Y), math.Max(x1, p.X), math.Max(y1, p.Y)
	}
	if x0 < 0 || y0 < 0 || x1 > cam.Width || y1 > cam.Height || (x1-x0 < cam.Width/3 && y1-y0 < cam.Height/3) {
		t.Errorf("object 3 projects to %.0f,%.0f..%.0f,%.0f in a %.0fx%.0f view; want it framed", x0, y0, x1, y1, cam.Width, cam.Height)
	}
	// Fetched quantized, as its level's tiles are (precision=), and drawn
	// within that precision of the stored vertices, never further.
	var prec float64
	b.value(`+(new URL(__zvf.requests.filter((r) => r.kind === 'object').at(-1).url, location.href).searchParams.get('precision') || 0)`, &prec)
	if prec <= 0 {
		t.Errorf("the object was fetched without a precision")
	}
	ax := e.sc.Axons
	lo, hi := [3]float64{math.Inf(1), math.Inf(1), math.Inf(1)}, [3]float64{math.Inf(-1), math.Inf(-1), math.Inf(-1)}
	for i := ax.Offsets[3] * 3; i < ax.Offsets[4]*3; i++ {
		lo[i%3], hi[i%3] = math.Min(lo[i%3], float64(ax.Positions[i])), math.Max(hi[i%3], float64(ax.Positions[i]))
	}
	for a := 0; a < 3; a++ {
		tol := prec + 1e-4*math.Max(math.Abs(lo[a]), math.Abs(hi[a]))
		if math.Abs(box[0][a]-lo[a]) > tol || math.Abs(box[1][a]-hi[a]) > tol {
			t.Errorf("object 3 framed on %v; its vertices span %v..%v (precision %g)", box, lo, hi, prec)
			break
		}
	}
	b.page("viewer-object-page.png")
	shot := b.shot("viewer-object.png")
	if n := near(t, shot, [3]int{255, 77, 224}, 60); n < 200 {
		t.Errorf("only %d highlighted pixels", n)
	}
	// The URL reopens it; removing its layer clears the panels.
	loc := ""
	b.value(`location.href`, &loc)
	if !strings.Contains(loc, "obj=axons:3") {
		t.Fatalf("URL %q lacks the object", loc)
	}
	b.navigate(loc)
	b.wait(`document.getElementById('oresult').textContent.startsWith('object 3 · axons')`)
	b.eval(`document.querySelector('.layer[data-store="axons"] .rm').click()`)
	b.wait(`document.getElementById('oresult').textContent === '' && document.getElementById('manifest').textContent === ''`)
	loc = b.search()
	if strings.Contains(loc, "axons") {
		t.Errorf("URL %q still names the removed layer", loc)
	}
	b.noProblems()
}

// testBoxQuery: a typed box gives the scene's counts and each answer's own
// bytes; a drawn box is asked for and kept in the URL.
func testBoxQuery(t *testing.T, e *viewerEnv) {
	b := e.open(t, "stores=cells,axons")
	lo, hi := [3]float32{0, 0, 0}, [3]float32{400, 400, 300}
	typed := e.lg.len()
	b.eval(`document.getElementById('bmin').value = '0,0,0'; document.getElementById('bmax').value = '400,400,300'; document.getElementById('bquery').click()`)
	b.wait(`document.querySelectorAll('#bresult tr').length === 3`)
	var rows [][]string
	b.value(`[...document.querySelectorAll('#bresult tr')].slice(1).map(r => [...r.cells].map(c => c.textContent).concat(r.cells[4].dataset.bytes || ''))`, &rows)
	want := map[string]int{"cells": inBox(e.sc.Cells.Positions, lo, hi), "axons": inBox(e.sc.Axons.Positions, lo, hi)}
	for _, r := range rows {
		n, _ := strconv.Atoi(strings.ReplaceAll(r[1], ",", ""))
		if n != want[r[0]] || r[2] != "0" || !strings.HasSuffix(r[3], " ms") {
			t.Errorf("box row %q; want %d vertices at level 0 with a time", r, want[r[0]])
		}
	}
	// Each row's bytes are those of its own layer's answer, as the server
	// sent them (the two answers are in flight together).
	isBox := func(r bboxReq) bool { return r.min == [3]float64{0, 0, 0} && r.max == [3]float64{400, 400, 300} }
	e.lg.waitFor(10*time.Second, func(log []served, _ []string) bool {
		n := 0
		for _, s := range log[typed:] {
			if strings.Contains(s.uri, "/bbox?min=0,0,0&max=400,400,300&") {
				n++
			}
		}
		return n >= 2
	})
	sent := map[string]int{}
	for _, r := range bboxRequests(t, e.lg.since(typed)) {
		if isBox(r) {
			sent[r.store] = r.bytes
		}
	}
	for _, r := range rows {
		got, _ := strconv.Atoi(r[5])
		if shown, tol := shownBytes(r[4]); got <= 0 || got != sent[r[0]] || math.Abs(shown-float64(got)) > tol {
			t.Errorf("%s: the bytes column says %q (%s bytes); the server sent %d", r[0], r[4], r[5], sent[r[0]])
		}
	}
	b.shot("viewer-box.png")
	// Drawn: from above, a rectangle over part of the block.
	b.eval(`document.getElementById('vtop').click()`)
	b.settle()
	b.eval(`document.getElementById('bdraw').click()`)
	var cam camera
	b.value(`__zvf.camera()`, &cam)
	start := e.lg.len()
	b.drag(cam.Width*0.4, cam.Height*0.4, cam.Width*0.6, cam.Height*0.6)
	b.wait(`document.getElementById('bdraw').getAttribute('aria-pressed') === 'false' && document.querySelectorAll('#bresult tr').length === 3 && document.getElementById('bmin').value !== '0,0,0'`)
	var bmin, bmax string
	b.value(`document.getElementById('bmin').value`, &bmin)
	b.value(`document.getElementById('bmax').value`, &bmax)
	mn, mx := triple(t, bmin), triple(t, bmax)
	if !(mn[0] > 0 && mx[0] < 1000 && mn[1] > 0 && mx[1] < 1000 && mn[0] < mx[0] && mn[1] < mx[1] && mn[2] == 0 && mx[2] == 600) {
		t.Errorf("drawn box %v..%v; want part of the block in x and y, all of it in z", mn, mx)
	}
	asked := false
	for _, r := range bboxRequests(t, e.lg.since(start)) {
		if r.store == "cells" && r.min == mn && r.max == mx {
			asked = true
		}
	}
	if !asked {
		t.Errorf("no bbox request for the drawn box %v..%v", mn, mx)
	}
	loc := b.search()
	if !strings.Contains(loc, "box="+bmin+","+bmax) {
		t.Errorf("URL %q lacks the box", loc)
	}
	b.page("viewer-box-drawn.png")
	b.noProblems()
}

// testStaleState: colour by an attribute only level 0 has, then choose
// level 1: canvas, legend and picker agree on level 1.
func testStaleState(t *testing.T, e *viewerEnv) {
	// The case: colour by an attribute only level 0 has, then
	// choose level 1. Canvas, legend and picker agree on level 1.
	b := e.open(t, "stores=cells&c.cells=intensity")
	b.eval(`(() => { const s = document.querySelector('.layer[data-store="cells"] .level'); s.value = '1'; s.dispatchEvent(new Event('change')); })()`)
	b.settle()
	levels := b.drawnLevels()
	if len(levels["cells"]) != 1 || levels["cells"]["1"] == 0 {
		t.Fatalf("level 1 chosen; drawn %v", levels["cells"])
	}
	if l := b.text(`.layer[data-store="cells"] .legend`); !strings.Contains(l, "levels 1, 2 hold no intensity: drawn grey") {
		t.Errorf("legend %q does not say level 1 has no intensity", l)
	}
	if e := b.text(`.layer[data-store="cells"] .lerr`); e != "" {
		t.Errorf("an error next to the layer: %q", e)
	}
	var at struct{ X, Y float64 }
	b.value(`__zvf.vertexOnScreen('cells')`, &at)
	b.pick(at.X, at.Y)
	if p := b.text("#picked"); !strings.Contains(p, "level 1") || !strings.Contains(p, "level 1 holds no vertex attributes") {
		t.Errorf("picked %q; want level 1 and its (absent) attributes", p)
	}
	b.page("viewer-level1-grey.png")
	b.noProblems()
}

// testNeuroglancerLink: each store links to the state its descriptor
// offers, with absolute sources.
func testNeuroglancerLink(t *testing.T, e *viewerEnv) {
	b := e.open(t, "stores=cells,axons,broken")
	var links struct{ Cells, Axons, Broken, CellsTitle, AxonsTitle string }
	b.value(`(() => { const a = (s) => document.querySelector('.layer[data-store="' + s + '"] .ng'); const href = (s) => a(s).hidden ? '' : a(s).href;
		return {Cells: href('cells'), Axons: href('axons'), Broken: href('broken'), CellsTitle: a('cells').title, AxonsTitle: a('axons').title}; })()`, &links)
	// Each store's link opens the state its descriptor offers, with
	// the server's absolute sources, which its title lists to paste
	// elsewhere; a store that did not open has none.
	for store, l := range map[string][2]string{"cells": {links.Cells, links.CellsTitle}, "axons": {links.Axons, links.AxonsTitle}} {
		href, title := l[0], l[1]
		src := "precomputed://" + e.ts.URL + "/ng/" + store + "/annotations"
		state, err := url.PathUnescape(strings.TrimPrefix(href, "https://neuroglancer-demo.appspot.com/#!"))
		if err != nil || !strings.HasPrefix(href, "https://neuroglancer-demo.appspot.com/#!") || !strings.Contains(state, `"`+src+`"`) {
			t.Errorf("%s: link %q (%v); want its state with an absolute source", store, href, err)
		}
		if !slices.Contains(strings.Split(title, "\n"), src) {
			t.Errorf("%s: the link's title %q does not list %s", store, title, src)
		}
	}
	if links.Broken != "" {
		t.Errorf("broken: link %q; a store that did not open has none", links.Broken)
	}
}

// testNarrowWindow: at 400 px the view spans the width above the controls,
// and the ☰ button gives it the whole height.
func testNarrowWindow(t *testing.T, e *viewerEnv) {
	b := e.ch.tab(t, 400, 800)
	b.navigate(e.ts.URL + "/?stores=cells,meshes")
	b.settle()
	var lay struct {
		CanvasW, CanvasH, CanvasBottom, PanelTop, ScrollW, InnerW float64
		PanelShown                                                bool
	}
	measure := `(() => { const c = document.getElementById('view').getBoundingClientRect(), p = document.getElementById('panel');
		return {CanvasW: c.width, CanvasH: c.height, CanvasBottom: c.bottom, PanelTop: p.getBoundingClientRect().top, PanelShown: !p.hidden,
			ScrollW: document.documentElement.scrollWidth, InnerW: innerWidth}; })()`
	b.value(measure, &lay)
	if lay.CanvasW < 380 || lay.CanvasH < 300 || lay.PanelTop < lay.CanvasBottom-1 || lay.ScrollW > lay.InnerW || !lay.PanelShown {
		t.Errorf("narrow layout %+v: want the view across the window with the controls below, no sideways scrolling", lay)
	}
	b.page("viewer-narrow-page.png")
	if n, total, _ := pixels(t, b.shot("viewer-narrow.png")); n < total/50 {
		t.Errorf("narrow view shows %d of %d pixels", n, total)
	}
	b.eval(`document.getElementById('paneltoggle').click()`)
	b.value(measure, &lay)
	if lay.PanelShown || lay.CanvasH < 780 {
		t.Errorf("after hiding the controls: %+v", lay)
	}
	b.settle()
	b.shot("viewer-narrow-full.png")
	b.noProblems()
}

// testLayerNames: in a 1,400-pixel window every layer's name is shown
// whole: its text is no wider than the element that holds it.
func testLayerNames(t *testing.T, e *viewerEnv) {
	b := e.ch.tab(t, 1400, 900)
	b.navigate(e.ts.URL + "/?stores=cells,axons,skeletons,meshes,damaged,lattice")
	b.settle()
	var names []struct {
		Name, Shown string
		Text, Box   float64
	}
	b.value(`[...document.querySelectorAll('.layer')].map(c => {
		const n = c.querySelector('.lhead b'), r = document.createRange();
		r.selectNodeContents(n);
		return {Name: c.dataset.store, Shown: n.textContent, Text: r.getBoundingClientRect().width, Box: n.getBoundingClientRect().width};
	})`, &names)
	if len(names) != 6 {
		t.Fatalf("%d layer cards: %+v", len(names), names)
	}
	for _, n := range names {
		if n.Shown != n.Name || n.Text <= 0 || n.Text > n.Box+0.5 {
			t.Errorf("layer %q: its name %q is %.1f px wide in a %.1f px element", n.Name, n.Shown, n.Text, n.Box)
		}
	}
	b.page("viewer-layer-names.png")
	b.noProblems()
}

// testColourRange: a numeric colouring's automatic range is the 2nd to
// the 98th percentile of the values drawn, not their extremes (the
// skeletons' radii run from 0.3 to a few thick roots).
func testColourRange(t *testing.T, e *viewerEnv) {
	b := e.open(t, "stores=skeletons&c.skeletons=radius")
	levels := b.drawnLevels()
	if n := e.level0["skeletons"]; len(levels["skeletons"]) != 1 || levels["skeletons"]["0"] != n {
		t.Fatalf("drew %v; the test wants every level-0 skeleton vertex (%d)", levels["skeletons"], n)
	}
	attr := e.sc.Skeletons.Attributes[0]
	if attr.Name != "radius" {
		t.Fatalf("the demo's first skeleton attribute is %q", attr.Name)
	}
	radii := make([]float64, len(attr.Data)/4)
	for i := range radii {
		radii[i] = float64(f32(attr.Data, i))
	}
	slices.Sort(radii)
	lo, hi := percentile(radii, 0.02), percentile(radii, 0.98)
	if top := radii[len(radii)-1]; top < 1.5*hi {
		t.Fatalf("radii %g..%g, 98th percentile %g: no outliers to test with", radii[0], top, hi)
	}
	var got []string
	b.value(`['.cmin', '.cmax'].map(s => document.querySelector('.layer[data-store="skeletons"] .legend ' + s).value)`, &got)
	a, _ := strconv.ParseFloat(got[0], 64)
	z, _ := strconv.ParseFloat(got[1], 64)
	// The page keeps four significant digits.
	if math.Abs(a-lo) > 1e-3*lo || math.Abs(z-hi) > 1e-3*hi {
		t.Errorf("colour range %q; want the 2nd to 98th percentile of the radii, %.4g to %.4g (they span %g to %g)", got, lo, hi, radii[0], radii[len(radii)-1])
	}
	loc := b.search()
	if !strings.Contains(loc, "range.skeletons="+got[0]+","+got[1]) {
		t.Errorf("URL %q lacks the range %q", loc, got)
	}
	b.page("viewer-colour-range.png")
	b.noProblems()
}

// testRequestLog: the page's request log keeps the latest requests, not
// every request of the tab's life.
func testRequestLog(t *testing.T, e *viewerEnv) {
	b := e.open(t, "stores=cells")
	type state struct{ Made, Kept, Max int }
	read := `({Made: __zvf.net.requests, Kept: __zvf.requests.length, Max: __zvf.net.logMax})`
	var before, after state
	b.value(read, &before)
	if before.Max < 100 || before.Kept != before.Made {
		t.Fatalf("log %+v: want a bound of at least 100 and, so far, every request kept", before)
	}
	extra := before.Max + 100
	b.await(`(async () => { for (let i = 0; i < ` + strconv.Itoa(extra) + `; i++) await __zvf.net.json('api/v1/stores', {kind: 'probe', i}); })()`)
	b.value(read, &after)
	var last struct {
		Kind string
		I    int
	}
	b.value(`__zvf.requests[__zvf.requests.length - 1]`, &last)
	if after.Made != before.Made+extra || after.Kept > after.Max || after.Kept < after.Max*3/4 || last.Kind != "probe" || last.I != extra-1 {
		t.Errorf("after %d more requests the log is %+v, its last entry %+v; want at most %d kept, the latest last", extra, after, last, after.Max)
	}
	b.noProblems()
}

// testMeasuredBounds: a store that declares no bounds is measured from
// every page of its coarsest level, on a server whose pages are smaller
// than that level, and then drawn whole.
func testMeasuredBounds(t *testing.T, e *viewerEnv) {
	s, n := unboundedStore(t)
	srv := apitest.New(t, api.Options{Stores: []*zvf.Store{s}, UI: web.Handler(web.Options{}), MaxVertices: 2000})
	lg := newLogged(srv.Handler())
	ts := httptest.NewServer(lg)
	t.Cleanup(ts.Close)
	b := e.ch.tab(t, 1280, 800)
	b.navigate(ts.URL + "/?stores=unbounded")
	b.settle()
	pages := 0
	for _, r := range bboxRequests(t, lg.since(0)) {
		if r.min[0] == -1e300 {
			pages++
		}
	}
	levels := b.drawnLevels()
	if levels["unbounded"]["0"] != n || pages < 2 {
		t.Errorf("drew %v of the %d points, measuring the store in %d pages; want them all", levels["unbounded"], n, pages)
	}
	var layers []struct {
		Name   string
		Bounds [2][3]float64
	}
	b.value(`__zvf.layers()`, &layers)
	if len(layers) != 1 {
		t.Fatalf("layers %+v", layers)
	}
	for k, bd := 0, layers[0].Bounds; k < 3; k++ {
		if bd[0][k] > 0 || bd[1][k] < 1000 {
			t.Errorf("measured bounds %v; want them around the points' 0..1000 on every axis", bd)
			break
		}
	}
	b.noProblems()
}

// percentile interpolates between the sorted values at rank p·(n−1).
func percentile(sorted []float64, p float64) float64 {
	r := p * float64(len(sorted)-1)
	i := int(r)
	j := min(i+1, len(sorted)-1)
	return sorted[i] + (sorted[j]-sorted[i])*(r-float64(i))
}

// shownBytes reads a size as the page shows it ("812 B", "20.5 kB",
// "1.27 MB") back into bytes, with half the step of its last digit
// (shown = -1: not a size).
func shownBytes(s string) (shown, tol float64) {
	num, unit, ok := strings.Cut(s, " ")
	v, err := strconv.ParseFloat(num, 64)
	step := map[string]float64{"B": 1, "kB": 100, "MB": 1e4}[unit]
	if !ok || err != nil || step == 0 {
		return -1, 0
	}
	return v * map[string]float64{"B": 1, "kB": 1e3, "MB": 1e6}[unit], step / 2
}

// camera is the page's camera (__zvf.camera(), __zvf.setCamera()).
type camera struct {
	Yaw    float64    `json:"yaw"`
	Pitch  float64    `json:"pitch"`
	Dist   float64    `json:"dist"`
	Target [3]float64 `json:"target"`
	Fov    float64    `json:"fov"`
	Width  float64    `json:"width"`
	Height float64    `json:"height"`
}

type tileInfo struct {
	Layer  string
	Level  int
	Lo, Hi [3]float64
	Count  int
	Masked bool
}

// levelAt is the finest level drawn at p (-1: none).
func levelAt(tiles []tileInfo, p [3]float64) int {
	best := -1
	for _, t := range tiles {
		if t.Lo[0] <= p[0] && p[0] <= t.Hi[0] && t.Lo[1] <= p[1] && p[1] <= t.Hi[1] && t.Lo[2] <= p[2] && p[2] <= t.Hi[2] {
			if best < 0 || t.Level < best {
				best = t.Level
			}
		}
	}
	return best
}

// findNear is the index of the stored vertex nearest to a position drawn
// within tol of it (per coordinate, and a float32 rounding), -1 when none
// is.
func findNear(pos []float32, p [3]float32, tol float64) int {
	at, best := -1, math.Inf(1)
	for i := 0; i+2 < len(pos); i += 3 {
		d := 0.0
		for k := range 3 {
			d = max(d, math.Abs(float64(pos[i+k])-float64(p[k]))-math.Abs(float64(p[k]))*0x1p-23)
		}
		if d <= tol && d < best {
			at, best = i/3, d
		}
	}
	return at
}

func f32(b []byte, i int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])) }

func inBox(pos []float32, lo, hi [3]float32) int {
	n := 0
	for i := 0; i+2 < len(pos); i += 3 {
		if pos[i] >= lo[0] && pos[i] <= hi[0] && pos[i+1] >= lo[1] && pos[i+1] <= hi[1] && pos[i+2] >= lo[2] && pos[i+2] <= hi[2] {
			n++
		}
	}
	return n
}

func triple(t *testing.T, s string) [3]float64 {
	t.Helper()
	var out [3]float64
	parts := strings.Split(s, ",")
	if len(parts) != 3 {
		t.Fatalf("%q is not three numbers", s)
	}
	for i, p := range parts {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		out[i] = v
	}
	return out
}
