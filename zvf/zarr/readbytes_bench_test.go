package zarr_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/storage/memstore"
	"github.com/zvfserve/zvfserve/zvf/zarr"
)

// BenchmarkReadBytes measures the ZVF reader's hot path: a 1 MB 1-D uint8
// blob in a single chunk c/0, per codec chain, from an in-memory bucket so
// the number is decode cost, not I/O.
func BenchmarkReadBytes(b *testing.B) {
	const n = 1 << 20
	blob := make([]byte, n)
	for i := range blob {
		blob[i] = byte(i * 7 / 3)
	}
	chains := map[string]string{
		"bytes":     `[{"name":"bytes"}]`,
		"zstd":      `[{"name":"bytes"},{"name":"zstd","configuration":{"level":3,"checksum":false}}]`,
		"bytes+crc": `[{"name":"bytes"},{"name":"crc32c"}]`,
		"gzip":      `[{"name":"bytes"},{"name":"gzip","configuration":{"level":5}}]`,
	}
	for _, name := range []string{"bytes", "bytes+crc", "zstd", "gzip"} {
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			meta := fmt.Sprintf(`{"zarr_format":3,"node_type":"array","shape":[%d],"data_type":"uint8",
"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[%d]}},
"chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},
"fill_value":0,"codecs":%s}`, n, n, chains[name])
			node, err := zarr.ParseNode([]byte(meta))
			if err != nil {
				b.Fatal(err)
			}
			st := memstore.New()
			defer func() {
				if err := st.Close(); err != nil {
					b.Error(err)
				}
			}()
			cs := zarr.NewCodecs()
			a, err := zarr.CreateArray(ctx, st, "blob", node.Array, cs)
			if err != nil {
				b.Fatal(err)
			}
			if err := a.WriteChunk(ctx, st, []int64{0}, &zarr.Chunk{Shape: []int64{n}, Type: node.Array.DataType, Data: blob}); err != nil {
				b.Fatal(err)
			}
			r, err := zarr.OpenArray(ctx, st, "blob", cs)
			if err != nil {
				b.Fatal(err)
			}
			got, err := r.ReadBytes(ctx)
			if err != nil || !bytes.Equal(got, blob) {
				b.Fatalf("round trip: err=%v equal=%v", err, bytes.Equal(got, blob))
			}
			b.SetBytes(n)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.ReadBytes(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
