package draco

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
)

// Draco's symbol coding (spec: "Rans Decoding"). A stream of uint32 symbols
// is written either
//
//	raw:    u8 1, u8 b, varint K, frequency table (K entries), varint n, n bytes of rANS
//	tagged: u8 0, varint K, frequency table, varint n, n bytes of rANS, then bits
//
// Raw codes the symbols themselves with rANS at a precision of
// clamp(3b/2, 12, 20) bits, where b (1..18) only picks the precision; the
// table has one entry per value 0..K−1, so raw is used for values below
// 2^18 only. Tagged codes each group of components' bit length with rANS
// at 12 bits of precision and then the group's values, that many bits each,
// least significant bit first, in a bit stream that ends at its last byte.
//
// rANS (Draco's flavour): state in [4P, 1024P) for precision P; a symbol of
// probability p and cumulative probability c maps state x to
// (x/p)·P + x%p + c after shifting bytes out while x ≥ 1024p. The decoder
// reads backwards, so symbols are coded last to first; the final state less
// 4P ends the data in 1 to 4 bytes whose top two bits say how many.

const (
	maxRawBitLength = 18
	tagPrecisionBit = 12
)

// symbolCoder keeps the scratch memory of one symbol stream.
type symbolCoder struct {
	freq  []uint32 // per symbol value (raw) or bit length (tagged)
	prob  []uint32
	cum   []uint32
	order []uint32 // symbol values by falling probability, for normalizing
	tags  []uint32 // bit length per group (tagged)
	rans  []byte
}

// appendSymbols appends the coded stream of syms, in groups of comps values
// (the tagged scheme codes one bit length per group). An empty stream is
// written as nothing at all: the decoder reads nothing for zero values.
func (sc *symbolCoder) appendSymbols(dst []byte, syms []uint32, comps int) []byte {
	if len(syms) == 0 {
		return dst
	}
	var maxVal uint32
	for _, s := range syms {
		maxVal = max(maxVal, s)
	}
	if bitLen(maxVal) > maxRawBitLength {
		return sc.appendTagged(dst, syms, comps)
	}
	sc.freq = clearGrow(sc.freq, int(maxVal)+1)
	for _, s := range syms {
		sc.freq[s]++
	}
	if sc.taggedCheaper(syms, comps) {
		return sc.appendTagged(dst, syms, comps)
	}
	return sc.appendRaw(dst, syms)
}

// bitLen is the number of bits of v, at least 1 (Draco codes 0 in one bit).
func bitLen(v uint32) int { return max(1, bits.Len32(v)) }

// taggedCheaper estimates both schemes' sizes in bits, as entropy plus table,
// and says whether tagged is smaller; sc.freq holds the symbols' counts.
func (sc *symbolCoder) taggedCheaper(syms []uint32, comps int) bool {
	rawBits, unique := entropyBits(sc.freq, len(syms))
	rawBits += tableBits(len(sc.freq), unique)

	var tagFreq [33]uint32
	var valueBits float64
	groups := 0
	for g := 0; g < len(syms); g += comps {
		var m uint32
		for _, s := range syms[g:min(g+comps, len(syms))] {
			m = max(m, s)
		}
		b := bitLen(m)
		tagFreq[b]++
		valueBits += float64(b * comps)
		groups++
	}
	tagBits, tagUnique := entropyBits(tagFreq[:], groups)
	tagBits += tableBits(len(tagFreq), tagUnique) + valueBits
	return tagBits < rawBits
}

// entropyBits returns Σ f·log2(n/f) over the nonzero counts and how many
// there are.
func entropyBits(freq []uint32, n int) (float64, int) {
	var b float64
	unique := 0
	for _, f := range freq {
		if f > 0 {
			b += float64(f) * math.Log2(float64(n)/float64(f))
			unique++
		}
	}
	return b, unique
}

// tableBits approximates a frequency table's size: up to three bytes per
// present symbol (two, typically) and a byte per run of up to 64 absent ones.
func tableBits(k, unique int) float64 {
	return float64(8 * (2*unique + (k-unique)/64 + 1))
}

// appendRaw writes the raw scheme; sc.freq holds the symbols' counts.
func (sc *symbolCoder) appendRaw(dst []byte, syms []uint32) []byte {
	unique := 0
	for _, f := range sc.freq {
		if f > 0 {
			unique++
		}
	}
	// The precision selector: the bit length of the number of distinct
	// symbols, so that the precision always exceeds it.
	b := min(max(1, bits.Len(uint(unique))), maxRawBitLength)
	precBits := min(max(3*b/2, 12), 20)
	sc.normalize(len(syms), precBits)

	dst = append(dst, symbolCodingRaw, byte(b))
	dst = binary.AppendUvarint(dst, uint64(len(sc.prob)))
	dst = appendTable(dst, sc.prob)
	sc.rans = ransEncode(sc.rans[:0], syms, sc.prob, sc.cum, precBits)
	dst = binary.AppendUvarint(dst, uint64(len(sc.rans)))
	return append(dst, sc.rans...)
}

func (sc *symbolCoder) appendTagged(dst []byte, syms []uint32, comps int) []byte {
	groups := (len(syms) + comps - 1) / comps
	sc.tags = grow(sc.tags, groups)
	maxTag := uint32(1)
	for g := range groups {
		var m uint32
		for _, s := range syms[g*comps : min(g*comps+comps, len(syms))] {
			m = max(m, s)
		}
		sc.tags[g] = uint32(bitLen(m))
		maxTag = max(maxTag, sc.tags[g])
	}
	sc.freq = clearGrow(sc.freq, int(maxTag)+1)
	for _, t := range sc.tags {
		sc.freq[t]++
	}
	sc.normalize(groups, tagPrecisionBit)

	dst = append(dst, symbolCodingTagged)
	dst = binary.AppendUvarint(dst, uint64(len(sc.prob)))
	dst = appendTable(dst, sc.prob)
	sc.rans = ransEncode(sc.rans[:0], sc.tags, sc.prob, sc.cum, tagPrecisionBit)
	dst = binary.AppendUvarint(dst, uint64(len(sc.rans)))
	dst = append(dst, sc.rans...)

	// The values, LSB first, in group order.
	var acc uint64
	n := 0
	for g, t := range sc.tags {
		for _, s := range syms[g*comps : min(g*comps+comps, len(syms))] {
			acc |= uint64(s) << n
			n += int(t)
			for n >= 8 {
				dst = append(dst, byte(acc))
				acc >>= 8
				n -= 8
			}
		}
	}
	if n > 0 {
		dst = append(dst, byte(acc))
	}
	return dst
}

// normalize turns sc.freq (counts summing to n) into sc.prob summing to
// exactly 2^precBits, every present symbol at least 1, and sc.cum, the
// exclusive prefix sums.
func (sc *symbolCoder) normalize(n, precBits int) {
	total := uint64(1) << precBits
	sc.prob = clearGrow(sc.prob, len(sc.freq))
	sc.order = sc.order[:0]
	var sum uint64
	for s, f := range sc.freq {
		if f == 0 {
			continue
		}
		p := uint64(f) * total / uint64(n)
		if p == 0 {
			p = 1
		}
		sc.prob[s] = uint32(p)
		sum += p
		sc.order = append(sc.order, uint32(s))
	}
	// Rounding down leaves a deficit, the raise to 1 of rare symbols an
	// excess of at most one per symbol. The likeliest symbols absorb either,
	// where it costs the least.
	slices.SortFunc(sc.order, func(a, b uint32) int {
		if sc.prob[a] != sc.prob[b] {
			if sc.prob[a] > sc.prob[b] {
				return -1
			}
			return 1
		}
		return int(a) - int(b)
	})
	if sum < total {
		sc.prob[sc.order[0]] += uint32(total - sum)
	}
	for excess := sum - min(sum, total); excess > 0; {
		var spare uint64 // above the floor of 1, over all symbols
		for _, s := range sc.order {
			spare += uint64(sc.prob[s] - 1)
		}
		start := excess
		for _, s := range sc.order {
			if excess == 0 {
				break
			}
			p := uint64(sc.prob[s])
			take := min(excess, p-1, max(1, (p-1)*start/spare))
			sc.prob[s] -= uint32(take)
			excess -= take
		}
	}
	sc.cum = grow(sc.cum, len(sc.prob))
	var c uint32
	for s, p := range sc.prob {
		sc.cum[s] = c
		c += p
	}
}

// appendTable writes a frequency table: a present symbol as its probability
// in 1 to 3 bytes (low 2 bits of the first byte: how many more; the
// probability's low 6 bits above them, then 8 bits a byte), a run of 1 to 64
// absent symbols as one byte (run−1)<<2 | 3.
func appendTable(dst []byte, prob []uint32) []byte {
	for i := 0; i < len(prob); i++ {
		p := prob[i]
		if p == 0 {
			run := 1
			for i+run < len(prob) && prob[i+run] == 0 && run < 64 {
				run++
			}
			dst = append(dst, byte(run-1)<<2|3)
			i += run - 1
			continue
		}
		switch {
		case p < 1<<6:
			dst = append(dst, byte(p<<2))
		case p < 1<<14:
			dst = append(dst, byte(p<<2)|1, byte(p>>6))
		default: // p ≤ 2^20 < 2^22
			dst = append(dst, byte(p<<2)|2, byte(p>>6), byte(p>>14))
		}
	}
	return dst
}

// ransEncode appends the rANS coding of syms (coded last to first, so the
// decoder gives them first to last) at precision 2^precBits.
func ransEncode(dst []byte, syms, prob, cum []uint32, precBits int) []byte {
	// The state stays below 1024·2^20 = 2^30, so 32-bit division (the
	// loop's cost) is exact.
	base := uint32(4) << precBits // Draco's l_rans_base
	state := base
	for i := len(syms) - 1; i >= 0; i-- {
		s := syms[i]
		p := prob[s]
		for state >= 1024*p { // (l_rans_base / precision) · IO base · p
			dst = append(dst, byte(state))
			state >>= 8
		}
		state = (state/p)<<precBits + state%p + cum[s]
	}
	x := state - base
	switch {
	case x < 1<<6:
		dst = append(dst, byte(x))
	case x < 1<<14:
		dst = binary.LittleEndian.AppendUint16(dst, uint16(x|1<<14))
	case x < 1<<22:
		v := x | 2<<22
		dst = append(dst, byte(v), byte(v>>8), byte(v>>16))
	default:
		dst = binary.LittleEndian.AppendUint32(dst, x|3<<30)
	}
	return dst
}

// clearGrow returns s resized to n with every element zero.
func clearGrow(s []uint32, n int) []uint32 {
	s = grow(s, n)
	clear(s)
	return s
}
