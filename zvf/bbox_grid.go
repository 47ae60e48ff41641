package zvf

import (
	"math"
	"slices"
)

// keyGrid finds a level's chunks in a box by cell instead of by scanning
// every key: a dense table over the bounding box of the chunks' spatial
// coordinates, each cell the index (into l.keys) of its chunk or -1.
// Built once when the level opens; a query then costs the cells its box
// overlaps, not the level's chunk count (level=auto scans a level twice,
// once to choose it and once to answer).
type keyGrid struct {
	lo, n  [maxDims]int64 // per axis: the first coordinate and the count
	stride [maxDims]int64 // per axis: cells per step
	cells  []int32
}

// maxGridCells bounds a key grid: a level whose chunks are sparse in
// their bounding box (more cells than this, or than gridSlack per chunk)
// keeps the scan.
const (
	maxGridCells = 1 << 22
	gridSlack    = 8
)

// newKeyGrid builds the grid of keys (spatial coordinates the last d of
// each key's arity components), or returns nil when it would not pay or
// cannot stand for the scan: keys sharing a cell (attribute-chunked
// levels), coordinates beyond what a float64 holds exactly, too sparse.
func newKeyGrid(keys []Key, arity, d int) *keyGrid {
	if len(keys) == 0 || d < 1 || d > maxDims || arity < d {
		return nil
	}
	off := arity - d
	const exact = 1 << 52
	g := &keyGrid{}
	var hi [maxDims]int64
	for j, k := range keys {
		if len(k) != arity {
			return nil
		}
		for a := 0; a < d; a++ {
			c := k[off+a]
			if c < -exact || c > exact {
				return nil
			}
			if j == 0 || c < g.lo[a] {
				g.lo[a] = c
			}
			if j == 0 || c > hi[a] {
				hi[a] = c
			}
		}
	}
	total := int64(1)
	for a := d - 1; a >= 0; a-- {
		g.n[a] = hi[a] - g.lo[a] + 1
		g.stride[a] = total
		if g.n[a] > maxGridCells || total*g.n[a] > maxGridCells {
			return nil
		}
		total *= g.n[a]
	}
	if total > max(gridSlack*int64(len(keys)), 4096) {
		return nil
	}
	g.cells = make([]int32, total)
	for i := range g.cells {
		g.cells[i] = -1
	}
	for j, k := range keys {
		at := int64(0)
		for a := 0; a < d; a++ {
			at += (k[off+a] - g.lo[a]) * g.stride[a]
		}
		if g.cells[at] >= 0 {
			return nil // two keys in one cell: the scan keeps both
		}
		g.cells[at] = int32(j)
	}
	return g
}

// appendIn appends the indices of the keys whose cell c satisfies
// lo[a] <= c[a] <= hi[a] on every axis (lo, hi: whole numbers or
// infinities, as candidates computes them), ascending.
func (g *keyGrid) appendIn(out []int32, d int, lo, hi *[maxDims]float64) []int32 {
	var first, last, idx [maxDims]int64
	for a := 0; a < d; a++ {
		// Clamped to the grid in float64 before converting: a box far
		// outside (or infinite) converts nothing out of range.
		f := math.Max(lo[a], float64(g.lo[a]))
		t := math.Min(hi[a], float64(g.lo[a]+g.n[a]-1))
		if !(f <= t) {
			return out
		}
		first[a], last[a] = int64(f)-g.lo[a], int64(t)-g.lo[a]
		idx[a] = first[a]
	}
	start := len(out)
	sorted := true
	z := d - 1
	for {
		base := int64(0)
		for a := 0; a < z; a++ {
			base += idx[a] * g.stride[a]
		}
		for c := first[z]; c <= last[z]; c++ {
			if j := g.cells[base+c]; j >= 0 {
				if n := len(out); n > start && out[n-1] > j {
					sorted = false
				}
				out = append(out, j)
			}
		}
		a := z - 1
		for ; a >= 0; a-- {
			if idx[a] < last[a] {
				idx[a]++
				break
			}
			idx[a] = first[a]
		}
		if a < 0 {
			break
		}
	}
	if !sorted { // keys not in axis order: candidates are in key order
		slices.Sort(out[start:])
	}
	return out
}
