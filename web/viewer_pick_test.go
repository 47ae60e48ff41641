package web_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// testPickPosition: the pick box gives the picked vertex's stored
// position, as the server holds it, not the quantized one the tile drew
// (precision=), which is up to the precision away.
func testPickPosition(t *testing.T, e *viewerEnv) {
	b := e.open(t, "stores=axons")
	var at struct {
		X, Y float64
		Pos  [3]float32
	}
	b.value(`__zvf.vertexOnScreen("axons")`, &at)
	b.pick(at.X, at.Y)
	var tol float64
	b.value(`Math.max(0, ...__zvf.requests.filter((r) => r.kind === 'tile').map((r) => +(new URL(r.url, location.href).searchParams.get('precision') || 0)))`, &tol)
	i := findNear(e.sc.Axons.Positions, at.Pos, tol)
	if i < 0 {
		t.Fatalf("no axon vertex within %g of the drawn %v", tol, at.Pos)
	}
	stored := e.sc.Axons.Positions[3*i : 3*i+3]
	if stored[0] == at.Pos[0] && stored[1] == at.Pos[1] && stored[2] == at.Pos[2] {
		t.Fatalf("the vertex at %v was drawn where it is stored; this test needs one moved by precision %g", at.Pos, tol)
	}
	var parts []string
	for _, v := range stored {
		parts = append(parts, strconv.FormatFloat(float64(v), 'g', -1, 32))
	}
	want := "position " + strings.Join(parts, ", ")
	if text := b.text("#picked"); !strings.Contains(text, want) {
		t.Errorf("pick box %q; want %q (drawn at %v, precision %g)", text, want, at.Pos, tol)
	}
	if text := b.text("#picked"); strings.Contains(text, fmt.Sprintf("position %s,", strconv.FormatFloat(float64(at.Pos[0]), 'g', -1, 32))) && at.Pos[0] != stored[0] {
		t.Errorf("pick box %q still gives the quantized position %v", text, at.Pos)
	}
	b.noProblems()
}
