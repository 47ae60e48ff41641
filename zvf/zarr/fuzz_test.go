package zarr

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/zarr/blosc"
	"github.com/zvfserve/zvfserve/zvf/zvftest/alloctest"
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
// pipeline or fails cleanly (a chunk over the limit with ErrTooLarge).
// Parsing and building allocate in proportion to the document — 64 × its
// size (JSON decoding into maps and structs) plus 64 KiB — never to the
// shapes it declares.
func FuzzParseNode(f *testing.F) {
	for _, b := range corpusMeta(f, "*/*.zarr") {
		f.Add(b)
	}
	f.Add([]byte(`{"zarr_format":3,"node_type":"array","shape":[10],"data_type":"uint8","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[4611686018427387903]}},"chunk_key_encoding":{"name":"default"},"fill_value":0,"codecs":[{"name":"bytes"}]}`))
	f.Add([]byte(`{"zarr_format":3,"node_type":"array","shape":[1],"data_type":"uint8","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[16777216]}},"chunk_key_encoding":{"name":"default"},"fill_value":0,
	 "codecs":[{"name":"sharding_indexed","configuration":{"chunk_shape":[1],"codecs":[{"name":"bytes"}],"index_codecs":[{"name":"bytes","configuration":{"endian":"little"}}]}}]}`))
	cs := NewCodecs()
	f.Fuzz(func(t *testing.T, b []byte) {
		var err error
		n := alloctest.Bytes(func() {
			var node *Node
			if node, err = ParseNode(b); err != nil || node.Array == nil {
				return
			}
			m := node.Array
			_, err = cs.build("chunk", m.Codecs, rep{shape: m.ChunkShape, typ: m.DataType, fill: m.Fill})
		})
		if err != nil && !errors.Is(err, ErrMetadata) && !errors.Is(err, ErrUnsupported) {
			t.Fatalf("untyped error: %v", err)
		}
		if bound := 64*uint64(len(b)) + 64<<10; n > bound {
			t.Fatalf("%d bytes of metadata allocated %d bytes, bound %d (%v)", len(b), n, bound, err)
		}
	})
}

// expansion is the most one input byte of a chain can decode to (the
// product over its compressors of their format's largest expansion).
func expansion(p *pipeline) uint64 {
	e := uint64(1)
	for _, c := range p.bb {
		e *= codecExpansion(c)
	}
	switch ab := p.ab.(type) {
	case *shardingCodec:
		e *= max(expansion(ab.innerPipe), expansion(ab.indexPipe))
	case *zarrsVlen:
		d := uint64(1)
		for _, c := range ab.data {
			d *= codecExpansion(c)
		}
		e *= max(expansion(ab.index), d)
	}
	return e
}

func codecExpansion(c bytesToBytes) uint64 {
	switch c.name() {
	case "zstd":
		return 32768 // a 4-byte RLE block holds 128 KiB
	case "blosc":
		return uint64(blosc.MaxExpansion(4 << 5)) // zstd inside, the largest
	case "gzip":
		return 1040 // deflate's 1032:1 and framing
	}
	return 1
}

// FuzzDecodeChunk runs arbitrary chunk bytes through real pipelines
// (sharding with crc32c index, sharded vlen-bytes cells, blosc, zstd, gzip, vlen with and without an
// exact size, sharding under an outer compressor, zarrs.vlen) and bounds
// what one decode allocates: 4 × the chunk's decoded size (what the
// metadata fixes: the output, an array→array copy, a shard's inner
// chunks) plus 5 × the chain's largest expansion × the input (output
// buffers double, and a full buffer is overshot by one block) plus 1 MiB
// of decoder scratch. A decoder that sized anything from a header would
// exceed it on the seeded bombs.
func FuzzDecodeChunk(f *testing.F) {
	type fuzzPipe struct {
		p          *pipeline
		chunkBytes uint64
	}
	var pipes []fuzzPipe
	cs := NewCodecs(Limits{MaxChunkBytes: 16 << 20})
	add := func(meta []byte, seeds ...[]byte) {
		n, err := ParseNode(meta)
		if err != nil {
			f.Fatal(err)
		}
		p, err := cs.build("chunk", n.Array.Codecs, rep{shape: n.Array.ChunkShape, typ: n.Array.DataType, fill: n.Array.Fill})
		if err != nil {
			f.Fatal(err)
		}
		_, cb, _ := sizeBytes(n.Array.ChunkShape, n.Array.DataType, 1<<62)
		pipes = append(pipes, fuzzPipe{p, uint64(cb)})
		for _, s := range seeds {
			f.Add(uint8(len(pipes)-1), s)
		}
	}
	for _, dir := range []string{"sharding/3d_crc_inner_int64.zarr", "sharding/index_big_endian_start_uint16.zarr", "blosc/lz4_shuffle_ts8_float64.zarr",
		"zstd/level1_int32.zarr", "gzip/level6_int16.zarr", "vlen/bytes_1d_zstd.zarr", "transpose/i2_3d_order201_big_gzip.zarr"} {
		b, err := os.ReadFile(filepath.Join("../../testdata/zarr-codecs", dir, "zarr.json"))
		if err != nil {
			continue
		}
		var seeds [][]byte
		chunks, _ := filepath.Glob(filepath.Join("../../testdata/zarr-codecs", dir, "c", "*"))
		for _, c := range chunks {
			if cb, err := os.ReadFile(c); err == nil && len(cb) < 1<<16 {
				seeds = append(seeds, cb)
			}
		}
		add(b, seeds...)
	}
	// A ZVF 0.9 chunk-grid array: sharded variable-length cells.
	if b, err := os.ReadFile("../../testdata/zvf-0.9/mesh_sharded_v09.zarrvectors/0/vertices/zarr.json"); err == nil {
		var seeds [][]byte
		for _, k := range []string{"0/0/0", "0/0/1", "1/1/0"} {
			if cb, err := os.ReadFile("../../testdata/zvf-0.9/mesh_sharded_v09.zarrvectors/0/vertices/c/" + k); err == nil {
				seeds = append(seeds, cb)
			}
		}
		add(b, seeds...)
	}
	if len(pipes) < 5 {
		f.Fatalf("only %d seed pipelines", len(pipes))
	}
	meta := func(shape, dtype, codecs string) []byte {
		return []byte(`{"zarr_format":3,"node_type":"array","shape":[` + shape + `],"data_type":"` + dtype + `",
		 "chunk_grid":{"name":"regular","configuration":{"chunk_shape":[` + shape + `]}},
		 "chunk_key_encoding":{"name":"default"},"fill_value":` + map[bool]string{true: `""`, false: "0"}[dtype == "string"] + `,"codecs":` + codecs + `}`)
	}
	zstdBomb := []byte{0x28, 0xB5, 0x2F, 0xFD, 0xC0, 6 << 3, 0, 0, 0, 0x10, 0, 0, 0, 0, 0x03, 0x80, 0, 'a'} // declares 256 MiB, holds 4 KiB
	bloscBomb := []byte{2, 1, 0x10, 1, 0, 0, 0x80, 0, 1, 0, 0x40, 0, 32, 0, 0, 0, 24, 0, 0, 0, 24, 0, 0, 0, 4, 0, 0, 0, 1, 2, 3, 4}
	const blosc = `{"name":"blosc","configuration":{"cname":"zstd","clevel":5,"shuffle":"shuffle","typesize":1}}`
	add(meta("8", "string", `[{"name":"vlen-utf8"},{"name":"zstd"}]`), zstdBomb)
	add(meta("8", "string", `[{"name":"vlen-bytes"},`+blosc+`]`), bloscBomb)
	add(meta("8", "string", `[{"name":"vlen-utf8"},{"name":"gzip"}]`))
	add(meta("64", "uint8", `[{"name":"sharding_indexed","configuration":{"chunk_shape":[16],"codecs":[{"name":"bytes"}],
	 "index_codecs":[{"name":"bytes","configuration":{"endian":"little"}}]}},{"name":"zstd"}]`), zstdBomb)
	add(meta("64", "uint8", `[{"name":"bytes"},`+blosc+`]`), bloscBomb)
	add(meta("8", "string", `[{"name":"zarrs.vlen","configuration":{"data_codecs":[{"name":"bytes"},{"name":"zstd"}],
	 "index_codecs":[{"name":"bytes","configuration":{"endian":"little"}},{"name":"zstd"}],"index_data_type":"uint32"}}]`),
		append(append(binary.LittleEndian.AppendUint64(nil, uint64(len(zstdBomb))), zstdBomb...), zstdBomb...))
	for i := range pipes { // allocate the decoders' reusable state before measuring
		_, _ = pipes[i].p.decode(zstdBomb)
	}
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		fp := pipes[int(which)%len(pipes)]
		var err error
		n := alloctest.Bytes(func() { _, err = fp.p.decode(b) })
		if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
			t.Fatalf("untyped error: %v", err)
		}
		bound := 4*fp.chunkBytes + 5*expansion(fp.p)*uint64(len(b)) + 1<<20
		if n > bound {
			t.Fatalf("pipeline %d: %d input bytes allocated %d bytes, bound %d (%v)", int(which)%len(pipes), len(b), n, bound, err)
		}
	})
}
