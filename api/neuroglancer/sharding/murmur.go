package sharding

import (
	"encoding/binary"
	"math/bits"
)

// murmur3x86128 is MurmurHash3_x86_128 (Austin Appleby's public-domain
// algorithm, SMHasher's "Murmur3C") of data with seed: four 32-bit lanes,
// 16-byte blocks, a tail of up to 15 bytes, the length and a final mix.
// The hash's bytes are h1, h2, h3, h4, each little-endian.
func murmur3x86128(data []byte, seed uint32) (h1, h2, h3, h4 uint32) {
	const (
		c1 = 0x239b961b
		c2 = 0xab0e9789
		c3 = 0x38b34ae5
		c4 = 0xa1e38b93
	)
	h1, h2, h3, h4 = seed, seed, seed, seed
	n := len(data)
	blocks := n / 16
	for i := range blocks {
		b := data[16*i:]
		k1 := binary.LittleEndian.Uint32(b)
		k2 := binary.LittleEndian.Uint32(b[4:])
		k3 := binary.LittleEndian.Uint32(b[8:])
		k4 := binary.LittleEndian.Uint32(b[12:])

		h1 ^= bits.RotateLeft32(k1*c1, 15) * c2
		h1 = (bits.RotateLeft32(h1, 19)+h2)*5 + 0x561ccd1b
		h2 ^= bits.RotateLeft32(k2*c2, 16) * c3
		h2 = (bits.RotateLeft32(h2, 17)+h3)*5 + 0x0bcaa747
		h3 ^= bits.RotateLeft32(k3*c3, 17) * c4
		h3 = (bits.RotateLeft32(h3, 15)+h4)*5 + 0x96cd1c35
		h4 ^= bits.RotateLeft32(k4*c4, 18) * c1
		h4 = (bits.RotateLeft32(h4, 13)+h1)*5 + 0x32ac3b17
	}

	// The tail: up to four bytes per lane, little-endian, lanes 4 to 1.
	tail := data[16*blocks:]
	var k [4]uint32
	for i, c := range tail {
		k[i/4] |= uint32(c) << (8 * (i % 4))
	}
	switch t := len(tail); {
	case t > 12:
		h4 ^= bits.RotateLeft32(k[3]*c4, 18) * c1
		fallthrough
	case t > 8:
		h3 ^= bits.RotateLeft32(k[2]*c3, 17) * c4
		fallthrough
	case t > 4:
		h2 ^= bits.RotateLeft32(k[1]*c2, 16) * c3
		fallthrough
	case t > 0:
		h1 ^= bits.RotateLeft32(k[0]*c1, 15) * c2
	}

	l := uint32(n)
	h1, h2, h3, h4 = h1^l, h2^l, h3^l, h4^l
	h1 += h2 + h3 + h4
	h2 += h1
	h3 += h1
	h4 += h1
	h1, h2, h3, h4 = fmix32(h1), fmix32(h2), fmix32(h3), fmix32(h4)
	h1 += h2 + h3 + h4
	h2 += h1
	h3 += h1
	h4 += h1
	return h1, h2, h3, h4
}

func fmix32(h uint32) uint32 {
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}
