package blosc

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/zvftest/alloctest"
)

// rawFrame builds a frame from header fields and the bytes after the
// header (block table and streams); cbytes is filled in.
func rawFrame(flags, typesize byte, nbytes, blocksize uint32, body ...[]byte) []byte {
	b := make([]byte, headerSize)
	b[0], b[1], b[2], b[3] = 2, 1, flags, typesize
	binary.LittleEndian.PutUint32(b[4:], nbytes)
	binary.LittleEndian.PutUint32(b[8:], blocksize)
	for _, p := range body {
		b = append(b, p...)
	}
	binary.LittleEndian.PutUint32(b[12:], uint32(len(b)))
	return b
}

func le32(v ...uint32) []byte {
	var out []byte
	for _, x := range v {
		out = binary.LittleEndian.AppendUint32(out, x)
	}
	return out
}

// zstdHugeFCS is a zstd frame whose header declares 1 GiB of content and
// whose only block is an RLE block of n bytes.
func zstdHugeFCS(n int) []byte {
	b := le32(0xFD2FB528)
	b = append(b, 0xC0, 6<<3) // 8-byte content size; a 64 KiB window
	b = binary.LittleEndian.AppendUint64(b, 1<<30)
	h := uint32(n)<<3 | 1<<1 | 1 // size, RLE, last block
	return append(b, byte(h), byte(h>>8), byte(h>>16), 7)
}

type bomb struct {
	name  string
	frame []byte
	ok    bool
}

// bombCases are frames whose headers claim far more than their bytes hold.
func bombCases() []bomb {
	const zstdCode = codeZstd << 5
	return []bomb{
		{"memcpyed 32 bytes claim 1 GiB", rawFrame(flagMemcpy|flagDontSplit, 1, 1<<30, 1<<28, make([]byte, 16)), false},
		{"blosclz 32 bytes claim 1 GiB", rawFrame(flagDontSplit, 1, 1<<30, 1<<28, le32(16, 16, 16, 16)), false},
		{"zstd 32 bytes claim 1 GiB", rawFrame(zstdCode|flagDontSplit, 1, 1<<30, 1<<29, le32(24, 24), le32(4), []byte{1, 2, 3, 4}), false},
		{"lz4 streams too short for their blocks", rawFrame(codeLZ4<<5|flagDontSplit, 1, 1<<26, 1<<20, le32(slices.Repeat([]uint32{16 + 4*64}, 64)...), le32(1), []byte{0}), false},
		{"16 bytes with a 715 MB block size, shuffled", rawFrame(flagShuffle|flagDontSplit, 4, 16, maxBlockSize, le32(20, 16), make([]byte, 16)), true},
		{"zstd stream declares 1 GiB of content", rawFrame(zstdCode|flagDontSplit, 1, 4096, 4096, le32(20, uint32(len(zstdHugeFCS(4096)))), zstdHugeFCS(4096)), false},
	}
}

func bombs() [][]byte {
	var out [][]byte
	for _, b := range bombCases() {
		out = append(out, b.frame)
	}
	return out
}

// TestBombs: frames whose header claims far more than their bytes can
// produce fail with a typed error before anything is allocated from the
// claim, under the 1 GiB limit that vlen and sharded arrays allowed. Each
// of these allocated what its header said before the block table was
// checked (the 32-byte frames 1 GiB, the shuffled one a 715 MB scratch
// block, the zstd stream its declared content size).
func TestBombs(t *testing.T) {
	const limit = 1 << 30
	var d Decoder
	// Warm the decoder's zstd state, which is allocated once.
	warm, _ := Encode(nil, floats(1000), Options{Codec: "zstd", Level: 1, TypeSize: 4})
	if _, err := d.DecodeLimit(nil, warm, limit); err != nil {
		t.Fatal(err)
	}
	for _, tc := range bombCases() {
		t.Run(tc.name, func(t *testing.T) {
			var out []byte
			var err error
			n := alloctest.Bytes(func() { out, err = d.DecodeLimit(nil, tc.frame, limit) })
			if tc.ok != (err == nil) {
				t.Fatalf("err = %v", err)
			}
			var be *Error
			if err != nil && (!errors.Is(err, ErrCorrupt) || !errors.As(err, &be)) {
				t.Fatalf("err = %v, want a *blosc.Error", err)
			}
			if max := uint64(64<<10 + 2*len(out)); n > max {
				t.Fatalf("a %d-byte frame allocated %d bytes (at most %d expected): %v", len(tc.frame), n, max, err)
			}
			t.Logf("%d-byte frame: %d bytes allocated, %v", len(tc.frame), n, err)
		})
	}
}
