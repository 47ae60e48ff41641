package writer

import (
	"math"
	"slices"
	"strconv"
	"strings"
)

// maxDim bounds the spatial dimensionality so chunk and bin coordinates fit
// a fixed-size array (usable as a map key without allocation).
const maxDim = 4

// coords is a chunk or bin coordinate; only the first D entries are used,
// the rest stay zero so == and map keys work.
type coords [maxDim]int64

// key renders the dotted chunk key ("0.1.-2") the reference uses.
func (c coords) key(d int) string {
	var b strings.Builder
	for i := range d {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(strconv.FormatInt(c[i], 10))
	}
	return b.String()
}

// cmpCoords orders coordinates lexicographically, like Python tuples.
func cmpCoords(a, b coords) int {
	for i := range maxDim {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// cellOf returns floor(p / cell) per axis, computed in float64 like the
// reference (float32 positions divided by a float64 shape).
func cellOf(p []float32, cell []float64) coords {
	var c coords
	for i, v := range p {
		c[i] = int64(math.Floor(float64(v) / cell[i]))
	}
	return c
}

// byCell groups the rows of pos (d coordinates a row) by the grid cell
// (floor(p/cell)) each falls in.
func byCell(pos []float32, d int, cell []float64) buckets {
	return groupBy(len(pos)/d, func(i int) coords { return cellOf(pos[i*d:i*d+d], cell) })
}

// floorDiv is Python's // on integers.
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// buckets is a stable grouping of n items by coordinate: keys sorted
// lexicographically, order lists item indices grouped by key (ascending
// item index inside a group), group g is order[start[g]:start[g+1]].
type buckets struct {
	keys  []coords
	order []uint32
	start []int
}

// groupBy buckets items 0..n-1 by keyOf with a counting sort, so memory is
// O(n) indices plus O(distinct keys).
func groupBy(n int, keyOf func(i int) coords) buckets {
	ids := make([]int32, n)
	index := make(map[coords]int32)
	var keys []coords
	for i := range n {
		k := keyOf(i)
		id, ok := index[k]
		if !ok {
			id = int32(len(keys))
			index[k] = id
			keys = append(keys, k)
		}
		ids[i] = id
	}
	// Rank the distinct keys in sorted order.
	perm := make([]int32, len(keys))
	for i := range perm {
		perm[i] = int32(i)
	}
	slices.SortFunc(perm, func(a, b int32) int { return cmpCoords(keys[a], keys[b]) })
	rank := make([]int32, len(keys))
	sorted := make([]coords, len(keys))
	for r, id := range perm {
		rank[id] = int32(r)
		sorted[r] = keys[id]
	}
	start := make([]int, len(keys)+1)
	for _, id := range ids {
		start[rank[id]+1]++
	}
	for g := range len(keys) {
		start[g+1] += start[g]
	}
	fill := slices.Clone(start[:len(keys)])
	order := make([]uint32, n)
	for i, id := range ids {
		r := rank[id]
		order[fill[r]] = uint32(i)
		fill[r]++
	}
	return buckets{keys: sorted, order: order, start: start}
}
