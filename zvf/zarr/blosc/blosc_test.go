package blosc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/zvftest/alloctest"
)

func floats(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, 4*n)
	v := float32(0)
	for i := 0; i < n; i++ {
		v += float32(r.NormFloat64())
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	// floats and zeros are just over 64 KiB (lz4's window): each of the 36
	// shuffle/typesize/blocksize settings splits them into 1 to 80 blocks;
	// larger inputs only add blocks of the same kind.
	inputs := map[string][]byte{
		"floats": floats(20000),
		"odd":    floats(1001)[:4003],
		"zeros":  make([]byte, 70000),
		"tiny":   {1, 2, 3},
		"empty":  {},
		"random": func() []byte {
			b := make([]byte, 5000)
			r := rand.New(rand.NewPCG(3, 4))
			for i := range b {
				b[i] = byte(r.Uint32())
			}
			return b
		}(),
	}
	for name, in := range inputs {
		for _, codec := range []string{"lz4", "lz4hc", "zlib", "zstd"} {
			t.Run(name+"/"+codec, func(t *testing.T) {
				t.Parallel()
				for _, sh := range []int{NoShuffle, Shuffle, BitShuffle} {
					for _, ts := range []int{1, 4, 8, 3} {
						for _, bs := range []int{0, 4096, 1000} {
							enc, err := Encode(nil, in, Options{Codec: codec, Level: 5, Shuffle: sh, TypeSize: ts, BlockSize: bs})
							if err != nil {
								t.Fatal(err)
							}
							dec, err := Decode(nil, enc)
							if err != nil {
								t.Fatalf("sh%d ts%d bs%d: %v", sh, ts, bs, err)
							}
							if !bytes.Equal(dec, in) {
								t.Fatalf("sh%d ts%d bs%d: round trip differs", sh, ts, bs)
							}
						}
					}
				}
			})
		}
	}
}

// corpusChunks returns the stored chunks of the zarr-python blosc corpus.
func corpusChunks(t testing.TB) [][]byte {
	var out [][]byte
	root := "../../../testdata/zarr-codecs/blosc"
	err := filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || filepath.Base(p) == "zarr.json" || filepath.Ext(p) == ".json" {
			return err
		}
		b, err := os.ReadFile(p)
		if err == nil && len(b) >= 16 && b[0] == 2 {
			out = append(out, b)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCorruptFrames(t *testing.T) {
	chunks := corpusChunks(t)
	if len(chunks) < 50 {
		t.Fatalf("%d corpus chunks", len(chunks))
	}
	for _, c := range chunks[:20] {
		for _, mut := range []func([]byte) []byte{
			func(b []byte) []byte { return b[:len(b)-1] },
			func(b []byte) []byte { binary.LittleEndian.PutUint32(b[4:], 1<<30); return b },
			func(b []byte) []byte { binary.LittleEndian.PutUint32(b[8:], 0); return b },
			func(b []byte) []byte { b[2] |= 0x08; return b },
			func(b []byte) []byte {
				if len(b) > 20 {
					binary.LittleEndian.PutUint32(b[16:], 1<<31-1)
				}
				return b
			},
		} {
			m := mut(bytes.Clone(c))
			if _, err := (&Decoder{}).DecodeLimit(nil, m, 1<<24); err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not match ErrCorrupt", err)
			}
		}
	}
}

// FuzzDecode: any bytes decode or fail with a *blosc.Error, and a decode
// allocates at most 2 × MaxExpansion × its input + 256 KiB: what the
// frame's bytes can really produce with its compressor (the output buffer
// grows by doubling, hence 2), never what its header claims. The constant
// covers the decoder's reusable scratch (a zstd block, a zlib window).
func FuzzDecode(f *testing.F) {
	for i, c := range corpusChunks(f) {
		if i%5 == 0 && len(c) < 4096 {
			f.Add(c)
		}
	}
	for _, codec := range []string{"lz4", "zlib", "zstd"} {
		enc, _ := Encode(nil, floats(300), Options{Codec: codec, Level: 5, Shuffle: Shuffle, TypeSize: 4})
		f.Add(enc)
	}
	for _, b := range bombs() {
		f.Add(b)
	}
	var d Decoder
	for _, codec := range []string{"zlib", "zstd"} { // allocate the reusable state before measuring
		enc, _ := Encode(nil, make([]byte, 1<<17), Options{Codec: codec, Level: 5, TypeSize: 1})
		if _, err := d.DecodeLimit(nil, enc, 1<<17); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var out []byte
		var err error
		n := alloctest.Bytes(func() { out, err = d.DecodeLimit(nil, b, 1<<24) })
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("untyped error %v", err)
		}
		bound := uint64(256 << 10)
		if len(b) >= headerSize {
			bound += 2 * uint64(MaxExpansion(b[2])) * uint64(len(b))
		}
		if n > bound {
			t.Fatalf("%d input bytes (flags %#x) allocated %d bytes, bound %d (output %d bytes, err %v)", len(b), b[2], n, bound, len(out), err)
		}
	})
}

func benchDecode(b *testing.B, codec string, sh int) {
	in := floats(1 << 18)
	enc, err := Encode(nil, in, Options{Codec: codec, Level: 5, Shuffle: sh, TypeSize: 4})
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]byte, len(in))
	var d Decoder
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := d.DecodeLimit(dst, enc, len(dst)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeLZ4Shuffle(b *testing.B)    { benchDecode(b, "lz4", Shuffle) }
func BenchmarkDecodeZstdShuffle(b *testing.B)   { benchDecode(b, "zstd", Shuffle) }
func BenchmarkDecodeLZ4BitShuffle(b *testing.B) { benchDecode(b, "lz4", BitShuffle) }
