package web_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"image/png"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/web"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/demo"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// chromium finds the browser for a browser test. The browser tests take
// minutes under a software renderer, so a plain go test ./... runs them
// only when asked: ZVFSERVE_BROWSER=1 runs them where Chromium is
// installed, ZVFSERVE_REQUIRE_BROWSER=1 (CI) also fails without it.
func chromium(t *testing.T) string {
	required := os.Getenv("ZVFSERVE_REQUIRE_BROWSER") == "1"
	if !required && os.Getenv("ZVFSERVE_BROWSER") != "1" {
		t.Skip("browser test: set ZVFSERVE_BROWSER=1 to run it (needs Chromium; it takes a few minutes)")
	}
	for _, p := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if required {
		t.Fatal("ZVFSERVE_REQUIRE_BROWSER=1 but no Chromium on PATH (apt-get install chromium)")
	}
	t.Skip("Chromium is not installed; apt-get install chromium to run the browser test")
	return ""
}

func demoServer(t *testing.T, token string) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(newDemo(t, false).handler(t, token))
	t.Cleanup(ts.Close)
	return ts
}

// demoStores are the demo's four stores (and, for the browser tests, a
// 2-million-point store, a store whose one chunk is damaged and one that
// does not open), opened once and served by as many handlers as a test
// needs.
type demoStores struct {
	scene   *demo.Scene
	stores  []*zvf.Store
	handles []*zvf.Handle
	cache   *cache.Cache
}

func newDemo(t *testing.T, extra bool) *demoStores {
	t.Helper()
	ctx := context.Background()
	mem, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Close() })
	o := demo.Options{Seed: 1, Scale: 1}
	infos, err := demo.Build(ctx, mem, o)
	if err != nil {
		t.Fatal(err)
	}
	d := &demoStores{cache: cache.New(512 << 20)}
	if d.scene, err = demo.Generate(o); err != nil {
		t.Fatal(err)
	}
	open := func(st storage.Store, name string) {
		s, err := zvf.Open(ctx, st, zvf.Options{Name: name, Cache: d.cache})
		if err != nil {
			t.Fatal(err)
		}
		d.stores = append(d.stores, s)
	}
	for _, in := range infos {
		open(storage.Sub(mem, in.Prefix), in.Name)
	}
	if !extra {
		return d
	}
	// damaged: the cells with one level-0 chunk (x, y ≥ 750, z ≥ 500)
	// cut short, so the tile over it fails and the rest draws.
	err = mem.Walk(ctx, "cells/", func(key string, _ storage.Attrs) error {
		b, err := storage.ReadAll(ctx, mem, key, 64<<20)
		if err != nil {
			return err
		}
		if strings.HasSuffix(key, "0/vertices/3.3.2/c/0") {
			b = b[:7]
		}
		return mem.Put(ctx, "damaged/"+strings.TrimPrefix(key, "cells/"), b)
	})
	if err != nil {
		t.Fatal(err)
	}
	open(storage.Sub(mem, "damaged"), "damaged")
	// broken: metadata that is not JSON; it is listed with its problem.
	if err := mem.Put(ctx, "broken/zarr.json", []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	h, err := zvf.OpenHandle(ctx, storage.Sub(mem, "broken"), zvf.Options{Name: "broken", Cache: d.cache}, zvf.Watch{})
	if err != nil {
		t.Fatal(err)
	}
	d.handles = append(d.handles, h)
	pts, err := synth.Points(ctx, 2_000_000, 1, writer.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pts.Close() })
	open(storage.Sub(pts, "points"), "points")
	// lattice: points every 25 units, so thousands lie exactly on the
	// faces the viewer's tiles share.
	var lat []float32
	for x := 0; x <= 1000; x += 25 {
		for y := 0; y <= 1000; y += 25 {
			for z := 0; z <= 1000; z += 25 {
				lat = append(lat, float32(x), float32(y), float32(z))
			}
		}
	}
	if _, err := writer.WritePoints(ctx, mem, "lattice", &writer.PointCloud{Positions: lat}, writer.Options{ChunkShape: []float64{125, 125, 125},
		BinShape: []float64{25, 25, 25}, Pyramid: []writer.PyramidLevel{{Coarsen: 2}, {Coarsen: 8}}}); err != nil {
		t.Fatal(err)
	}
	open(storage.Sub(mem, "lattice"), "lattice")
	return d
}

func (d *demoStores) handler(t *testing.T, token string) http.Handler {
	t.Helper()
	srv, err := api.New(api.Options{Stores: d.stores, Handles: d.handles, Cache: d.cache, UI: web.Handler(), Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return srv.Handler()
}

// served is one request the test server answered.
type served struct {
	uri   string
	bytes int
}

// logged records the requests a handler answers, so tests see what the
// page asked for from the server's side. While gate is set, level-0 bbox
// requests of the points store wait for it to close, or for the client
// to give up (counted in cancelled, with their boxes).
type logged struct {
	h         http.Handler
	mu        sync.Mutex
	log       []served
	gate      chan struct{}
	cancelled []string
}

func (l *logged) hold(t *testing.T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gate = make(chan struct{})
	t.Cleanup(l.release)
}

func (l *logged) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gate != nil {
		close(l.gate)
		l.gate = nil
	}
}

type countingWriter struct {
	http.ResponseWriter
	n, status int
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.ResponseWriter.Write(b)
	c.n += n
	return n, err
}

func (c *countingWriter) WriteHeader(code int) {
	c.status = code
	c.ResponseWriter.WriteHeader(code)
}

func (c *countingWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (l *logged) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	gate := l.gate
	l.mu.Unlock()
	if gate != nil && r.URL.Path == "/api/v1/stores/points/bbox" && r.URL.Query().Get("level") == "0" {
		select {
		case <-gate:
		case <-r.Context().Done():
			l.mu.Lock()
			l.cancelled = append(l.cancelled, r.URL.RequestURI())
			l.mu.Unlock()
			return
		}
	}
	cw := &countingWriter{ResponseWriter: w, status: 200}
	l.h.ServeHTTP(cw, r)
	l.mu.Lock()
	l.log = append(l.log, served{r.URL.RequestURI(), cw.n})
	l.mu.Unlock()
}

// since returns the requests answered after the first n.
func (l *logged) since(n int) []served {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]served(nil), l.log[n:]...)
}

func (l *logged) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.log)
}

// pixels counts the pixels of a screenshot that differ from the canvas
// clear colour, and the distinct colours among them.
func pixels(t *testing.T, pngBytes []byte) (drawn, total, colours int) {
	drawn, total, colours, _ = shading(t, pngBytes)
	return
}

// shading is pixels with, also, the share of the drawn pixels that have
// the most common colour (near 1 for a flat, unlit surface).
func shading(t *testing.T, pngBytes []byte) (drawn, total, colours int, top float64) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(pngBytes))
	if err != nil {
		t.Fatal(err)
	}
	b := img.Bounds()
	seen := map[uint32]int{}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			r, g, bl = r>>8, g>>8, bl>>8
			if absDiff(r, 13) > 12 || absDiff(g, 15) > 12 || absDiff(bl, 18) > 12 {
				drawn++
				seen[r<<16|g<<8|bl]++
			}
		}
	}
	most := 0
	for _, n := range seen {
		most = max(most, n)
	}
	if drawn > 0 {
		top = float64(most) / float64(drawn)
	}
	return drawn, b.Dx() * b.Dy(), len(seen), top
}

// near counts the pixels within tol of colour c on every channel.
func near(t *testing.T, pngBytes []byte, c [3]int, tol int) int {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(pngBytes))
	if err != nil {
		t.Fatal(err)
	}
	b, n := img.Bounds(), 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if absDiff(r>>8, c[0]) <= tol && absDiff(g>>8, c[1]) <= tol && absDiff(bl>>8, c[2]) <= tol {
				n++
			}
		}
	}
	return n
}

func absDiff(a uint32, b int) int {
	d := int(a) - b
	if d < 0 {
		return -d
	}
	return d
}

func artifact(t *testing.T, name string, b []byte) {
	dir := os.Getenv("ZVFSERVE_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
}

// browser is a headless Chromium tab with helpers that fail the test.
type browser struct {
	t        *testing.T
	ctx      context.Context
	mu       sync.Mutex
	problems []string // console errors and warnings, exceptions
}

// chrome is one headless Chromium; each subtest opens its own tab.
type chrome struct{ ctx context.Context }

func newChrome(t *testing.T) *chrome {
	exe := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("use-angle", "swiftshader"), chromedp.Flag("enable-unsafe-swiftshader", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-quic", true),
		chromedp.WindowSize(1280, 800))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelA)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	// The first action starts the browser, which lives as long as ctx.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	return &chrome{ctx: ctx}
}

func newBrowser(t *testing.T) *browser { return newChrome(t).tab(t, 1280, 800) }

// tab opens a tab with a w x h viewport, closed when t ends.
func (c *chrome) tab(t *testing.T, w, h int) *browser {
	tctx, cancel := chromedp.NewContext(c.ctx)
	t.Cleanup(cancel)
	// Opening the tab before the deadline is set: a deadline on the call
	// that creates a target ends the target with it.
	if err := chromedp.Do(tctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	ctx, cancelT := context.WithTimeout(tctx, 150*time.Second)
	t.Cleanup(cancelT)
	b := &browser{t: t, ctx: ctx}
	// The window cannot be narrower than about 500 pixels; the viewport can.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(int64(w), int64(h))); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Listen(ctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				b.problems = append(b.problems, fmt.Sprintf("console.%s: %s", e.Type, strings.Join(parts, " ")))
			}
		case *runtime.EventExceptionThrown:
			d := e.ExceptionDetails
			desc := d.Text
			if d.Exception != nil {
				desc += " " + d.Exception.Description
			}
			b.problems = append(b.problems, fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber, desc))
		}
	}); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *browser) wait(expr string) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(60*time.Second))); err != nil {
		status, _ := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS("#status")))
		b.mu.Lock()
		defer b.mu.Unlock()
		b.t.Fatalf("waiting for %s: %v (status line: %q, console: %v)", expr, err, status, b.problems)
	}
}

// settle waits until every layer has loaded what the view asks for.
func (b *browser) settle() {
	b.t.Helper()
	b.wait(`window.__zvf && window.__zvf.ready === true && window.__zvf.settled === true`)
}

func (b *browser) eval(expr string) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[any](expr)); err != nil {
		b.t.Fatalf("%s: %v", expr, err)
	}
}

// value evaluates expr and decodes its JSON value into out.
func (b *browser) value(expr string, out any) {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`JSON.stringify(`+expr+`)`))
	if err != nil {
		b.t.Fatalf("%s: %v", expr, err)
	}
	// Decoding into a map would merge with what it held; start afresh.
	v := reflect.ValueOf(out).Elem()
	v.Set(reflect.Zero(v.Type()))
	if err := json.Unmarshal([]byte(s), out); err != nil {
		b.t.Fatalf("%s = %s: %v", expr, s, err)
	}
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	var s string
	b.value(`document.querySelector(`+strconv.Quote(sel)+`).textContent`, &s)
	return s
}

// shot is a screenshot of the view (canvas and overlay); page, of the
// whole page with its panels.
func (b *browser) shot(name string) []byte { return b.screenshot(name, "main") }
func (b *browser) page(name string) []byte { return b.screenshot(name, "#app") }

func (b *browser) screenshot(name, sel string) []byte {
	b.t.Helper()
	// Let the next animation frame draw.
	b.eval(`new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))`)
	png, err := chromedp.Run(b.ctx, chromedp.Screenshot(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatal(err)
	}
	artifact(b.t, name, png)
	return png
}

func (b *browser) navigate(url string) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, chromedp.Navigate(url)); err != nil {
		b.t.Fatal(err)
	}
}

// click clicks at CSS pixel (x, y) of the view canvas.
func (b *browser) click(x, y float64) {
	b.t.Helper()
	var r struct{ Left, Top float64 }
	b.value(`(() => { const r = document.getElementById('view').getBoundingClientRect(); return {Left: r.left, Top: r.top}; })()`, &r)
	if err := chromedp.Do(b.ctx, chromedp.MouseClickXY(r.Left+x, r.Top+y)); err != nil {
		b.t.Fatal(err)
	}
}

// drag presses at (x0, y0) of the view, moves to (x1, y1) and releases.
func (b *browser) drag(x0, y0, x1, y1 float64) {
	b.t.Helper()
	var r struct{ Left, Top float64 }
	b.value(`(() => { const r = document.getElementById('view').getBoundingClientRect(); return {Left: r.left, Top: r.top}; })()`, &r)
	ev := func(typ input.DispatchMouseEventType, x, y float64, buttons int64) chromedp.Action[chromedp.Void] {
		return chromedp.MouseEvent(typ, r.Left+x, r.Top+y, chromedp.ButtonLeft, chromedp.ClickCount(1),
			func(p *input.DispatchMouseEventParams) { p.Buttons = buttons })
	}
	acts := []chromedp.Action[chromedp.Void]{ev(chromedp.MousePressed, x0, y0, 1)}
	for i := 1; i <= 8; i++ {
		f := float64(i) / 8
		acts = append(acts, ev(chromedp.MouseMoved, x0+(x1-x0)*f, y0+(y1-y0)*f, 1))
	}
	acts = append(acts, ev(chromedp.MouseReleased, x1, y1, 0))
	if err := chromedp.Do(b.ctx, acts...); err != nil {
		b.t.Fatal(err)
	}
}

// noProblems fails the test if the console reported errors or warnings.
func (b *browser) noProblems() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.problems) > 0 {
		b.t.Fatalf("browser console reported problems:\n%s", strings.Join(b.problems, "\n"))
	}
}

// bboxReq is a bbox request the server answered, parsed.
type bboxReq struct {
	store    string
	level    string
	min, max [3]float64
	bytes    int
}

func bboxRequests(t *testing.T, log []served) []bboxReq {
	t.Helper()
	var out []bboxReq
	for _, s := range log {
		u, err := url.Parse(s.uri)
		if err != nil {
			t.Fatal(err)
		}
		parts := strings.Split(u.Path, "/")
		if len(parts) != 6 || parts[5] != "bbox" {
			continue
		}
		q := u.Query()
		r := bboxReq{store: parts[4], level: q.Get("level"), bytes: s.bytes}
		for i, v := range strings.Split(q.Get("min"), ",") {
			r.min[i], _ = strconv.ParseFloat(v, 64)
		}
		for i, v := range strings.Split(q.Get("max"), ",") {
			r.max[i], _ = strconv.ParseFloat(v, 64)
		}
		out = append(out, r)
	}
	return out
}

func sumBytes(log []served) (n int) {
	for _, s := range log {
		n += s.bytes
	}
	return n
}

// TestViewerInBrowser drives the viewer in headless Chromium against the
// real API over the demo stores (and a 2-million-point store, a damaged
// and a broken one): every item of the viewer's contract is a subtest.
func TestViewerInBrowser(t *testing.T) {
	ch := newChrome(t)
	d := newDemo(t, true)
	lg := &logged{h: d.handler(t, "")}
	ts := httptest.NewServer(lg)
	t.Cleanup(ts.Close)
	sc := d.scene
	level0 := map[string]int{
		"cells": len(sc.Cells.Positions) / 3, "axons": len(sc.Axons.Positions) / 3,
		"skeletons": len(sc.Skeletons.Positions) / 3, "meshes": len(sc.Meshes.Positions) / 3,
	}

	t.Run("layers", func(t *testing.T) {
		b := ch.tab(t, 1280, 800)
		b.navigate(ts.URL + "/?stores=cells,axons,skeletons,meshes&c.cells=cell_type&c.axons=fa")
		b.settle()
		// The whole block at full detail: each layer drew every level-0
		// vertex exactly once (the tiles partition the store).
		var drawn map[string]int
		var levels map[string]map[string]int
		b.value(`__zvf.drawn`, &drawn)
		b.value(`__zvf.drawnLevels`, &levels)
		for name, n := range level0 {
			if drawn[name] != n || len(levels[name]) != 1 || levels[name]["0"] != n {
				t.Errorf("%s: drew %d vertices (levels %v); want all %d of level 0", name, drawn[name], levels[name], n)
			}
		}
		// Lines join across the seams between tiles: every edge drawn once.
		var edges map[string]int
		b.value(`__zvf.drawnEdges`, &edges)
		wantEdges := map[string]int{"axons": level0["axons"] - (len(sc.Axons.Offsets) - 1), "skeletons": len(sc.Skeletons.Edges) / 2}
		for name, n := range wantEdges {
			if edges[name] != n {
				t.Errorf("%s: drew %d edges; want all %d", name, edges[name], n)
			}
		}
		var cover map[string]int
		b.value(`__zvf.coverage()`, &cover)
		t.Logf("pixels per layer: %v", cover)
		for name := range level0 {
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
		loc := ""
		b.value(`location.search`, &loc)
		if !strings.Contains(loc, "hide=cells,axons,skeletons") || !strings.Contains(loc, "c.cells=cell_type") {
			t.Errorf("URL %q does not carry the layers' state", loc)
		}
		// Links from the single-store viewer still open what they showed.
		b.navigate(ts.URL + "/#store=meshes&level=0")
		b.settle()
		b.value(`__zvf.drawnLevels`, &levels)
		b.value(`location.search`, &loc)
		if len(levels) != 1 || levels["meshes"]["0"] != level0["meshes"] || !strings.HasPrefix(loc, "?stores=meshes&lvl.meshes=0") {
			t.Errorf("#store=meshes&level=0 opened %q drawing %v", loc, levels)
		}
		b.noProblems()
	})

	t.Run("streaming", func(t *testing.T) {
		b := ch.tab(t, 1280, 800)
		page := ts.URL + "/?stores=points"
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
		start := lg.len()
		b.navigate(page)
		b.settle()
		initial := lg.since(start)
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
		b.value(`__zvf.drawnLevels`, &levels)
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
		start = lg.len()
		b.eval(`__zvf.setCamera({target: [125, 875, 125], dist: 300, yaw: -Math.PI / 2, pitch: 1.5707})`)
		b.settle()
		zoom := lg.since(start)
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
		start = lg.len()
		js, _ := json.Marshal(before)
		b.eval(`__zvf.setCamera(` + string(js) + `)`)
		b.settle()
		back := lg.since(start)
		t.Logf("zoom sequence: whole store %d requests, zoom into a corner %.2f MB (%d requests), back out %.2f MB (%d)",
			len(reqs), float64(sumBytes(zoom))/1e6, len(bboxRequests(t, zoom)), float64(sumBytes(back))/1e6, len(bboxRequests(t, back)))
		if len(bboxRequests(t, back)) > 2 {
			t.Errorf("going back to the first view asked for %d tiles again; they should be kept", len(bboxRequests(t, back)))
		}
		// With a budget over the store, every vertex is drawn once.
		b.eval(`(() => { const e = document.getElementById('budget'); e.value = '2500000'; e.dispatchEvent(new Event('change')); })()`)
		b.settle()
		b.value(`__zvf.drawnLevels`, &levels)
		if levels["points"]["0"] != 2_000_000 || len(levels["points"]) != 1 {
			t.Errorf("with a 2.5M budget the page drew %v; want all 2,000,000 level-0 points", levels["points"])
		}
		b.noProblems()
	})

	t.Run("tiles partition", func(t *testing.T) {
		// Vertices on the faces tiles share are drawn once, not twice.
		b := ch.tab(t, 1280, 800)
		b.navigate(ts.URL + "/?stores=lattice")
		b.settle()
		var levels map[string]map[string]int
		b.value(`__zvf.drawnLevels`, &levels)
		if want := 41 * 41 * 41; len(levels["lattice"]) != 1 || levels["lattice"]["0"] != want {
			t.Errorf("drew %v of the lattice; want its %d level-0 points once each", levels["lattice"], want)
		}
		b.noProblems()
	})

	t.Run("cancelled requests", func(t *testing.T) {
		// Level-0 tiles of one corner are in flight when the camera moves
		// to the opposite one: those requests are aborted, the new corner
		// is loaded.
		b := ch.tab(t, 1280, 800)
		lg.hold(t)
		b.navigate(ts.URL + "/?stores=points&cam=-1.5708,1.5707,300,125,125,125")
		b.wait(`__zvf.requests.some(r => r.kind === 'tile' && r.level === 0)`)
		b.eval(`__zvf.setCamera({target: [875, 875, 875], dist: 300, yaw: -Math.PI / 2, pitch: 1.5707})`)
		b.wait(`__zvf.requests.some(r => r.kind === 'tile' && r.level === 0 && r.aborted)`)
		// The server learns of an abort when it reads the closed connection,
		// a moment after the page gives up: release the held requests only
		// once it has (or after a while, which the check below reports).
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			lg.mu.Lock()
			n := len(lg.cancelled)
			lg.mu.Unlock()
			if n > 0 {
				break
			}
		}
		lg.release()
		b.settle()
		var aborted [][2][3]float64
		b.value(`__zvf.requests.filter(r => r.aborted).map(r => r.box)`, &aborted)
		for _, box := range aborted {
			if box[0][0] >= 500 || box[0][1] >= 500 {
				t.Errorf("aborted a tile at %v, which the new view needs", box)
			}
		}
		lg.mu.Lock()
		cancelled := len(lg.cancelled)
		lg.mu.Unlock()
		var tiles []tileInfo
		b.value(`__zvf.tiles()`, &tiles)
		if len(aborted) == 0 || cancelled == 0 || levelAt(tiles, [3]float64{875, 875, 875}) != 0 {
			t.Errorf("%d requests aborted by the page, %d seen cancelled by the server, the new corner drawn at level %d; want aborts and level 0",
				len(aborted), cancelled, levelAt(tiles, [3]float64{875, 875, 875}))
		}
		b.noProblems()
	})

	t.Run("budget across layers", func(t *testing.T) {
		b := ch.tab(t, 1280, 800)
		b.navigate(ts.URL + "/?stores=points,cells,axons&budget=300000")
		b.settle()
		var levels map[string]map[string]int
		b.value(`__zvf.drawnLevels`, &levels)
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
		b.navigate(ts.URL + "/?stores=points&lvl.points=0&budget=300000")
		b.settle()
		b.value(`__zvf.drawnLevels`, &levels)
		if n := levels["points"]["0"]; n > 330_000 || n < 200_000 || len(levels["points"]) != 1 {
			t.Errorf("level 0 with a 300,000 budget: drew %v", levels["points"])
		}
		b.noProblems()
	})

	t.Run("picking", func(t *testing.T) {
		b := ch.tab(t, 1280, 800)
		b.navigate(ts.URL + "/?stores=cells,axons&c.cells=cell_type")
		b.settle()
		for _, tc := range []struct {
			layer string
			attrs []string
			check func(pos [3]float32, objectID int64, text string)
		}{
			{"cells", []string{"cell_type", "intensity"}, func(pos [3]float32, oid int64, text string) {
				i := find(sc.Cells.Positions, pos)
				if i < 0 {
					t.Fatalf("no cell vertex at %v", pos)
				}
				ct := sc.Cells.Attributes[0]
				want := []string{fmt.Sprintf("object %d", sc.Cells.ObjectIDs[i]), fmt.Sprintf("cell_type = %q", ct.Categories[ct.Data[i]]),
					"intensity = " + strconv.FormatFloat(float64(f32(sc.Cells.Attributes[1].Data, i)), 'g', -1, 32)}
				for _, w := range want {
					if !strings.Contains(text, w) {
						t.Errorf("picked %q lacks %q", text, w)
					}
				}
			}},
			{"axons", []string{"fa"}, func(pos [3]float32, oid int64, text string) {
				i := find(sc.Axons.Positions, pos)
				if i < 0 {
					t.Fatalf("no axon vertex at %v", pos)
				}
				line := 0
				for line+1 < len(sc.Axons.Offsets) && sc.Axons.Offsets[line+1] <= i {
					line++
				}
				want := []string{fmt.Sprintf("object %d", line), "fa = " + strconv.FormatFloat(float64(f32(sc.Axons.Attributes[0].Data, i)), 'g', -1, 32)}
				for _, w := range want {
					if !strings.Contains(text, w) {
						t.Errorf("picked %q lacks %q", text, w)
					}
				}
			}},
		} {
			var at struct {
				X, Y  float64
				Pos   [3]float32
				Level int
			}
			b.value(`__zvf.vertexOnScreen(`+strconv.Quote(tc.layer)+`)`, &at)
			b.eval(`document.getElementById('pickclose').click()`)
			b.click(at.X, at.Y)
			b.wait(`document.getElementById('picked').textContent.startsWith('layer ') && !document.getElementById('picked').textContent.includes('loading')`)
			var picked struct {
				Store string
				Level int
				Pos   [3]float32
				Oid   int64
			}
			b.value(`__zvf.picked()`, &picked)
			text := b.text("#picked")
			if picked.Store != tc.layer || picked.Pos != at.Pos || !strings.Contains(text, fmt.Sprintf("layer %s · level %d", tc.layer, at.Level)) {
				t.Fatalf("clicked a %s vertex at %v; picked %+v: %q", tc.layer, at.Pos, picked, text)
			}
			tc.check(picked.Pos, picked.Oid, text)
		}
		b.page("viewer-picked.png")
		b.noProblems()
	})

	t.Run("failing stores", func(t *testing.T) {
		b := ch.tab(t, 1280, 800)
		b.navigate(ts.URL + "/?stores=cells,broken,nosuch,damaged,meshes")
		b.settle()
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
		if drawn["cells"] != level0["cells"] || drawn["meshes"] != level0["meshes"] || drawn["damaged"] < level0["cells"]/2 || drawn["damaged"] >= level0["cells"] {
			t.Errorf("drawn %v: the healthy layers must draw whole, the damaged one all but its failed tile", drawn)
		}
		if c := b.text("#status"); strings.Contains(c, "error") {
			t.Errorf("status line %q: one layer's failure is not the page's", c)
		}
		b.page("viewer-failing.png")
		b.noProblems()
	})

	t.Run("find object", func(t *testing.T) {
		b := ch.tab(t, 1280, 800)
		b.navigate(ts.URL + "/?stores=cells,axons")
		b.settle()
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
		b.value(`location.search`, &loc)
		if strings.Contains(loc, "axons") {
			t.Errorf("URL %q still names the removed layer", loc)
		}
		b.noProblems()
	})

	t.Run("box query", func(t *testing.T) {
		b := ch.tab(t, 1280, 800)
		b.navigate(ts.URL + "/?stores=cells,axons")
		b.settle()
		lo, hi := [3]float32{0, 0, 0}, [3]float32{400, 400, 300}
		b.eval(`document.getElementById('bmin').value = '0,0,0'; document.getElementById('bmax').value = '400,400,300'; document.getElementById('bquery').click()`)
		b.wait(`document.querySelectorAll('#bresult tr').length === 3`)
		var rows [][]string
		b.value(`[...document.querySelectorAll('#bresult tr')].slice(1).map(r => [...r.cells].map(c => c.textContent))`, &rows)
		want := map[string]int{"cells": inBox(sc.Cells.Positions, lo, hi), "axons": inBox(sc.Axons.Positions, lo, hi)}
		for _, r := range rows {
			n, _ := strconv.Atoi(strings.ReplaceAll(r[1], ",", ""))
			if n != want[r[0]] || r[2] != "0" || !strings.HasSuffix(r[3], " ms") {
				t.Errorf("box row %q; want %d vertices at level 0 with a time", r, want[r[0]])
			}
		}
		b.shot("viewer-box.png")
		// Drawn: from above, a rectangle over part of the block.
		b.eval(`document.getElementById('vtop').click()`)
		b.settle()
		b.eval(`document.getElementById('bdraw').click()`)
		var cam camera
		b.value(`__zvf.camera()`, &cam)
		start := lg.len()
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
		for _, r := range bboxRequests(t, lg.since(start)) {
			if r.store == "cells" && r.min == mn && r.max == mx {
				asked = true
			}
		}
		if !asked {
			t.Errorf("no bbox request for the drawn box %v..%v", mn, mx)
		}
		loc := ""
		b.value(`location.search`, &loc)
		if !strings.Contains(loc, "box="+bmin+","+bmax) {
			t.Errorf("URL %q lacks the box", loc)
		}
		b.page("viewer-box-drawn.png")
		b.noProblems()
	})

	t.Run("stale state", func(t *testing.T) {
		// The case: colour by an attribute only level 0 has, then
		// choose level 1. Canvas, legend and picker agree on level 1.
		b := ch.tab(t, 1280, 800)
		b.navigate(ts.URL + "/?stores=cells&c.cells=intensity")
		b.settle()
		b.eval(`(() => { const s = document.querySelector('.layer[data-store="cells"] .level'); s.value = '1'; s.dispatchEvent(new Event('change')); })()`)
		b.settle()
		var levels map[string]map[string]int
		b.value(`__zvf.drawnLevels`, &levels)
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
		b.click(at.X, at.Y)
		b.wait(`document.getElementById('picked').textContent.startsWith('layer ') && !document.getElementById('picked').textContent.includes('loading')`)
		if p := b.text("#picked"); !strings.Contains(p, "level 1") || !strings.Contains(p, "level 1 holds no vertex attributes") {
			t.Errorf("picked %q; want level 1 and its (absent) attributes", p)
		}
		b.page("viewer-level1-grey.png")
		b.noProblems()
	})

	t.Run("neuroglancer link", func(t *testing.T) {
		b := ch.tab(t, 1280, 800)
		b.navigate(ts.URL + "/?stores=cells,axons,broken")
		b.settle()
		var links struct{ Cells, Axons, Broken string }
		b.value(`(() => { const href = (s) => { const a = document.querySelector('.layer[data-store="' + s + '"] .ng'); return a.hidden ? '' : a.href; };
			return {Cells: href('cells'), Axons: href('axons'), Broken: href('broken')}; })()`, &links)
		// Each store's link opens the state its descriptor offers, with
		// its own sources made absolute; a store that did not open has none.
		for store, href := range map[string]string{"cells": links.Cells, "axons": links.Axons} {
			state, err := url.PathUnescape(strings.TrimPrefix(href, "https://neuroglancer-demo.appspot.com/#!"))
			if err != nil || !strings.HasPrefix(href, "https://neuroglancer-demo.appspot.com/#!") || !strings.Contains(state, `"precomputed://`+ts.URL+`/ng/`+store+`/annotations"`) {
				t.Errorf("%s: link %q (%v); want its state with an absolute source", store, href, err)
			}
		}
		if links.Broken != "" {
			t.Errorf("broken: link %q; a store that did not open has none", links.Broken)
		}
	})

	t.Run("narrow window", func(t *testing.T) {
		b := ch.tab(t, 400, 800)
		b.navigate(ts.URL + "/?stores=cells,meshes")
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
	})
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

func find(pos []float32, p [3]float32) int {
	for i := 0; i+2 < len(pos); i += 3 {
		if pos[i] == p[0] && pos[i+1] == p[1] && pos[i+2] == p[2] {
			return i / 3
		}
	}
	return -1
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

// TestViewerTokenInBrowser: against a server started with a token, the
// page loads, asks for the token, asks again when it is wrong, then sends
// it as a bearer header on every data request and draws; a reload in the
// same tab does not ask again.
func TestViewerTokenInBrowser(t *testing.T) {
	b := newBrowser(t)
	const token = "s3cret-token"
	var mu sync.Mutex
	seen := map[string]int{} // "path status auth-ok"
	h := newDemo(t, false).handler(t, token)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &countingWriter{ResponseWriter: w, status: 200}
		h.ServeHTTP(sw, r)
		kind := "static"
		if strings.HasPrefix(r.URL.Path, "/api/") {
			kind = "api"
		}
		mu.Lock()
		seen[fmt.Sprintf("%s %d %v", kind, sw.status, r.Header.Get("Authorization") == "Bearer "+token)]++
		mu.Unlock()
	}))
	t.Cleanup(ts.Close)

	b.navigate(ts.URL + "/?stores=cells")
	b.wait(`!document.getElementById('tokenform').hidden`)
	b.eval(`document.getElementById('token').value = 'wrong'; document.querySelector('#tokenform button').click()`)
	b.wait(`!document.getElementById('tokenform').hidden && document.getElementById('tokenmsg').textContent.includes('did not accept')`)
	if ready, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`window.__zvf.ready === true`)); err != nil || ready {
		t.Fatalf("the viewer loaded data without the token (%v)", err)
	}
	b.eval(`document.getElementById('token').value = '` + token + `'; document.querySelector('#tokenform button').click()`)
	b.settle()
	if n, total, _ := pixels(t, b.shot("viewer-token.png")); n < total/200 {
		t.Fatalf("canvas shows almost nothing with the token: %d of %d pixels", n, total)
	}
	kept, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`sessionStorage.getItem('zvfserve-token')`))
	if err != nil || kept != token {
		t.Fatalf("session storage holds %q (%v)", kept, err)
	}

	// A reload in the same tab uses the kept token without asking.
	b.navigate(ts.URL + "/?stores=cells")
	b.settle()
	b.wait(`document.getElementById('tokenform').hidden`)

	mu.Lock()
	defer mu.Unlock()
	if seen["static 200 false"] == 0 {
		t.Errorf("the page did not load without the token: %v", seen)
	}
	if seen["api 401 false"] == 0 || seen["api 200 true"] < 4 {
		t.Errorf("data requests: %v; want 401 without the token, then 200 with it", seen)
	}
	for k, n := range seen {
		if strings.HasPrefix(k, "api 200 false") || strings.HasPrefix(k, "api 401 true") {
			t.Errorf("%d data requests %q", n, k)
		}
	}
	b.noProblems()
}
