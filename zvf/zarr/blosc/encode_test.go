package blosc

import (
	"bytes"
	"crypto/sha256"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/encode.golden")

// encodeInputs are compressible floats, random (incompressible) bytes and
// both in one input, so that a frame holds compressed and stored blocks.
func encodeInputs() []struct {
	name string
	b    []byte
} {
	random := make([]byte, 12000)
	r := rand.New(rand.NewPCG(5, 6))
	for i := range random {
		random[i] = byte(r.Uint32())
	}
	return []struct {
		name string
		b    []byte
	}{
		{"floats", floats(10000)},
		{"random", random},
		{"mixed", append(floats(3000), random...)},
		{"odd", floats(700)[:2799]},
	}
}

// TestEncodeGolden pins the frames Encode writes, for every codec, shuffle
// and a range of levels and block sizes, to the bytes of the encoder that
// made a compressor per block (testdata/encode.golden was written by it):
// stores written before and after must not differ. One encoder encodes
// every input in turn, twice, so that state left by one frame would show
// in the next.
func TestEncodeGolden(t *testing.T) {
	var got strings.Builder
	inputs := encodeInputs()
	for _, codec := range []string{"lz4", "lz4hc", "zlib", "zstd"} {
		for _, sh := range []int{NoShuffle, Shuffle, BitShuffle} {
			for _, level := range []int{0, 1, 5, 9} {
				for _, bs := range []int{0, 4096} {
					o := Options{Codec: codec, Level: level, Shuffle: sh, TypeSize: 4, BlockSize: bs}
					enc, err := NewEncoder(o)
					if err != nil {
						t.Fatal(err)
					}
					var dst []byte
					for pass := range 2 {
						for _, in := range inputs {
							name := fmt.Sprintf("%s/sh%d/l%d/bs%d/%s", codec, sh, level, bs, in.name)
							if dst, err = enc.Encode(dst, in.b); err != nil {
								t.Fatalf("%s: %v", name, err)
							}
							dec, err := Decode(nil, dst)
							if err != nil || !bytes.Equal(dec, in.b) {
								t.Fatalf("%s: round trip: %v", name, err)
							}
							if pass == 0 {
								fmt.Fprintf(&got, "%s %d %x\n", name, len(dst), sha256.Sum256(dst))
							} else if line := fmt.Sprintf("%s %d %x\n", name, len(dst), sha256.Sum256(dst)); !strings.Contains(got.String(), line) {
								t.Errorf("%s: the second encoding differs from the first", name)
							}
						}
					}
				}
			}
		}
	}
	golden := filepath.Join("testdata", "encode.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want) {
		wl, gl := strings.Split(string(want), "\n"), strings.Split(got.String(), "\n")
		for i := range min(len(wl), len(gl)) {
			if wl[i] != gl[i] {
				t.Fatalf("frame differs from the golden\n got %s\nwant %s", gl[i], wl[i])
			}
		}
		t.Fatalf("%d golden lines, %d encoded", len(wl), len(gl))
	}
}

// benchEncode encodes n bytes of floats with one reused Encoder, as the
// writer does for every blob of a store: small blobs show the per-frame
// cost, large ones (several blocks) the per-block cost.
func benchEncode(b *testing.B, codec string, n int) {
	in := floats(n / 4)
	enc, err := NewEncoder(Options{Codec: codec, Level: 5, Shuffle: BitShuffle, TypeSize: 4})
	if err != nil {
		b.Fatal(err)
	}
	var dst []byte
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if dst, err = enc.Encode(dst, in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeZstdSmall(b *testing.B) { benchEncode(b, "zstd", 4<<10) }
func BenchmarkEncodeZstdLarge(b *testing.B) { benchEncode(b, "zstd", 1<<20) }
func BenchmarkEncodeZlibSmall(b *testing.B) { benchEncode(b, "zlib", 4<<10) }
func BenchmarkEncodeZlibLarge(b *testing.B) { benchEncode(b, "zlib", 1<<20) }
func BenchmarkEncodeLZ4Small(b *testing.B)  { benchEncode(b, "lz4", 4<<10) }
func BenchmarkEncodeLZ4Large(b *testing.B)  { benchEncode(b, "lz4", 1<<20) }

// TestEncoderReusesCompressors: a warmed Encoder writes a frame of several
// blocks without making a compressor (zstd's tables are ~1 MB, zlib's
// ~300 KB) or an output buffer per block or frame; it did both for every
// blob of every store the writer wrote.
func TestEncoderReusesCompressors(t *testing.T) {
	in := floats(1 << 18) // 1 MiB: four blocks
	for _, codec := range []string{"lz4", "lz4hc", "zlib", "zstd"} {
		enc, err := NewEncoder(Options{Codec: codec, Level: 5, Shuffle: BitShuffle, TypeSize: 4})
		if err != nil {
			t.Fatal(err)
		}
		var dst []byte
		if dst, err = enc.Encode(dst, in); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(3, func() { dst, _ = enc.Encode(dst, in) }); n > 1 {
			t.Errorf("%s: %.0f allocations a frame", codec, n)
		}
	}
}
