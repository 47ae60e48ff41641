package zarr

import (
	"os"
	"path/filepath"
	"testing"
)

func corpusMeta(f *testing.F, pattern string) [][]byte {
	paths, _ := filepath.Glob(filepath.Join("../../testdata/zarr-codecs", pattern, "zarr.json"))
	var out [][]byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// FuzzParseNode: any bytes parse or fail cleanly; what parses builds a
// pipeline or fails cleanly.
func FuzzParseNode(f *testing.F) {
	for _, b := range corpusMeta(f, "*/*.zarr") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := ParseNode(b)
		if err != nil || n.Array == nil {
			return
		}
		if n.Array.ChunkElems() > 1<<20 {
			return
		}
		_, _ = NewCodecs().build("chunk", n.Array.Codecs, rep{shape: n.Array.ChunkShape, typ: n.Array.DataType, fill: n.Array.Fill})
	})
}

// FuzzDecodeChunk runs arbitrary chunk bytes through real pipelines
// (sharding with crc32c index, blosc, zstd, gzip, vlen-bytes).
func FuzzDecodeChunk(f *testing.F) {
	var pipes []*pipeline
	cs := NewCodecs()
	for _, dir := range []string{"sharding/3d_crc_inner_int64.zarr", "sharding/index_big_endian_start_uint16.zarr", "blosc/lz4_shuffle_ts8_float64.zarr",
		"zstd/level1_int32.zarr", "gzip/level6_int16.zarr", "vlen/bytes_1d_zstd.zarr", "transpose/i2_3d_order201_big_gzip.zarr"} {
		b, err := os.ReadFile(filepath.Join("../../testdata/zarr-codecs", dir, "zarr.json"))
		if err != nil {
			continue
		}
		n, err := ParseNode(b)
		if err != nil {
			f.Fatal(err)
		}
		p, err := cs.build("chunk", n.Array.Codecs, rep{shape: n.Array.ChunkShape, typ: n.Array.DataType, fill: n.Array.Fill})
		if err != nil {
			f.Fatal(err)
		}
		pipes = append(pipes, p)
		chunks, _ := filepath.Glob(filepath.Join("../../testdata/zarr-codecs", dir, "c", "*"))
		for _, c := range chunks {
			if cb, err := os.ReadFile(c); err == nil && len(cb) < 1<<16 {
				f.Add(uint8(len(pipes)-1), cb)
			}
		}
	}
	if len(pipes) < 4 {
		f.Fatalf("only %d seed pipelines", len(pipes))
	}
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		_, _ = pipes[int(which)%len(pipes)].decode(b)
	})
}
