package web_test

import (
	"fmt"
	"strings"
	"testing"
)

// heard installs an observer of every live region of the page (what a
// screen reader reads out as it changes) and returns the expression of
// what they said since, in order.
func heard(b *browser) string {
	b.eval(`(() => {
		window.__heard = [];
		const live = document.querySelectorAll('[aria-live]:not([aria-live="off"]), [role="status"], [role="alert"], [role="log"]');
		for (const el of live) new MutationObserver(() => { if (el.textContent) window.__heard.push(el.textContent); }).observe(el, { childList: true, characterData: true, subtree: true });
	})()`)
	return `window.__heard`
}

// testAnnouncements: the status line was the page's live region
// (role=status), and the page rewrites it on every frame while tiles load
// (tiles to load, megabytes fetched): a screen reader read out progress
// chatter all along. What is announced is what a user waits for: the
// view loaded, with its count, once; a box query's counts; a pick; an
// error.
func testAnnouncements(t *testing.T, e *viewerEnv) {
	// A budget that holds the layer to coarse levels until the view zooms.
	b := e.open(t, "stores=cells&budget=10000")
	said := heard(b)
	// Zoom into a corner: level-0 tiles load, frame after frame.
	b.eval(`__zvf.setCamera({yaw: 0.6, pitch: 0.5, dist: 150, target: [850, 850, 600]})`)
	b.settle()
	var requests int
	b.value(`__zvf.requests.filter((r) => r.kind === 'tile').length`, &requests)
	var got []string
	b.value(said, &got)
	var drawn map[string]int
	b.value(`__zvf.drawn`, &drawn)
	want := fmt.Sprintf("%s vertices drawn in 1 of 1 layers", commas(drawn["cells"]))
	if len(got) != 1 || got[0] != want {
		t.Errorf("while the view loaded (%d tile requests in all) the live regions said %d things %q; want once %q", requests, len(got), got, want)
	}
	// A box query: its answer, with its count.
	b.eval(`document.getElementById('bmin').value = '0,0,0'; document.getElementById('bmax').value = '400,400,300'; document.getElementById('bquery').click()`)
	b.wait(`document.querySelectorAll('#bresult tr').length === 2`)
	// A pick: what was picked.
	var at struct{ X, Y float64 }
	b.value(`__zvf.vertexOnScreen('cells')`, &at)
	b.pick(at.X, at.Y)
	b.wait(`window.__heard.some((s) => s.startsWith('picked: '))`)
	b.value(said, &got)
	box := fmt.Sprintf("box query: cells %s vertices at level 0", commas(inBox(e.sc.Cells.Positions, [3]float32{0, 0, 0}, [3]float32{400, 400, 300})))
	if len(got) != 3 || got[1] != box || !strings.HasPrefix(got[2], "picked: layer cells · level ") || !strings.Contains(got[2], "; object ") {
		t.Errorf("after a box query and a pick the live regions said %q; want %q, %q and the pick with its object", got, want, box)
	}
	// An error: an object the store does not have.
	b.eval(`document.getElementById('olayer').value = 'cells'; document.getElementById('oid').value = '987654321'; document.getElementById('oquery').click()`)
	b.wait(`window.__heard.length > 3`)
	b.value(said, &got)
	if len(got) != 4 || !strings.HasPrefix(got[3], "object 987654321 in cells: 404") {
		t.Errorf("after looking up a missing object the live regions said %q; want its 404 last", got)
	}
	var hooked []string
	b.value(`__zvf.announced`, &hooked)
	if strings.Join(hooked, "\n") != strings.Join(got, "\n") && !strings.HasSuffix(strings.Join(hooked, "\n"), strings.Join(got, "\n")) {
		t.Errorf("__zvf.announced %q; the live region said %q", hooked, got)
	}
	b.noProblems()
}

// commas writes n as the page does (toLocaleString in en-US).
func commas(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
