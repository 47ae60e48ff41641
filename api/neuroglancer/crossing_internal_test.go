package neuroglancer

import (
	"fmt"
	"testing"
)

// TestWalkChunks: the chunks a segment passes through between its ends'
// chunks, on half-open chunks of 1: exactly those (none it only grazes
// at an edge or corner, each once, in order), and at most as many as the
// chunks between the ends along the axes, however long the segment
// (a diagonal across a 1000-chunk grid); the walk ends at the end's
// chunk even where the store filed a vertex in a chunk its coordinates
// do not say (rounding).
func TestWalkChunks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		ca, cb []int64
		a, b   []float64
		want   string // the chunks visited; "" to check the count only
		count  int
	}{
		{"along x", []int64{0, 0, 0}, []int64{2, 0, 0}, []float64{0.5, 0.5, 0.5}, []float64{2.5, 0.5, 0.5}, "[[1 0 0]]", 1},
		{"face neighbours", []int64{0, 0, 0}, []int64{0, 1, 0}, []float64{0.5, 0.5, 0.5}, []float64{0.5, 1.5, 0.5}, "[]", 0},
		{"diagonal in a plane", []int64{0, 0, 0}, []int64{1, 1, 0}, []float64{0.2, 0.6, 0.5}, []float64{1.6, 1.2, 0.5}, "[[1 0 0]]", 1},
		{"diagonal the other side", []int64{0, 0, 0}, []int64{1, 1, 0}, []float64{0.6, 0.2, 0.5}, []float64{1.2, 1.6, 0.5}, "[[0 1 0]]", 1},
		{"through corners up", []int64{0, 0, 0}, []int64{3, 3, 3}, []float64{0.5, 0.5, 0.5}, []float64{3.5, 3.5, 3.5}, "[[1 1 1] [2 2 2]]", 2},
		{"through corners down", []int64{3, 3, 3}, []int64{0, 0, 0}, []float64{3.5, 3.5, 3.5}, []float64{0.5, 0.5, 0.5}, "[[2 2 2] [1 1 1]]", 2},
		// At the corner (1,1) the point is in chunk (1,1): x has entered
		// it, y has not left it yet.
		{"through a corner up and down", []int64{0, 1}, []int64{1, 0}, []float64{0.5, 1.5}, []float64{1.5, 0.5}, "[[1 1]]", 1},
		{"down x", []int64{5, 0}, []int64{2, 0}, []float64{5.5, 0.5}, []float64{2.5, 0.5}, "[[4 0] [3 0]]", 2},
		{"the store's chunk, not the coordinates'", []int64{0, 0}, []int64{3, 0}, []float64{0.5, 0.5}, []float64{0.5, 0.5}, "[[1 0] [2 0]]", 2},
		{"long diagonal", []int64{0, 0, 0}, []int64{999, 999, 999}, []float64{0.1, 0.3, 0.2}, []float64{999.9, 999.6, 999.95}, "", -1},
	}
	for _, tc := range tests {
		p := &plan{rank: len(tc.ca), cs: make([]float64, len(tc.ca))}
		for i := range p.cs {
			p.cs[i] = 1
		}
		var got [][]int64
		p.walkChunks(tc.ca, tc.cb, tc.a, tc.b, func(c []int64) { got = append(got, append([]int64(nil), c...)) })
		if tc.want != "" && fmt.Sprint(got) != tc.want {
			t.Errorf("%s: visited %v, want %s", tc.name, got, tc.want)
		}
		if tc.count >= 0 && len(got) != tc.count {
			t.Errorf("%s: visited %d chunks, want %d", tc.name, len(got), tc.count)
		}
		var between int64
		for i := range tc.ca {
			between += max(tc.ca[i]-tc.cb[i], tc.cb[i]-tc.ca[i])
		}
		if int64(len(got)) >= between {
			t.Errorf("%s: visited %d chunks, more than the %d between the ends along the axes", tc.name, len(got), between-1)
		}
		// Each chunk visited is a step of one chunk on some axes from the
		// last, towards cb: none twice.
		prev := tc.ca
		for _, c := range append(got, tc.cb) {
			for i := range c {
				if d := c[i] - prev[i]; d*d > 1 || d != 0 && (d > 0) != (tc.cb[i] > tc.ca[i]) {
					t.Fatalf("%s: a step from %v to %v", tc.name, prev, c)
				}
			}
			prev = c
		}
	}
}
