package zvf

import (
	"encoding/binary"
	"math"
)

// deriveBins finds, on a bin-prefiltered level (fragment = bin), the bin
// of each of cv's rows from its coordinates, and sets cv.bins and
// cv.inCell. It succeeds only when the rows are grouped by bin in bin
// order (row-major, the last axis fastest: the order matchBins visits
// bins in) and every row lies in its bin's closed cell, computed as
// matchBins computes it. Then matching from these bins is exact — a bin
// the box misses holds no row in it, a bin it covers only rows in it —
// and finds a box's rows in row order, as a test of every row would; so
// the fragment index, whose ranges could only say the same of a
// well-formed chunk, need not be read. Otherwise (a row outside its
// chunk, rows out of bin order) it reports false and leaves cv alone:
// the chunk is then read with its fragment index. For float32 × 3 rows
// the same pass finds whether a row lies on a face of its bin's cell and
// sets cv.faces, so no box makes a second pass over a cold chunk's rows
// to ask (see faceFree).
func (l *Level) deriveBins(key Key, cv *chunkVerts) bool {
	d := l.s.dims
	if d > maxDims || len(key) != d || cv.rows > math.MaxInt32 {
		return false
	}
	nb := prod(l.bpc)
	bins := make([]int32, nb+1)
	var cellLo, cellHi, inv [maxDims]float64
	var base, cur [maxDims]int64      // per axis: the chunk's first bin, the previous row's bin
	var curLo, curHi [maxDims]float64 // the previous row's bin cell
	var lohi [8]float32               // its float32 × 3 bounds for sameBin3 (see binBounds)
	for i := 0; i < d; i++ {
		cellLo[i] = float64(key[i]) * l.chunkShape[i]
		cellHi[i] = cellLo[i] + l.chunkShape[i]
		base[i] = key[i] * l.bpc[i]
		inv[i] = 1 / l.binShape[i]
		curLo[i], curHi[i] = l.binCell(base[i], 0, i)
		if i < 3 {
			lohi[i], lohi[4+i] = below32(curLo[i]), above32(curHi[i])
		}
	}
	f32 := l.vdt.Name == "float32"
	// A row in a bin whose cell lies in the chunk's lies in the chunk's;
	// rows of other bins (the bin and chunk shapes agree only to within
	// rounding) are tested one by one.
	binInChunk := func() bool {
		for i := 0; i < d; i++ {
			if !(curLo[i] >= cellLo[i] && curHi[i] <= cellHi[i]) {
				return false
			}
		}
		return true
	}
	inCell, curInChunk := true, binInChunk()
	onFace := false  // a row lies on a face of its bin's cell (float32 × 3)
	last := int64(0) // the previous row's bin
	var v [maxDims]float64
	for r := 0; r < cv.rows; r++ {
		if f32 && d == 3 {
			if curInChunk {
				// The rows that follow strictly inside the same bin, in
				// registers; a row on a face is placed below.
				r = sameBin3(cv.data, r, cv.rows, curLo[0], curLo[1], curLo[2], curHi[0], curHi[1], curHi[2], &lohi)
				if r == cv.rows {
					break
				}
			}
			p := cv.data[12*r : 12*r+12 : 12*r+12]
			v[0] = float64(math.Float32frombits(binary.LittleEndian.Uint32(p)))
			v[1] = float64(math.Float32frombits(binary.LittleEndian.Uint32(p[4:])))
			v[2] = float64(math.Float32frombits(binary.LittleEndian.Uint32(p[8:])))
			if v[0] >= curLo[0] && v[0] <= curHi[0] && v[1] >= curLo[1] && v[1] <= curHi[1] && v[2] >= curLo[2] && v[2] <= curHi[2] {
				onFace = onFace || onCellFace(v[:3], curLo[:3], curHi[:3])
				if !curInChunk {
					inCell = inCell && inBox(v[:3], cellLo[:3], cellHi[:3])
				}
				continue // in the previous row's bin
			}
		} else {
			for i := 0; i < d; i++ {
				if f32 {
					v[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(cv.data[4*(r*d+i):])))
				} else {
					v[i] = l.vdt.At(cv.data, r*d+i).Float64()
				}
			}
		}
		for i := 0; i < d; i++ {
			if v[i] >= curLo[i] && v[i] <= curHi[i] {
				continue // in the previous row's bin on this axis
			}
			b, ok := l.binAlong(v[i], i, base[i], inv[i])
			if !ok {
				return false
			}
			cur[i] = b
			curLo[i], curHi[i] = l.binCell(base[i], b, i)
			if i < 3 {
				lohi[i], lohi[4+i] = below32(curLo[i]), above32(curHi[i])
			}
		}
		if f32 && d == 3 {
			onFace = onFace || onCellFace(v[:3], curLo[:3], curHi[:3])
		}
		curInChunk = binInChunk()
		if !curInChunk {
			inCell = inCell && inBox(v[:d], cellLo[:d], cellHi[:d])
		}
		f := int64(0)
		for i := 0; i < d; i++ {
			f = f*l.bpc[i] + cur[i]
		}
		if f < last {
			return false // out of bin order
		}
		for ; last < f; last++ {
			bins[last+1] = int32(r)
		}
	}
	for ; last < nb; last++ {
		bins[last+1] = int32(cv.rows)
	}
	cv.bins, cv.inCell = bins, inCell
	if f32 && d == 3 {
		faces := int32(facesFree)
		if onFace {
			faces = facesTouched
		}
		cv.faces.Store(faces)
	}
	return true
}

// onCellFace reports whether v, in the closed box [lo, hi], lies on one
// of its faces.
func onCellFace(v, lo, hi []float64) bool {
	for i := range v {
		if v[i] == lo[i] || v[i] == hi[i] {
			return true
		}
	}
	return false
}

// binCell is the closed extent on axis i of bin b of a chunk whose first
// bin there is base, computed as binBox and matchBins compute it.
func (l *Level) binCell(base, b int64, i int) (lo, hi float64) {
	lo = float64(base+b) * l.binShape[i]
	return lo, lo + l.binShape[i]
}

// binAlong is the chunk's bin on axis i whose closed cell holds v (the
// one v × inv falls in when it holds v, as a writer files it), or false
// when none does.
func (l *Level) binAlong(v float64, i int, base int64, inv float64) (int64, bool) {
	g := math.Floor(v * inv)
	if !(g >= -(1<<62) && g <= 1<<62) { // NaN, ±Inf, far away
		return 0, false
	}
	guess := int64(g) - base
	for _, b := range [3]int64{guess, guess - 1, guess + 1} {
		if b < 0 || b >= l.bpc[i] {
			continue
		}
		if lo, hi := l.binCell(base, b, i); v >= lo && v <= hi {
			return b, true
		}
	}
	return 0, false
}

// inBox reports whether v lies in the closed box [lo, hi].
func inBox(v, lo, hi []float64) bool {
	for i := range v {
		if !(v[i] >= lo[i] && v[i] <= hi[i]) {
			return false
		}
	}
	return true
}

// sameBin3 is the first row from r on of float32 × 3 rows that does not
// lie strictly inside the box (x0, y0, z0)–(x1, y1, z1), or n; lohi is the
// box as binBounds gives it. Where the CPU has vector steps they pass a
// bin's rows 8 at a time (a cold chunk's rows are mostly in runs of one
// bin: in the bench's 500k box this test was 8 % of a cold answer's CPU),
// comparing in float32 against bounds that decide alike, and say which
// row stops them; the rows after their whole steps are tested here.
func sameBin3(data []byte, r, n int, x0, y0, z0, x1, y1, z1 float64, lohi *[8]float32) int {
	if n-r >= 2*binStep {
		if k, ok := sameBinSIMD(data[12*r:12*n], lohi); ok {
			if k < (n-r)/binStep*binStep {
				return r + k // the steps found it
			}
			r += k
		}
	}
	return sameBin3Go(data, r, n, x0, y0, z0, x1, y1, z1)
}

// binStep is the rows of sameBinSIMD's step.
const binStep = 8

// binBounds is the box (x0, y0, z0)–(x1, y1, z1) as sameBinSIMD takes it.
func binBounds(x0, y0, z0, x1, y1, z1 float64) [8]float32 {
	return [8]float32{below32(x0), below32(y0), below32(z0), 0, above32(x1), above32(y1), above32(z1), 0}
}

// below32 is the largest float32 ≤ v (NaN for NaN): for every float32 x,
// x > v exactly when x > below32(v), since no float32 lies in
// (below32(v), v]. Likewise above32, the smallest float32 ≥ v, for x < v.
// Both hold past float32's range too (±Inf, or ±MaxFloat32 for a finite
// v beyond it). (The nearest float32 would never pass a row outside, but
// would stop the steps at a row inside, on a bound it rounded inward.)
func below32(v float64) float32 {
	f := float32(v)
	if float64(f) > v {
		f = math.Nextafter32(f, float32(math.Inf(-1)))
	}
	return f
}

// above32: see below32.
func above32(v float64) float32 {
	f := float32(v)
	if float64(f) < v {
		f = math.Nextafter32(f, float32(math.Inf(1)))
	}
	return f
}

// sameBin3Go is sameBin3 a row at a time.
func sameBin3Go(data []byte, r, n int, x0, y0, z0, x1, y1, z1 float64) int {
	for ; r < n; r++ {
		p := data[12*r : 12*r+12 : 12*r+12]
		x := float64(math.Float32frombits(binary.LittleEndian.Uint32(p)))
		y := float64(math.Float32frombits(binary.LittleEndian.Uint32(p[4:])))
		z := float64(math.Float32frombits(binary.LittleEndian.Uint32(p[8:])))
		if !(x > x0 && x < x1 && y > y0 && y < y1 && z > z0 && z < z1) {
			return r
		}
	}
	return n
}
