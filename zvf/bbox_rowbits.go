package zvf

import (
	"encoding/binary"
	"math"
	"slices"
)

// Rows tested as bits. A float32 range [lo, hi] that lies wholly above
// zero (lo > 0) or wholly below it (hi < 0) is a run of the values' bit
// patterns read as unsigned integers: positive floats order as their
// bits, negative ones in reverse. So a row's value x is inside exactly
// when x-l < w+1 for l the run's first pattern and w its width (x-l a
// uint32, wrapping; the compare in int64, so its sign is the verdict and
// three axes' verdicts are one AND): no float compare. Patterns outside
// the run are rejected whatever they are: the other sign, -0 and +0 (the
// run holds no zero), NaN (beyond ±Inf's pattern on its side). A range
// that holds a zero would be two runs (-0's and +0's); there the rows
// are tested by key instead: rowKey maps every float32 to an int32 in the
// floats' order, so any range is one run of keys, at three instructions
// more an axis a row (measured: more than the plain bits where those
// apply, so both kernels stay). An empty range, or one with a NaN bound,
// keeps the float test (rowBits' ok and okKey lack it).
//
// The kernels test four rows a step: each row is written (its number,
// its bytes) and the ends advance only for a row inside, as the float
// kernels do; a step's offsets are sums of bits the compiler bounds, so
// its writes into a fixed-size view need no check.

// rowBits are a box's float32 bounds as runs of bits, per axis: l, w
// where the axis's bit in ok is set; and as runs of keys (rowKey): kl, kw
// where its bit in okKey is set.
type rowBits struct {
	l, w   [3]uint32
	kl, kw [3]uint32
	ok     uint8
	okKey  uint8
}

// newRowBits finds the runs of the float32 bounds lo, hi (f32Bounds').
func newRowBits(lo, hi [3]float32) rowBits {
	var b rowBits
	for i := range 3 {
		if !(lo[i] <= hi[i]) { // empty, or a NaN bound: the float test
			continue
		}
		bl, bh := math.Float32bits(lo[i]), math.Float32bits(hi[i])
		kl, kh := rowKey(bl), rowKey(bh)
		if lo[i] == 0 { // -0 is +0 to the float test: both inside
			kl = rowKey(1 << 31)
		}
		if hi[i] == 0 {
			kh = rowKey(0)
		}
		b.kl[i], b.kw[i] = kl, kh-kl
		b.okKey |= 1 << i
		switch {
		case lo[i] > 0:
			b.l[i], b.w[i] = bl, bh-bl
		case hi[i] < 0:
			b.l[i], b.w[i] = bh, bl-bh
		default:
			continue
		}
		b.ok |= 1 << i
	}
	return b
}

// rowKey maps a float32's bits to a key, read as an int32 in the floats'
// order: a positive float keeps its bits, a negative one has its
// magnitude's bits flipped (-0 → -1, just below +0 → 0, -Inf far below),
// and NaNs lie beyond ±Inf on their sign's side.
func rowKey(x uint32) uint32 { return x ^ uint32(int32(x)>>31)>>1 }

// rowPath chooses the row kernels' path: the fastest here (rowsBest),
// or, for tests and benchmarks comparing the paths, the Go kernels alone
// (rowsGo) or the AVX2 steps (rowsAVX2: the Go kernels where there are
// none).
type rowPath uint8

const (
	rowsBest rowPath = iota
	rowsGo
	rowsAVX2
)

// bitRuns are the runs the kernels take: per axis its first pattern l
// and its width plus one, l at 2i and w+1 at 2i+1.
type bitRuns [6]int64

// runs is the runs of the axes in axes (of keys when keyed), and every
// pattern on the others (the caller knows the rows hold there).
func (b *rowBits) runs(axes uint8, keyed bool) (r bitRuns) {
	l, w := &b.l, &b.w
	if keyed {
		l, w = &b.kl, &b.kw
	}
	for i := range 3 {
		r[2*i], r[2*i+1] = 0, 1<<32
		if axes&(1<<i) != 0 {
			r[2*i], r[2*i+1] = int64(l[i]), int64(w[i])+1
		}
	}
	return r
}

// The helpers below are flat expressions: an inlined call that calls
// another leaves a marker instruction in the loop.

// The kernels are instantiated twice: K uint32 tests a row's bits, K
// int32 its keys. x ^ uint32(K(x)>>31)>>1 is rowKey(x) for K int32 (the
// shift copies the sign) and x itself for K uint32 (the shifts make
// zero, and the compiler folds them), so the bits kernels pay nothing.
// The expressions stay under the inlining budget (80) for both.
type runKey interface{ ~uint32 | ~int32 }

// keep1 is 1 when x (as K) lies in the run (l, w1 = w+1), else 0; keep12
// is 12 then.
func keep1[K runKey](x, l uint32, w1 int64) uint {
	return uint(int64(x^uint32(K(x)>>31)>>1-l)-w1) >> 63
}
func keep12[K runKey](x, l uint32, w1 int64) uint {
	return uint((int64(x^uint32(K(x)>>31)>>1-l)-w1)>>63) & 12
}

// keep3 is 1 when row p lies in the runs on every axis, else 0; keep312
// is 12 then.
func keep3[K runKey](p *[12]byte, lx, ly, lz uint32, wx, wy, wz int64) uint {
	return uint((int64(binary.LittleEndian.Uint32(p[0:])^uint32(K(binary.LittleEndian.Uint32(p[0:]))>>31)>>1-lx)-wx)&
		(int64(binary.LittleEndian.Uint32(p[4:])^uint32(K(binary.LittleEndian.Uint32(p[4:]))>>31)>>1-ly)-wy)&
		(int64(binary.LittleEndian.Uint32(p[8:])^uint32(K(binary.LittleEndian.Uint32(p[8:]))>>31)>>1-lz)-wz)) >> 63
}
func keep312[K runKey](p *[12]byte, lx, ly, lz uint32, wx, wy, wz int64) uint {
	return uint(((int64(binary.LittleEndian.Uint32(p[0:])^uint32(K(binary.LittleEndian.Uint32(p[0:]))>>31)>>1-lx)-wx)&
		(int64(binary.LittleEndian.Uint32(p[4:])^uint32(K(binary.LittleEndian.Uint32(p[4:]))>>31)>>1-ly)-wy)&
		(int64(binary.LittleEndian.Uint32(p[8:])^uint32(K(binary.LittleEndian.Uint32(p[8:]))>>31)>>1-lz)-wz))>>63) & 12
}

// axisOff is the offset of axis (0, 1 or 2) in a row, bounded so the
// compiler knows a value read there lies in the row.
func axisOff(axis int) uint {
	x := uint(4 * axis)
	if x > 8 {
		x = 8
	}
	return x
}

// rowKeep is keep1 of one row on the runs, for the kernels' last rows
// (axis as theirs).
func rowKeep[K runKey](p *[12]byte, axis int, runs *bitRuns) uint {
	if axis >= 0 {
		return keep1[K](binary.LittleEndian.Uint32(p[axisOff(axis):]), uint32(runs[2*axis]), runs[2*axis+1])
	}
	return keep3[K](p, uint32(runs[0]), uint32(runs[2]), uint32(runs[4]), runs[1], runs[3], runs[5])
}

// copyBits appends to vout the 12 bytes of each row of src inside the
// runs, of keys when keyed (axis is the one axis tested, or -1 for runs of
// every axis). The vector steps of path (simdRows) take the rows first;
// the Go kernels the rest.
func copyBits(vout, src []byte, axis int, runs *bitRuns, keyed bool, path rowPath) []byte {
	if simdRows(path) {
		v := len(vout)
		vout = slices.Grow(vout, len(src))
		done, kept := copyRowsSIMD(vout[v:v+len(src)], src, runs, keyed, path)
		vout, src = vout[:v+12*kept], src[done:]
	}
	if keyed {
		return copyRuns[int32](vout, src, axis, runs)
	}
	return copyRuns[uint32](vout, src, axis, runs)
}

// copyRuns is copyBits of K's runs.
func copyRuns[K runKey](vout, src []byte, axis int, runs *bitRuns) []byte {
	v := len(vout)
	vout = slices.Grow(vout, len(src))[:v+len(src)]
	dst := vout[v:]
	var n uint
	if axis >= 0 {
		x, l, w := axisOff(axis), uint32(runs[2*axis]), runs[2*axis+1]
		for ; len(src) >= 48; src = src[48:] {
			s, d := (*[48]byte)(src), (*[48]byte)(dst[n:n+48])
			*(*[12]byte)(d[0:12]) = [12]byte(s[0:12])
			o := keep12[K](binary.LittleEndian.Uint32(s[x:]), l, w)
			*(*[12]byte)(d[o : o+12]) = [12]byte(s[12:24])
			o += keep12[K](binary.LittleEndian.Uint32(s[12+x:]), l, w)
			*(*[12]byte)(d[o : o+12]) = [12]byte(s[24:36])
			o += keep12[K](binary.LittleEndian.Uint32(s[24+x:]), l, w)
			*(*[12]byte)(d[o : o+12]) = [12]byte(s[36:48])
			n += o + keep12[K](binary.LittleEndian.Uint32(s[36+x:]), l, w)
		}
	} else {
		lx, ly, lz, wx, wy, wz := uint32(runs[0]), uint32(runs[2]), uint32(runs[4]), runs[1], runs[3], runs[5]
		for ; len(src) >= 48; src = src[48:] {
			s, d := (*[48]byte)(src), (*[48]byte)(dst[n:n+48])
			*(*[12]byte)(d[0:12]) = [12]byte(s[0:12])
			o := keep312[K]((*[12]byte)(s[0:12]), lx, ly, lz, wx, wy, wz)
			*(*[12]byte)(d[o : o+12]) = [12]byte(s[12:24])
			o += keep312[K]((*[12]byte)(s[12:24]), lx, ly, lz, wx, wy, wz)
			*(*[12]byte)(d[o : o+12]) = [12]byte(s[24:36])
			o += keep312[K]((*[12]byte)(s[24:36]), lx, ly, lz, wx, wy, wz)
			*(*[12]byte)(d[o : o+12]) = [12]byte(s[36:48])
			n += o + keep312[K]((*[12]byte)(s[36:48]), lx, ly, lz, wx, wy, wz)
		}
	}
	// The last rows, fewer than four, one at a time.
	for ; len(src) >= 12; src = src[12:] {
		p := (*[12]byte)(src)
		*(*[12]byte)(dst[n : n+12]) = *p
		n += 12 * rowKeep[K](p, axis, runs)
	}
	return vout[:v+int(n)]
}

// matchBits appends to out the numbers of the rows of src inside the
// runs (src's first row is row r), and, when vout is not nil, their 12
// bytes to *vout; axis, keyed and path as copyBits'.
func matchBits(out []int32, vout *[]byte, src []byte, r int32, axis int, runs *bitRuns, keyed bool, path rowPath) []int32 {
	if simdRows(path) {
		k, rows := len(out), len(src)/12
		out = slices.Grow(out, rows)
		var dst []byte
		if vout != nil {
			v := len(*vout)
			*vout = slices.Grow(*vout, len(src))
			dst = (*vout)[v : v+len(src)]
		}
		done, kept := matchRowsSIMD(out[k:k+rows], dst, src, r, runs, keyed, path)
		out, src, r = out[:k+kept], src[done:], r+int32(done/12)
		if vout != nil {
			*vout = (*vout)[:len(*vout)+12*kept]
		}
	}
	if keyed {
		return matchRuns[int32](out, vout, src, r, axis, runs)
	}
	return matchRuns[uint32](out, vout, src, r, axis, runs)
}

// matchRuns is matchBits of K's runs.
func matchRuns[K runKey](out []int32, vout *[]byte, src []byte, r int32, axis int, runs *bitRuns) []int32 {
	k, rows := len(out), len(src)/12
	out = slices.Grow(out, rows)[:k+rows]
	nums := out[k:]
	var dst []byte // the bytes' room (vout set)
	v := 0
	if vout != nil {
		v = len(*vout)
		*vout = slices.Grow(*vout, len(src))[:v+len(src)]
		dst = (*vout)[v:]
	}
	var n uint
	x, l, w := axisOff(max(axis, 0)), uint32(runs[2*max(axis, 0)]), runs[2*max(axis, 0)+1]
	lx, ly, lz, wx, wy, wz := uint32(runs[0]), uint32(runs[2]), uint32(runs[4]), runs[1], runs[3], runs[5]
	switch {
	case vout != nil && axis >= 0:
		// Numbers and bytes: each row's test is made once for both.
		for ; len(src) >= 48; src, r = src[48:], r+4 {
			s, d, dv := (*[48]byte)(src), (*[4]int32)(nums[n:n+4]), (*[48]byte)(dst[12*n:12*n+48])
			d[0], *(*[12]byte)(dv[0:12]) = r, [12]byte(s[0:12])
			o := keep1[K](binary.LittleEndian.Uint32(s[x:]), l, w)
			d[o], *(*[12]byte)(dv[12*o : 12*o+12]) = r+1, [12]byte(s[12:24])
			o += keep1[K](binary.LittleEndian.Uint32(s[12+x:]), l, w)
			d[o], *(*[12]byte)(dv[12*o : 12*o+12]) = r+2, [12]byte(s[24:36])
			o += keep1[K](binary.LittleEndian.Uint32(s[24+x:]), l, w)
			d[o], *(*[12]byte)(dv[12*o : 12*o+12]) = r+3, [12]byte(s[36:48])
			n += o + keep1[K](binary.LittleEndian.Uint32(s[36+x:]), l, w)
		}
	case vout != nil:
		for ; len(src) >= 48; src, r = src[48:], r+4 {
			s, d, dv := (*[48]byte)(src), (*[4]int32)(nums[n:n+4]), (*[48]byte)(dst[12*n:12*n+48])
			d[0], *(*[12]byte)(dv[0:12]) = r, [12]byte(s[0:12])
			o := keep3[K]((*[12]byte)(s[0:12]), lx, ly, lz, wx, wy, wz)
			d[o], *(*[12]byte)(dv[12*o : 12*o+12]) = r+1, [12]byte(s[12:24])
			o += keep3[K]((*[12]byte)(s[12:24]), lx, ly, lz, wx, wy, wz)
			d[o], *(*[12]byte)(dv[12*o : 12*o+12]) = r+2, [12]byte(s[24:36])
			o += keep3[K]((*[12]byte)(s[24:36]), lx, ly, lz, wx, wy, wz)
			d[o], *(*[12]byte)(dv[12*o : 12*o+12]) = r+3, [12]byte(s[36:48])
			n += o + keep3[K]((*[12]byte)(s[36:48]), lx, ly, lz, wx, wy, wz)
		}
	case axis >= 0:
		for ; len(src) >= 48; src, r = src[48:], r+4 {
			s, d := (*[48]byte)(src), (*[4]int32)(nums[n:n+4])
			d[0] = r
			o := keep1[K](binary.LittleEndian.Uint32(s[x:]), l, w)
			d[o] = r + 1
			o += keep1[K](binary.LittleEndian.Uint32(s[12+x:]), l, w)
			d[o] = r + 2
			o += keep1[K](binary.LittleEndian.Uint32(s[24+x:]), l, w)
			d[o] = r + 3
			n += o + keep1[K](binary.LittleEndian.Uint32(s[36+x:]), l, w)
		}
	default:
		for ; len(src) >= 48; src, r = src[48:], r+4 {
			s, d := (*[48]byte)(src), (*[4]int32)(nums[n:n+4])
			d[0] = r
			o := keep3[K]((*[12]byte)(s[0:12]), lx, ly, lz, wx, wy, wz)
			d[o] = r + 1
			o += keep3[K]((*[12]byte)(s[12:24]), lx, ly, lz, wx, wy, wz)
			d[o] = r + 2
			o += keep3[K]((*[12]byte)(s[24:36]), lx, ly, lz, wx, wy, wz)
			d[o] = r + 3
			n += o + keep3[K]((*[12]byte)(s[36:48]), lx, ly, lz, wx, wy, wz)
		}
	}
	for ; len(src) >= 12; src, r = src[12:], r+1 {
		p := (*[12]byte)(src)
		nums[n] = r
		if vout != nil {
			*(*[12]byte)(dst[12*n : 12*n+12]) = *p
		}
		n += rowKeep[K](p, axis, runs)
	}
	if vout != nil {
		*vout = (*vout)[:v+12*int(n)]
	}
	return out[:k+int(n)]
}
