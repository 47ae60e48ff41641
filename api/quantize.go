package api

import (
	"encoding/binary"
	"math"

	"github.com/zvfserve/zvfserve/zvf"
)

// Quantized vertices: with precision=P a binary answer sends each batch's
// coordinates as unsigned integers of 8, 16 or 32 bits (block kind 6,
// docs/binary-format.md) that decode, as offset[a] + q × scale[a] in
// float64, to within P of the stored coordinate.
//
// Every axis of every batch is put on one lattice of step s = 2P anchored
// at 0: v is sent as the number q of the cell [(k0+q)·s, (k0+q+1)·s) it
// lies in, k0 the cell of the batch's smallest value, and decodes to that
// cell's middle, offset = (k0 + ½)·s: within s/2 = P. Anchoring every
// batch to the same lattice rather than to its own minimum costs at most
// one cell a batch (none when chunk edges are whole cells, as for a
// power-of-two P on a power-of-two grid) and lets a client join the
// batches of an answer by adding whole numbers, as the viewer does; with a
// power-of-two P every step is exact binary arithmetic.
//
// Rounding (v/s in float64) can put a value just across a cell's edge, so
// each value's decoded form is checked as a client computes it (the
// product rounded, then the sum) and moved to the neighbouring cell when
// that is the one within P; where neither is (P near float64's resolution
// at the values' magnitude), the batch is tried once more with a step a
// millionth smaller, and otherwise goes out exact, as kind 1. So does a
// batch with a coordinate that is not finite, or an integer beyond 2^53
// (no float64 holds it), or more cells than 32 bits count.

// quantizer builds kind 6 payloads; one per answer, its buffers reused
// from batch to batch.
type quantizer struct {
	axis     []float64   // one axis of a batch, as float64 (types but float32)
	cells    []uint32    // one axis's cell numbers (types but float32 × 3)
	lo, hi   []float64   // each axis's smallest and largest value
	k0, span []float64   // each axis's first cell and cells
	out      []byte      // the payload being built
	rules    [3]cellRule // a float32 × 3 batch's, for cells3
	// axisByAxis: float32 × 3 batches too go through bounds and float32s
	// an axis at a time, not bounds3 and cells3 (tests compare the two).
	axisByAxis bool
}

// margins are the steps tried: 2P, then a millionth less (see above).
var quantMargins = [...]float64{1, 1 - 0x1p-20}

// quantize returns the kind 6 payload of col's rows (dims values each) at
// precision p and its bits per value, or ok false when the batch must go
// out exact. The payload is the quantizer's buffer, valid until the next
// call.
func (z *quantizer) quantize(col *zvf.Column, rows, dims int, p float64) (payload []byte, bits int, ok bool) {
	if dims <= 0 || rows < 0 || len(col.Data) < rows*dims*col.ItemBytes() {
		return nil, 0, false
	}
	z.lo, z.hi = growFloats(z.lo, dims), growFloats(z.hi, dims)
	z.k0, z.span = growFloats(z.k0, dims), growFloats(z.span, dims)
	if col.DType == "float32" && dims == 3 && !z.axisByAxis {
		if !bounds3(col.Data[:12*rows], z.lo, z.hi) {
			return nil, 0, false
		}
	} else {
		for a := range dims {
			var lo, hi float64
			if lo, hi, ok = z.bounds(col, rows, dims, a); !ok {
				return nil, 0, false
			}
			z.lo[a], z.hi[a] = lo, hi
		}
	}
	for _, m := range quantMargins {
		s := 2 * p * m
		if !(s > 0) || math.IsInf(s, 0) {
			return nil, 0, false
		}
		if payload, bits, ok = z.build(col, rows, dims, s, p); ok {
			return payload, bits, true
		}
	}
	return nil, 0, false
}

// bounds is axis a's smallest and largest value, or ok false when one is
// not finite or has no exact float64. With no rows both are 0.
func (z *quantizer) bounds(col *zvf.Column, rows, dims, a int) (lo, hi float64, ok bool) {
	if rows == 0 {
		return 0, 0, true
	}
	r := extent{lo: math.Inf(1), hi: math.Inf(-1)}
	if col.DType == "float32" {
		d := col.Data
		for i := range rows {
			r.add(float64(math.Float32frombits(binary.LittleEndian.Uint32(d[4*(i*dims+a):]))))
		}
	} else {
		v, ok := z.decode(col, rows, dims, a)
		if !ok {
			return 0, 0, false
		}
		for _, x := range v {
			r.add(x)
		}
	}
	return r.lo, r.hi, r.nan == 0 && r.lo-r.lo == 0 && r.hi-r.hi == 0
}

// bounds3 is bounds for float32 × 3 rows, every axis in one pass over
// the rows in order (bounds reads each axis apart, a value every 12
// bytes), 8 rows a step where the CPU has the steps (bounds3SIMD): their
// smallest and largest values into lo and hi, or false when one is not
// finite (exponent bits all set: NaN or ±Inf). Compared as float32, which
// float64 widens exactly. Of a −0 and a +0 either may be the bound: the
// payload is the same (k0 = ⌊±0/s⌋ decodes alike). With no rows all are 0.
func bounds3(d []byte, lo, hi []float64) bool {
	if len(d) == 0 {
		lo[0], lo[1], lo[2], hi[0], hi[1], hi[2] = 0, 0, 0, 0, 0, 0
		return true
	}
	const exp = 0x7f800000
	var x0, y0, z0, x1, y1, z1 float32
	steps := 0
	if len(d) >= 96 {
		var b [6]float32
		var bad bool
		if steps, bad = bounds3SIMD(d, &b); bad {
			return false
		}
		if steps > 0 {
			x0, y0, z0, x1, y1, z1 = b[0], b[1], b[2], b[3], b[4], b[5]
			d = d[96*steps:]
		}
	}
	if steps == 0 {
		// The first row's bits are checked by the loop below.
		x0 = math.Float32frombits(binary.LittleEndian.Uint32(d))
		y0 = math.Float32frombits(binary.LittleEndian.Uint32(d[4:]))
		z0 = math.Float32frombits(binary.LittleEndian.Uint32(d[8:]))
		x1, y1, z1 = x0, y0, z0
	}
	for ; len(d) >= 12; d = d[12:] {
		bx, by, bz := binary.LittleEndian.Uint32(d), binary.LittleEndian.Uint32(d[4:]), binary.LittleEndian.Uint32(d[8:])
		// Non-finite values are found by their bits; the comparisons
		// below then see only numbers.
		if bx&exp == exp || by&exp == exp || bz&exp == exp {
			return false
		}
		x, y, z := math.Float32frombits(bx), math.Float32frombits(by), math.Float32frombits(bz)
		if x < x0 {
			x0 = x
		}
		if x > x1 {
			x1 = x
		}
		if y < y0 {
			y0 = y
		}
		if y > y1 {
			y1 = y
		}
		if z < z0 {
			z0 = z
		}
		if z > z1 {
			z1 = z
		}
	}
	lo[0], lo[1], lo[2] = float64(x0), float64(y0), float64(z0)
	hi[0], hi[1], hi[2] = float64(x1), float64(y1), float64(z1)
	return true
}

// extent gathers the smallest and largest of values. A NaN fails every
// comparison: nan counts them (x != x), and ±Inf leaves lo or hi
// infinite.
type extent struct {
	lo, hi float64
	nan    int
}

func (r *extent) add(x float64) {
	if x < r.lo {
		r.lo = x
	}
	if x > r.hi {
		r.hi = x
	}
	if x != x {
		r.nan++
	}
}

// build is one try at step s.
func (z *quantizer) build(col *zvf.Column, rows, dims int, s, p float64) ([]byte, int, bool) {
	cells := 0.0
	for a := range dims {
		k0, k1 := math.Floor(z.lo[a]/s), math.Floor(z.hi[a]/s)
		// Cell numbers must be whole float64s for the offsets to be exact.
		if !(math.Abs(k0) < 1<<52 && math.Abs(k1) < 1<<52) {
			return nil, 0, false
		}
		z.k0[a], z.span[a] = k0, k1-k0+1
		cells = max(cells, k1-k0+1)
	}
	var bits int
	switch {
	case cells <= 1<<8:
		bits = 8
	case cells <= 1<<16:
		bits = 16
	case cells <= 1<<32:
		bits = 32
	default:
		return nil, 0, false
	}
	w := bits / 8
	n := 16*dims + rows*dims*w
	if cap(z.out) < n {
		z.out = make([]byte, n)
	}
	out := z.out[:n]
	fused := col.DType == "float32" && dims == 3 && !z.axisByAxis
	if !fused && cap(z.cells) < rows {
		z.cells = make([]uint32, rows)
	}
	inv := 1 / s
	for a := range dims {
		off := (z.k0[a] + 0.5) * s
		binary.LittleEndian.PutUint64(out[8*a:], math.Float64bits(off))
		binary.LittleEndian.PutUint64(out[8*(dims+a):], math.Float64bits(s))
		if fused {
			// Field by field: a cellRule built whole and copied in costs
			// its stores' forwarding to the copy's wider loads, about as
			// much as a small batch's cells.
			r := &z.rules[a]
			r.s, r.inv, r.k0, r.last, r.p, r.off = s, inv, z.k0[a], z.span[a]-1, p, off
			continue
		}
		c := cellRule{s: s, inv: inv, k0: z.k0[a], last: z.span[a] - 1, p: p, off: off}
		qs := z.cells[:rows]
		var ok bool
		if col.DType == "float32" {
			ok = c.float32s(qs, col.Data, dims, a)
		} else {
			v, _ := z.decode(col, rows, dims, a) // decoded once before: cannot fail
			ok = c.float64s(qs, v)
		}
		if !ok {
			return nil, 0, false
		}
		putCells(out[16*dims+a*rows*w:16*dims+(a+1)*rows*w], qs, w)
	}
	if fused && !cells3(out[48:], w, col.Data[:12*rows], &z.rules) {
		return nil, 0, false
	}
	return out, bits, true
}

// putCells writes qs to dst as w-byte little-endian integers.
func putCells(dst []byte, qs []uint32, w int) {
	switch w {
	case 1:
		for i, q := range qs {
			dst[i] = byte(q)
		}
	case 2:
		for i, q := range qs {
			binary.LittleEndian.PutUint16(dst[2*i:], uint16(q))
		}
	default:
		for i, q := range qs {
			binary.LittleEndian.PutUint32(dst[4*i:], q)
		}
	}
}

// cells3 is float32s for the three axes of float32 × 3 rows d in one pass
// over the rows in order (float32s reads an axis a value every 12 bytes),
// 8 rows a step where the CPU has the steps (cells3SIMD, rules as k) and a
// row at a time around them and in batches of fewer rows: the cells of
// axis a into out's plane a (out[a·rows·w:], w-byte little-endian
// integers). False as float32s.
func cells3(out []byte, w int, d []byte, rules *[3]cellRule) bool {
	rows := len(d) / 12
	stride := rows * w
	if len(out) < 3*stride {
		return false
	}
	px, py, pz := out[:stride], out[stride:2*stride], out[2*stride:3*stride]
	cx, cy, cz := rules[0], rules[1], rules[2]
	for i := 0; i < rows; {
		end := rows
		if rows-i >= 8 {
			if n, ok := cells3SIMD(d[12*i:12*rows], out[i*w:], stride, w, rules); ok {
				// The steps stop at a step with a value by a cell's edge
				// (or before the last rows): that step a row at a time,
				// then steps again.
				i += n
				end = min(rows, i+8)
			}
		}
		for ; i < end; i++ {
			p := d[12*i : 12*i+12 : 12*i+12]
			x := float64(math.Float32frombits(binary.LittleEndian.Uint32(p)))
			y := float64(math.Float32frombits(binary.LittleEndian.Uint32(p[4:])))
			z := float64(math.Float32frombits(binary.LittleEndian.Uint32(p[8:])))
			qx, ox := cx.first(x)
			qy, oy := cy.first(y)
			qz, oz := cz.first(z)
			if !(ox && oy && oz) {
				// A value by a cell's edge: cell tries the neighbours.
				var ok bool
				if qx, ok = cx.cell(x); !ok {
					return false
				}
				if qy, ok = cy.cell(y); !ok {
					return false
				}
				if qz, ok = cz.cell(z); !ok {
					return false
				}
			}
			switch w {
			case 1:
				px[i], py[i], pz[i] = byte(qx), byte(qy), byte(qz)
			case 2:
				binary.LittleEndian.PutUint16(px[2*i:], uint16(qx))
				binary.LittleEndian.PutUint16(py[2*i:], uint16(qy))
				binary.LittleEndian.PutUint16(pz[2*i:], uint16(qz))
			default:
				binary.LittleEndian.PutUint32(px[4*i:], qx)
				binary.LittleEndian.PutUint32(py[4*i:], qy)
				binary.LittleEndian.PutUint32(pz[4*i:], qz)
			}
		}
	}
	return true
}

// cellRule puts one axis's values in their cells: the cell of x is
// x/s − k0 rounded down (within [0, last]), and decodes to off + q × s.
// Its fields' order is quantize_amd64.s's (RULE).
type cellRule struct{ s, inv, k0, last, p, off float64 }

// cell is x's cell number, checked as a client decodes it: float64(q*s)
// keeps the compiler from fusing the multiply and add, as a client's
// float64 arithmetic does not. x × (1/s) may round across a cell's edge:
// the neighbouring cell is then the one within p (ok false if neither).
// The loops below inline its first try (first) and call it for the rest.
func (c *cellRule) cell(x float64) (uint32, bool) {
	q, ok := c.first(x)
	if ok {
		return q, true
	}
	switch k := float64(q); {
	case k > 0 && math.Abs(c.off+float64((k-1)*c.s)-x) <= c.p:
		return q - 1, true
	case k < c.last && math.Abs(c.off+float64((k+1)*c.s)-x) <= c.p:
		return q + 1, true
	}
	return 0, false
}

// first is cell's first try alone (small enough to inline): x's cell,
// rounded down, and whether it decodes within p. Truncation is rounding
// down here: the clamp leaves t ≥ 0 (explicit comparisons: the min and
// max builtins' NaN rules cost a third).
func (c *cellRule) first(x float64) (uint32, bool) {
	t := float64(x*c.inv) - c.k0 // never fused: cells3's steps round the product too
	if t < 0 {
		t = 0
	} else if t > c.last {
		t = c.last
	}
	k := float64(int64(t))
	return uint32(k), math.Abs(c.off+float64(k*c.s)-x) <= c.p
}

// float32s fills qs with the cells of axis a of d's float32 rows.
func (c *cellRule) float32s(qs []uint32, d []byte, dims, a int) bool {
	for i := range qs {
		x := float64(math.Float32frombits(binary.LittleEndian.Uint32(d[4*(i*dims+a):])))
		var ok bool
		if qs[i], ok = c.first(x); ok {
			continue
		}
		if qs[i], ok = c.cell(x); !ok {
			return false
		}
	}
	return true
}

// float64s fills qs with the cells of v's values.
func (c *cellRule) float64s(qs []uint32, v []float64) bool {
	for i, x := range v {
		q, ok := c.cell(x)
		if !ok {
			return false
		}
		qs[i] = q
	}
	return true
}

// decode puts axis a of col's rows into z.axis as float64, or reports
// false for a value no float64 holds exactly.
func (z *quantizer) decode(col *zvf.Column, rows, dims, a int) ([]float64, bool) {
	z.axis = growFloats(z.axis, rows)
	v := z.axis
	d := col.Data
	switch col.DType {
	case "float32":
		for i := range v {
			v[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(d[4*(i*dims+a):])))
		}
	case "float64":
		for i := range v {
			v[i] = math.Float64frombits(binary.LittleEndian.Uint64(d[8*(i*dims+a):]))
		}
	default:
		for i := range v {
			n := col.At(i*dims + a)
			switch n.Kind {
			case zvf.KindFloat:
				v[i] = n.F
			case zvf.KindInt:
				if n.I > 1<<53 || n.I < -1<<53 {
					return nil, false
				}
				v[i] = float64(n.I)
			default:
				if n.U > 1<<53 {
					return nil, false
				}
				v[i] = float64(n.U)
			}
		}
	}
	return v, true
}

// grow is s with length n, reallocated only when too small.
func growFloats(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	return s[:n]
}
