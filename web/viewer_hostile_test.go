package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/api/problem"
	"github.com/zvfserve/zvfserve/web"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// Names a hostile store chooses: were any of them ever put into the page
// as markup, it would make elements (img, svg, b) with event handlers.
const (
	evilAttr  = `<img src=x onerror="document.title='pwned'">`
	evilCat   = `<svg onload="document.title='pwned'">`
	evilLabel = `<b onmouseover="document.title='pwned'">bold</b>`
)

// hostileLabels are the categories of evilCat: markup, quotes, and a
// label far wider than the panel.
var hostileLabels = []string{evilLabel, `'); DROP`, `a"b`, strings.Repeat("L", 300)}

// hostileStores: hostile (8,000 points whose attribute, category, axis
// and unit names are markup, with 54 attributes, one of them 315
// characters long, one with 2,000 categories), one (a single point) and empty (no vertex at all).
func hostileStores(t *testing.T, c zvf.Cache) []*zvf.Store {
	t.Helper()
	ctx := context.Background()
	mem := memStorage(t)
	var pos []float32
	for x := range 20 {
		for y := range 20 {
			for z := range 20 {
				pos = append(pos, float32(x*10), float32(y*10), float32(z*10))
			}
		}
	}
	n := len(pos) / 3
	vals, labels := make([]float32, n), make([]string, n)
	for i := range n {
		vals[i] = float32(i)
		labels[i] = hostileLabels[i%len(hostileLabels)]
	}
	attrs := []writer.Attribute{writer.Float32Attribute(evilAttr, 1, vals), writer.CategoricalAttribute(evilCat, labels),
		writer.Float32Attribute(strings.Repeat("verylongattributename", 15), 1, vals)}
	for i := range 50 {
		attrs = append(attrs, writer.Float32Attribute(fmt.Sprintf("attr_%02d", i), 1, vals))
	}
	many := make([]string, n)
	for i := range n {
		many[i] = fmt.Sprintf("label %04d", i%2000)
	}
	attrs = append(attrs, writer.CategoricalAttribute("many", many))
	o := writer.Options{ChunkShape: []float64{100, 100, 100}}
	ho := o
	ho.Axes, ho.Unit = []string{"<i>x</i>", "y", "z"}, "<b>um</b>"
	for _, s := range []struct {
		name string
		pc   *writer.PointCloud
		o    writer.Options
	}{
		{"hostile", &writer.PointCloud{Positions: pos, Attributes: attrs}, ho},
		{"one", &writer.PointCloud{Positions: []float32{5, 5, 5}}, o},
		{"empty", &writer.PointCloud{}, o},
	} {
		if _, err := writer.WritePoints(ctx, mem, s.name, s.pc, s.o); err != nil {
			t.Fatal(err)
		}
	}
	// Bounds the metadata declares, whatever the points: inverted,
	// enormous, far off from every point (outside), holding half of them
	// (shifted), holding them in ten thousand times their extent (loose).
	for name, bounds := range map[string][2][3]float64{
		"inverted": {{190, 190, 190}, {0, 0, 0}},
		"enormous": {{-1e300, -1e300, -1e300}, {1e300, 1e300, 1e300}},
		"outside":  {{1e17, 0, 0}, {1e17 + 64, 190, 190}},
		"shifted":  {{0, 0, 0}, {95, 190, 190}},
		"loose":    {{-1e6, -1e6, -1e6}, {1e6, 1e6, 1e6}},
	} {
		if _, err := writer.WritePoints(ctx, mem, name, &writer.PointCloud{Positions: pos}, o); err != nil {
			t.Fatal(err)
		}
		editZarrJSON(t, mem, name, func(zv map[string]any) { zv["bounds"] = bounds })
	}
	// faroff: the points far from zero (x is 1e17 in float32), in bounds
	// with an extent a float64 there cannot step through in ticks.
	far := append([]float32(nil), pos...)
	x0 := float64(float32(1e17))
	for i := 0; i < len(far); i += 3 {
		far[i] = float32(x0)
	}
	if _, err := writer.WritePoints(ctx, mem, "faroff", &writer.PointCloud{Positions: far}, o); err != nil {
		t.Fatal(err)
	}
	editZarrJSON(t, mem, "faroff", func(zv map[string]any) { zv["bounds"] = [2][3]float64{{x0, 0, 0}, {x0 + 64, 190, 190}} })
	// four: the 8,000 points with a fourth axis (time, say).
	var pos4 []float32
	for i := range n {
		pos4 = append(pos4, pos[3*i], pos[3*i+1], pos[3*i+2], float32(i%5))
	}
	if _, err := writer.WritePoints(ctx, mem, "four", &writer.PointCloud{Positions: pos4}, writer.Options{ChunkShape: []float64{100, 100, 100, 10}}); err != nil {
		t.Fatal(err)
	}
	// two: a plane of 400 points (x, y only).
	var pos2 []float32
	for i := range 400 {
		pos2 = append(pos2, float32(i%20*10), float32(i/20*10))
	}
	if _, err := writer.WritePoints(ctx, mem, "two", &writer.PointCloud{Positions: pos2}, writer.Options{ChunkShape: []float64{100, 100}}); err != nil {
		t.Fatal(err)
	}
	var out []*zvf.Store
	open := func(prefix, name string) {
		s, err := zvf.Open(ctx, storage.Sub(mem, prefix), zvf.Options{Name: name, Cache: c})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	for _, name := range []string{"hostile", "one", "empty", "inverted", "faroff", "enormous", "outside", "shifted", "loose", "four", "two"} {
		open(name, name)
	}
	// Names a folder may have that a plain object already has (a folder
	// of stores names each by its path), and two that differ only in a
	// character an element id cannot hold: the inverted store's 8,000
	// points under each.
	for _, name := range []string{"constructor", "toString", "a.b", "a_b"} {
		open("inverted", name)
	}
	return out
}

// editZarrJSON changes the zarr_vectors attributes of the store at name.
func editZarrJSON(t *testing.T, mem storage.Writer, name string, edit func(map[string]any)) {
	t.Helper()
	ctx := context.Background()
	b, err := storage.ReadAll(ctx, mem, name+"/zarr.json", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	zv, ok := doc["attributes"].(map[string]any)["zarr_vectors"].(map[string]any)
	if !ok {
		t.Fatalf("%s/zarr.json has no zarr_vectors attributes: %s", name, b)
	}
	edit(zv)
	if b, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	if err := mem.Put(ctx, name+"/zarr.json", b); err != nil {
		t.Fatal(err)
	}
}

// fault is an answer the faults handler gives instead of the server's:
// to requests whose path is path (or, with prefix, starts with it), the
// first times of them (-1: all).
type fault struct {
	path       string
	prefix     bool
	query      string // when set, only requests whose query holds it
	status     int
	retryAfter string
	times      int
	kind       problem.Kind // the problem's type; none (a proxy's answer) when empty
}

// hit is a request the faults handler saw.
type hit struct {
	path   string
	query  string
	at     time.Time
	status int
}

// faults answers some requests with a problem (a store changing, a
// backend down, too many requests) before the real server answers them.
type faults struct {
	h     http.Handler
	mu    sync.Mutex
	rules []*fault
	hits  []hit
}

func (f *faults) set(rules ...*fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules, f.hits = rules, nil
}

// seen: the requests for path so far.
func (f *faults) seen(path string) []hit { return f.seenAsking(path, "") }

// seenAsking: the requests of path whose query holds query.
func (f *faults) seenAsking(path, query string) []hit {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []hit
	for _, h := range f.hits {
		if h.path == path && strings.Contains(h.query, query) {
			out = append(out, h)
		}
	}
	return out
}

func (f *faults) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := route(r.URL.Path) // a rule is of a route, whatever version the path names
	f.mu.Lock()
	var rule *fault
	for _, x := range f.rules {
		if (path == x.path || x.prefix && strings.HasPrefix(path, x.path)) && strings.Contains(r.URL.RawQuery, x.query) && x.times != 0 {
			rule = x
			if x.times > 0 {
				x.times--
			}
			break
		}
	}
	h := hit{path: path, query: r.URL.RawQuery, at: time.Now(), status: 200}
	if rule != nil {
		h.status = rule.status
	}
	f.hits = append(f.hits, h)
	f.mu.Unlock()
	if rule == nil {
		f.h.ServeHTTP(w, r)
		return
	}
	if rule.retryAfter != "" {
		w.Header().Set("Retry-After", rule.retryAfter)
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(rule.status)
	if rule.kind != "" {
		fmt.Fprintf(w, `{"type":%q,"title":%q,"status":%d,"detail":"injected by the test"}`, rule.kind.URI(), rule.kind.Title(), rule.status)
		return
	}
	fmt.Fprintf(w, `{"title":%q,"status":%d,"detail":"injected by the test"}`, http.StatusText(rule.status), rule.status)
}

// hostileEnv: one Chromium, the demo and hostile stores behind faults.
type hostileEnv struct {
	ch *chrome
	d  *demoStores
	f  *faults
	ts *httptest.Server
}

// TestViewerHostileInBrowser: the viewer against stores that name things
// with markup, a store of one point and one of none, a server that says
// to come back later, and links garbled or made to harm.
func TestViewerHostileInBrowser(t *testing.T) {
	ch := newChrome(t)
	d := newDemo(t, false)
	stores := append(append([]*zvf.Store(nil), d.stores...), hostileStores(t, d.cache)...)
	srv := apitest.New(t, api.Options{Stores: stores, Cache: d.cache, UI: web.Handler(web.Options{})})
	f := &faults{h: srv.Handler()}
	ts := httptest.NewServer(f)
	t.Cleanup(ts.Close)
	e := &hostileEnv{ch: ch, d: d, f: f, ts: ts}
	for _, tc := range []struct {
		name string
		run  func(*testing.T, *hostileEnv)
	}{
		{"hostile names", testHostileNames},
		{"come back later", testComeBackLater},
		{"link camera, store busy", testLinkCameraBusy},
		{"one point, no points", testOneAndNoPoints},
		{"garbled links", testGarbledLinks},
		{"hostile bounds", testHostileBounds},
		{"store names", testStoreNames},
		{"filter link, store busy", testFilterLinkBusy},
		{"typed filter, store busy", testTypedFilterBusy},
		{"storage denied", testStorageDenied},
		{"layer colours", testLayerColours},
		{"object link, store busy", testObjectLinkBusy},
		{"box query, store busy", testBoxQueryBusy},
		{"context lost", testContextLost},
		{"overview, store busy", testOverviewBusy},
		{"neuroglancer link schemes", testNeuroglancerSchemes},
		{"two and four axes", testFourAxes},
	} {
		t.Run(tc.name, func(t *testing.T) { f.set(); tc.run(t, e) })
	}
}

// testHostileNames: attribute, category, axis and unit names that are
// markup show as text, make no element, and a label wider than the panel
// does not make it scroll sideways; all 54 attributes can be chosen, and
// one of 2,000 categories gets a legend of the first few.
func testHostileNames(t *testing.T, e *hostileEnv) {
	b := e.ch.tab(t, 1280, 800)
	b.navigate(e.ts.URL + "/?stores=hostile&c.hostile=" + url.QueryEscape(evilCat))
	b.settle()
	var made []string
	b.value(`[...document.querySelectorAll('*')].filter((x) => ['IMG', 'SVG', 'svg', 'I'].includes(x.tagName) || (x.tagName === 'B' && !x.classList.contains('lname')) ||
		[...x.attributes].some((a) => a.name.startsWith('on'))).map((x) => x.outerHTML.slice(0, 80))`, &made)
	if len(made) > 0 || b.text("title") != "zvfserve viewer" {
		t.Errorf("a store's names made elements %q (title %q)", made, b.text("title"))
	}
	legend := b.text(`.layer[data-store="hostile"] .legend`)
	for _, l := range hostileLabels {
		if !strings.Contains(legend, l) {
			t.Errorf("legend %.200q lacks the label %.60q as text", legend, l)
		}
	}
	var opts []string
	b.value(`[...document.querySelector('.layer[data-store="hostile"] .colour').options].map((o) => o.value)`, &opts)
	if len(opts) != 2+54 || !strings.Contains(strings.Join(opts, "\n"), evilAttr) {
		t.Errorf("colour options %d (%.200q); want 56 with %q", len(opts), opts, evilAttr)
	}
	// 2,000 categories: the legend lists the first ones and counts the rest.
	b.eval(`(() => { const s = document.querySelector('.layer[data-store="hostile"] .colour'); s.value = 'many'; s.dispatchEvent(new Event('change')); })()`)
	var cats int
	b.value(`document.querySelectorAll('.layer[data-store="hostile"] .legend .cat').length`, &cats)
	if l := b.text(`.layer[data-store="hostile"] .legend`); cats > 100 || !strings.Contains(l, "label 0000") || !strings.Contains(l, "more") {
		t.Errorf("legend of 2,000 categories: %d swatches, %.300q; want the first few and a count of the rest", cats, l)
	}
	b.eval(`(() => { const s = document.querySelector('.layer[data-store="hostile"] .colour'); s.value = ` + jsString(evilCat) + `; s.dispatchEvent(new Event('change')); })()`)
	// The filter box's hints list the queryables as text too.
	b.eval(`document.querySelector('.layer[data-store="hostile"] .filter').focus()`)
	b.wait(`document.querySelector('.layer[data-store="hostile"] .fhint').textContent.includes('attr_49')`)
	if h := b.text(`.layer[data-store="hostile"] .fhint`); !strings.Contains(h, evilCat) || !strings.Contains(h, evilLabel) {
		t.Errorf("filter hints %.300q lack %q and %q as text", h, evilCat, evilLabel)
	}
	var wide struct{ Scroll, Client int }
	b.value(`(() => { const p = document.getElementById('panel'); return {Scroll: p.scrollWidth, Client: p.clientWidth}; })()`, &wide)
	if wide.Scroll > wide.Client {
		t.Errorf("the panel scrolls sideways: %d wide in %d", wide.Scroll, wide.Client)
	}
	var labels []string
	b.value(`__zvf.labels().map((l) => l.text)`, &labels)
	if s := strings.Join(labels, " "); !strings.Contains(s, "<i>x</i>") || !strings.Contains(s, "<b>um</b>") {
		t.Errorf("axis labels %q: want the axis and unit names as they are", labels)
	}
	b.page("viewer-hostile.png")
	b.noProblems()
}

// testComeBackLater: answers that say to come back later (429 and 503
// with Retry-After, 502 backend-unavailable, 409 stale cursor) are asked
// again when the server says, later each time, and the page draws once
// they pass: the catalog, a store's descriptor, a tile. A store that never comes back
// says so on its card and is asked again less and less often, never in
// a tight loop.
func testComeBackLater(t *testing.T, e *hostileEnv) {
	const catalog, cells, meshes = "/api/v1/stores", "/api/v1/stores/cells", "/api/v1/stores/meshes"
	e.f.set(&fault{path: catalog, status: 429, retryAfter: "1", times: 1},
		&fault{path: cells, status: 503, retryAfter: "1", times: 2},
		&fault{path: "/api/v1/stores/axons/bbox", status: 502, retryAfter: "1", times: 2},
		// A page's cursor from a version of the store that is gone (the store
		// changed while a tile was paged): the tile is asked for again at once.
		&fault{path: "/api/v1/stores/cells/bbox", status: 409, times: 1},
		&fault{path: meshes, prefix: true, status: 503, retryAfter: "1", times: -1})
	b := e.ch.tab(t, 1280, 800)
	start := time.Now()
	b.navigate(e.ts.URL + "/?stores=cells,axons,meshes")
	// While it fails, the card says what the server said and that it asks again.
	b.wait(`document.querySelector('.layer[data-store="meshes"] .lerr').textContent.includes('retrying')`)
	if s := b.text(`.layer[data-store="meshes"] .lerr`); !strings.Contains(s, "503") {
		t.Errorf("meshes card says %q; want the 503", s)
	}
	sc := e.d.scene
	want := map[string]int{"cells": len(sc.Cells.Positions) / 3, "axons": len(sc.Axons.Positions) / 3}
	// Drawn whole, with no error left on their cards, in seconds (a tile
	// that failed for good is asked for again only after a minute).
	b.wait(fmt.Sprintf(`(() => { const d = __zvf.drawnLevels, err = (n) => document.querySelector('.layer[data-store="' + n + '"] .lerr').textContent;
		return d.cells && d.cells[0] === %d && d.axons && d.axons[0] === %d && !err('cells') && !err('axons'); })()`, want["cells"], want["axons"]))
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the page took %v to get over the failures", d)
	}
	if s := b.text("#status"); strings.Contains(s, "error") {
		t.Errorf("status line %q", s)
	}
	// Asked again as told, not at once.
	for _, p := range []string{catalog, cells} {
		hs := e.f.seen(p)
		for i := 1; i < len(hs); i++ {
			if hs[i-1].status != 200 && hs[i].at.Sub(hs[i-1].at) < 900*time.Millisecond {
				t.Errorf("%s asked again %v after a %d that said Retry-After: 1", p, hs[i].at.Sub(hs[i-1].at), hs[i-1].status)
			}
		}
		if len(hs) < 2 || hs[len(hs)-1].status != 200 {
			t.Errorf("%s: %d requests, the last %+v; want it asked again until it answered", p, len(hs), hs)
		}
	}
	// The store that stays away: asked again, each time later (1, 2, 4 s…).
	time.Sleep(4 * time.Second)
	hs := e.f.seen(meshes)
	elapsed := time.Since(start)
	if len(hs) < 2 || float64(len(hs)) > elapsed.Seconds()/1.5+2 {
		t.Errorf("meshes asked %d times in %v; want again, but backing off", len(hs), elapsed)
	}
	// Each wait at least the schedule's (1, 2, 4 s…), with a margin for
	// timers; a busy machine only makes waits longer, so comparing a wait
	// with the one before (1.55 s, then 2.06 s under CI's load) is not a
	// test of the back-off.
	for i := 1; i < len(hs); i++ {
		want := time.Duration(float64(time.Second) * 0.9 * float64(uint(1)<<min(i-1, 6)))
		if gap := hs[i].at.Sub(hs[i-1].at); gap < min(want, 54*time.Second) {
			t.Errorf("meshes asked again %v after its try %d; want at least %v (1, 2, 4 s…)", gap, i, want)
		}
	}
	b.noProblems()
}

// testOneAndNoPoints: a store of a single point is framed so the point
// shows (a box of no size once framed it from a millionth of a unit, in
// float32, and drew nothing); a store with no vertex says so on its card
// instead of drawing a blank.
func testOneAndNoPoints(t *testing.T, e *hostileEnv) {
	b := e.ch.tab(t, 1280, 800)
	b.navigate(e.ts.URL + "/?stores=one")
	b.settle()
	var cover map[string]int
	b.value(`__zvf.coverage()`, &cover)
	if cover["one"] == 0 {
		var cam any
		b.value(`__zvf.camera()`, &cam)
		t.Errorf("the one point covers no pixel (camera %v)", cam)
	}
	if s := b.text(`.layer[data-store="one"] .lstat`); !strings.HasPrefix(s, "1 vertex drawn") {
		t.Errorf("card says %q; want 1 vertex drawn", s)
	}
	b.shot("viewer-one.png")
	// Every layer removed, then one added: the view, framed on nothing,
	// frames the new layer.
	b.eval(`document.querySelector('.layer .rm').click()`)
	b.wait(`document.querySelectorAll('.layer').length === 0`)
	b.eval(`document.getElementById('addstore').value = 'hostile'; document.getElementById('addlayer').click()`)
	// The page was settled before the click and may still say so: wait
	// for the new layer to have drawn, then for the page to settle.
	b.wait(`(() => { const s = document.querySelector('.layer[data-store="hostile"] .lstat'); return !!s && s.textContent.includes('drawn'); })()`)
	b.settle()
	b.value(`__zvf.coverage()`, &cover)
	if cover["hostile"] < 1000 {
		var cam any
		b.value(`__zvf.camera()`, &cam)
		t.Errorf("a layer added to an empty page covers %d pixels (camera %v)", cover["hostile"], cam)
	}
	b.navigate(e.ts.URL + "/?stores=empty,one")
	b.wait(`__zvf.ready && __zvf.settled`)
	if s := b.text(`.layer[data-store="empty"] .lstat`); !strings.Contains(s, "holds no vertices") {
		t.Errorf("the empty store's card says %q; want that it holds no vertices", s)
	}
	b.noProblems()
}

// testGarbledLinks: links whose state is garbled or made up open the
// page without an exception, draw the layer where the camera can see it,
// and a box query or object named in them is asked for as a request the
// server takes (or refused by the page with a sentence).
func testGarbledLinks(t *testing.T, e *hostileEnv) {
	for _, tc := range []struct {
		query string
		check string // a JavaScript condition on the settled page
	}{
		{"stores=cells&budget=Infinity&box=0,0,0,100,100,100", `!document.getElementById('bresult').textContent.includes('400')`},
		{"stores=cells&budget=1e30&box=0,0,0,100,100,100", `!document.getElementById('bresult').textContent.includes('400')`},
		{"stores=cells&budget=-5", `__zvf.net.log.every((r) => !/[?&]limit=-/.test(r.url))`},
		{"stores=cells&obj=cells:99999999999999999999999", `!document.getElementById('oresult').textContent.includes('e+')`},
		{"stores=cells&cam=0,0,0,0,0,0", ""},
		{"stores=cells&cam=1,2,1e308,0,0,0", ""},
		{"stores=cells&cam=0,0,-500,500,500,300", ""},
		{"stores=cells&size=-1&op.cells=NaN&range.cells=1,1&c.cells=intensity&s.cells=2&rgb.cells=zzzzzz&lvl.cells=0%26limit%3D1&blevel=%3Cx%3E", ""},
		{"stores=,,cells,,&hide=,", ""},
		// An old single-store link, garbled.
		{"#store=cells&level=%zz&color=%3Cb%3E&obj=x&budget=Infinity&box=1,2", `location.search.startsWith('?stores=cells')`},
	} {
		t.Run(tc.query, func(t *testing.T) {
			b := e.ch.tab(t, 1280, 800)
			b.navigate(e.ts.URL + "/?" + tc.query)
			b.settle()
			var cover map[string]int
			b.value(`__zvf.coverage()`, &cover)
			if cover["cells"] < 100 {
				var cam any
				b.value(`__zvf.camera()`, &cam)
				t.Errorf("cells cover %d pixels (camera %v)", cover["cells"], cam)
			}
			if tc.check != "" {
				var ok bool
				b.value(tc.check, &ok)
				if !ok {
					t.Errorf("%s does not hold: box %q, object %q", tc.check, b.text("#bresult"), b.text("#oresult"))
				}
			}
			b.noProblems()
		})
	}
}

// testHostileBounds: bounds a store declares that are inverted, far from
// zero with an extent a float64 cannot step through in ticks, or enormous,
// neither hang the page nor throw: it settles, and bounds that are
// inverted or beyond what the page can draw are measured instead, and the
// store drawn whole. Bounds that miss some or all of the points (before:
// a blank view, or half the store, without a word) are widened to the
// measured ones, the store drawn whole and framed, and the card and the
// status line say so. Bounds far larger than the points are cut to the
// box their chunks occupy, without a count (before: a dot in the middle of
// the view).
func testHostileBounds(t *testing.T, e *hostileEnv) {
	for _, tc := range []struct{ name, note string }{
		{"inverted", ""},
		{"faroff", ""},
		{"enormous", ""},
		{"loose", ""},
		{"outside", "0 of level 0's 8,000 vertices lie within the store's declared bounds 100000000000000000,0,0 – 100000000000000000,190,190; drawn within -100,-100,-100 – 290,290,290, measured"},
		{"shifted", "4,000 of level 0's 8,000 vertices lie within the store's declared bounds 0,0,0 – 95,190,190; drawn within -100,-100,-100 – 290,290,290, measured"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := e.ch.tab(t, 1280, 800)
			b.navigate(e.ts.URL + "/?stores=" + tc.name)
			b.wait(`window.__zvf && __zvf.settled && document.querySelector('.lstat') && document.querySelector('.lstat').textContent !== 'loading…'`)
			b.shot("viewer-bounds-" + tc.name + ".png")
			if tc.name != "faroff" {
				var drawn map[string]int
				b.value(`__zvf.drawn`, &drawn)
				if drawn[tc.name] != 8000 {
					t.Errorf("drew %d of the 8,000 points", drawn[tc.name])
				}
				var cover map[string]int
				b.value(`__zvf.coverage()`, &cover)
				if cover[tc.name] < 5000 {
					t.Errorf("the points cover %d pixels; want them framed", cover[tc.name])
				}
			}
			card, status := b.text(`.layer .lerr`), b.text("#status")
			if card != tc.note {
				t.Errorf("card says %q; want %q", card, tc.note)
			}
			if off := strings.Contains(status, tc.name+": vertices outside the declared bounds, framed as measured (see its card)"); off != (tc.note != "") {
				t.Errorf("status line %q", status)
			}
			if tc.name == "loose" {
				var layers []struct{ Bounds [2][3]float64 }
				b.value(`__zvf.layers()`, &layers)
				if want := [2][3]float64{{0, 0, 0}, {200, 200, 200}}; len(layers) != 1 || layers[0].Bounds != want {
					t.Errorf("bounds %v; want the chunks' %v", layers, want)
				}
				var counted bool
				b.value(`__zvf.requests.some((r) => r.url.includes('/count?'))`, &counted)
				if counted {
					t.Error("bounds holding every chunk were checked by a count")
				}
			}
			b.noProblems()
		})
	}
	// A store too large to count (the check's limit lowered below its
	// 8,000 points): bounds that do not hold every chunk give way to the
	// chunks' box, and bounds not declared are not measured by reading
	// the level.
	for _, name := range []string{"shifted", "inverted"} {
		t.Run(name+" unchecked", func(t *testing.T) {
			b := e.ch.tab(t, 1280, 800)
			b.navigate(e.ts.URL + "/?stores=one")
			b.wait(`__zvf.ready && __zvf.settled`)
			b.eval(`__zvf.boundsCheck.max = 1000; document.getElementById('addstore').value = '` + name + `'; document.getElementById('addlayer').click()`)
			b.wait(`(() => { const s = document.querySelector('.layer[data-store="` + name + `"] .lstat'); return !!s && s.textContent.includes('drawn'); })()`)
			b.settle()
			var drawn map[string]int
			b.value(`__zvf.drawn`, &drawn)
			if drawn[name] != 8000 {
				t.Errorf("drew %d of the 8,000 points", drawn[name])
			}
			var bounds [2][3]float64
			b.value(`__zvf.layers().find((l) => l.name === '`+name+`').bounds`, &bounds)
			if want := [2][3]float64{{0, 0, 0}, {200, 200, 200}}; bounds != want {
				t.Errorf("bounds %v; want the chunks' %v", bounds, want)
			}
			var read bool
			b.value(`__zvf.requests.some((r) => /\/stores\/`+name+`\/(v[0-9a-f]+\/)?(count\?|bbox\?min=-1e%2B300)/.test(r.url))`, &read)
			if read {
				t.Error("a level over the check's limit was counted or read whole")
			}
			if s := b.text(`.layer[data-store="` + name + `"] .lerr`); s != "" {
				t.Errorf("card says %q", s)
			}
			b.noProblems()
		})
	}
}

// testStoreNames: stores named like what every JavaScript object has
// (constructor, toString) are counted as the others, not added to a
// function; stores whose names differ only in a character an id cannot
// hold each keep their own filter suggestions.
func testStoreNames(t *testing.T, e *hostileEnv) {
	b := e.ch.tab(t, 1280, 800)
	b.navigate(e.ts.URL + "/?stores=constructor,toString,a.b,a_b")
	b.settle()
	var drawn map[string]any
	b.value(`__zvf.drawn`, &drawn)
	for _, name := range []string{"constructor", "toString", "a.b", "a_b"} {
		if n, ok := drawn[name].(float64); !ok || n != 8000 {
			t.Errorf("%s: drawn %#v; want 8000", name, drawn[name])
		}
		if s := b.text(`.layer[data-store="` + name + `"] .lstat`); s != "8,000 vertices drawn (level 0)" {
			t.Errorf("%s card says %q", name, s)
		}
	}
	if s := b.text("#status"); !strings.Contains(s, " 32,000 vertices drawn") {
		t.Errorf("status line %q; want 32,000 vertices drawn", s)
	}
	var own []bool
	b.value(`[...document.querySelectorAll('.layer')].map((c) => c.querySelector('.filter').list === c.querySelector('datalist'))`, &own)
	for i, ok := range own {
		if !ok {
			t.Errorf("layer %d's filter box suggests another layer's list", i)
		}
	}
	b.noProblems()
}

// testFilterLinkBusy: a link's filter is checked with the server before
// any tile; when that check is answered 503 (come back later), the filter
// is not taken for refused (dropped from the view and the URL): the check
// is made again and the filter applied.
func testFilterLinkBusy(t *testing.T, e *hostileEnv) {
	// Every level's first check (the demo has three).
	e.f.set(&fault{path: "/api/v1/stores/cells/count", status: 503, retryAfter: "1", times: 3})
	b := e.ch.tab(t, 1280, 800)
	b.navigate(e.ts.URL + "/?stores=cells&f.cells=" + url.QueryEscape("cell_type = 'neuron'"))
	b.settle()
	if s := b.search(); !strings.Contains(s, "f.cells=") {
		t.Errorf("the URL lost the filter: %s", s)
	}
	if s := b.text(`.layer[data-store="cells"] .lerr`); s != "" {
		t.Errorf("cells card says %q", s)
	}
	resp, err := http.Get(e.ts.URL + "/api/v1/stores/cells/count?min=-1e300,-1e300,-1e300&max=1e300,1e300,1e300&level=0&filter=" + url.QueryEscape("cell_type = 'neuron'"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c struct{ Count int }
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || c.Count == 0 {
		t.Fatalf("count of neurons: %v (%d)", err, c.Count)
	}
	neurons := c.Count
	if got := drawnAt0(t, b, "cells"); got != neurons {
		t.Errorf("drew %d cells at level 0; want the %d neurons", got, neurons)
	}
	b.noProblems()
}

// testTypedFilterBusy: a filter typed into the box whose check is
// answered 503 (Retry-After: 1) says so on the card and is checked again
// as tiles are, a second later, then applied (before, it stayed refused
// until its text was changed).
func testTypedFilterBusy(t *testing.T, e *hostileEnv) {
	const neurons = "cell_type = 'neuron'"
	b := e.ch.tab(t, 1280, 800)
	b.noCache()
	b.navigate(e.ts.URL + "/?stores=cells")
	b.settle()
	// The check asks each of the demo's three levels: two of them busy.
	// Only the filter's checks: a bounds check counts too (without one).
	e.f.set(&fault{path: "/api/v1/stores/cells/count", query: "filter=", status: 503, retryAfter: "1", kind: problem.StoreChanging, times: 2})
	setInput(b, "cells", "filter", neurons)
	b.wait(`document.querySelector('.layer[data-store="cells"] .lerr').textContent !== ''`)
	if s, want := b.text(`.layer[data-store="cells"] .lerr`), "filter: 503 Store is being changed: injected by the test · retrying in 1 s"; s != want {
		t.Errorf("while busy the card says %q; want %q", s, want)
	}
	b.wait(`document.querySelector('.layer[data-store="cells"] .lerr').textContent === '' && new URLSearchParams(location.search).has('f.cells')`)
	b.settle()
	hs := e.f.seenAsking("/api/v1/stores/cells/count", "filter=")
	if len(hs) != 6 || hs[0].status != 503 || hs[5].status != 200 || hs[3].at.Sub(hs[0].at) < 900*time.Millisecond {
		t.Errorf("filter checks %+v; want three (two 503s), then three more a second later", hs)
	}
	lo, hi := layerBox(t, b, "cells")
	resp, err := http.Get(e.ts.URL + "/api/v1/stores/cells/count?min=" + lo + "&max=" + hi + "&level=0&filter=" + url.QueryEscape(neurons))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c struct{ Count int }
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || c.Count == 0 {
		t.Fatalf("count of neurons: %v (%d)", err, c.Count)
	}
	if got := drawnAt0(t, b, "cells"); got != c.Count {
		t.Errorf("drew %d cells at level 0; want the %d neurons", got, c.Count)
	}
	b.noProblems()
}

// testStorageDenied: a 502 storage-denied (the server's storage refuses
// its credentials) is not asked again: retrying cannot help, so the card
// says what the server said and that it is not retried, for a
// descriptor and for a tile (before: retried, the tile once a minute,
// for ever, under "retrying in 60 s"); a 502 that is not the server's
// (a proxy) is still retried.
func testStorageDenied(t *testing.T, e *hostileEnv) {
	const cells, axons = "/api/v1/stores/cells", "/api/v1/stores/axons/bbox"
	e.f.set(&fault{path: cells, status: 502, kind: problem.StorageDenied, times: -1},
		&fault{path: axons, status: 502, kind: problem.StorageDenied, times: -1},
		&fault{path: "/api/v1/stores/skeletons", status: 502, times: 1})
	b := e.ch.tab(t, 1280, 800)
	b.noCache()
	b.navigate(e.ts.URL + "/?stores=cells,axons,skeletons")
	b.settle()
	const why = " · not retried: the server's storage refused it access (its credentials or permissions); reload once they are fixed"
	if s, want := b.text(`.layer[data-store="cells"] .lerr`), "cells: 502 Storage refused access: injected by the test"+why; s != want {
		t.Errorf("cells card says %q; want %q", s, want)
	}
	s := b.text(`.layer[data-store="axons"] .lerr`)
	if !strings.Contains(s, "tile") || !strings.Contains(s, ": 502 Storage refused access: injected by the test"+why) || strings.Contains(s, "retrying") {
		t.Errorf("axons card says %q; want its tiles refused, not retried", s)
	}
	asked, tiles := len(e.f.seen(cells)), len(e.f.seen(axons))
	time.Sleep(3500 * time.Millisecond)
	if n := len(e.f.seen(cells)); asked != 1 || n != 1 {
		t.Errorf("the cells descriptor was asked %d times (%d after 3.5 s); want once", asked, n)
	}
	if n := len(e.f.seen(axons)); n != tiles {
		t.Errorf("axons tiles asked %d times, then %d after 3.5 s; want none again", tiles, n)
	}
	if hs := e.f.seen("/api/v1/stores/skeletons"); len(hs) != 2 || hs[1].status != 200 {
		t.Errorf("skeletons descriptor requests %+v; want a proxy's 502, then asked again", hs)
	}
	if s := b.text(`.layer[data-store="skeletons"] .lerr`); s != "" {
		t.Errorf("skeletons card says %q", s)
	}
	b.page("viewer-storage-denied.png")
	b.noProblems()
	// A filter whose check the storage refuses is not said to be a bad
	// filter (before: "filter: injected by the test", the detail alone).
	b = e.ch.tab(t, 1280, 800)
	b.navigate(e.ts.URL + "/?stores=skeletons")
	b.settle()
	e.f.set(&fault{path: "/api/v1/stores/skeletons/count", status: 502, kind: problem.StorageDenied, times: -1})
	setInput(b, "skeletons", "filter", "radius > 1")
	b.wait(`document.querySelector('.layer[data-store="skeletons"] .lerr').textContent !== ''`)
	b.settle()
	if s, want := b.text(`.layer[data-store="skeletons"] .lerr`), "filter: 502 Storage refused access: injected by the test"+why; s != want {
		t.Errorf("a filter check the storage refused: the card says %q; want %q", s, want)
	}
	b.noProblems()
	// The same for a link's filter: the layer draws without it.
	b = e.ch.tab(t, 1280, 800)
	b.navigate(e.ts.URL + "/?stores=skeletons&f.skeletons=" + url.QueryEscape("radius > 1"))
	b.settle()
	if s, want := b.text(`.layer[data-store="skeletons"] .lerr`), "filter: 502 Storage refused access: injected by the test"+why; s != want {
		t.Errorf("a link's filter check the storage refused: the card says %q; want %q", s, want)
	}
	var drawn map[string]int
	b.value(`__zvf.drawn`, &drawn)
	if drawn["skeletons"] == 0 {
		t.Errorf("the layer whose link filter was refused draws nothing")
	}
	b.noProblems()
}

// testLayerColours: the eight layers a page opens with by default each
// get a colour of their own (before: a palette of six, so the seventh and
// eighth looked like the first and second); a layer added after one was
// removed takes a colour no layer has (before: the next in turn, one a
// layer had), and a reload of the page's URL keeps every layer's colour.
func testLayerColours(t *testing.T, e *hostileEnv) {
	b := e.ch.tab(t, 1280, 800)
	b.navigate(e.ts.URL + "/?stores=cells,axons,skeletons,meshes,one,two,four,inverted")
	b.settle()
	colours := func() map[string]string {
		var m map[string]string
		b.value(`Object.fromEntries([...document.querySelectorAll('.layer')].map((c) => [c.dataset.store, getComputedStyle(c.querySelector('.sw')).backgroundColor]))`, &m)
		return m
	}
	distinct := func(when string, m map[string]string) {
		t.Helper()
		seen := map[string]string{}
		for store, c := range m {
			if other, ok := seen[c]; ok {
				t.Errorf("%s: %s and %s are both %s (%v)", when, store, other, c, m)
			}
			seen[c] = store
		}
	}
	first := colours()
	if len(first) != 8 {
		t.Fatalf("layers %v; want 8", first)
	}
	distinct("eight layers", first)
	b.eval(`document.querySelector('.layer[data-store="axons"] .rm').click()`)
	b.eval(`document.getElementById('addstore').value = 'hostile'; document.getElementById('addlayer').click()`)
	b.settle()
	added := colours()
	distinct("axons removed, hostile added", added)
	for store, c := range added {
		if store != "hostile" && first[store] != c {
			t.Errorf("%s changed colour from %s to %s when another layer was added", store, first[store], c)
		}
	}
	var loc string
	b.value(`location.href`, &loc)
	b.navigate(loc)
	b.settle()
	if again := colours(); !reflect.DeepEqual(again, added) {
		t.Errorf("after a reload of %s the layers' colours are %v; want %v", loc, again, added)
	}
	b.noProblems()
}

// testObjectLinkBusy: a link's object (obj=) whose lookup is answered
// 503 (Retry-After: 1) says so and is looked up again as tiles are, then
// found (before: the error stayed until Find was clicked again).
func testObjectLinkBusy(t *testing.T, e *hostileEnv) {
	const levels = "/api/v1/stores/axons/objects/3/levels"
	e.f.set(&fault{path: levels, status: 503, retryAfter: "1", kind: problem.StoreChanging, times: 2})
	b := e.ch.tab(t, 1280, 800)
	b.navigate(e.ts.URL + "/?stores=axons&obj=axons:3")
	b.wait(`document.getElementById('oresult').textContent.includes('retrying')`)
	if s, want := b.text("#oresult"), "object 3 in axons: 503 Store is being changed: injected by the test · retrying in 1 s"; s != want {
		t.Errorf("while busy Find says %q; want %q", s, want)
	}
	b.wait(`document.getElementById('oresult').textContent.startsWith('object 3 · axons · level 0')`)
	hs := e.f.seen(levels)
	if len(hs) != 3 || hs[2].status != 200 || hs[1].at.Sub(hs[0].at) < 900*time.Millisecond || hs[2].at.Sub(hs[1].at) < 1800*time.Millisecond {
		t.Errorf("lookups %+v; want two 503s, then found, 1 s and 2 s apart", hs)
	}
	if q := b.search(); !strings.Contains(q, "obj=axons:3") {
		t.Errorf("the URL %q lost the object", q)
	}
	b.noProblems()
}

// testBoxQueryBusy: a box query answered 503 (Retry-After: 1) says so
// in its row and is asked again as tiles are, then answered (before: the
// error stayed until the query was run again by hand).
func testBoxQueryBusy(t *testing.T, e *hostileEnv) {
	b := e.ch.tab(t, 1280, 800)
	b.navigate(e.ts.URL + "/?stores=cells")
	b.settle()
	// Only the box query's box: on a loaded machine a tile may still be
	// asked for after the page settled, and took the one 503 (CI, 10:07).
	const box = "min=0,0,0&max=500,500,500&"
	e.f.set(&fault{path: "/api/v1/stores/cells/bbox", query: box, status: 503, retryAfter: "1", kind: problem.StoreChanging, times: 1})
	b.eval(`document.getElementById('bmin').value = '0,0,0'; document.getElementById('bmax').value = '500,500,500'; document.getElementById('bquery').click()`)
	b.wait(`document.getElementById('bresult').textContent.includes('retrying')`)
	if s := b.text("#bresult"); !strings.Contains(s, "cells503 Store is being changed: injected by the test · retrying in 1 s") {
		t.Errorf("while busy the box query says %q", s)
	}
	b.wait(`(() => { const td = document.querySelectorAll('#bresult td'); return td.length === 5 && /^[\d,]+$/.test(td[1].textContent); })()`)
	hs := e.f.seenAsking("/api/v1/stores/cells/bbox", box)
	if len(hs) != 2 || hs[0].status != 503 || hs[1].status != 200 || hs[1].at.Sub(hs[0].at) < 900*time.Millisecond {
		t.Errorf("box queries %+v; want a 503, then answered a second later", hs)
	}
	resp, err := http.Get(e.ts.URL + "/api/v1/stores/cells/count?min=0,0,0&max=500,500,500&level=0")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c struct{ Count int }
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || c.Count == 0 {
		t.Fatalf("count in the box: %v (%d)", err, c.Count)
	}
	var shown string
	b.value(`document.querySelectorAll('#bresult td')[1].textContent`, &shown)
	if want := strings.ReplaceAll(fmt.Sprintf("%d", c.Count), ",", ""); strings.ReplaceAll(shown, ",", "") != want {
		t.Errorf("the box query says %s vertices; the server counts %d", shown, c.Count)
	}
	b.noProblems()
}

// testContextLost: when the browser takes the WebGL context away (a GPU
// reset), the status line says so instead of a blank view under "drawn";
// when it gives it back, the page draws again, from its URL.
func testContextLost(t *testing.T, e *hostileEnv) {
	b := e.ch.tab(t, 1280, 800)
	b.navigate(e.ts.URL + "/?stores=cells")
	b.settle()
	b.eval(`window.__lose = document.getElementById('view').getContext('webgl2').getExtension('WEBGL_lose_context'); window.__lose.loseContext()`)
	b.wait(`document.getElementById('status').textContent.includes('graphics context was lost')`)
	if s := b.text("#status"); !strings.HasPrefix(s, "error") {
		t.Errorf("status line %q; want an error", s)
	}
	b.eval(`window.__lose.restoreContext()`)
	// The page loads again: polls across the navigation fail until it has.
	for deadline := time.Now().Add(60 * time.Second); ; {
		ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`!window.__lose && !!window.__zvf && __zvf.ready && __zvf.settled`))
		if err == nil && ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page did not draw again after the context came back: %q", b.text("#status"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	var cover map[string]int
	b.value(`__zvf.coverage()`, &cover)
	if cover["cells"] < 1000 {
		t.Errorf("after the context came back, cells cover %d pixels", cover["cells"])
	}
	b.noProblems()
}

// testOverviewBusy: a density overview answered 503 (Retry-After: 1) is
// shown as failed, then asked for again and drawn.
func testOverviewBusy(t *testing.T, e *hostileEnv) {
	e.f.set(&fault{path: "/api/v1/stores/cells/density", status: 503, retryAfter: "1", times: 1})
	b := e.ch.tab(t, 1280, 800)
	b.navigate(e.ts.URL + "/?stores=cells&budget=1000")
	b.wait(`(() => { const o = __zvf.overview && __zvf.overview().cells; return !!o && o.cells > 0; })()`)
	if hs := e.f.seen("/api/v1/stores/cells/density"); len(hs) != 2 || hs[0].status != 503 || hs[1].at.Sub(hs[0].at) < 900*time.Millisecond {
		t.Errorf("density requests %+v; want a 503, then one more a second later", hs)
	}
	b.noProblems()
}

// testNeuroglancerSchemes: a descriptor's neuroglancer url becomes the
// card's link only when it is http or https: a javascript: or data: URL
// would run in the page's origin when clicked.
func testNeuroglancerSchemes(t *testing.T, e *hostileEnv) {
	b := e.ch.tab(t, 1280, 800)
	b.navigate(e.ts.URL + "/?stores=one")
	b.settle()
	var got []string
	b.await(`import('./neuroglancer.js').then((m) => { window.__ng = ['javascript:alert(1)', ' JavaScript:alert(1)', 'data:text/html,<script>alert(1)</script>', 'https://example.org/#!{}', '/ng/one']
		.map((u) => m.neuroglancerURL({ url: u }, location)); })`)
	b.value(`window.__ng`, &got)
	want := []string{"", "", "", "https://example.org/#!{}", e.ts.URL + "/ng/one"}
	if len(got) != len(want) {
		t.Fatalf("links %q; want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("link %d: %q; want %q", i, got[i], want[i])
		}
	}
	b.noProblems()
}

// testFourAxes: a store of two axes is drawn on a plane; one of four
// axes (x, y, z and one more) is drawn in x, y, z: every request names
// all four axes (the server wants a number per axis), the fourth over its
// whole range; the box query too.
func testFourAxes(t *testing.T, e *hostileEnv) {
	b := e.ch.tab(t, 1280, 800)
	b.navigate(e.ts.URL + "/?stores=four&box=0,0,0,50,50,50")
	b.settle()
	var drawn map[string]int
	b.value(`__zvf.drawn`, &drawn)
	if drawn["four"] != 8000 {
		t.Errorf("drew %d of the 8,000 points of a 4-axis store (card: %q)", drawn["four"], b.text(`.layer[data-store="four"]`))
	}
	if s := b.text("#bresult"); !strings.Contains(s, "four") || strings.Contains(s, "400") {
		t.Errorf("box query: %q", s)
	}
	b.noProblems()
	b.navigate(e.ts.URL + "/?stores=two")
	b.settle()
	b.value(`__zvf.drawn`, &drawn)
	if drawn["two"] != 400 {
		t.Errorf("drew %d of the 400 points of a 2-axis store (card: %q)", drawn["two"], b.text(`.layer[data-store="two"]`))
	}
	b.noProblems()
}

// testLinkCameraBusy: a link's camera is taken once the store it looks at
// answers, even when its descriptor came only on a retry (before, the
// page had framed the empty scene, and the camera, far off for that,
// was not taken).
func testLinkCameraBusy(t *testing.T, e *hostileEnv) {
	e.f.set(&fault{path: "/api/v1/stores/cells", status: 503, retryAfter: "1", times: 1})
	b := e.ch.tab(t, 1280, 800)
	b.navigate(e.ts.URL + "/?stores=cells&cam=-0.9,0.45,20000,500,500,300")
	b.settle()
	var cam struct {
		Yaw, Pitch, Dist float64
		Target           []float64
	}
	b.value(`__zvf.camera()`, &cam)
	if cam.Dist != 20000 || cam.Yaw != -0.9 || len(cam.Target) != 3 || cam.Target[0] != 500 {
		t.Errorf("camera %+v; want the link's", cam)
	}
	b.noProblems()
}
