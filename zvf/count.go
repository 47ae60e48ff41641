package zvf

import (
	"context"
	"encoding/binary"
	"math"
	"runtime"

	"golang.org/x/sync/errgroup"
)

// CountQuery counts the vertices in a closed box at one level.
type CountQuery struct {
	Min, Max []float64
	// Selection narrows the rows counted, as it narrows a bbox answer.
	Selection
}

// Count returns the number of rows BBox answers for the same box and
// selection (all pages): exact, with nothing gathered. A chunk the box
// covers counts its rows without testing them (when they were found in
// their cell when the chunk was decoded), a bin the box covers its
// fragment's rows; only chunks and bins the box cuts are matched row by
// row. No attribute is read unless the filter names it.
func (l *Level) Count(ctx context.Context, q CountQuery) (int64, error) {
	if err := l.checkBox(q.Min, q.Max); err != nil {
		return 0, err
	}
	rf, err := l.newRowFilter(ctx, q.Selection)
	if err != nil {
		return 0, err
	}
	if err := l.checkHoles(ctx, q.Min, q.Max); err != nil {
		return 0, err
	}
	sc := l.s.getScratch()
	defer l.s.putScratch(sc)
	sc.rf = rf
	sc.cand = l.candidates(sc.cand[:0], q.Min, q.Max)
	var n int64
	err = l.matches(ctx, sc, sc.cand, q.Min, q.Max, func(m *chunkMatch) (bool, error) {
		n += int64(m.count())
		return false, nil
	})
	return n, err
}

// MaxDensityCells bounds the cells of one density grid (128³).
const MaxDensityCells = 1 << 21

// DensityQuery counts the vertices in each cell of a closed box split
// evenly: on axis a, with w = (Max[a]−Min[a])/Shape[a] in float64, cell i
// holds Min[a] + i·w ≤ v < Min[a] + (i+1)·w (each boundary computed in
// float64 as written), and the last cell also the vertices at or past its
// lower boundary up to Max[a] (so v = Max[a] is in it). The box may extend
// beyond the store.
type DensityQuery struct {
	Min, Max []float64
	Shape    []int // cells per axis, each at least 1; at most MaxDensityCells in all
	// Selection narrows the rows counted, as it narrows a bbox answer.
	Selection
}

// VoxelQuery counts the vertices in each voxel of a grid anchored at the
// origin: on axis a voxel v covers [v·Voxel[a], (v+1)·Voxel[a]) (each
// bound computed in float64 as written). The voxels counted are [Lo[a],
// Hi[a]) on each axis; where Closed[a], Hi[a] is the end of the whole grid
// and a vertex on its upper face (v = Hi[a]·Voxel[a]) counts in voxel
// Hi[a]−1, as Neuroglancer's volumes have it.
type VoxelQuery struct {
	Voxel  []float64
	Lo, Hi []int64
	Closed []bool
	// Selection narrows the rows counted, as it narrows a bbox answer.
	Selection
}

// grid is the cells a density is counted in: per axis n cells between n+1
// ascending boundaries b; a vertex belongs to the last cell whose lower
// boundary it reaches (the last cell taking everything past it up to the
// box's max), except past b[n] on an open axis (another grid's).
type grid struct {
	d      int
	n      [maxDims]int
	b      [maxDims][]float64
	inv    [maxDims]float64 // 1/w: the first guess of a cell
	open   [maxDims]bool
	stride [maxDims]int
	cells  int
}

func (g *grid) init(d int, shape []int) {
	g.d, g.cells = d, 1
	for a := 0; a < d; a++ {
		g.n[a] = shape[a]
		g.stride[a] = g.cells
		g.cells *= shape[a]
		g.b[a] = make([]float64, shape[a]+1)
	}
}

// cell returns the cell of v on axis a; false when v is past an open
// axis's end.
func (g *grid) cell(a int, v float64) (int, bool) {
	if g.open[a] && v >= g.b[a][g.n[a]] {
		return 0, false
	}
	return cellOf(g.b[a], g.n[a]-1, g.inv[a], v), true
}

// cellOf is the last of cells 0 … last whose lower boundary b[i] v
// reaches (0 when none does): guessed from the cell width, then moved to
// the exact boundaries (the guess is off only by rounding).
func cellOf(b []float64, last int, inv, v float64) int {
	i := 0
	if t := (v - b[0]) * inv; t >= 1 { // also false for NaN
		i = last
		if t < float64(last) {
			i = int(t)
		}
	}
	for i > 0 && v < b[i] {
		i--
	}
	for i < last && v >= b[i+1] {
		i++
	}
	return i
}

// Density counts the vertices (of BBox's answer for the box and
// selection) in each cell, x fastest: cell (i, j, k) is counts[i +
// nx·(j + ny·k)]. A count saturates at 2³²−1.
func (l *Level) Density(ctx context.Context, q DensityQuery) ([]uint32, error) {
	if err := l.checkBox(q.Min, q.Max); err != nil {
		return nil, err
	}
	d := l.s.dims
	if len(q.Shape) != d {
		return nil, l.s.errf(ErrBadQuery, l.n, "", "", "shape needs %d numbers (one per axis), got %d", d, len(q.Shape))
	}
	cells := 1
	for a, n := range q.Shape {
		if n < 1 || n > MaxDensityCells {
			return nil, l.s.errf(ErrBadQuery, l.n, "", "", "shape[%d] = %d: each axis needs 1 to %d cells", a, n, MaxDensityCells)
		}
		if cells *= n; cells > MaxDensityCells {
			return nil, l.s.errf(ErrBadQuery, l.n, "", "", "shape %v has more than %d cells", q.Shape, MaxDensityCells)
		}
	}
	var g grid
	g.init(d, q.Shape)
	for a := 0; a < d; a++ {
		w := (q.Max[a] - q.Min[a]) / float64(q.Shape[a])
		for i := range g.b[a] {
			g.b[a][i] = q.Min[a] + float64(i)*w
		}
		if w > 0 {
			g.inv[a] = 1 / w
		}
	}
	return l.density(ctx, &g, q.Min, q.Max, q.Selection)
}

// Voxels counts the vertices in each voxel of q's part of a grid, x
// fastest, as Density does.
func (l *Level) Voxels(ctx context.Context, q VoxelQuery) ([]uint32, error) {
	d := l.s.dims
	if len(q.Voxel) != d || len(q.Lo) != d || len(q.Hi) != d || len(q.Closed) != d {
		return nil, l.s.errf(ErrBadQuery, l.n, "", "", "a voxel grid needs %d axes", d)
	}
	shape := make([]int, d)
	cells := 1
	for a := 0; a < d; a++ {
		n := q.Hi[a] - q.Lo[a]
		if !(q.Voxel[a] > 0) || math.IsInf(q.Voxel[a], 0) || n < 1 || n > MaxDensityCells {
			return nil, l.s.errf(ErrBadQuery, l.n, "", "", "voxels %d to %d of size %v on axis %d", q.Lo[a], q.Hi[a], q.Voxel[a], a)
		}
		shape[a] = int(n)
		if cells *= int(n); cells > MaxDensityCells {
			return nil, l.s.errf(ErrBadQuery, l.n, "", "", "more than %d voxels", MaxDensityCells)
		}
	}
	var g grid
	g.init(d, shape)
	min, max := make([]float64, d), make([]float64, d)
	for a := 0; a < d; a++ {
		s := q.Voxel[a]
		for i := range g.b[a] {
			g.b[a][i] = float64(q.Lo[a]+int64(i)) * s
		}
		g.inv[a] = 1 / s
		g.open[a] = !q.Closed[a]
		min[a], max[a] = g.b[a][0], g.b[a][shape[a]]
	}
	if err := l.checkBox(min, max); err != nil {
		return nil, err
	}
	return l.density(ctx, &g, min, max, q.Selection)
}

// density counts the rows of the closed box [lo, hi] (narrowed by sel)
// into g's cells. The candidate chunks are split into runs counted on
// every core at once, each into its own cells (a run's selection has its
// own evaluators), and the runs' cells summed.
func (l *Level) density(ctx context.Context, g *grid, lo, hi []float64, sel Selection) ([]uint32, error) {
	rf, err := l.newRowFilter(ctx, sel) // refuses a bad selection before anything runs
	if err != nil {
		return nil, err
	}
	if err := l.checkHoles(ctx, lo, hi); err != nil {
		return nil, err
	}
	cand := l.candidates(nil, lo, hi)
	parts := max(1, min(runtime.GOMAXPROCS(0), maxDensityParts, len(cand)/4))
	counts := make([][]uint32, parts)
	eg, ectx := errgroup.WithContext(ctx)
	for p := range parts {
		run := cand[p*len(cand)/parts : (p+1)*len(cand)/parts]
		eg.Go(func() (err error) {
			defer l.s.recoverInto(&err, "density")
			prf := rf
			if p > 0 {
				if prf, err = l.newRowFilter(ectx, sel); err != nil {
					return err
				}
			}
			sc := l.s.getScratch()
			defer l.s.putScratch(sc)
			sc.rf = prf
			c := make([]uint32, g.cells)
			counts[p] = c
			var total uint64
			return l.matches(ectx, sc, run, lo, hi, func(m *chunkMatch) (bool, error) {
				l.binRows(g, c, m, &total)
				return false, nil
			})
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	out := counts[0]
	for _, c := range counts[1:] {
		for i, v := range c {
			out[i] = uint32(min(uint64(out[i])+uint64(v), math.MaxUint32))
		}
	}
	return out, nil
}

// maxDensityParts bounds the runs a density is counted in at once (each
// holds a copy of the cells).
const maxDensityParts = 4

// binRows adds m's rows to their cells; *total counts the rows added so
// far, so that counts saturate only when they could overflow.
func (l *Level) binRows(g *grid, counts []uint32, m *chunkMatch, total *uint64) {
	n := m.count()
	if n == 0 {
		return
	}
	*total += uint64(n)
	plain := *total <= math.MaxUint32 // no cell can overflow yet
	add := func(idx int) {
		if c := counts[idx]; plain || c != math.MaxUint32 {
			counts[idx] = c + 1
		}
	}
	data, d := m.cv.data, g.d
	if plain && l.binRowsByBins(g, counts, m) {
		return
	}
	if l.vdt.Name == "float32" && d == 3 {
		// The common case in one pass, the cells inlined.
		bx, by, bz := g.b[0], g.b[1], g.b[2]
		lx, ly, lz := g.n[0]-1, g.n[1]-1, g.n[2]-1
		ix, iy, iz := g.inv[0], g.inv[1], g.inv[2]
		ex, ey, ez := math.Inf(1), math.Inf(1), math.Inf(1) // an open axis ends at its last boundary
		if g.open[0] {
			ex = bx[lx+1]
		}
		if g.open[1] {
			ey = by[ly+1]
		}
		if g.open[2] {
			ez = bz[lz+1]
		}
		s1, s2 := g.stride[1], g.stride[2]
		all, rows := m.all, m.rows
		for k := 0; k < n; k++ {
			r := k
			if !all {
				r = int(rows[k])
			}
			p := data[12*r : 12*r+12 : 12*r+12]
			x := float64(math.Float32frombits(binary.LittleEndian.Uint32(p)))
			y := float64(math.Float32frombits(binary.LittleEndian.Uint32(p[4:])))
			z := float64(math.Float32frombits(binary.LittleEndian.Uint32(p[8:])))
			if x >= ex || y >= ey || z >= ez {
				continue
			}
			add(cellOf(bx, lx, ix, x) + s1*cellOf(by, ly, iy, y) + s2*cellOf(bz, lz, iz, z))
		}
		return
	}
	for k := 0; k < n; k++ {
		r := m.row(k)
		idx, ok := 0, true
		for a := 0; a < d && ok; a++ {
			var i int
			i, ok = g.cell(a, l.vdt.At(data, r*d+a).Float64())
			idx += i * g.stride[a]
		}
		if ok {
			add(idx)
		}
	}
}

// binSpan is how a bin lies in a grid on one axis: a row of the bin
// (inside its closed box) is in cell first plus the number of the
// thresholds it reaches, the grid's inner boundaries within the bin
// (exact as float32: the least float32 at or above each; +Inf past the
// last). ok is false when the bin spans more than maxBinSpan cells or
// reaches an open axis's end.
type binSpan struct {
	first int
	t     [maxBinSpan - 1]float32
	ok    bool
}

// maxBinsPerAxis bounds the bins per chunk axis binRowsByBins takes (its
// spans live on the stack).
const maxBinsPerAxis = 32

// maxBinSpan bounds the cells a bin may span on an axis for its rows to
// be counted by compares.
const maxBinSpan = 4

// span returns how [lo, hi] lies in the grid on axis a.
func (g *grid) span(a int, lo, hi float64) binSpan {
	b, last := g.b[a], g.n[a]-1
	if g.open[a] && hi >= b[last+1] {
		return binSpan{}
	}
	sp := binSpan{first: cellOf(b, last, g.inv[a], lo), ok: true}
	for j := range sp.t {
		sp.t[j] = float32(math.Inf(1))
		i := sp.first + 1 + j
		if i > last || b[i] > hi {
			continue
		}
		t := float32(b[i])
		if float64(t) < b[i] {
			t = math.Nextafter32(t, float32(math.Inf(1)))
		}
		sp.t[j] = t
	}
	if i := sp.first + len(sp.t) + 1; i <= last && b[i] <= hi {
		sp.ok = false // more boundaries than thresholds
	}
	return sp
}

// binRowsByBins counts the rows of a chunk the box covers (m.all) whose
// fragments are its bins, float32 × 3, bin by bin: a bin whose rows were
// found in its cell and that spans few cells per axis finds each row's
// cell by compares with the bin's thresholds, not by a search; the other
// bins' rows are searched as binRows does. It reports false, having
// counted nothing, where it does not apply. Counts must not saturate
// (binRows' plain).
func (l *Level) binRowsByBins(g *grid, counts []uint32, m *chunkMatch) bool {
	cv := m.cv
	if !m.all || g.d != 3 || l.vdt.Name != "float32" || !l.binsUsable(cv) || max(l.bpc[0], l.bpc[1], l.bpc[2]) > maxBinsPerAxis {
		return false
	}
	nf := int(prod(l.bpc))
	at := int64(0)
	for f := range nf { // the bins' rows must be consecutive, in bin order
		s, c := cv.binRange(f)
		if c > 0 && s != at {
			return false
		}
		at += c
	}
	if at != int64(cv.rows) {
		return false
	}
	// Per axis, how each of the chunk's bins along it lies in the grid
	// (binBox's arithmetic).
	var spans [3][maxBinsPerAxis]binSpan
	for a := range 3 {
		n := l.bpc[a]
		for b := range n {
			lo := float64(m.key[a]*n+b) * l.binShape[a]
			spans[a][b] = g.span(a, lo, lo+l.binShape[a])
		}
	}
	data := cv.data
	s1, s2 := g.stride[1], g.stride[2]
	nx, ny, nz := l.bpc[0], l.bpc[1], l.bpc[2]
	for f := range nf {
		s, c := cv.binRange(f)
		if c == 0 {
			continue
		}
		bz := int64(f) % nz
		by := int64(f) / nz % ny
		bx := int64(f) / nz / ny % nx
		sx, sy, sz := &spans[0][bx], &spans[1][by], &spans[2][bz]
		if !(cv.binInside(f) && sx.ok && sy.ok && sz.ok) {
			l.binRange(g, counts, data, int(s), int(s+c))
			continue
		}
		base := sx.first + s1*sy.first + s2*sz.first
		x1, x2, x3 := sx.t[0], sx.t[1], sx.t[2]
		y1, y2, y3 := sy.t[0], sy.t[1], sy.t[2]
		z1, z2, z3 := sz.t[0], sz.t[1], sz.t[2]
		for r := int(s); r < int(s+c); r++ {
			p := data[12*r : 12*r+12 : 12*r+12]
			x := math.Float32frombits(binary.LittleEndian.Uint32(p))
			y := math.Float32frombits(binary.LittleEndian.Uint32(p[4:]))
			z := math.Float32frombits(binary.LittleEndian.Uint32(p[8:]))
			i := b2i(x >= x1) + b2i(x >= x2) + b2i(x >= x3)
			j := b2i(y >= y1) + b2i(y >= y2) + b2i(y >= y3)
			k := b2i(z >= z1) + b2i(z >= z2) + b2i(z >= z3)
			counts[base+i+s1*j+s2*k]++
		}
	}
	return true
}

// binRange adds rows [a, b) of float32 × 3 data to their cells, searching
// each row's cell on each axis (counts must not saturate).
func (l *Level) binRange(g *grid, counts []uint32, data []byte, a, b int) {
	for r := a; r < b; r++ {
		p := data[12*r : 12*r+12 : 12*r+12]
		idx, ok := 0, true
		for ax := 0; ax < 3 && ok; ax++ {
			var i int
			i, ok = g.cell(ax, float64(math.Float32frombits(binary.LittleEndian.Uint32(p[4*ax:]))))
			idx += i * g.stride[ax]
		}
		if ok {
			counts[idx]++
		}
	}
}
