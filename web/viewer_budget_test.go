package web_test

import (
	"fmt"
	"testing"
)

// testBudgetExact: the vertices drawn (every drawn tile's, a tile drawn
// with refined children masked out counted whole: the GPU runs all of
// them) never exceed the budget, and the budget is used: what is left is
// less than the tile the view wanted next. A partly refined tile was
// drawn whole while only its unrefined share was charged: 31 of the 2M
// store's 64 level-0 tiles under its one level-1 tile drew 975,889
// vertices for 972,014 charged, 0.4 % over a budget between them.
func testBudgetExact(t *testing.T, e *viewerEnv) {
	for _, tc := range []struct{ query string }{
		{"stores=points"},
		{"stores=points&cam=-1.5708,1.5707,300,125,125,125"},
		{"stores=points,cells,axons&budget=100000"},
	} {
		b := e.open(t, tc.query)
		total := func() (int, int) {
			var drawn map[string]int
			b.value(`__zvf.drawn`, &drawn)
			n := 0
			for _, v := range drawn {
				n += v
			}
			var largest int
			b.value(`Math.max(...__zvf.tiles().map((t) => t.count))`, &largest)
			return n, largest
		}
		var budget int
		b.value(`Number(document.getElementById('budget').value)`, &budget)
		// The zoomed camera sees everything at level 0 well within the
		// budget: at most, not near.
		if first, _ := total(); first > budget {
			t.Errorf("%s: %d vertices drawn under a budget of %d; want at most the budget", tc.query, first, budget)
		}
		// Budgets just under what was drawn: each a vertex under the last
		// count, so a selection charged less than it draws stays as it was.
		// Near: within the tile the view wanted next (twice the largest
		// drawn: a tile not loaded yet is charged its estimate).
		for range 3 {
			n, _ := total()
			budget = n - 1
			b.eval(fmt.Sprintf(`(() => { const e = document.getElementById('budget'); e.value = '%d'; e.dispatchEvent(new Event('change')); })()`, budget))
			b.settle()
			got, largest := total()
			t.Logf("%s: budget %d: %d drawn (largest tile %d)", tc.query, budget, got, largest)
			if got > budget || got < budget-2*largest {
				t.Errorf("%s: %d vertices drawn under a budget of %d (tiles up to %d); want at most the budget, and near it", tc.query, got, budget, largest)
			}
		}
		b.noProblems()
	}
}
