// Package jsonnum formats numbers for JSON output fast. A JSON vertex answer
// is mostly float32 coordinates, and strconv's general-purpose float
// formatting is what caps its throughput; AppendFloat32 writes the same
// bytes in well under strconv's time (BenchmarkAppendFloat32 against
// BenchmarkStrconv).
package jsonnum

//go:generate go run gen_tables.go

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"strconv"
)

// AppendFloat32 appends the shortest decimal form of v that parses back to
// the same float32, byte-for-byte identical to
// strconv.AppendFloat(dst, float64(v), 'g', -1, 32) for every finite v
// ("-0" included). NaN and the infinities, which JSON callers replace by
// null, are handed to strconv. It writes nothing past the bytes it appends,
// and does not allocate when dst has room for 16 more.
func AppendFloat32(dst []byte, v float32) []byte {
	b := math.Float32bits(v)
	ex := uint8(b >> 23)
	frac := b & (1<<23 - 1)
	sign := uint64(b >> 31)

	c, q := frac|1<<23, int(ex)-150 // |v| = c · 2^q
	switch ex {
	case 0xff:
		return strconv.AppendFloat(dst, float64(v), 'g', -1, 32)
	case 0:
		if frac == 0 {
			return append(dst, "-0"[1-sign:]...)
		}
		c, q = frac, -149
	}
	// Integers below 10^6 are printed as such: the float32s next to them
	// are at most 1/2 away, so no shorter decimal rounds to them.
	if sh := uint(-q); sh <= 23 && c&(1<<sh-1) == 0 && c>>sh < 1e6 {
		return appendDecimal(dst, sign, c>>sh, 0)
	}
	m, e := shortest(c, ex, frac == 0 && ex > 1)
	return appendDecimal(dst, sign, m, e)
}

// scale brings the float32 values of one exponent field (ulp 2^q) to the
// decimal scale of their shortest forms: x·2^q·10^-k = (x<<h)·g / 2^64,
// g being 10^-k·2^(64-h+q) rounded up. k is chosen so that the rounding
// interval around a value is 1 to 10 units of 10^k wide.
type scale struct {
	g uint64
	k int16
	h uint16 // 1 to 4
}

// shortest returns the decimal m·10^e that strconv's shortest formatting
// gives for c·2^q, q from the exponent field ex: the fewest digits that
// round back to c·2^q, the closest of those when there are several, an
// exact tie going to the even digit. For a power of two (irregular: the
// lower neighbour is twice as close) strconv breaks that tie upwards, and
// so does this. m has at most 9 digits, and may have trailing zeros.
//
// It is the Schubfach method: the rounding interval of c·2^q holds at most
// one multiple of 10 units of 10^k (then that is the answer) and at least
// one unit, so the answer is ⌊c·2^q/10^k⌋ or the unit above. The value and
// the two interval ends are scaled by 4·10^-k with one 64×64-bit product
// each, rounded to odd so that comparisons with even numbers stay exact.
func shortest(c uint32, ex uint8, irregular bool) (uint32, int) {
	cb := uint64(c) << 2 // the value, in quarter ulps
	cbl := cb - 2        // the lower end of its rounding interval
	sc := &scales[0][ex]
	tieUp := uint64(0)
	if irregular {
		cbl = cb - 1
		sc = &scales[1][ex]
		tieUp = 1
	}
	h := uint(sc.h) & 7
	vbHi, vbLo := bits.Mul64(sc.g, cb<<h)
	vb := vbHi | (vbLo>>32+(1<<32-1))>>32
	vbl := scaleOdd(sc.g, cbl<<h)
	vbr := scaleOdd(sc.g, (cb+2)<<h)

	// The interval ends are candidates only when c is even (ties round to
	// even when reading back); out makes the tests below strict.
	out := uint64(c & 1)
	lower := vbl + out
	upper := vbr - out

	// The choices are made with arithmetic rather than branches, which
	// random data would mispredict: all values are below 2^33, so x ≤ y is
	// the sign bit of y-x, flipped.
	s := vbHi >> 2 // ⌊c·2^q·10^-k⌋
	// s or s+1: s+1 when s is out, or when s+1 is in and closer or as
	// close, in a tie that goes to the even one, or up.
	sOut := (s<<2 - lower) >> 63
	s1In := (upper-(s+1)<<2)>>63 ^ 1
	mid := s<<2 + 2
	above := (mid - vb) >> 63
	tie := ((vb ^ mid) - 1) >> 63
	m := s + (sOut | s1In&(above|tie&(s&1|tieUp)))
	// But a multiple of 10 in the interval, t·10 or (t+1)·10, is shorter.
	t := s / 10
	tIn := (t*40-lower)>>63 ^ 1
	t1In := (upper-(t+1)*40)>>63 ^ 1
	coarse := tIn | t1In
	m += (t + t1In - m) & -coarse
	return uint32(m), int(sc.k) + int(coarse)
}

// scaleOdd is ⌊x·g / 2^64⌋ rounded to odd: its low bit is set when the
// product has a fraction. Only the fraction's top 32 bits are looked at, so
// g's rounding up (by less than x < 2^31 in the low word) never turns an
// exact product inexact; for float32 no inexact product comes that close
// to an integer (the exhaustive test checks every value).
func scaleOdd(g, x uint64) uint64 {
	hi, lo := bits.Mul64(g, x)
	return hi | (lo>>32+(1<<32-1))>>32
}

// appendDecimal appends ±m·10^e (sign 1 for minus) the way strconv's %g
// does at shortest precision: d.ddde±XX when the decimal exponent x of the
// first digit is below -4 or at least 6 (the precision %g assumes for the
// choice), plain digits with a point otherwise. m has at most 9 digits;
// trailing zeros in it are not significant.
//
// The digits are made all at once as ASCII in a 64-bit word, the text is
// laid out in two registers (lo holds bytes 0-7, hi 8-15) and stored with
// two overlapping word writes that cover exactly the new bytes: no loop,
// and, besides the choice of the exponent form, one data-dependent branch
// (on the digit count, which measured faster than computing it without).
func appendDecimal(dst []byte, sign uint64, m uint32, e int) []byte {
	nd := decimalLen(m)
	dp := nd + e // digits before the point (zero or less: zeros after it)

	// The 9 digits of m with leading zeros (d9 the first, w the others)
	// are moved down past the leading zeros, '0' coming in on top: d holds
	// the first 8 digits of m padded with '0', d8 the ninth.
	d9 := m / 1e8
	w := digits8(d9, m)
	ns := nd - bits.LeadingZeros64(w-0x3030303030303030)/8 // without trailing zeros
	d, d8 := uint64('0'+d9)|w<<8, w>>56
	if nd < 9 {
		z := uint(8*(8-nd)) & 63
		d = w>>z | 0x3030303030303030&^(^uint64(0)>>z)
		d8 = '0'
	}

	var lo, hi uint64
	var l int // the length of the text, sign aside: at most 14
	if x := dp - 1; x < -4 || x >= 6 {
		exp := uint64('e') | '+'<<8
		if x < 0 {
			exp = uint64('e') | '-'<<8
			x = -x
		}
		exp |= uint64(digitPairs[2*x])<<16 | uint64(digitPairs[2*x+1])<<24 // x ≤ 45
		p := uint(8)                                                       // where the exponent goes, in bits
		lo = d & 0xff
		if ns > 1 { // d.ddd
			if ns < 9 {
				d &= 1<<(8*ns) - 1
				d8 = 0
			}
			lo |= '.'<<8 | (d&^0xff)<<8
			hi = d>>56 | d8<<8
			p = uint(8 * (ns + 1))
		}
		// Shifts by 64 bits or more give 0, so this covers p below, at or
		// above 64.
		lo |= exp << p
		hi |= exp>>(64-p) | exp<<(p-64)
		l = int(p/8) + 4
	} else {
		// u '0's go in front (0.000ddd), then the point after the digit
		// at dp+u.
		u := 0
		if dp <= 0 {
			u = 1 - dp
		}
		zu := uint(8*u) & 63              // ≤ 32
		lo = d<<zu | 0x30303030&(1<<zu-1) // '0's, then d
		hi = d>>1>>((63-zu)&63) | d8<<zu  // d>>(64-zu)
		pt := uint(8*(dp+u)) & 63         // 8 to 48
		mask := uint64(1)<<pt - 1         // the digits before the point
		hi = hi<<8 | lo>>56
		lo = lo&mask | '.'<<pt | (lo&^mask)<<8
		l = ns + u + 1
		if dp >= ns { // an integer, the padding giving its zeros
			l = dp
		}
	}

	// A '-' goes at n, overwritten by the text when there is no sign; the
	// text goes at n+sign. Nothing is written past n+sign+l.
	n := len(dst)
	if cap(dst)-n < 16 {
		dst = slices.Grow(dst, 16)
	}
	out := (*[16]byte)(dst[n : n+16])
	s := uint(sign) & 1
	out[0] = '-'
	switch {
	case l >= 8: // the first 8 bytes, then the last 8
		binary.LittleEndian.PutUint64(out[s:], lo)
		k := uint(8*(l-8)) & 63
		binary.LittleEndian.PutUint64(out[(s+uint(l)-8)&7:], lo>>k|hi<<1<<((63-k)&63))
	case l >= 4: // the same with 4
		binary.LittleEndian.PutUint32(out[s:], uint32(lo))
		binary.LittleEndian.PutUint32(out[(s+uint(l)-4)&7:], uint32(lo>>(uint(8*(l-4))&63)))
	default:
		for i := range uint(l) & 3 {
			out[s+i] = byte(lo >> (8 * i))
		}
	}
	return dst[:n+int(s)+l]
}

// digits8 returns the last 8 decimal digits of m < 10^9 as ASCII, the
// first in the low byte, given d9 = m/10^8: m is split in halves of 4
// digits, then 2, then 1, all lanes at once in one 64-bit word.
func digits8(d9, m uint32) uint64 {
	q := m / 1e4
	v := uint64(q-d9*1e4) | uint64(m-q*1e4)<<32 // two 32-bit lanes < 10^4
	q2 := (v * 5243 >> 19) & 0x0000007f0000007f
	v = q2 | (v-q2*100)<<16 // four 16-bit lanes < 100
	q2 = (v * 103 >> 10) & 0x000f000f000f000f
	v = q2 | (v-q2*10)<<8 // eight bytes < 10
	return v + 0x3030303030303030
}

const digitPairs = "00010203040506070809" + "10111213141516171819" + "20212223242526272829" +
	"30313233343536373839" + "40414243444546474849" + "50515253545556575859" +
	"60616263646566676869" + "70717273747576777879" + "80818283848586878889" +
	"90919293949596979899"

// decimalLen is the number of decimal digits of m > 0.
func decimalLen(m uint32) int {
	// ⌊log10⌋ from the bit length, short by at most one.
	n := (bits.Len32(m) * 1233) >> 12
	if m >= pow10u32[n] {
		n++
	}
	return n
}

var pow10u32 = [...]uint32{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9}
