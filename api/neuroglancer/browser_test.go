package neuroglancer_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/api/neuroglancer"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/web"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/demo"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// The browser test runs Neuroglancer, built from npm by .ci/build-neuroglancer
// from testdata/ngclient into a cache outside the checkout, in headless
// Chromium. It takes minutes under a software renderer, so a plain go test
// runs it only when asked (ZVFSERVE_BROWSER=1, as for the viewer's browser
// tests); then, without Chromium or the build, it is skipped, unless
// ZVFSERVE_REQUIRE_NEUROGLANCER is set (CI sets it): then it fails.

const harness = "testdata/ngclient"

func requireNeuroglancer() bool { return os.Getenv("ZVFSERVE_REQUIRE_NEUROGLANCER") != "" }

// neuroglancerDist finds the built page the way .ci/build-neuroglancer
// names it: the cache folder, then a hash of the harness files.
func neuroglancerDist(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("ZVFSERVE_NEUROGLANCER_DIST"); d != "" {
		return d
	}
	h := sha256.New()
	for _, f := range []string{"package.json", "vite.config.js", "index.html", "src/main.js"} {
		b, err := os.ReadFile(filepath.Join(harness, f))
		if err != nil {
			t.Fatal(err)
		}
		h.Write(b)
	}
	dist := filepath.Join(zvftest.CICache(t), "neuroglancer-"+hex.EncodeToString(h.Sum(nil))[:12], "dist")
	if _, err := os.Stat(filepath.Join(dist, "index.html")); err != nil {
		msg := fmt.Sprintf("Neuroglancer is not built at %s: run .ci/build-neuroglancer (npm install and vite build, about a minute)", dist)
		if requireNeuroglancer() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return dist
}

func chromiumPath(t *testing.T) string {
	t.Helper()
	return zvftest.Tool(t, "ZVFSERVE_REQUIRE_NEUROGLANCER", "Chromium is not installed (apt-get install chromium): the Neuroglancer browser test needs it",
		"chromium", "chromium-browser", "google-chrome")
}

// requestLog records what zvfserve answered, and the body bytes it sent
// for each path (as sent: compressed when the browser took an encoding).
type requestLog struct {
	mu    sync.Mutex
	seen  []string // "status method path"
	bytes map[string]int64
}

func (l *requestLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := apitest.NewCountingWriter(w)
		h.ServeHTTP(sw, r)
		l.mu.Lock()
		l.seen = append(l.seen, fmt.Sprintf("%d %s %s", sw.Status, r.Method, r.URL.Path))
		if l.bytes == nil {
			l.bytes = map[string]int64{}
		}
		l.bytes[r.URL.Path] += sw.N
		l.mu.Unlock()
	})
}

// take returns the requests seen since the last take, and the bytes sent
// per path.
func (l *requestLog) take() ([]string, map[string]int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out, n := l.seen, l.bytes
	l.seen, l.bytes = nil, nil
	return out, n
}

// demoStores are the demo scene's stores (a pyramid of three levels each).
func demoStores(t testing.TB, ch *cache.Cache) []*zvf.Store {
	t.Helper()
	ctx := context.Background()
	mem := zvftest.Store(t, "mem://")
	infos, err := demo.Build(ctx, mem, demo.Options{Seed: 1, Scale: 1})
	if err != nil {
		t.Fatal(err)
	}
	var out []*zvf.Store
	for _, in := range infos {
		s, err := zvf.Open(ctx, storage.Sub(mem, in.Prefix), zvf.Options{Name: in.Name, Cache: ch})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// TestNeuroglancerRendersEveryKind opens each kind of source from a running
// zvfserve in Neuroglancer (another origin, so CORS is exercised), with the
// state the store descriptor offers, and waits until every visible chunk
// is loaded with no layer error; the 3-D panel must show something, and
// zvfserve must have answered the requests each kind needs.
func TestNeuroglancerRendersEveryKind(t *testing.T) {
	t.Parallel()
	if !requireNeuroglancer() && os.Getenv("ZVFSERVE_BROWSER") != "1" {
		t.Skip("Neuroglancer browser test: set ZVFSERVE_BROWSER=1 to run it (needs Chromium and .ci/build-neuroglancer; it takes a few minutes)")
	}
	dist := neuroglancerDist(t)
	exe := chromiumPath(t)

	ch := cache.New(512 << 20)
	stores := append(append(fixtureStores(t), largeIDStores(t)...), demoStores(t, ch)...)
	stores = append(stores, apitest.Open(t, "../../testdata/zvf-0.9/mesh_v09.zarrvectors", "mesh_v09", ch))
	connectome := connectomeStore(t, ch)
	stores = append(stores, connectome)
	// Without --public-url the descriptor's sources are absolute URLs on
	// the address the request came to: the states below are opened as the
	// descriptor gives them.
	srv := apitest.New(t, api.Options{Stores: stores, Cache: ch, UI: web.Handler(web.Options{})})
	var log requestLog
	data := httptest.NewServer(log.wrap(srv.Handler()))
	t.Cleanup(data.Close)
	// The same stores with every annotation and skeleton source sharded.
	shardedSrv := apitest.New(t, api.Options{Stores: stores, Cache: ch, NGSharded: neuroglancer.ShardAlways})
	shardedData := httptest.NewServer(log.wrap(shardedSrv.Handler()))
	t.Cleanup(shardedData.Close)
	page := httptest.NewServer(http.FileServer(http.Dir(dist)))
	t.Cleanup(page.Close)

	bctx := newBrowser(t, exe)

	meshBytes := map[string]int64{} // by case: what the mesh source's requests took
	meshDrawn := map[string]int{}   // by case: the lit pixels of the mesh cases
	for _, tc := range []struct {
		name   string
		stores []string // whose descriptors' states to open, all layers shown
		viewer string   // or: the store whose state the bundled viewer links to
		want   []string // requests zvfserve must have answered (200 or 206, or 304 to a browser revalidating)
		swap   string   // a source route a mesh store's layer takes instead of the state's segments
		mesh   string   // a path prefix whose bytes to add up, with the browser's cache off
		// or: these layers (sources relative to the server), in a layout
		// at a zoom (crossSectionScale, metres a pixel; 0: Neuroglancer's), and the
		// share of the panel that must be coloured (not grey)
		layers []neuroglancer.Layer
		layout string
		zoom   float64
		colour float64
		// link: each annotation layer is linked to the store's skeleton
		// layer through the relationship and shows only the annotations
		// of its segments (Neuroglancer then reads objects/{id} lists).
		link bool
		// sharded: the stores come from the server with --ng-sharded=always.
		sharded bool
		// spacing: the annotation layers' 3-D annotation spacing in pixels
		// (projectionAnnotationSpacing; 0: Neuroglancer's 8). A finer one
		// wants more annotations than a small store's coarse level holds,
		// so Neuroglancer reads the finer levels too.
		spacing float64
		// minDrawn: the lit pixels the 3-D panel must show (0: a
		// thousandth of it).
		minDrawn int
	}{
		{name: "points", stores: []string{"points_pyramid"}, spacing: 2, want: []string{
			`^/ng/points_pyramid/annotations/info$`, `^/ng/points_pyramid/annotations/v[0-9a-f]{16}\.\d+/spatial0/\d+_\d+_\d+$`,
			`^/ng/points_pyramid/annotations/v[0-9a-f]{16}\.\d+/spatial1/\d+_\d+_\d+$`}},
		{name: "streamlines", stores: []string{"polylines"}, want: []string{`^/ng/polylines/annotations/info$`, `^/ng/polylines/annotations/v[0-9a-f]{16}\.\d+/spatial0/\d+_\d+_\d+$`,
			`^/ng/polylines/lines/v[0-9a-f]{16}\.\d+/spatial0/\d+_\d+_\d+$`, `^/ng/polylines/segments/info$`, `^/ng/polylines/skeletons/v[0-9a-f]{16}\.\d+/\d+$`}},
		{name: "graph", stores: []string{"graph"}, want: []string{`^/ng/graph/annotations/v[0-9a-f]{16}\.\d+/spatial0/\d+_\d+_\d+$`,
			`^/ng/graph/segments/info$`, `^/ng/graph/skeletons/v[0-9a-f]{16}\.\d+/info$`, `^/ng/graph/skeletons/v[0-9a-f]{16}\.\d+/seg_props/info$`, `^/ng/graph/skeletons/v[0-9a-f]{16}\.\d+/\d+$`}},
		{name: "skeletons", stores: []string{"skeleton"}, want: []string{`^/ng/skeleton/skeletons/v[0-9a-f]{16}\.\d+/info$`, `^/ng/skeleton/skeletons/v[0-9a-f]{16}\.\d+/seg_props/info$`,
			`^/ng/skeleton/skeletons/v[0-9a-f]{16}\.\d+/0$`, `^/ng/skeleton/skeletons/v[0-9a-f]{16}\.\d+/1$`, `^/ng/skeleton/skeletons/v[0-9a-f]{16}\.\d+/2$`}},
		{name: "meshes", stores: []string{"mesh"}, swap: "meshes",
			want: []string{`^/ng/mesh/meshes/info$`, `^/ng/mesh/meshes/\d+:0$`, `^/ng/mesh/meshes/frag/\d+$`}},
		{name: "multilod", stores: []string{"mesh_v09"}, want: []string{`^/ng/mesh_v09/segments/info$`, `^/ng/mesh_v09/multilod/v[0-9a-f]{16}\.\d+/info$`,
			`^/ng/mesh_v09/multilod/v[0-9a-f]{16}\.\d+/\d+\.index$`, `^/ng/mesh_v09/multilod/v[0-9a-f]{16}\.\d+/\d+$`}},
		// The demo scene at Neuroglancer's default zoom (the store's whole
		// box), fetched afresh with multilod meshes, then legacy ones: the
		// bytes each mesh source takes.
		{name: "demo", stores: []string{"cells", "axons", "skeletons", "meshes"}, mesh: "/ng/meshes/multilod/",
			want: []string{`^/ng/cells/annotations/v[0-9a-f]{16}\.\d+/spatial0/0_0_0$`, `^/ng/axons/annotations/v[0-9a-f]{16}\.\d+/spatial0/0_0_0$`,
				`^/ng/skeletons/skeletons/v[0-9a-f]{16}\.\d+/\d+$`, `^/ng/meshes/multilod/v[0-9a-f]{16}\.\d+/\d+\.index$`, `^/ng/meshes/multilod/v[0-9a-f]{16}\.\d+/\d+$`}},
		{name: "demo with legacy meshes", stores: []string{"cells", "axons", "skeletons", "meshes"}, swap: "meshes", mesh: "/ng/meshes/meshes/",
			want: []string{`^/ng/meshes/meshes/\d+:0$`, `^/ng/meshes/meshes/frag/\d+$`}},
		// The connectome store at the default view of its box: segments
		// drawn at coarse LODs. Its neurites are under a pixel thick at
		// this zoom, so the panel is mostly black: what multilod draws is
		// checked against what the full meshes draw, below.
		{name: "connectome", stores: []string{"connectome"}, mesh: "/ng/connectome/multilod/", minDrawn: 200,
			want: []string{`^/ng/connectome/multilod/v[0-9a-f]{16}\.\d+/\d+\.index$`, `^/ng/connectome/multilod/v[0-9a-f]{16}\.\d+/\d+$`}},
		{name: "connectome with legacy meshes", stores: []string{"connectome"}, swap: "meshes", mesh: "/ng/connectome/meshes/", minDrawn: 200,
			want: []string{`^/ng/connectome/meshes/\d+:0$`, `^/ng/connectome/meshes/frag/\d+$`}},
		{name: "viewer link", viewer: "cells", want: []string{`^/ng/cells/annotations/info$`, `^/ng/cells/annotations/v[0-9a-f]{16}\.\d+/spatial0/0_0_0$`}},
		// The density volume as an image layer: a heat map of the cells
		// in a cross-section.
		{name: "density", want: []string{`^/ng/cells/density/info$`, `^/ng/cells/density/v[0-9a-f]{16}\.\d+/\d+/\d+-\d+_\d+-\d+_\d+-\d+$`},
			layers: []neuroglancer.Layer{{Type: "image", Name: "cells density", Source: "precomputed:///ng/cells/density",
				Shader: "#uicontrol invlerp normalized(range=[0, 30])\nvoid main() {\n  emitRGB(colormapJet(normalized()));\n}\n"}},
			layout: "xy", zoom: 0.9e-6, colour: 0.5},
		// Segment ids above 2^60: skeletons, and the polylines and lines of
		// the selected segments through the relationship.
		{name: "large ids", stores: []string{"big_streamlines"}, link: true, want: []string{`^/ng/big_streamlines/skeletons/v[0-9a-f]{16}\.\d+/\d{19}$`,
			`^/ng/big_streamlines/annotations/v[0-9a-f]{16}\.\d+/objects/\d{19}$`, `^/ng/big_streamlines/lines/v[0-9a-f]{16}\.\d+/objects/\d{19}$`}},
		// Sharded sources: Neuroglancer reads shard files by Range.
		{name: "sharded points", stores: []string{"points_pyramid"}, sharded: true, spacing: 2, want: []string{
			`^/ng/points_pyramid/annotations/info$`, `^/ng/points_pyramid/annotations/v[0-9a-f]{16}\.\d+/spatial0/0\.shard$`,
			`^/ng/points_pyramid/annotations/v[0-9a-f]{16}\.\d+/spatial1/0\.shard$`}},
		{name: "sharded skeletons and lines", stores: []string{"graph"}, sharded: true, want: []string{
			`^/ng/graph/annotations/v[0-9a-f]{16}\.\d+/spatial0/0\.shard$`, `^/ng/graph/lines/v[0-9a-f]{16}\.\d+/spatial0/0\.shard$`,
			`^/ng/graph/skeletons/v[0-9a-f]{16}\.\d+/info$`, `^/ng/graph/skeletons/v[0-9a-f]{16}\.\d+/0\.shard$`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := data
			if tc.sharded {
				data = shardedData
			}
			tctx, cancel := context.WithTimeout(bctx, 3*time.Minute)
			defer cancel()
			var fragment string
			if tc.viewer != "" {
				// The bundled viewer's "Open in Neuroglancer" link, opened
				// in the harness page instead of the public Neuroglancer.
				if err := chromedp.Do(tctx, chromedp.Navigate(data.URL+"/#store="+tc.viewer)); err != nil {
					t.Fatal(err)
				}
				href, err := pollNavigated[string](tctx, `(() => { const a = document.querySelector('.layer a.ng'); return a && !a.hidden && a.href.includes('#!') ? a.href : ''; })()`)
				if err != nil {
					t.Fatalf("the viewer shows no Neuroglancer link: %v", err)
				}
				_, fragment, _ = strings.Cut(href, "#")
				fragment = "#" + fragment
			} else {
				state := map[string]any{"layout": "3d", "showAxisLines": false, "showScaleBar": false, "showDefaultAnnotations": false}
				var layers []neuroglancer.Layer
				for _, name := range tc.stores {
					var d struct {
						Neuroglancer *neuroglancer.Description `json:"neuroglancer"`
					}
					resp, body := apitest.Get(t, data, "/api/v1/stores/"+name)
					if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &d) != nil || d.Neuroglancer == nil {
						t.Fatalf("descriptor of %s: %d %.300s", name, resp.StatusCode, body)
					}
					if st := d.Neuroglancer.State; len(tc.stores) == 1 && st.ProjectionScale > 0 {
						// Where a mesh store's state looks.
						state["dimensions"], state["position"], state["projectionScale"] = st.Dimensions, st.Position, st.ProjectionScale
					}
					for _, l := range d.Neuroglancer.State.Layers {
						if len(tc.stores) == 1 {
							l.Visible = nil // every source of the store, the hidden ones too
						}
						if tc.swap != "" && d.Neuroglancer.Sources["multilod"] != "" {
							l.Source = strings.Replace(l.Source, "/segments", "/"+tc.swap, 1)
						}
						layers = append(layers, l)
					}
					if src, ok := d.Neuroglancer.Sources["lines"]; ok && len(tc.stores) == 1 && !strings.Contains(fmt.Sprint(layers), src) {
						// Lines are no layer of the ready state; open them too.
						layers = append(layers, neuroglancer.Layer{Type: "annotation", Name: name + " lines", Source: "precomputed://" + src})
					}
				}
				for _, l := range tc.layers {
					l.Source = strings.Replace(l.Source, "precomputed:///", "precomputed://"+data.URL+"/", 1)
					layers = append(layers, l)
				}
				if tc.layout != "" {
					state["layout"] = tc.layout
				}
				if tc.zoom != 0 {
					state["crossSectionScale"] = tc.zoom
				}
				var out []any
				for _, l := range layers {
					if (!tc.link && tc.spacing == 0) || l.Type != "annotation" {
						out = append(out, l)
						continue
					}
					var m map[string]any
					js, _ := json.Marshal(l)
					_ = json.Unmarshal(js, &m)
					for _, sk := range layers {
						if sk.Type == "segmentation" && tc.link {
							m["linkedSegmentationLayer"] = map[string]string{"object": sk.Name}
							m["filterBySegmentation"] = []string{"object"}
						}
					}
					if tc.spacing > 0 {
						m["projectionAnnotationSpacing"] = tc.spacing
					}
					out = append(out, m)
				}
				state["layers"] = out
				js, _ := json.Marshal(state)
				fragment = "#!" + url.PathEscape(string(js))
			}
			if _, err := chromedp.Call(tctx, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: tc.mesh != ""}); err != nil {
				t.Fatal(err)
			}
			log.take()
			if err := chromedp.Do(tctx, chromedp.Navigate(page.URL+"/index.html"+fragment)); err != nil {
				t.Fatal(err)
			}
			if _, err := pollNavigated[bool](tctx, "typeof window.zvfWhenLoaded === 'function'"); err != nil {
				t.Fatal(err)
			}
			st, err := chromedp.Run(tctx, chromedp.Evaluate[map[string]any]("window.zvfWhenLoaded(120000)", chromedp.EvalAwaitPromise))
			if err != nil {
				seen, _ := log.take()
				t.Fatalf("Neuroglancer did not load every visible chunk without error: %v\nrequests: %v", err, seen)
			}
			// Two frames after the last chunk arrived, the picture is drawn.
			if _, err := chromedp.Run(tctx, chromedp.Evaluate[any](`new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(0))))`, chromedp.EvalAwaitPromise)); err != nil {
				t.Fatal(err)
			}
			shot, err := chromedp.Run(tctx, chromedp.Screenshot(chromedp.CSS(".neuroglancer-rendered-data-panel")))
			if err != nil {
				t.Fatal(err)
			}
			saveShot(t, "neuroglancer-"+tc.name+".png", shot)
			drawn, total := litPixels(t, shot)
			t.Logf("%s: %v; %d of %d pixels drawn", tc.name, st["chunks"], drawn, total)
			if minDrawn := cmp.Or(tc.minDrawn, total/1000); drawn < minDrawn {
				t.Fatalf("the 3-D panel is blank: %d of %d pixels drawn, want %d", drawn, total, minDrawn)
			}
			if c := colouredPixels(t, shot); float64(c) < tc.colour*float64(total) {
				t.Fatalf("%d of %d pixels coloured, want %.0f%%", c, total, 100*tc.colour)
			}
			seen, sent := log.take()
			if tc.mesh != "" {
				for p, n := range sent {
					if strings.HasPrefix(p, tc.mesh) {
						meshBytes[tc.name] += n
					}
				}
				meshDrawn[tc.name] = drawn
				t.Logf("%s: %d bytes", tc.mesh, meshBytes[tc.name])
				// The benchmark's replay of Neuroglancer's LOD choice
				// assumes this panel.
				if img, err := png.DecodeConfig(bytes.NewReader(shot)); err != nil || img.Width != ngPanel[0] || img.Height != ngPanel[1] {
					t.Errorf("the 3-D panel is %d × %d (%v), replayMeshView takes %v", img.Width, img.Height, err, ngPanel)
				}
			}
			for _, re := range tc.want {
				rx := regexp.MustCompile(re)
				if !slicesContainsFunc(seen, func(s string) bool {
					parts := strings.SplitN(s, " ", 3)
					return (parts[0] == "200" || parts[0] == "206" || parts[0] == "304") && rx.MatchString(parts[2])
				}) {
					t.Errorf("zvfserve answered no %s; it saw %v", re, seen)
				}
			}
			for _, s := range seen {
				// 304: the browser revalidating what an earlier case fetched;
				// 408: what the server logs for a request whose client left
				// (Neuroglancer aborts fetches of chunks it no longer needs).
				if code, _, _ := strings.Cut(s, " "); strings.Contains(s, " /ng/") && code != "200" && code != "206" && code != "304" && code != "408" {
					t.Errorf("zvfserve answered %s", s)
				}
			}
		})
	}
	// docs/performance.md reports these numbers; the benchmark's replay
	// (BenchmarkMultilodBytes/…/view=default) must count the same bytes.
	for _, c := range []struct {
		name string
		st   *zvf.Store
		want float64 // at least this many times fewer bytes
	}{{"demo", storeNamed(t, stores, "meshes"), 2}, {"connectome", connectome, 5}} {
		legacy, multilod := meshBytes[c.name+" with legacy meshes"], meshBytes[c.name]
		if legacy == 0 || multilod == 0 {
			continue
		}
		t.Logf("%s meshes at Neuroglancer's default view: legacy %d bytes, multilod %d bytes (%.1f× fewer)",
			c.name, legacy, multilod, float64(legacy)/float64(multilod))
		if float64(legacy) < c.want*float64(multilod) {
			t.Errorf("%s: multilod meshes took %d bytes, legacy %d: want %g× fewer", c.name, multilod, legacy, c.want)
		}
		// The coarse LODs draw about what the full meshes draw: no
		// neurite collapses away.
		if d, full := meshDrawn[c.name], meshDrawn[c.name+" with legacy meshes"]; 10*d < 9*full {
			t.Errorf("%s: multilod meshes light %d pixels, legacy meshes %d", c.name, d, full)
		}
		// The demo's four stores open on their annotations' box; the
		// meshes' state on the meshes' box; every segment is drawn at
		// LOD 0 at both.
		rl, rm := replayMeshView(t, srv.Handler(), c.st, stateMeshView(t, srv.Handler(), c.st.Name()))
		if rl != legacy || rm != multilod {
			t.Errorf("%s: the replay counts legacy %d and multilod %d bytes, the browser fetched %d and %d", c.name, rl, rm, legacy, multilod)
		}
	}
}

// newBrowser starts headless Chromium (exe) for the test, WebGL on
// SwiftShader, in a 1000 × 700 window.
func newBrowser(t *testing.T, exe string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1000, 700),
		chromedp.Flag("use-angle", "swiftshader"), chromedp.Flag("enable-unsafe-swiftshader", true),
		chromedp.Flag("disable-gpu", false), chromedp.Flag("ignore-gpu-blocklist", true),
		chromedp.Flag("disable-component-update", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	bctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	// The first action starts the browser and ties it to its context: this
	// one, not a test case's (whose end would close it).
	if err := chromedp.Do(bctx); err != nil {
		t.Fatal(err)
	}
	return bctx
}

func slicesContainsFunc(s []string, f func(string) bool) bool {
	for _, v := range s {
		if f(v) {
			return true
		}
	}
	return false
}

// litPixels counts the pixels of a screenshot of the 3-D panel that are
// not its black background, outside the corners where Neuroglancer writes
// the panel's controls.
func litPixels(t *testing.T, b []byte) (int, int) {
	t.Helper()
	return countPixels(t, b, func(x, y int, r image.Rectangle, cr, cg, cb uint32) bool {
		if y-r.Min.Y < 160 && (x-r.Min.X < 240 || r.Max.X-x < 48) {
			return false
		}
		return cr > 24 || cg > 24 || cb > 24
	})
}

// colouredPixels counts the pixels whose channels differ (a colour map's
// colours, not the grey around a volume or the black of an empty panel).
func colouredPixels(t *testing.T, b []byte) int {
	t.Helper()
	n, _ := countPixels(t, b, func(_, _ int, _ image.Rectangle, cr, cg, cb uint32) bool {
		return max(cr, cg, cb)-min(cr, cg, cb) > 40
	})
	return n
}

// countPixels counts the pixels of a PNG screenshot that count holds, given
// their place in the image's bounds and their 8-bit channels, and the
// pixels in all.
func countPixels(t *testing.T, b []byte, count func(x, y int, r image.Rectangle, cr, cg, cb uint32) bool) (int, int) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	r := img.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if cr, cg, cb, _ := img.At(x, y).RGBA(); count(x, y, r, cr>>8, cg>>8, cb>>8) {
				n++
			}
		}
	}
	return n, r.Dx() * r.Dy()
}

// saveShot keeps a screenshot under ZVFSERVE_ARTIFACTS (else the test's
// temporary folder).
func saveShot(t *testing.T, name string, b []byte) {
	t.Helper()
	dir := os.Getenv("ZVFSERVE_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// pollNavigated is chromedp.Poll on a page just navigated to. A poll can
// land in the execution context of the page the navigation replaced
// ("Cannot find context", -32000, seen under load, after either of the
// test's navigations): it polls again, in the new one.
func pollNavigated[T any](ctx context.Context, expr string) (T, error) {
	var v T
	var err error
	for try := 0; try < 3; try++ {
		v, err = chromedp.Run(ctx, chromedp.Poll[T](expr))
		if err == nil || !strings.Contains(err.Error(), "-32000") {
			break
		}
	}
	return v, err
}
