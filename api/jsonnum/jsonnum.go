// Package jsonnum formats numbers for JSON output fast. Coordinates are
// float32 and a JSON answer is mostly their text, so the float32
// formatter here — Ryū's shortest-digits search with 64-bit tables, then
// the digits written straight into the caller's buffer — is what JSON
// throughput comes down to. Its output is byte-for-byte that of
// strconv.AppendFloat(dst, float64(v), 'g', -1, 32), which the tests check
// over every float32.
package jsonnum

import (
	"math"
	"math/big"
	"math/bits"
	"slices"
	"strconv"
)

const (
	mantBits = 23
	bias     = 127

	pow5InvBits = 59 // precision of pow5Inv entries
	pow5Bits    = 61 // precision of pow5 entries
)

// tables holds ⌈2^k / 5^q⌉ and ⌊5^i / 2^k⌋ scaled to 59 / 61 bits:
// the powers of five that move a binary exponent to a decimal one.
type tables struct {
	pow5Inv [31]uint64
	pow5    [47]uint64
}

// tab is computed once, exactly, with math/big; it is read-only after.
var tab = func() *tables {
	t := new(tables)
	five := big.NewInt(5)
	for q := range t.pow5Inv {
		p := new(big.Int).Exp(five, big.NewInt(int64(q)), nil)
		// ⌈2^(pow5bits(q)-1+pow5InvBits) / 5^q⌉ (plus one for q = 0, as Ryū does, so the
		// multiplication never lands exactly on an integer it should round down from).
		num := new(big.Int).Lsh(big.NewInt(1), uint(pow5bits(q)-1+pow5InvBits))
		v, r := new(big.Int).QuoRem(num, p, new(big.Int))
		if r.Sign() != 0 || q == 0 {
			v.Add(v, big.NewInt(1))
		}
		t.pow5Inv[q] = v.Uint64()
	}
	for i := range t.pow5 {
		p := new(big.Int).Exp(five, big.NewInt(int64(i)), nil)
		shift := pow5bits(i) - pow5Bits
		if shift >= 0 {
			p.Rsh(p, uint(shift))
		} else {
			p.Lsh(p, uint(-shift))
		}
		t.pow5[i] = p.Uint64()
	}
	return t
}()

// pow5bits is ⌈log2(5^e)⌉ for e ≥ 1 (and 1 for e = 0).
func pow5bits(e int) int { return int((uint32(e)*1217359)>>19) + 1 }

// log10Pow2 is ⌊log10(2^e)⌋ and log10Pow5 ⌊log10(5^e)⌋, for the exponent
// ranges of float32.
func log10Pow2(e int) int { return int((uint32(e) * 78913) >> 18) }
func log10Pow5(e int) int { return int((uint32(e) * 732923) >> 20) }

func pow5Factor(v uint32) int {
	n := 0
	for v%5 == 0 {
		v /= 5
		n++
	}
	return n
}

// mulShift is ⌊m·f / 2^shift⌋ (shift in 32…95).
func mulShift(m uint32, f uint64, shift int) uint32 {
	hi, lo := bits.Mul64(uint64(m), f)
	if shift >= 64 {
		return uint32(hi >> (shift - 64))
	}
	return uint32(hi<<(64-shift) | lo>>shift)
}

// shortest returns the shortest decimal m·10^e that parses back to the
// float32 with this mantissa and exponent field, the closest one when
// several are as short (Ryū, f2s).
func shortest(mant, exp uint32) (uint32, int) {
	var e2 int
	var m2 uint32
	if exp == 0 {
		e2 = 1 - bias - mantBits - 2
		m2 = mant
	} else {
		e2 = int(exp) - bias - mantBits - 2
		m2 = 1<<mantBits | mant
	}
	acceptBounds := m2&1 == 0
	mv := 4 * m2
	mp := 4*m2 + 2
	mmShift := uint32(0)
	if mant != 0 || exp <= 1 {
		mmShift = 1
	}
	mm := 4*m2 - 1 - mmShift

	var vr, vp, vm uint32
	var e10 int
	vmTrailingZeros, vrTrailingZeros := false, false
	lastRemoved := uint32(0)
	if e2 >= 0 {
		q := log10Pow2(e2)
		e10 = q
		k := pow5InvBits + pow5bits(q) - 1
		i := -e2 + q + k
		vr = mulShift(mv, tab.pow5Inv[q], i)
		vp = mulShift(mp, tab.pow5Inv[q], i)
		vm = mulShift(mm, tab.pow5Inv[q], i)
		if q != 0 && (vp-1)/10 <= vm/10 {
			// One removed digit is needed even if the loop below runs no
			// round; q-1 keeps the arithmetic in 32 bits.
			l := pow5InvBits + pow5bits(q-1) - 1
			lastRemoved = mulShift(mv, tab.pow5Inv[q-1], -e2+q-1+l) % 10
		}
		if q <= 9 {
			// At most one of mp, mv and mm is a multiple of 5.
			switch {
			case mv%5 == 0:
				vrTrailingZeros = pow5Factor(mv) >= q
			case acceptBounds:
				vmTrailingZeros = pow5Factor(mm) >= q
			case pow5Factor(mp) >= q:
				vp--
			}
		}
	} else {
		q := log10Pow5(-e2)
		e10 = q + e2
		i := -e2 - q
		k := pow5bits(i) - pow5Bits
		j := q - k
		vr = mulShift(mv, tab.pow5[i], j)
		vp = mulShift(mp, tab.pow5[i], j)
		vm = mulShift(mm, tab.pow5[i], j)
		if q != 0 && (vp-1)/10 <= vm/10 {
			j = q - 1 - (pow5bits(i+1) - pow5Bits)
			lastRemoved = mulShift(mv, tab.pow5[i+1], j) % 10
		}
		switch {
		case q <= 1:
			// mv = 4·m2 has two trailing zero bits; mm has one iff mmShift.
			vrTrailingZeros = true
			if acceptBounds {
				vmTrailingZeros = mmShift == 1
			} else {
				vp--
			}
		case q < 31:
			vrTrailingZeros = mv&(1<<(q-1)-1) == 0
		}
	}

	removed := 0
	var out uint32
	if vmTrailingZeros || vrTrailingZeros {
		for vp/10 > vm/10 {
			vmTrailingZeros = vmTrailingZeros && vm%10 == 0
			vrTrailingZeros = vrTrailingZeros && lastRemoved == 0
			lastRemoved = vr % 10
			vr /= 10
			vp /= 10
			vm /= 10
			removed++
		}
		if vmTrailingZeros {
			for vm%10 == 0 {
				vrTrailingZeros = vrTrailingZeros && lastRemoved == 0
				lastRemoved = vr % 10
				vr /= 10
				vp /= 10
				vm /= 10
				removed++
			}
		}
		if vrTrailingZeros && lastRemoved == 5 && vr%2 == 0 {
			lastRemoved = 4 // an exact tie rounds to even
		}
		out = vr
		if (vr == vm && (!acceptBounds || !vmTrailingZeros)) || lastRemoved >= 5 {
			out++
		}
	} else {
		for vp/10 > vm/10 {
			lastRemoved = vr % 10
			vr /= 10
			vp /= 10
			vm /= 10
			removed++
		}
		out = vr
		if vr == vm || lastRemoved >= 5 {
			out++
		}
	}
	return out, e10 + removed
}

// AppendFloat32 appends the shortest decimal form of v that parses back to
// the same float32: byte-for-byte strconv.AppendFloat(dst, float64(v), 'g',
// -1, 32) for every finite v (NaN and infinities go through strconv too;
// JSON callers write null for them before getting here; powers of two go
// through strconv as well).
func AppendFloat32(dst []byte, v float32) []byte {
	b := math.Float32bits(v)
	exp := b >> mantBits & 0xff
	mant := b & (1<<mantBits - 1)
	if exp == 0xff || (mant == 0 && exp != 0) {
		// NaN, infinities, and the 254 powers of two: their rounding
		// interval is lopsided, and strconv (Dragonbox) breaks exact ties
		// there its own way; matching it is worth more than their speed.
		return strconv.AppendFloat(dst, float64(v), 'g', -1, 32)
	}
	if b&(1<<31) != 0 {
		dst = append(dst, '-')
	}
	if exp == 0 && mant == 0 {
		return append(dst, '0')
	}
	m, e := shortest(mant, exp)
	// Strip trailing zeros (Ryū can leave them when the interval holds a
	// shorter integer, e.g. 1e7 = 10000000).
	for m%10 == 0 {
		m /= 10
		e++
	}
	nd := decimalLen(m)
	dp := nd + e          // position of the decimal point in the digits
	x := dp - 1           // decimal exponent of the first digit
	if x < -4 || x >= 6 { // %g at shortest precision decides with precision 6
		return appendE(dst, m, nd, x)
	}
	// Fixed notation: -3 ≤ dp ≤ 6 here. The digits go into t at an offset
	// that leaves room for "0.000" or for the point, then one append.
	var t [20]byte
	switch {
	case dp <= 0: // 0.000ddd
		o := 2 - dp
		t[0], t[1], t[2], t[3], t[4] = '0', '.', '0', '0', '0'
		putDigits(t[o:o+nd], m)
		return append(dst, t[:o+nd]...)
	case dp >= nd: // ddd000
		putDigits(t[:nd], m)
		t[nd], t[nd+1], t[nd+2], t[nd+3], t[nd+4], t[nd+5] = '0', '0', '0', '0', '0', '0'
		return append(dst, t[:dp]...)
	default: // dd.ddd
		putDigits(t[1:nd+1], m)
		copy(t[:dp], t[1:dp+1])
		t[dp] = '.'
		return append(dst, t[:nd+1]...)
	}
}

// putDigits writes the decimal digits of m, right-aligned, into d (whose
// length is their count), two at a time.
func putDigits(d []byte, m uint32) {
	i := len(d)
	for m >= 100 {
		r := m % 100
		m /= 100
		i -= 2
		d[i], d[i+1] = digitPairs[2*r], digitPairs[2*r+1]
	}
	if m >= 10 {
		d[i-2], d[i-1] = digitPairs[2*m], digitPairs[2*m+1]
	} else if i > 0 {
		d[i-1] = byte('0' + m)
	}
}

const digitPairs = "00010203040506070809101112131415161718192021222324252627282930313233343536373839" +
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879" +
	"8081828384858687888990919293949596979899"

// decimalLen is the number of decimal digits of m (m > 0).
func decimalLen(m uint32) int {
	switch {
	case m < 10:
		return 1
	case m < 100:
		return 2
	case m < 1000:
		return 3
	case m < 10000:
		return 4
	case m < 100000:
		return 5
	case m < 1000000:
		return 6
	case m < 10000000:
		return 7
	case m < 100000000:
		return 8
	case m < 1000000000:
		return 9
	}
	return 10
}

// appendE writes d.ddd e±XX as strconv's %e does: at least two exponent
// digits.
func appendE(dst []byte, m uint32, nd, x int) []byte {
	size := nd + 4 // digits, 'e', sign, two exponent digits
	if nd > 1 {
		size++ // the point
	}
	ax := x
	if ax < 0 {
		ax = -ax
	}
	if ax >= 100 {
		size++
	}
	n := len(dst)
	dst = slices.Grow(dst, size)[:n+size]
	out := dst[n:]
	i := size
	for ax >= 10 || i > size-2 {
		i--
		out[i] = byte('0' + ax%10)
		ax /= 10
	}
	i--
	if x < 0 {
		out[i] = '-'
	} else {
		out[i] = '+'
	}
	i--
	out[i] = 'e'
	if nd > 1 {
		putDigits(out[1:nd+1], m)
		out[0], out[1] = out[1], '.'
	} else {
		out[0] = byte('0' + m)
	}
	return dst
}
