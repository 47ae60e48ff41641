package zvf

import "math"

// seenSums is what level=auto learnt of a level's chunks (l.seen), summed
// over its key grid once per change instead of per request: inclusive
// prefix sums, per grid cell, of the chunks present, those not seen, the
// rows of those seen, and the rows of those seen whose rows all lie in
// their cell. A warm box then costs fitsInBox a few table reads, not a
// pass over its candidate chunks (ChooseLevel passes over every level
// finer than the one it chooses).
type seenSums struct {
	gen     uint64   // l.seenGen when built
	n       [3]int64 // grid cells per axis, a level of fewer axes padded with 1
	present []int64  // each (n[0]+1)·(n[1]+1)·(n[2]+1), zero on the low faces
	unseen  []int64
	rows    []int64
	inCell  []int64
}

// maxSumCells bounds the grids summed (four int64 tables per cell, about
// 512 KB at the bound, held for the level's life and rebuilt whenever a
// chunk is first seen — while a viewer browses a cold store, at about
// every request, so the bound keeps that rebuild well under a cold
// chunk's read): a larger level keeps the pass over its candidates.
const maxSumCells = 1 << 14

// seenSumsFor is the level's sums as of its current generation, built
// when seen changed since the last; nil when the level has no key grid of
// at most three axes and maxSumCells cells. A chunk noted while building
// leaves the sums tagged with the generation before it, so the next call
// builds them again; the sums never hold a value seen does not.
func (l *Level) seenSumsFor() *seenSums {
	g := l.grid
	d := l.s.dims
	if g == nil || d > 3 || len(g.cells) > maxSumCells {
		return nil
	}
	gen := l.seenGen.Load()
	if s := l.sums.Load(); s != nil && s.gen == gen {
		return s
	}
	s := &seenSums{gen: gen, n: [3]int64{1, 1, 1}}
	copy(s.n[:], g.n[:d])
	size := (s.n[0] + 1) * (s.n[1] + 1) * (s.n[2] + 1)
	s.present = make([]int64, size)
	s.unseen = make([]int64, size)
	s.rows = make([]int64, size)
	s.inCell = make([]int64, size)
	// Grid cell (x, y, z) (strides g.stride, the last axis fastest) is
	// table entry (x+1, y+1, z+1); each entry adds its own cell to the
	// inclusion–exclusion of the three entries below it.
	var stride [3]int64
	copy(stride[:], g.stride[:d])
	sy, sx := s.n[2]+1, (s.n[1]+1)*(s.n[2]+1)
	for x := int64(0); x < s.n[0]; x++ {
		for y := int64(0); y < s.n[1]; y++ {
			for z := int64(0); z < s.n[2]; z++ {
				var p, u, r, in int64
				if j := g.cells[x*stride[0]+y*stride[1]+z*stride[2]]; j >= 0 {
					v := l.seen[j].Load()
					p = 1
					switch {
					case v == 0:
						u = 1
					default:
						r = int64(v >> 2)
						if v&2 != 0 {
							in = r
						}
					}
				}
				at := (x+1)*sx + (y+1)*sy + z + 1
				prefix(s.present, at, sx, sy, p)
				prefix(s.unseen, at, sx, sy, u)
				prefix(s.rows, at, sx, sy, r)
				prefix(s.inCell, at, sx, sy, in)
			}
		}
	}
	l.sums.Store(s)
	return s
}

// prefix sets tab's entry at to v plus the entries below it on every
// axis (inclusion–exclusion of the seven already summed).
func prefix(tab []int64, at, sx, sy, v int64) {
	tab[at] = v + tab[at-sx] + tab[at-sy] + tab[at-1] -
		tab[at-sx-sy] - tab[at-sx-1] - tab[at-sy-1] + tab[at-sx-sy-1]
}

// sum is tab's total over grid cells first … last (inclusive, per axis).
func (s *seenSums) sum(tab []int64, first, last *[3]int64) int64 {
	sy, sx := s.n[2]+1, (s.n[1]+1)*(s.n[2]+1)
	x0, y0, z0 := first[0]*sx, first[1]*sy, first[2]
	x1, y1, z1 := (last[0]+1)*sx, (last[1]+1)*sy, last[2]+1
	return tab[x1+y1+z1] - tab[x0+y1+z1] - tab[x1+y0+z1] - tab[x1+y1+z0] +
		tab[x0+y0+z1] + tab[x0+y1+z0] + tab[x1+y0+z0] - tab[x0+y0+z0]
}

// fitsFromSums answers fitsInBox from the level's seenSums when every
// candidate chunk has been seen, with the same result as its pass: the
// pass then adds the rows of the covered chunks whose rows lie in their
// cell (A) and fails once that passes stop, else sets the other seen
// rows aside and succeeds when all of them (B) are within stop; whole
// numbers, so float64 sums them exactly in any order. With chunks not
// seen, see unseenPass. Any other case (A ≤ stop < B: the pass matches
// the cut chunks) is left to the pass (decided false).
func (l *Level) fitsFromSums(lo, hi []float64, stop float64) (fits, decided bool) {
	s := l.seenSumsFor()
	if s == nil {
		return false, false
	}
	g, d := l.grid, l.s.dims
	var first, last, kFirst, kLast [3]int64
	covered := true // the box covers some cell on every axis so far
	for a := 0; a < 3; a++ {
		if a >= d {
			continue // first = last = 0 on a padded axis: kFirst, kLast too
		}
		cs := l.chunkShape[a]
		// The candidates' range, as candidates and appendIn compute it.
		f := max(math.Floor(lo[a]/cs), float64(g.lo[a]))
		t := min(math.Floor(hi[a]/cs), float64(g.lo[a]+g.n[a]-1))
		if !(f <= t) {
			return true, true // no candidate: the pass adds nothing and fits
		}
		first[a], last[a] = int64(f)-g.lo[a], int64(t)-g.lo[a]
		// The cells the box covers on this axis, by covers' own test; a
		// run, since the test is monotone in the cell's coordinate.
		kFirst[a], kLast[a] = -1, -2
		for c := first[a]; c <= last[a]; c++ {
			c0 := float64(c+g.lo[a]) * cs
			if lo[a] <= c0 && c0+cs <= hi[a] {
				if kFirst[a] < 0 {
					kFirst[a] = c
				} else if kLast[a] != c-1 {
					return false, false // not a run: leave it to the pass
				}
				kLast[a] = c
			}
		}
		if kFirst[a] < 0 {
			covered = false
		}
	}
	if s.sum(s.present, &first, &last) == 0 {
		return true, true
	}
	var in int64
	if covered {
		in = s.sum(s.inCell, &kFirst, &kLast)
	}
	if s.sum(s.unseen, &first, &last) != 0 {
		return l.unseenPass(s, lo, hi, &first, &last, &kFirst, &kLast, covered, in, stop)
	}
	if float64(in) > stop {
		return false, true
	}
	if float64(s.sum(s.rows, &first, &last)) <= stop {
		return true, true
	}
	return false, false
}

// unseenPass decides what fitsFromSums can of a box whose candidates
// include chunks never seen: the finer levels of a viewer's level=auto,
// which no answer reads (without it, every request passed over their
// candidates). The pass counts such a chunk at the level's mean times the
// share of its cell in the box, and adds, never takes away: with no seen
// chunk cut, it fits exactly when its final estimate is within stop.
//
//   - Every candidate present and unseen (a level never read): the
//     estimate is the mean times the sum of the cells' shares, and a
//     cell's share is the product of its shares along the axes (the
//     pass's own expression, cellShare's), so the sum is the product of
//     the axes' sums of shares. Computed in another order than the pass's
//     sum of at most maxSumCells terms, it differs from it by less than
//     1e-11 of itself: decided when farther from stop than 1e-8 of the
//     larger and 1e-6.
//   - Every candidate present, some seen: the unseen chunks' shares are
//     at least that sum less one a seen chunk; with the rows of the
//     covered seen chunks (in), a lower bound of the estimate. Past stop
//     by that margin, the pass fails.
//   - Else, when the box covers cells: the unseen chunks it covers have a
//     share of 1 but for rounding (below 2^-30 for cells within 2^20
//     chunks of the origin); with the rows of the covered seen chunks
//     (in), a lower bound of the estimate. Past stop by that margin, the
//     pass fails.
//
// Anything else is the pass's (decided false).
func (l *Level) unseenPass(s *seenSums, lo, hi []float64, first, last, kFirst, kLast *[3]int64, covered bool, in int64, stop float64) (fits, decided bool) {
	g, d := l.grid, l.s.dims
	mean := float64(l.meta.VertexCount) / float64(len(l.keys))
	if !(mean >= 0) {
		return false, false // a store's negative vertex_count: the bounds assume none
	}
	cells := (last[0] - first[0] + 1) * (last[1] - first[1] + 1) * (last[2] - first[2] + 1)
	unseen := s.sum(s.unseen, first, last)
	if unseen == cells {
		est := mean * l.axesShares(lo, hi, first, last)
		slack := 1e-8*max(est, math.Abs(stop)) + 1e-6
		switch {
		case est-slack > stop:
			return false, true
		case est+slack <= stop:
			return true, true
		}
		return false, false
	}
	if s.sum(s.present, first, last) == cells {
		// Every candidate present, some seen: the unseen ones' shares are
		// the sum over all (as above) less the seen ones', each at most 1
		// (within rounding); with the covered seen rows, a lower bound.
		// The margins are of the sum and of the seen count themselves, not
		// of their difference, which may be small beside them.
		sum := l.axesShares(lo, hi, first, last)
		seen := float64(cells - unseen)
		if low := mean*(sum*(1-1e-8)-seen*(1+1e-8)) + float64(in); low*(1-1e-8) > stop {
			return false, true
		}
	}
	if !covered {
		return false, false
	}
	for a := 0; a < d; a++ {
		for _, c := range [2]int64{kFirst[a], kLast[a]} {
			if math.Abs(float64(c+g.lo[a])) > 1<<20 {
				return false, false
			}
		}
	}
	low := mean*float64(s.sum(s.unseen, kFirst, kLast)) + float64(in)
	if low*(1-1e-8) > stop {
		return false, true
	}
	return false, false
}

// axesShares is the sum of the shares of the cells first…last inside the
// box (the product of the axes' sums: a share is the product of the
// cell's shares along the axes, cellShare's expression).
func (l *Level) axesShares(lo, hi []float64, first, last *[3]int64) float64 {
	g, sum := l.grid, 1.0
	for a := 0; a < l.s.dims; a++ {
		cs, share := l.chunkShape[a], 0.0
		for c := first[a]; c <= last[a]; c++ {
			c0 := float64(c+g.lo[a]) * cs
			share += max(0, min(hi[a], c0+cs)-max(lo[a], c0)) / cs
		}
		sum *= share
	}
	return sum
}
