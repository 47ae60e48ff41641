package vlen

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/zvfserve/zvfserve/zvf/zvftest/alloctest"
)

var sample = [][]byte{[]byte(""), []byte("a"), []byte("héllo"), bytes.Repeat([]byte("x"), 1000), {0, 1, 2}}

func identity(b []byte) ([]byte, error) { return b, nil }

func layouts(t testing.TB) map[string]Layout {
	enc, _ := zstd.NewWriter(nil)
	dec, _ := zstd.NewReader(nil)
	t.Cleanup(func() { _ = enc.Close(); dec.Close() })
	zin := func(b []byte) ([]byte, error) { return enc.EncodeAll(b, nil), nil }
	zout := func(b []byte) ([]byte, error) { return dec.DecodeAll(b, nil) }
	return map[string]Layout{
		"vlen-bytes":      VlenBytes{},
		"zarrs start u32": Zarrs{OffsetSize: 4, DecodeIndex: identity, DecodeData: identity, EncodeIndex: identity, EncodeData: identity},
		"zarrs end u64":   Zarrs{IndexAtEnd: true, OffsetSize: 8, DecodeIndex: identity, DecodeData: identity, EncodeIndex: identity, EncodeData: identity},
		"zarrs end zstd":  Zarrs{IndexAtEnd: true, OffsetSize: 4, DecodeIndex: zout, DecodeData: zout, EncodeIndex: zin, EncodeData: zin},
	}
}

func TestRoundTrips(t *testing.T) {
	for name, l := range layouts(t) {
		for _, elems := range [][][]byte{sample, {}, {[]byte("only")}} {
			b, err := l.Encode(elems)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			got, err := l.Decode(b, len(elems))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if len(got) != len(elems) {
				t.Fatalf("%s: %d elements", name, len(got))
			}
			for i := range elems {
				if !bytes.Equal(got[i], elems[i]) {
					t.Fatalf("%s: element %d = %q", name, i, got[i])
				}
			}
			if _, err := l.Decode(b, len(elems)+1); !errors.Is(err, ErrMalformed) {
				t.Errorf("%s: wrong count accepted: %v", name, err)
			}
		}
	}
}

func TestMalformed(t *testing.T) {
	z := Zarrs{OffsetSize: 4, DecodeIndex: identity, DecodeData: identity}
	good, _ := Zarrs{OffsetSize: 4, EncodeIndex: identity, EncodeData: identity}.Encode(sample)
	for name, b := range map[string][]byte{
		"short":              good[:5],
		"index length lies":  append(binary.LittleEndian.AppendUint64(nil, 1<<60), good[8:]...),
		"truncated data":     good[:len(good)-2],
		"offsets decreasing": func() []byte { c := bytes.Clone(good); binary.LittleEndian.PutUint32(c[8+8:], 0xffff); return c }(),
	} {
		if _, err := z.Decode(b, len(sample)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := (VlenBytes{}).Decode([]byte{0xff, 0xff, 0xff, 0x7f}, 1<<31-1); !errors.Is(err, ErrMalformed) {
		t.Error("a count that cannot fit was accepted")
	}
	if _, err := (VlenBytes{UTF8: true}).Decode(mustEncode(t, VlenBytes{}, [][]byte{{0xff}}), 1); !errors.Is(err, ErrMalformed) {
		t.Error("invalid UTF-8 accepted by vlen-utf8")
	}
}

func mustEncode(t *testing.T, l Layout, e [][]byte) []byte {
	b, err := l.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fuzzLayout: Decode returns n elements or a typed error, and allocates at
// most 8 × the chunk plus 64 KiB — each element costs a 24-byte slice
// header and needs at least a 4-byte length or offset in the chunk (6×);
// the elements alias the chunk; the constant absorbs what the fuzzing
// worker allocates meanwhile — never what a count claims, even when the
// caller's n is large.
func fuzzLayout(f *testing.F, l Layout) {
	b, _ := l.Encode(sample)
	f.Add(b, len(sample))
	f.Add([]byte{}, 0)
	f.Add([]byte{0xff, 0xff, 0xff, 0x7f}, 1<<20) // a count of 2^31 in 4 bytes
	f.Add(make([]byte, 16), 1<<20)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		if n < 0 || n > 1<<20 {
			return
		}
		var elems [][]byte
		var err error
		if a := alloctest.Bytes(func() { elems, err = l.Decode(b, n) }); a > 8*uint64(len(b))+64<<10 {
			t.Fatalf("%d bytes, n=%d: allocated %d (%v)", len(b), n, a, err)
		}
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("untyped error %v", err)
		}
		if err == nil && len(elems) != n {
			t.Fatalf("%d elements, want %d", len(elems), n)
		}
	})
}

func FuzzVlenBytes(f *testing.F) { fuzzLayout(f, VlenBytes{UTF8: true}) }

func FuzzZarrsVlen(f *testing.F) {
	fuzzLayout(f, Zarrs{IndexAtEnd: true, OffsetSize: 8, DecodeIndex: identity, DecodeData: identity, EncodeIndex: identity, EncodeData: identity})
}

func BenchmarkVlenBytesDecode(b *testing.B) {
	elems := make([][]byte, 16384)
	for i := range elems {
		elems[i] = bytes.Repeat([]byte{byte(i)}, 40+i%60)
	}
	enc, _ := VlenBytes{}.Encode(elems)
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := (VlenBytes{}).Decode(enc, len(elems)); err != nil {
			b.Fatal(err)
		}
	}
}
