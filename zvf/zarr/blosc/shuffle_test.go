package blosc

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// bitshuffleSlow is the definition, bit by bit: row 8·j+k holds bit k of
// byte j of every element.
func bitshuffleSlow(src []byte, ts int) []byte {
	n := len(src) / ts
	dst := make([]byte, len(src))
	if n%8 != 0 {
		copy(dst, src)
		return dst
	}
	rowLen := n / 8
	for i := 0; i < n; i++ {
		for j := 0; j < ts; j++ {
			for k := 0; k < 8; k++ {
				if src[i*ts+j]>>k&1 != 0 {
					dst[(j*8+k)*rowLen+i/8] |= 1 << (i % 8)
				}
			}
		}
	}
	copy(dst[n*ts:], src[n*ts:])
	return dst
}

// TestBitShuffleTranspose: the 8×8-transpose shuffles agree with the
// bit-by-bit definition, and unshuffle inverts shuffle, for every element
// size and for lengths with and without a partial tail.
func TestBitShuffleTranspose(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, ts := range []int{1, 2, 3, 4, 8, 16} {
		for _, n := range []int{0, 7, 8, 64, 1000, 4096} {
			src := make([]byte, n*ts+r.IntN(ts))
			for i := range src {
				src[i] = byte(r.Uint32())
			}
			want := bitshuffleSlow(src, ts)
			got := make([]byte, len(src))
			bitshuffle(got, src, ts)
			if !bytes.Equal(got, want) {
				t.Fatalf("ts=%d n=%d: bitshuffle differs from the definition", ts, n)
			}
			back := make([]byte, len(src))
			bitunshuffle(back, got, ts)
			if !bytes.Equal(back, src) {
				t.Fatalf("ts=%d n=%d: bitunshuffle does not invert bitshuffle", ts, n)
			}
		}
	}
}
