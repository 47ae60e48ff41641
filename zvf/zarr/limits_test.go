package zarr_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/zarr"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// arrayJSON is a zarr.json with the given shape, type, chunk shape and
// codecs (JSON).
func arrayJSON(shape, dtype, chunks, fill, codecs string) string {
	return `{"zarr_format":3,"node_type":"array","shape":` + shape + `,"data_type":"` + dtype + `",
	 "chunk_grid":{"name":"regular","configuration":{"chunk_shape":` + chunks + `}},
	 "chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},"fill_value":` + fill + `,
	 "codecs":` + codecs + `}`
}

func memStore(t *testing.T, files map[string]string) storage.Store {
	t.Helper()
	ctx := context.Background()
	st := zvftest.Store(t, "mem://")
	for k, v := range files {
		if err := st.Put(ctx, k, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

const bytesLE = `[{"name":"bytes","configuration":{"endian":"little"}}]`

// TestChunkBytesLimit: metadata whose decoded chunk (or inner shard chunk,
// or shard index) would exceed the codec environment's MaxChunkBytes is a
// typed metadata error when the array is opened, computed in bytes without
// overflow; nothing is allocated from it. Before the limit, the 2^62−1
// chunk with its chunk missing panicked while building the fill chunk.
func TestChunkBytesLimit(t *testing.T) {
	ctx := context.Background()
	const limit = 1 << 20
	small := zarr.NewCodecs(zarr.Limits{MaxChunkBytes: limit})
	shard := func(outer, inner string) string {
		return arrayJSON(`[`+outer+`]`, "uint8", `[`+outer+`]`, "0", `[{"name":"sharding_indexed","configuration":{"chunk_shape":[`+inner+`],
		 "codecs":`+bytesLE+`,"index_codecs":[{"name":"bytes","configuration":{"endian":"little"}},{"name":"crc32c"}]}}]`)
	}
	for _, tc := range []struct {
		name string
		meta string
		cs   *zarr.Codecs
		ok   bool
		want string // in the error
	}{
		{"2^62-1 uint8, default limit", arrayJSON("[10]", "uint8", "[4611686018427387903]", "0", bytesLE), zarr.NewCodecs(), false, "4611686018427387903 elements × 1 bytes"},
		{"2^62-1 uint8, nil codecs", arrayJSON("[10]", "uint8", "[4611686018427387903]", "0", bytesLE), nil, false, "exceeds the 268435456-byte limit"},
		{"elements fit, bytes overflow int64", arrayJSON("[10]", "float64", "[2305843009213693952]", "0", bytesLE), small, false, "2305843009213693952 elements × 8 bytes"},
		{"rank 3 product", arrayJSON("[1,1,1]", "int32", "[1024,1024,1024]", "0", bytesLE), zarr.NewCodecs(), false, "1073741824 elements × 4 bytes"},
		{"at the limit", arrayJSON("[10]", "uint8", fmt.Sprint("[", limit, "]"), "0", bytesLE), small, true, ""},
		{"one byte over", arrayJSON("[10]", "uint8", fmt.Sprint("[", limit+1, "]"), "0", bytesLE), small, false, "1048577 elements × 1 bytes"},
		{"item size counts", arrayJSON("[10]", "uint16", fmt.Sprint("[", limit/2+1, "]"), "0", bytesLE), small, false, "524289 elements × 2 bytes"},
		{"variable-length elements", arrayJSON("[10]", "string", "[65536]", `""`, `[{"name":"vlen-utf8"}]`), small, false, "65536 elements × 24 bytes"},
		{"cast to a wider type", arrayJSON("[10]", "float64", fmt.Sprint("[", limit/4, "]"), "0",
			`[{"name":"cast_value","configuration":{"data_type":"uint8"}},`+bytesLE[1:]), small, false, "262144 elements × 8 bytes"},
		{"shard too large", shard("4194304", "1024"), small, false, "4194304 elements × 1 bytes"},
		{"shard index too large", shard("131072", "1"), small, false, "sharding index"},
		{"shard and index fit", shard("131072", "1024"), small, true, ""},
		{"zarrs vlen elements", arrayJSON("[10]", "string", "[65536]", `""`,
			`[{"name":"zarrs.vlen","configuration":{"index_data_type":"uint64"}}]`), small, false, "65536 elements × 24 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := memStore(t, map[string]string{"a/zarr.json": tc.meta})
			a, err := zarr.OpenArray(ctx, st, "a", tc.cs)
			if tc.ok {
				if err != nil {
					t.Fatalf("open: %v", err)
				}
				// The chunk is missing: it reads as the fill value.
				if _, err := a.ReadChunk(ctx, make([]int64, len(a.Meta().Shape))); err != nil {
					t.Fatalf("read: %v", err)
				}
				return
			}
			var ze *zarr.Error
			if !errors.Is(err, zarr.ErrMetadata) || !errors.As(err, &ze) || ze.Path != "a" {
				t.Fatalf("open: err = %v, want a *zarr.Error matching ErrMetadata", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

// TestReadLimit: a whole-array read is sized in bytes against MaxReadBytes
// before anything is allocated, also when the shape's product overflows.
func TestReadLimit(t *testing.T) {
	ctx := context.Background()
	cs := zarr.NewCodecs(zarr.Limits{MaxReadBytes: 1 << 20})
	for _, tc := range []struct {
		name, shape, dtype, chunks string
		ok                         bool
	}{
		{"fits", "[1024,128]", "float64", "[64,64]", true},
		{"too many bytes", "[1024,129]", "float64", "[64,64]", false},
		{"product overflows", "[4294967296,4294967296]", "uint8", "[1,1]", false},
		{"bytes overflow", "[1152921504606846976]", "uint64", "[1024]", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := memStore(t, map[string]string{"a/zarr.json": arrayJSON(tc.shape, tc.dtype, tc.chunks, "0", bytesLE)})
			a, err := zarr.OpenArray(ctx, st, "a", cs)
			if err != nil {
				t.Fatal(err)
			}
			_, err = a.Read(ctx)
			if tc.ok != (err == nil) {
				t.Fatalf("Read: err = %v", err)
			}
			if !tc.ok && !errors.Is(err, zarr.ErrTooLarge) {
				t.Fatalf("Read: err = %v, want ErrTooLarge", err)
			}
		})
	}
}
