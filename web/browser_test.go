package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
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

// noCache turns the tab's HTTP cache off: the viewer's data URLs name
// the store version and are immutable, so a test that must see its
// requests reach the server (faults, holds) cannot take them from what
// an earlier test on the same browser left in its cache.
func (b *browser) noCache() {
	b.t.Helper()
	if _, err := chromedp.Call(b.ctx, network.Enable, network.EnableParams{}); err != nil {
		b.t.Fatal(err)
	}
	if _, err := chromedp.Call(b.ctx, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: true}); err != nil {
		b.t.Fatal(err)
	}
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

// await evaluates expr, a promise, and waits for it to settle.
func (b *browser) await(expr string) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[any](expr, chromedp.EvalAwaitPromise)); err != nil {
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
	b.await(`new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))`)
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
