package web_test

import (
	"context"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/web"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// bigIDs are the object ids of the "ids" store, by manifest row: past
// 2^31 (an int32 wraps it negative), past 2^32 (its low 32 bits are 5),
// past 2^53 (a JavaScript Number rounds it), the largest int64s, two of
// them a Number cannot tell apart, and 5, whose low 32 bits are those of
// 2^32 + 5.
var bigIDs = []int64{1<<31 + 1, 1<<32 + 5, 1<<53 + 3, 1<<63 - 1, 5, 1<<63 - 2}

// serialOf is the "serial" attribute of the ids store's vertex i: odd
// and past 2^53, so a Number rounds every one.
func serialOf(i int) int64 { return 1<<55 + 2*int64(i) + 1 }

// idStore writes the "ids" store: a ZVF 0.9.2 point cloud whose object
// index names objects by id (vlen_manifests_v2): object r is a cube of 8
// points 12 apart around (100 r, 0, 0), and objects 2 and 3 also share
// one point, at (250, 60, 0) (vertices 48 and 49); each vertex has an
// int64 attribute, serial (serialOf). It returns the folder and each
// object's points, by row.
func idStore(t *testing.T) (string, [][][3]float32) {
	t.Helper()
	ctx := context.Background()
	var pos []float32
	var oid []int64
	pts := make([][][3]float32, len(bigIDs))
	add := func(row int, p [3]float32) {
		pos = append(pos, p[:]...)
		oid = append(oid, int64(row))
		pts[row] = append(pts[row], p)
	}
	for row := range bigIDs {
		for k := range 8 {
			add(row, [3]float32{float32(100*row + 12*(k&1)), float32(12 * (k >> 1 & 1)), float32(12 * (k >> 2))})
		}
	}
	add(2, [3]float32{250, 60, 0})
	add(3, [3]float32{250, 60, 0})
	serial := make([]int64, len(oid))
	for i := range serial {
		serial[i] = serialOf(i)
	}
	mem := memStorage(t)
	pc := &writer.PointCloud{Positions: pos, ObjectIDs: oid, Attributes: []writer.Attribute{writer.Int64Attribute("serial", 1, serial)}}
	if _, err := writer.WritePoints(ctx, mem, "ids", pc, writer.Options{ChunkShape: []float64{200, 200, 200}}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "ids.zarrvectors")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := zvftest.To09(ctx, storage.Sub(mem, "ids"), zvftest.Store(t, dir), zvftest.To09Options{}); err != nil {
		t.Fatal(err)
	}
	zvftest.WriteObjectIDs(t, dir, bigIDs)
	return dir, pts
}

// TestViewerObjectIDsInBrowser: object ids past 2^31 and 2^53 are shown,
// looked up, kept in the URL and highlighted exactly: the viewer never
// names an object by a wrapped or rounded id.
func TestViewerObjectIDsInBrowser(t *testing.T) {
	dir, pts := idStore(t)
	ch := newChrome(t)
	c := cache.New(64 << 20)
	s := apitest.Open(t, dir, "ids", c)
	// A fixture whose objects have a uint64 segment_id past 2^53.
	skel := apitest.Open(t, "../testdata/zvf-0.9/skeleton_v09.zarrvectors", "skeleton_v09", c)
	srv := apitest.New(t, api.Options{Stores: []*zvf.Store{s, skel}, Cache: c, UI: web.Handler(web.Options{})})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	b := ch.tab(t, 1280, 800)
	b.navigate(ts.URL + "/?stores=ids&size=3")
	b.settle()
	// pickAt clicks on a point of object row (not the shared one) that a
	// click there picks, and returns where it clicked.
	pickAt := func(row int) (x, y float64) {
		t.Helper()
		for _, p := range pts[row][:8] {
			var at struct{ X, Y, W float64 }
			b.value(`__zvf.project([`+fmtPoint(p)+`])`, &at)
			b.eval(`document.getElementById('pickclose').click()`)
			b.pick(at.X, at.Y)
			var picked struct{ Pos [3]float32 }
			b.value(`__zvf.picked()`, &picked)
			// Drawn from quantized coordinates: within a unit (the
			// points are 12 apart).
			if d := math.Max(math.Abs(float64(picked.Pos[0]-p[0])), math.Max(math.Abs(float64(picked.Pos[1]-p[1])), math.Abs(float64(picked.Pos[2]-p[2])))); d < 1 {
				return at.X, at.Y
			}
			t.Logf("clicked %v at %.1f,%.1f; picked %v: %q", p, at.X, at.Y, picked.Pos, b.text("#picked"))
		}
		t.Fatalf("no point of object %d could be picked", bigIDs[row])
		return 0, 0
	}
	for _, row := range []int{0, 1, 2, 5} {
		id := strconv.FormatInt(bigIDs[row], 10)
		x, y := pickAt(row)
		text := b.text("#picked")
		if !strings.Contains(text, "object "+id+"\n") {
			t.Errorf("picked a point of object %s: %q", id, text)
		}
		var field string
		b.value(`document.getElementById('oid').value`, &field)
		if field != id {
			t.Errorf("picked object %s; the Find field says %q", id, field)
		}
		// Lit: the point picked is drawn in the highlight colour, a
		// point of every other object is not (object 5 neither, whose
		// low 32 bits are those of 2^32 + 5).
		if n := near(t, b.clip(x, y, 6), [3]int{255, 77, 224}, 60); n == 0 {
			t.Errorf("object %s is not highlighted where it was picked", id)
		}
		for other := range bigIDs {
			if other == row {
				continue
			}
			var at struct{ X, Y float64 }
			b.value(`__zvf.project([`+fmtPoint(pts[other][0])+`])`, &at)
			if n := near(t, b.clip(at.X, at.Y, 6), [3]int{255, 77, 224}, 60); n > 0 {
				t.Errorf("picked object %s; object %d is highlighted too", id, bigIDs[other])
			}
		}
	}
	// Two objects past 2^53 at one point: the pick box lists both, each
	// by its exact id, with its exact serial.
	sharedPick := []string{"(object " + strconv.FormatInt(bigIDs[2], 10) + ")\nserial = " + strconv.FormatInt(serialOf(48), 10) + "\n",
		"(object " + strconv.FormatInt(bigIDs[3], 10) + ")\nserial = " + strconv.FormatInt(serialOf(49), 10)}
	shared := pts[2][8]
	var at struct{ X, Y float64 }
	b.value(`__zvf.project([`+fmtPoint(shared)+`])`, &at)
	b.eval(`document.getElementById('pickclose').click()`)
	b.pick(at.X, at.Y)
	text := b.text("#picked")
	for _, w := range sharedPick {
		if !strings.Contains(text, w) {
			t.Errorf("the shared point's pick box %q lacks %q", text, w)
		}
	}
	// The same in a browser whose JSON.parse gives a reviver no source
	// text (Firefox and Safari before 2025): the ids come from the binary
	// answer instead (before, they were listed rounded, marked ≈).
	nb := ch.tab(t, 1280, 800)
	if _, err := chromedp.Run(nb.ctx, func(ctx context.Context, tg *chromedp.Target) (bool, error) {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `{ const parse = JSON.parse;
			JSON.parse = function (text, reviver) { return parse(text, reviver && function (k, v) { return reviver.call(this, k, v); }); }; }`})
		return true, err
	}); err != nil {
		t.Fatal(err)
	}
	nb.navigate(ts.URL + "/?stores=ids&size=3")
	nb.settle()
	nb.value(`__zvf.project([`+fmtPoint(shared)+`])`, &at)
	nb.pick(at.X, at.Y)
	text = nb.text("#picked")
	for _, w := range sharedPick {
		if !strings.Contains(text, w) || strings.Contains(text, "≈") {
			t.Errorf("without JSON source text, the shared point's pick box %q lacks %q", text, w)
		}
	}
	findSegment(t, nb, ts.URL, "≈720576063983877000")
	nb.noProblems()
	// Find, typed: the request, the result, the URL name the exact id,
	// and the URL reopens it.
	for _, row := range []int{2, 5} {
		id := strconv.FormatInt(bigIDs[row], 10)
		b.eval(`document.getElementById('olayer').value = 'ids'; document.getElementById('oid').value = '` + id + `'; document.getElementById('oquery').click()`)
		b.wait(`document.getElementById('oresult').textContent.startsWith('object ` + id + ` · ids · level 0 · ` + strconv.Itoa(len(pts[row])) + ` vertices')`)
		var asked bool
		b.value(`__zvf.requests.some((r) => r.kind === 'object' && r.url.includes('/objects/`+id+`?'))`, &asked)
		if !asked {
			t.Errorf("Find %s did not ask for /objects/%s", id, id)
		}
		if q := b.search(); !strings.Contains(q, "obj=ids:"+id) {
			t.Errorf("found object %s; the URL says %q", id, q)
		}
	}
	id := strconv.FormatInt(bigIDs[3], 10)
	b.navigate(ts.URL + "/?stores=ids&obj=ids:" + id)
	b.wait(`document.getElementById('oresult').textContent.startsWith('object ` + id + ` · ids · level 0 · 9 vertices')`)
	var field string
	b.value(`document.getElementById('oid').value`, &field)
	if q := b.search(); field != id || !strings.Contains(q, "obj=ids:"+id) {
		t.Errorf("opened obj=ids:%s: the Find field says %q, the URL %q", id, field, q)
	}
	findSegment(t, b, ts.URL, "720576063983876970")
	b.noProblems()
}

// findSegment finds object 1 of skeleton_v09 and checks that its
// segment_id (720576063983876970) is shown as want: every digit, or
// marked ≈ where the browser parsed it rounded (before: 720576100000000000,
// cut to seven digits like a float, unmarked).
func findSegment(t *testing.T, b *browser, base, want string) {
	t.Helper()
	b.navigate(base + "/?stores=skeleton_v09")
	b.settle()
	b.eval(`document.getElementById('olayer').value = 'skeleton_v09'; document.getElementById('oid').value = '1'; document.getElementById('oquery').click()`)
	b.wait(`document.getElementById('oresult').textContent.startsWith('object 1 · skeleton_v09')`)
	var cells []string
	b.value(`[...document.querySelectorAll('#oattrs td')].map((td) => td.textContent)`, &cells)
	if len(cells) != 2 || cells[0] != "segment_id" || cells[1] != want {
		t.Errorf("object 1 of skeleton_v09: attributes %q; want segment_id %s", cells, want)
	}
}

func fmtPoint(p [3]float32) string {
	var s []string
	for _, v := range p {
		s = append(s, strconv.FormatFloat(float64(v), 'g', -1, 32))
	}
	return strings.Join(s, ",")
}

// clip is a screenshot of the (2r+1)-pixel square of the view centred on
// CSS pixel (x, y) of the canvas.
func (b *browser) clip(x, y, r float64) []byte {
	b.t.Helper()
	b.await(`new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))`)
	var v struct{ Left, Top float64 }
	b.value(`(() => { const r = document.getElementById('view').getBoundingClientRect(); return {Left: r.left, Top: r.top}; })()`, &v)
	png, err := chromedp.Run(b.ctx, func(ctx context.Context, tg *chromedp.Target) ([]byte, error) {
		res, err := cdp.Call(ctx, tg, page.CaptureScreenshot, page.CaptureScreenshotParams{
			Clip: &page.Viewport{X: v.Left + x - r, Y: v.Top + y - r, Width: 2*r + 1, Height: 2*r + 1, Scale: 1}})
		if err != nil {
			return nil, err
		}
		return res.Data, nil
	})
	if err != nil {
		b.t.Fatal(err)
	}
	return png
}
