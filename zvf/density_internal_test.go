package zvf

import (
	"math"
	"testing"
)

// FuzzGridCell: the cell a coordinate falls in is the last whose lower
// boundary it reaches, clamped to the grid (the stated rule, found here
// by scanning), for any box and cell count; an open axis leaves out what
// reaches its end.
func FuzzGridCell(f *testing.F) {
	f.Add(0.0, 100.0, 8, 12.5, false)
	f.Add(0.0, 100.0, 8, 100.0, true)
	f.Add(-1e-300, 1e-300, 3, 0.0, false)
	f.Add(0.1, 0.7, 3, 0.3, false)
	f.Add(5.0, 5.0, 4, 5.0, true)
	f.Add(1e15, 1e15+7, 7, 1e15+6, false)
	f.Fuzz(func(t *testing.T, lo, hi float64, n int, v float64, open bool) {
		if math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) || lo > hi || n < 1 || n > 4096 ||
			math.IsNaN(v) || v < lo || v > hi || math.IsInf(hi-lo, 0) {
			return
		}
		var g grid
		g.init(1, []int{n})
		w := (hi - lo) / float64(n)
		for i := range g.b[0] {
			g.b[0][i] = lo + float64(i)*w
		}
		if w > 0 {
			g.inv[0] = 1 / w
		}
		g.open[0] = open
		got, ok := g.cell(0, v)
		want := 0
		for i := 0; i < n; i++ {
			if g.b[0][i] <= v {
				want = i
			}
		}
		wantOK := !(open && v >= g.b[0][n])
		if ok != wantOK || (ok && got != want) {
			t.Fatalf("[%v, %v] in %d cells: %v is in cell %d (%v), want %d (%v)", lo, hi, n, v, got, ok, want, wantOK)
		}
	})
}
