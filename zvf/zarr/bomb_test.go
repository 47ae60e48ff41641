package zarr_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/klauspost/compress/gzip"

	"github.com/zvfserve/zvfserve/zvf/zarr"
	"github.com/zvfserve/zvfserve/zvf/zvftest/alloctest"
)

// zstdFrame is a zstd frame of RLE blocks of blockLen bytes each (the
// byte 'a'), with the given window descriptor and, when fcs >= 0, an
// 8-byte declared content size.
func zstdFrame(fcs int64, window byte, blocks, blockLen int) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 0xFD2FB528)
	if fcs >= 0 {
		b = append(b, 0xC0, window)
		b = binary.LittleEndian.AppendUint64(b, uint64(fcs))
	} else {
		b = append(b, 0x00, window)
	}
	for i := 0; i < blocks; i++ {
		h := uint32(blockLen)<<3 | 1<<1 // RLE
		if i == blocks-1 {
			h |= 1
		}
		b = append(b, byte(h), byte(h>>8), byte(h>>16), 'a')
	}
	return b
}

// bloscFrame is a 32-byte BloscLZ frame declaring nbytes in two blocks
// whose one shared stream is 4 bytes long.
func bloscFrame(nbytes uint32) []byte {
	b := []byte{2, 1, 0x10, 1}
	for _, v := range []uint32{nbytes, nbytes/2 + 1, 32, 24, 24, 4} {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	return append(b, 1, 2, 3, 4)
}

func gzipped(n int) []byte {
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, 9)
	_, _ = w.Write(make([]byte, n))
	_ = w.Close()
	return buf.Bytes()
}

// TestDecompressionBombs: a chunk whose compressed frames claim (or really
// expand to) far more than the metadata allows fails with a typed error,
// and reading it allocates in proportion to its bytes or to what the
// metadata fixes, never to what a header claims. Variable-length and
// sharded arrays have no exact decoded size, which is where the headers
// were believed (up to 1 GiB): every case but the last two allocated
// hundreds of MiB before failing.
func TestDecompressionBombs(t *testing.T) {
	ctx := context.Background()
	cs := zarr.NewCodecs(zarr.Limits{MaxChunkBytes: 1 << 20})
	str := func(codecs string) string {
		return arrayJSON("[8]", "string", "[8]", `""`, `[{"name":"vlen-utf8"},`+codecs+`]`)
	}
	sharded := func(outer string) string {
		return arrayJSON("[64]", "uint8", "[64]", "0", `[{"name":"sharding_indexed","configuration":{"chunk_shape":[16],
		 "codecs":`+bytesLE+`,"index_codecs":`+bytesLE+`}},`+outer+`]`)
	}
	const zstd, blosc = `{"name":"zstd"}`, `{"name":"blosc","configuration":{"cname":"lz4","clevel":5,"shuffle":"noshuffle","typesize":1}}`
	for _, tc := range []struct {
		name, meta string
		chunk      []byte
		// Bytes the read may allocate. Real output stops at the 2 MiB
		// bound (MaxChunkBytes plus framing); its doubling buffers cost
		// several times that, more under the race detector (32 MiB).
		max uint64
	}{
		{"vlen, zstd frame declares 256 MiB", str(zstd), zstdFrame(256<<20, 6<<3, 1, 4096), 256 << 10},
		{"vlen, zstd without a content size expands to 128 MiB", str(zstd), zstdFrame(-1, 7<<3, 1024, 128<<10), 32 << 20},
		{"vlen, 32-byte blosc frame claims 1.5 MiB", str(blosc), bloscFrame(3 << 19), 256 << 10},
		{"vlen, 32-byte blosc frame claims 200 MiB", str(blosc), bloscFrame(200 << 20), 256 << 10},
		{"vlen, gzip inflates to 64 MiB", str(`{"name":"gzip","configuration":{"level":9}}`), gzipped(64 << 20), 32 << 20},
		{"sharded, outer zstd frame declares 256 MiB", sharded(zstd), zstdFrame(256<<20, 6<<3, 1, 4096), 256 << 10},
		{"sharded, outer blosc frame claims 200 MiB", sharded(blosc), bloscFrame(200 << 20), 256 << 10},
		{"fixed size, zstd declares more than the chunk", arrayJSON("[64]", "uint8", "[64]", "0", `[`+bytesLE[1:len(bytesLE)-1]+`,`+zstd+`]`), zstdFrame(256<<20, 6<<3, 1, 4096), 256 << 10},
		{"fixed size, blosc claims more than the chunk", arrayJSON("[64]", "uint8", "[64]", "0", `[`+bytesLE[1:len(bytesLE)-1]+`,`+blosc+`]`), bloscFrame(200 << 20), 256 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := memStore(t, map[string]string{"a/zarr.json": tc.meta, "a/c/0": string(tc.chunk)})
			a, err := zarr.OpenArray(ctx, st, "a", cs)
			if err != nil {
				t.Fatal(err)
			}
			// Warm the codec state (zstd decoders) outside the measurement.
			_, _ = a.ReadChunk(ctx, []int64{0})
			n := alloctest.Bytes(func() { _, err = a.ReadChunk(ctx, []int64{0}) })
			var ze *zarr.Error
			if !errors.Is(err, zarr.ErrCorrupt) || !errors.As(err, &ze) || ze.Chunk != "a/c/0" {
				t.Fatalf("err = %v, want a *zarr.Error for a/c/0 matching ErrCorrupt", err)
			}
			if n > tc.max {
				t.Fatalf("a %d-byte chunk allocated %d bytes, at most %d expected (%v)", len(tc.chunk), n, tc.max, err)
			}
			t.Logf("%d-byte chunk: %d bytes allocated: %v", len(tc.chunk), n, err)
		})
	}
}

// TestInnerChunkRange: a shard index entry claiming a huge inner chunk
// fails ReadInnerChunk with a typed error before the range read, which
// would preallocate the claimed length (up to 64 MiB), is issued.
func TestInnerChunkRange(t *testing.T) {
	ctx := context.Background()
	cs := zarr.NewCodecs(zarr.Limits{MaxChunkBytes: 1 << 20})
	index := func() []byte {
		var b []byte
		for _, e := range [][2]uint64{{0, 16}, {0, 60 << 20}, {^uint64(0), ^uint64(0)}, {^uint64(0), ^uint64(0)}} {
			b = binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(b, e[0]), e[1])
		}
		return b
	}
	for _, loc := range []string{"end", "start"} {
		t.Run("index at "+loc, func(t *testing.T) {
			shard := append(make([]byte, 16), index()...)
			if loc == "start" {
				shard = append(index(), make([]byte, 16)...)
				binary.LittleEndian.PutUint64(shard, 64) // first chunk after the index
			}
			meta := arrayJSON("[64]", "uint8", "[64]", "0", `[{"name":"sharding_indexed","configuration":{"chunk_shape":[16],
			 "codecs":`+bytesLE+`,"index_codecs":`+bytesLE+`,"index_location":"`+loc+`"}}]`)
			st := memStore(t, map[string]string{"a/zarr.json": meta, "a/c/0": string(shard)})
			a, err := zarr.OpenArray(ctx, st, "a", cs)
			if err != nil {
				t.Fatal(err)
			}
			if c, err := a.ReadInnerChunk(ctx, []int64{0}, []int64{0}); err != nil || len(c.Data) != 16 {
				t.Fatalf("inner chunk 0: %v", err)
			}
			n := alloctest.Bytes(func() { _, err = a.ReadInnerChunk(ctx, []int64{0}, []int64{1}) })
			if !errors.Is(err, zarr.ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
			if n > 64<<10 {
				t.Fatalf("allocated %d bytes for a claimed 60 MiB inner chunk", n)
			}
		})
	}
}
