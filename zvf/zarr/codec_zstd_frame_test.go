package zarr

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/zvfserve/zvfserve/zvf/zvftest/alloctest"
)

// TestZstdUnknownSize: frames decoded without an exact size — including
// highly compressible ones, whose declared content size is stripped and
// whose output grows by doubling — give exactly what a plain decoder
// gives: single-segment or windowed frames, with checksums, several frames
// and skippable frames, and the zarr-python corpus.
func TestZstdUnknownSize(t *testing.T) {
	enc := func(data []byte, opts ...zstd.EOption) []byte {
		e, err := zstd.NewWriter(nil, opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		return e.EncodeAll(data, nil)
	}
	zeros := make([]byte, 6<<20)
	text := bytes.Repeat([]byte("the quick brown fox jumps over the lazy dog "), 5000)
	skippable := append([]byte{0x50, 0x2A, 0x4D, 0x18, 3, 0, 0, 0}, 1, 2, 3)
	inputs := map[string][]byte{
		"zeros single segment":        enc(zeros, zstd.WithSingleSegment(true)),
		"zeros windowed with content": enc(zeros, zstd.WithWindowSize(1<<20), zstd.WithSingleSegment(false)),
		"zeros no checksum":           enc(zeros, zstd.WithEncoderCRC(false), zstd.WithSingleSegment(true)),
		"text":                        enc(text),
		"empty":                       enc(nil),
		"two frames and a skippable": append(append(enc(text[:1000], zstd.WithSingleSegment(true)), skippable...),
			enc(zeros[:1<<20], zstd.WithSingleSegment(true))...),
	}
	err := filepath.WalkDir("../../testdata/zarr-codecs/zstd", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Base(filepath.Dir(p)) == "." || filepath.Ext(p) == ".json" {
			return err
		}
		b, err := os.ReadFile(p)
		inputs["corpus "+p] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(1<<30))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	c := &zstdCodec{cs: NewCodecs()}
	for name, b := range inputs {
		t.Run(name, func(t *testing.T) {
			want, err := plain.DecodeAll(b, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.decode(b, upTo(int64(len(want))+1<<20))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("decoded %d bytes (%v), want %d", len(got), err, len(want))
			}
			if len(want) > 0 {
				if _, err := c.decode(b, upTo(int64(len(want)-1))); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("one byte under the limit: err = %v", err)
				}
			}
			got, err = c.decode(b, outSize{exact: int64(len(want)), max: int64(len(want))})
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("exact: decoded %d bytes (%v), want %d", len(got), err, len(want))
			}
		})
	}
}

// TestScanZstd: headers that promise more than the bytes present are
// refused before decoding.
func TestScanZstd(t *testing.T) {
	frame := func(fhd byte, rest ...byte) []byte { return append([]byte{0x28, 0xB5, 0x2F, 0xFD, fhd}, rest...) }
	rle := func(n int, last bool) []byte {
		h := uint32(n)<<3 | 2
		if last {
			h |= 1
		}
		return []byte{byte(h), byte(h >> 8), byte(h >> 16), 'x'}
	}
	for _, tc := range []struct {
		name string
		b    []byte
		ok   bool
	}{
		{"single segment, 1-byte size", append(frame(0x20, 100), rle(100, true)...), true},
		{"content size over the blocks", append(frame(0x20, 101), rle(100, true)...), false},
		{"8-byte size of 2^40", append(frame(0xE0, 0, 0, 0, 0, 0, 1, 0, 0), rle(100, true)...), false},
		{"compressed block bounded by the window", append(frame(0x40, 0, 0x08, 0xFF), 0x05|0x10<<3, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16), false},
		{"truncated block", append(frame(0x20, 10), 0x01|10<<3, 0, 0, 1, 2), false},
		{"reserved block type", append(frame(0x20, 10), 0x07, 0, 0), false},
		{"reserved header bit", append(frame(0x28, 10), rle(10, true)...), false},
		{"no last block", append(frame(0x20, 10), rle(10, false)...), false},
		{"bad magic", []byte{1, 2, 3, 4, 5, 6, 7, 8}, false},
		{"skippable frame overruns", []byte{0x50, 0x2A, 0x4D, 0x18, 9, 0, 0, 0, 1}, false},
		{"nothing", nil, true},
		{"skippable frame only", []byte{0x50, 0x2A, 0x4D, 0x18, 1, 0, 0, 0, 1}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := scanZstd(tc.b)
			if tc.ok != (err == nil) {
				t.Fatalf("err = %v", err)
			}
			if err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
		})
	}
}

// FuzzBytesCodecs: zstd and gzip decode arbitrary bytes, with an exact
// size (which the metadata would fix) or only a bound. Whatever a plain
// decoder makes of the bytes, ours agrees: the same output when both
// succeed within the size, so scanning frames, stripping declared sizes
// and growing the output change nothing; an error where the plain decoder
// succeeds only for a wrong exact size or output over the bound. A decode
// allocates at most the exact size plus 5 × the format's largest
// expansion × the input (buffers double, and a full one is overshot by a
// block) plus 1 MiB of decoder scratch. Seeded with bombs: content sizes
// the blocks cannot hold, frames without one that expand 32768-fold,
// gzip of 64 MiB of zeros.
func FuzzBytesCodecs(f *testing.F) {
	const limit = 16 << 20
	zenc, _ := zstd.NewWriter(nil, zstd.WithSingleSegment(true))
	defer zenc.Close()
	text := bytes.Repeat([]byte("the quick brown fox jumps over the lazy dog "), 300)
	f.Add(uint8(0), int32(-1), zenc.EncodeAll(make([]byte, 1<<20), nil))
	f.Add(uint8(0), int32(len(text)), zenc.EncodeAll(text, nil))
	f.Add(uint8(0), int32(-1), []byte{0x28, 0xB5, 0x2F, 0xFD, 0xC0, 6 << 3, 0, 0, 0, 0x10, 0, 0, 0, 0, 0x03, 0x80, 0, 'a'})
	rle := []byte{0x28, 0xB5, 0x2F, 0xFD, 0x00, 7 << 3}
	for i := 0; i < 200; i++ {
		h := uint32(128<<10)<<3 | 2
		if i == 199 {
			h |= 1
		}
		rle = append(rle, byte(h), byte(h>>8), byte(h>>16), 'a')
	}
	f.Add(uint8(0), int32(-1), rle)
	var gz bytes.Buffer
	w, _ := gzip.NewWriterLevel(&gz, 9)
	_, _ = w.Write(make([]byte, 64<<20))
	_ = w.Close()
	f.Add(uint8(1), int32(-1), gz.Bytes())
	gz.Reset()
	w.Reset(&gz)
	_, _ = w.Write(text)
	_ = w.Close()
	f.Add(uint8(1), int32(len(text)), gz.Bytes())

	plainZstd, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(limit))
	if err != nil {
		f.Fatal(err)
	}
	defer plainZstd.Close()
	plain := []func([]byte) ([]byte, error){
		func(b []byte) ([]byte, error) { return plainZstd.DecodeAll(b, nil) },
		func(b []byte) ([]byte, error) {
			r, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				return nil, err
			}
			return io.ReadAll(io.LimitReader(r, limit+1))
		},
	}
	cs := NewCodecs()
	codecs := []bytesToBytes{&zstdCodec{cs: cs}, gzipCodec{}}
	expansion := []uint64{32768, 1040}
	_, _ = codecs[0].decode(zenc.EncodeAll(text, nil), upTo(limit)) // the decoders' state, before measuring
	f.Fuzz(func(t *testing.T, which uint8, exact int32, b []byte) {
		i := int(which) % len(codecs)
		size := upTo(limit)
		if exact >= 0 {
			size = outSize{exact: int64(exact % (1 << 20)), max: int64(exact % (1 << 20))}
		}
		var got []byte
		var err error
		n := alloctest.Bytes(func() { got, err = codecs[i].decode(b, size) })
		if bound := uint64(max(size.exact, 0)) + 5*expansion[i]*uint64(len(b)) + 1<<20; n > bound {
			t.Fatalf("%s: %d input bytes allocated %d, bound %d (%v)", codecs[i].name(), len(b), n, bound, err)
		}
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("untyped error %v", err)
		}
		want, perr := plain[i](b)
		if i == 0 && err == nil && errors.Is(perr, zstd.ErrWindowSizeExceeded) && len(got) <= limit {
			// A frame may declare any window (RFC 8878); the plain
			// decoder's memory bound refuses one past it, which ours,
			// bounded by the output it expects, need not.
			return
		}
		switch {
		case err == nil && (perr != nil || !bytes.Equal(got, want)):
			t.Fatalf("%s: decoded %d bytes, a plain decoder %d (%v)", codecs[i].name(), len(got), len(want), perr)
		case err != nil && perr == nil && len(want) <= limit && (size.exact < 0 || int64(len(want)) == size.exact):
			t.Fatalf("%s: %v, but a plain decoder gives %d bytes", codecs[i].name(), err, len(want))
		}
	})
}
