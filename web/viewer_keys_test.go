package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// key sends one key, with modifiers, to the focused element.
func (b *browser) key(k string, mods ...chromedp.KeyOption) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, chromedp.KeyEvent(k, mods...)); err != nil {
		b.t.Fatal(err)
	}
}

// testKeyboardView: with the view focused (Tab reaches it), the arrow
// keys orbit, shift and the arrows pan, + and - zoom, and the URL follows,
// as the mouse does; the page does not scroll under them.
func testKeyboardView(t *testing.T, e *viewerEnv) {
	b := e.open(t, "stores=cells")
	b.eval(`document.getElementById('view').focus()`)
	var c0, c camera
	b.value(`__zvf.camera()`, &c0)
	step := func(what string, k string, mods ...chromedp.KeyOption) {
		t.Helper()
		b.value(`__zvf.camera()`, &c0)
		b.key(k, mods...)
		b.value(`__zvf.camera()`, &c)
		t.Logf("%s: yaw %.3f→%.3f pitch %.3f→%.3f dist %.1f→%.1f target %v→%v", what, c0.Yaw, c.Yaw, c0.Pitch, c.Pitch, c0.Dist, c.Dist, c0.Target, c.Target)
	}
	step("left", kb.ArrowLeft)
	if !(c.Yaw != c0.Yaw && c.Pitch == c0.Pitch && c.Dist == c0.Dist) {
		t.Errorf("ArrowLeft on the view: yaw %g → %g, pitch %g → %g; want an orbit about the vertical", c0.Yaw, c.Yaw, c0.Pitch, c.Pitch)
	}
	step("up", kb.ArrowUp)
	if !(c.Pitch != c0.Pitch && c.Yaw == c0.Yaw) {
		t.Errorf("ArrowUp on the view: pitch %g → %g; want a tilt", c0.Pitch, c.Pitch)
	}
	step("zoom in", "+")
	if !(c.Dist < c0.Dist) {
		t.Errorf("+ on the view: distance %g → %g; want closer", c0.Dist, c.Dist)
	}
	step("zoom out", "-")
	if !(c.Dist > c0.Dist) {
		t.Errorf("- on the view: distance %g → %g; want further", c0.Dist, c.Dist)
	}
	step("pan", kb.ArrowRight, chromedp.KeyModifiers(chromedp.ModifierShift))
	moved := math.Abs(c.Target[0]-c0.Target[0]) + math.Abs(c.Target[1]-c0.Target[1]) + math.Abs(c.Target[2]-c0.Target[2])
	if !(moved > 0 && c.Yaw == c0.Yaw && c.Dist == c0.Dist) {
		t.Errorf("shift+ArrowRight on the view: target moved %g, yaw %g → %g; want a pan", moved, c0.Yaw, c.Yaw)
	}
	var scrolled float64
	b.value(`document.scrollingElement.scrollTop + document.getElementById('panel').scrollTop`, &scrolled)
	if scrolled != 0 {
		t.Errorf("the arrow keys scrolled the page by %g px", scrolled)
	}
	// The URL follows the camera once it rests.
	b.wait(`new URLSearchParams(location.search).get('cam') !== null && Math.abs(+new URLSearchParams(location.search).get('cam').split(',')[2] - __zvf.camera().dist) < 1e-3 * __zvf.camera().dist`)
	if label := b.text("#status"); strings.Contains(label, "error") {
		t.Errorf("status line %q", label)
	}
	var aria string
	b.value(`document.getElementById('view').getAttribute('aria-label')`, &aria)
	if !strings.Contains(aria, "arrow keys") {
		t.Errorf("the view's label %q does not tell a keyboard user its keys", aria)
	}
	b.settle()
	b.noProblems()
}

// testEnterRuns: an object id or a box corner typed and Enter pressed runs
// Find or the box query, as a user expects of a one-line field.
func testEnterRuns(t *testing.T, e *viewerEnv) {
	b := e.open(t, "stores=cells,axons")
	b.eval(`document.getElementById('olayer').value = 'axons'`)
	if err := chromedp.Do(b.ctx, chromedp.SendKeys(chromedp.CSS("#oid"), "3"+kb.Enter)); err != nil {
		t.Fatal(err)
	}
	b.wait(`document.getElementById('oresult').textContent.startsWith('object 3 · axons · level 0')`)
	if err := chromedp.Do(b.ctx, chromedp.SendKeys(chromedp.CSS("#bmin"), "0,0,0")); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(b.ctx, chromedp.SendKeys(chromedp.CSS("#bmax"), "400,400,300"+kb.Enter)); err != nil {
		t.Fatal(err)
	}
	b.wait(`document.querySelectorAll('#bresult tr').length === 3`)
	if s := b.search(); !strings.Contains(s, "obj=axons%3A3") && !strings.Contains(s, "obj=axons:3") {
		t.Errorf("URL %q lacks the object found", s)
	}
	b.settle()
	b.noProblems()
}

// testControlNames: every control of the page has an accessible name of
// its own (as Chromium computes it for a screen reader), so with several
// layers each card's controls say which layer they set.
func testControlNames(t *testing.T, e *viewerEnv) {
	b := e.open(t, "stores=cells,axons,skeletons")
	tree, err := chromedp.Run(b.ctx, func(ctx context.Context, tg *chromedp.Target) ([]*accessibility.Node, error) {
		res, err := cdp.Call(ctx, tg, accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{})
		if err != nil {
			return nil, err
		}
		return res.Nodes, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	controls := map[string]bool{"checkbox": true, "combobox": true, "slider": true, "textbox": true, "button": true, "spinbutton": true, "ColorWell": true}
	seen := map[string]int{}
	for _, n := range tree {
		if n.Ignored || n.Role == nil || n.Name == nil {
			continue
		}
		var role, name string
		_ = json.Unmarshal(n.Role.Value, &role)
		_ = json.Unmarshal(n.Name.Value, &name)
		if n.ChromeRole != nil {
			var cr string
			if json.Unmarshal(n.ChromeRole.Value, &cr) == nil && cr == "ColorWell" {
				role = cr
			}
		}
		if !controls[role] {
			continue
		}
		if strings.TrimSpace(name) == "" {
			t.Errorf("a %s has no name", role)
		}
		seen[role+" "+strings.TrimSpace(name)]++
	}
	for k, n := range seen {
		if n > 1 {
			t.Errorf("%d controls are named %q: a screen reader cannot tell which layer each sets", n, k)
		}
	}
	t.Logf("%d named controls", len(seen))
	b.noProblems()
}

// testBoxAfterFilter: a box query's rows and hits follow the layers'
// selection: a filter applied after the query asks again, and the row
// gives the filtered count (before: the unfiltered count stayed, and its
// hits drawn white included vertices the filter hides).
func testBoxAfterFilter(t *testing.T, e *viewerEnv) {
	b := e.open(t, "stores=cells")
	b.eval(`document.getElementById('bmin').value = '0,0,0'; document.getElementById('bmax').value = '400,400,300'; document.getElementById('bquery').click()`)
	b.wait(`document.querySelectorAll('#bresult tr').length === 2`)
	var all, neurons struct{ Count int }
	b.await(`__zvf.net.json("api/v1/stores/cells/count?min=0,0,0&max=400,400,300&level=0").then((r) => (window.__all = r))`)
	b.value(`window.__all`, &all)
	b.await(`__zvf.net.json("api/v1/stores/cells/count?min=0,0,0&max=400,400,300&level=0&filter=" + encodeURIComponent("cell_type = 'neuron'")).then((r) => (window.__neurons = r))`)
	b.value(`window.__neurons`, &neurons)
	if all.Count == neurons.Count || neurons.Count == 0 {
		t.Fatalf("the box holds %d cells, %d neurons: this test needs a filter that changes the count", all.Count, neurons.Count)
	}
	row := func() string { return b.text(`#bresult tr:nth-child(2) td:nth-child(2)`) }
	if got := row(); got != fmtInt(all.Count) {
		t.Fatalf("box row %q; want %s", got, fmtInt(all.Count))
	}
	b.eval(`(() => { const f = document.querySelector('.layer[data-store="cells"] .filter'); f.value = "cell_type = 'neuron'"; f.dispatchEvent(new Event('change')); })()`)
	b.wait(`location.search.includes('f.cells=')`)
	b.settle()
	b.wait(`document.querySelectorAll('#bresult tr').length === 2`)
	if got := row(); got != fmtInt(neurons.Count) {
		t.Errorf("after the filter, the box row says %q; want the %s neurons the layer draws there", got, fmtInt(neurons.Count))
	}
	b.noProblems()
}

// fmtInt is n with thousands separated as the page shows them (en).
func fmtInt(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// testKeyboardPick: Enter on the focused view picks the drawn vertex
// nearest the middle of the view (a keyboard user cannot click one), and
// the pick box is a live region, so a screen reader reads what was picked.
func testKeyboardPick(t *testing.T, e *viewerEnv) {
	b := e.open(t, "stores=axons")
	var at struct {
		X, Y float64
		Pos  [3]float32
	}
	b.value(`__zvf.vertexOnScreen("axons")`, &at)
	// Centre the view near that vertex, a few pixels off.
	b.eval(fmt.Sprintf(`__zvf.setCamera({target: [%g + 3, %g, %g]})`, at.Pos[0], at.Pos[1], at.Pos[2]))
	b.settle()
	b.eval(`document.getElementById('view').focus()`)
	b.key(kb.Enter)
	b.wait(`document.getElementById('picked').textContent.startsWith('layer axons') && !document.getElementById('picked').textContent.includes('loading')`)
	// What was picked is read out: the page's live region says it (once
	// the attributes are in; testAnnouncements has the sequence).
	var live struct{ Role, Live, Text string }
	b.value(`(() => { const a = document.getElementById('announce'); return {role: a.getAttribute('role'), live: a.getAttribute('aria-live'), text: a.textContent}; })()`, &live)
	if live.Role != "status" || live.Live != "polite" || !strings.HasPrefix(live.Text, "picked: layer axons") {
		t.Errorf("the live region (role %q, aria-live %q) says %q; want a polite one saying what was picked", live.Role, live.Live, live.Text)
	}
	b.noProblems()
}

// testEscapeDrawBox: Escape leaves Draw box, so the next drag orbits
// instead of drawing (and querying) a box the user changed their mind
// about.
func testEscapeDrawBox(t *testing.T, e *viewerEnv) {
	b := e.open(t, "stores=cells")
	b.eval(`document.getElementById('bdraw').click()`)
	b.eval(`document.getElementById('view').focus()`)
	b.key(kb.Escape)
	var pressed string
	b.value(`document.getElementById('bdraw').getAttribute('aria-pressed')`, &pressed)
	if pressed != "false" {
		t.Errorf("after Escape, Draw box is aria-pressed=%q; want false", pressed)
	}
	var c0, c camera
	b.value(`__zvf.camera()`, &c0)
	b.drag(400, 300, 500, 350)
	b.value(`__zvf.camera()`, &c)
	if c.Yaw == c0.Yaw || b.text("#bresult") != "" || strings.Contains(b.search(), "box=") {
		t.Errorf("a drag after Escape: yaw %g → %g, box rows %q, URL %q; want an orbit and no box", c0.Yaw, c.Yaw, b.text("#bresult"), b.search())
	}
	b.noProblems()
}
