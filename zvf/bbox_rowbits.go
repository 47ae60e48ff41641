package zvf

import (
	"encoding/binary"
	"math"
	"slices"
)

// Rows tested as bits. A float32 range [lo, hi] that lies wholly above
// zero (lo > 0) or wholly below it (hi < 0) is a run of the values' bit
// patterns read as unsigned integers: positive floats order as their
// bits, negative ones in reverse. So a row's value is inside exactly
// when bits-l <= w (uint32, wrapping) for l the run's first pattern and
// w its width: one subtraction and one unsigned compare an axis, no
// float compare. Patterns outside the run are rejected whatever they
// are: the other sign, -0 and +0 (the run holds no zero), NaN (beyond
// ±Inf's pattern on its side). A range that holds a zero would be two
// runs (-0's and +0's), and an empty one none: those axes keep the float
// test (rowBits' ok lacks them).
//
// The kernels below test four rows a step: each row is written (its
// number, its bytes) and the ends advance only for a row inside, as the
// float kernels do; a step's offsets are sums of masked bits the
// compiler bounds, so its writes into a fixed-size view need no check.

// rowBits are a box's float32 bounds as runs of bits, per axis: l, w
// where the axis's bit in ok is set.
type rowBits struct {
	l, w [3]uint32
	ok   uint8
}

// newRowBits finds the runs of the float32 bounds lo, hi (f32Bounds').
func newRowBits(lo, hi [3]float32) rowBits {
	var b rowBits
	for i := range 3 {
		bl, bh := math.Float32bits(lo[i]), math.Float32bits(hi[i])
		switch {
		case lo[i] > 0 && lo[i] <= hi[i]:
			b.l[i], b.w[i] = bl, bh-bl
		case hi[i] < 0 && lo[i] <= hi[i]:
			b.l[i], b.w[i] = bh, bl-bh
		default:
			continue
		}
		b.ok |= 1 << i
	}
	return b
}

// axes3 is the runs of the axes in axes, every pattern on the others
// (the caller knows the rows hold there), as the kernels take them.
func (b *rowBits) axes3(axes uint8) (runs [6]uint32) {
	for i := range 3 {
		runs[2*i], runs[2*i+1] = 0, math.MaxUint32
		if axes&(1<<i) != 0 {
			runs[2*i], runs[2*i+1] = b.l[i], b.w[i]
		}
	}
	return runs
}

// outBits is negative exactly when x is outside the run (l, w).
func outBits(x, l, w uint32) int64 { return int64(w) - int64(x-l) }

// out3 is negative exactly when row p is outside the runs on some axis.
func out3(p *[12]byte, lx, wx, ly, wy, lz, wz uint32) int64 {
	return outBits(binary.LittleEndian.Uint32(p[0:]), lx, wx) |
		outBits(binary.LittleEndian.Uint32(p[4:]), ly, wy) |
		outBits(binary.LittleEndian.Uint32(p[8:]), lz, wz)
}

// in1 is 1 when o (outBits') says inside, else 0; in12 is 12 then.
func in1(o int64) uint  { return uint(^o) >> 63 }
func in12(o int64) uint { return uint(^(o >> 63)) & 12 }

// copyBits appends to vout the 12 bytes of each row of src inside the
// runs (axis is the one axis tested, or -1 for runs of every axis).
func copyBits(vout, src []byte, axis int, runs *[6]uint32) []byte {
	v := len(vout)
	vout = slices.Grow(vout, len(src))[:v+len(src)]
	dst := vout[v:]
	var n uint
	i := 48
	if axis >= 0 {
		l, w := runs[2*axis], runs[2*axis+1]
		off := 4 * axis
		for ; i <= len(src); i += 48 {
			s := (*[48]byte)(src[i-48 : i])
			x := (*[40]byte)(src[i-48+off : i-8+off]) // the axis's values at 0, 12, 24, 36
			d := (*[48]byte)(dst[n : n+48])
			*(*[12]byte)(d[0:12]) = [12]byte(s[0:12])
			o := in12(outBits(binary.LittleEndian.Uint32(x[0:]), l, w))
			*(*[12]byte)(d[o : o+12]) = [12]byte(s[12:24])
			o += in12(outBits(binary.LittleEndian.Uint32(x[12:]), l, w))
			*(*[12]byte)(d[o : o+12]) = [12]byte(s[24:36])
			o += in12(outBits(binary.LittleEndian.Uint32(x[24:]), l, w))
			*(*[12]byte)(d[o : o+12]) = [12]byte(s[36:48])
			o += in12(outBits(binary.LittleEndian.Uint32(x[36:]), l, w))
			n += o
		}
	} else {
		lx, wx, ly, wy, lz, wz := runs[0], runs[1], runs[2], runs[3], runs[4], runs[5]
		for ; i <= len(src); i += 48 {
			s := (*[48]byte)(src[i-48 : i])
			d := (*[48]byte)(dst[n : n+48])
			*(*[12]byte)(d[0:12]) = [12]byte(s[0:12])
			o := in12(out3((*[12]byte)(s[0:12]), lx, wx, ly, wy, lz, wz))
			*(*[12]byte)(d[o : o+12]) = [12]byte(s[12:24])
			o += in12(out3((*[12]byte)(s[12:24]), lx, wx, ly, wy, lz, wz))
			*(*[12]byte)(d[o : o+12]) = [12]byte(s[24:36])
			o += in12(out3((*[12]byte)(s[24:36]), lx, wx, ly, wy, lz, wz))
			*(*[12]byte)(d[o : o+12]) = [12]byte(s[36:48])
			o += in12(out3((*[12]byte)(s[36:48]), lx, wx, ly, wy, lz, wz))
			n += o
		}
	}
	// The last rows, fewer than four, one at a time.
	for r := i - 48; r+12 <= len(src); r += 12 {
		p := (*[12]byte)(src[r : r+12])
		*(*[12]byte)(dst[n : n+12]) = *p
		n += in12(rowOut(p, axis, runs))
	}
	return vout[:v+int(n)]
}

// rowOut is out3 of one row for copyBits' and matchBits' last rows.
func rowOut(p *[12]byte, axis int, runs *[6]uint32) int64 {
	if axis >= 0 {
		return outBits(binary.LittleEndian.Uint32(p[4*axis:]), runs[2*axis], runs[2*axis+1])
	}
	return out3(p, runs[0], runs[1], runs[2], runs[3], runs[4], runs[5])
}

// matchBits appends to out the numbers of the rows of src inside the
// runs (src's first row is row r), and, when vout is not nil, their 12
// bytes to *vout; axis as copyBits'.
func matchBits(out []int32, vout *[]byte, src []byte, r int32, axis int, runs *[6]uint32) []int32 {
	k := len(out)
	rows := len(src) / 12
	out = slices.Grow(out, rows)[:k+rows]
	nums := out[k:]
	if vout != nil {
		// Numbers and bytes in one pass would keep twice the ends in
		// registers; the bytes are copied by the same test first.
		*vout = copyBits(*vout, src, axis, runs)
	}
	var n uint
	i := 48
	if axis >= 0 {
		l, w := runs[2*axis], runs[2*axis+1]
		off := 4 * axis
		for ; i <= len(src); i, r = i+48, r+4 {
			x := (*[40]byte)(src[i-48+off : i-8+off])
			d := (*[4]int32)(nums[n : n+4])
			d[0] = r
			o := in1(outBits(binary.LittleEndian.Uint32(x[0:]), l, w))
			d[o] = r + 1
			o += in1(outBits(binary.LittleEndian.Uint32(x[12:]), l, w))
			d[o] = r + 2
			o += in1(outBits(binary.LittleEndian.Uint32(x[24:]), l, w))
			d[o] = r + 3
			o += in1(outBits(binary.LittleEndian.Uint32(x[36:]), l, w))
			n += o
		}
	} else {
		lx, wx, ly, wy, lz, wz := runs[0], runs[1], runs[2], runs[3], runs[4], runs[5]
		for ; i <= len(src); i, r = i+48, r+4 {
			s := (*[48]byte)(src[i-48 : i])
			d := (*[4]int32)(nums[n : n+4])
			d[0] = r
			o := in1(out3((*[12]byte)(s[0:12]), lx, wx, ly, wy, lz, wz))
			d[o] = r + 1
			o += in1(out3((*[12]byte)(s[12:24]), lx, wx, ly, wy, lz, wz))
			d[o] = r + 2
			o += in1(out3((*[12]byte)(s[24:36]), lx, wx, ly, wy, lz, wz))
			d[o] = r + 3
			o += in1(out3((*[12]byte)(s[36:48]), lx, wx, ly, wy, lz, wz))
			n += o
		}
	}
	for j := i - 48; j+12 <= len(src); j, r = j+12, r+1 {
		nums[n] = r
		n += in1(rowOut((*[12]byte)(src[j:j+12]), axis, runs))
	}
	return out[:k+int(n)]
}
