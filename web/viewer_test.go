package web_test

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/web"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/demo"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
)

func chromium(t *testing.T) string {
	for _, p := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("ZVFSERVE_REQUIRE_BROWSER") == "1" {
		t.Fatal("ZVFSERVE_REQUIRE_BROWSER=1 but no Chromium on PATH (apt-get install chromium)")
	}
	t.Skip("Chromium is not installed; apt-get install chromium to run the browser test")
	return ""
}

func demoServer(t *testing.T, token string) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(demoHandler(t, token))
	t.Cleanup(ts.Close)
	return ts
}

// demoHandler is the API with the viewer over the demo stores.
func demoHandler(t *testing.T, token string) http.Handler {
	t.Helper()
	ctx := context.Background()
	mem, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Close() })
	infos, err := demo.Build(ctx, mem, demo.Options{Seed: 1, Scale: 1})
	if err != nil {
		t.Fatal(err)
	}
	ch := cache.New(256 << 20)
	var stores []*zvf.Store
	for _, in := range infos {
		s, err := zvf.Open(ctx, storage.Sub(mem, in.Prefix), zvf.Options{Name: in.Name, Cache: ch})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	srv, err := api.New(api.Options{Stores: stores, Cache: ch, UI: web.Handler(), Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return srv.Handler()
}

// nonBackground counts pixels that differ from the canvas clear colour.
func nonBackground(t *testing.T, pngBytes []byte) (int, int) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(pngBytes))
	if err != nil {
		t.Fatal(err)
	}
	b := img.Bounds()
	n := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if absDiff(r>>8, 13) > 12 || absDiff(g>>8, 15) > 12 || absDiff(bl>>8, 18) > 12 {
				n++
			}
		}
	}
	return n, b.Dx() * b.Dy()
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

func newBrowser(t *testing.T) *browser {
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
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancelT)
	b := &browser{t: t, ctx: ctx}
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
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(45*time.Second))); err != nil {
		status, _ := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS("#status")))
		b.mu.Lock()
		defer b.mu.Unlock()
		b.t.Fatalf("waiting for %s: %v (status line: %q, console: %v)", expr, err, status, b.problems)
	}
}

func (b *browser) eval(expr string) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[any](expr)); err != nil {
		b.t.Fatalf("%s: %v", expr, err)
	}
}

func (b *browser) shot(name string) []byte {
	b.t.Helper()
	// Let the next animation frame draw.
	b.eval(`new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))`)
	png, err := chromedp.Run(b.ctx, chromedp.Screenshot(chromedp.CSS("#view")))
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

// noProblems fails the test if the console reported errors or warnings.
func (b *browser) noProblems() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.problems) > 0 {
		b.t.Fatalf("browser console reported problems:\n%s", strings.Join(b.problems, "\n"))
	}
}

func TestViewerInBrowser(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	ts := demoServer(t, "")
	ctx, wait, eval, shot := b.ctx, b.wait, b.eval, b.shot

	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/#store=cells")); err != nil {
		t.Fatal(err)
	}
	wait(`window.__zvf && window.__zvf.ready === true`)
	first := shot("viewer-cells.png")
	n, total := nonBackground(t, first)
	if n < total/200 {
		t.Fatalf("canvas shows almost nothing: %d of %d pixels differ from the background", n, total)
	}
	t.Logf("cells: %d of %d pixels drawn", n, total)

	// Level selection issues a level=1 request and changes the picture.
	eval(`(() => { const s = document.getElementById('level'); s.value = '1'; s.dispatchEvent(new Event('change')); })()`)
	wait(`window.__zvf.requests.some(u => u.includes('level=1')) && window.__zvf.loads >= 2`)
	lvl1 := shot("viewer-level1.png")
	if bytes.Equal(lvl1, first) {
		t.Fatal("selecting level 1 changed nothing on the canvas")
	}

	// Box query: a request with the box, a count, a visible box.
	eval(`document.getElementById('bmin').value = '0,0,0'; document.getElementById('bmax').value = '400,400,300'; document.getElementById('bquery').click()`)
	wait(`document.getElementById('bresult').textContent.includes('vertices')`)
	wait(`window.__zvf.requests.some(u => u.includes('min=0,0,0') && u.includes('max=400,400,300'))`)
	boxShot := shot("viewer-box.png")
	if bytes.Equal(boxShot, lvl1) {
		t.Fatal("the box query changed nothing on the canvas")
	}

	// Object lookup: object and manifest requests, a highlighted object.
	eval(`document.getElementById('oid').value = '3'; document.getElementById('oquery').click()`)
	wait(`document.getElementById('oresult').textContent.startsWith('object 3')`)
	wait(`window.__zvf.requests.some(u => u.includes('/objects/3/manifest'))`)
	if !strings.Contains(mustText(t, ctx, "#manifest"), "blocks") {
		t.Fatal("manifest panel is empty")
	}
	objShot := shot("viewer-object.png")
	if bytes.Equal(objShot, boxShot) {
		t.Fatal("the object lookup changed nothing on the canvas")
	}

	// The view is in the URL: reloading it reproduces the object and box.
	loc, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.hash`))
	if err != nil || !strings.Contains(loc, "obj=3") || !strings.Contains(loc, "box=") {
		t.Fatalf("hash %q does not carry the view (%v)", loc, err)
	}

	// Another geometry: meshes draw faces.
	eval(`(() => { const s = document.getElementById('store'); s.value = 'meshes'; s.dispatchEvent(new Event('change')); })()`)
	wait(`window.__zvf.requests.some(u => u.includes('stores/meshes/bbox'))`)
	wait(`document.getElementById('status').textContent.startsWith('meshes')`)
	if m, _ := nonBackground(t, shot("viewer-meshes.png")); m < total/500 {
		t.Fatalf("meshes: only %d pixels drawn", m)
	}

	// Frame time on this machine's renderer (SwiftShader: the CPU runs the
	// vertex shader and rasteriser). docs/viewer.md records the numbers and
	// why a million points are not interactive here; the bound below only
	// catches a regression by an order of magnitude.
	for _, n := range []int{100_000, 1_000_000} {
		eval(fmt.Sprintf(`window.__zvf.loadSynthetic(%d)`, n))
		ms, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`window.__zvf.measureFrames(3)`))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d points: %.1f ms per frame (SwiftShader software renderer)", n, ms)
		if limit := float64(n) / 100; ms > limit { // 10 µs a point
			t.Fatalf("a frame of %d points took %.0f ms (over %.0f)", n, ms, limit)
		}
	}

	b.noProblems()
}

func mustText(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestViewerTokenInBrowser: against a server started with a token, the
// page loads, asks for the token, asks again when it is wrong, then sends
// it as a bearer header on every data request and draws; a reload in the
// same tab does not ask again.
func TestViewerTokenInBrowser(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	const token = "s3cret-token"
	var mu sync.Mutex
	seen := map[string]int{} // "path status auth-ok"
	h := demoHandler(t, token)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusRecorder{ResponseWriter: w, status: 200}
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

	b.navigate(ts.URL + "/#store=cells")
	b.wait(`!document.getElementById('tokenform').hidden`)
	b.eval(`document.getElementById('token').value = 'wrong'; document.querySelector('#tokenform button').click()`)
	b.wait(`!document.getElementById('tokenform').hidden && document.getElementById('tokenmsg').textContent.includes('did not accept')`)
	if ready, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`window.__zvf.ready === true`)); err != nil || ready {
		t.Fatalf("the viewer loaded data without the token (%v)", err)
	}
	b.eval(`document.getElementById('token').value = '` + token + `'; document.querySelector('#tokenform button').click()`)
	b.wait(`window.__zvf && window.__zvf.ready === true`)
	if n, total := nonBackground(t, b.shot("viewer-token.png")); n < total/200 {
		t.Fatalf("canvas shows almost nothing with the token: %d of %d pixels", n, total)
	}
	kept, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`sessionStorage.getItem('zvfserve-token')`))
	if err != nil || kept != token {
		t.Fatalf("session storage holds %q (%v)", kept, err)
	}

	// A reload in the same tab uses the kept token without asking.
	b.navigate(ts.URL + "/#store=cells")
	b.wait(`window.__zvf && window.__zvf.ready === true`)
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

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}
