package fragindex

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/zvftest/alloctest"
)

// specExample is the spec's worked example: F=3, R=2, ranges (0,4) and
// (20,8), fragment 1 explicit [12 7 19].
const specExample = "47465 65a 0100 0000 03000000 02000000 0500000000000000" +
	"0000000000000000 0400000000000000 1400000000000000 0800000000000000" +
	"00000000 03000000 0c00000000000000 0700000000000000 1300000000000000"

func unhex(t testing.TB, s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSpecExample(t *testing.T) {
	b := unhex(t, specExample)
	if len(b) != 88 {
		t.Fatalf("example is %d bytes", len(b))
	}
	x, err := Decode(b, 28)
	if err != nil {
		t.Fatal(err)
	}
	if x.Len() != 3 || x.NumRanges() != 2 {
		t.Fatalf("F=%d R=%d", x.Len(), x.NumRanges())
	}
	if s, c, ok := x.Range(0); !ok || s != 0 || c != 4 {
		t.Errorf("Range(0) = %d %d %v", s, c, ok)
	}
	if got := x.Indices(1); !reflect.DeepEqual(got, []int64{12, 7, 19}) {
		t.Errorf("Indices(1) = %v", got)
	}
	if s, c, ok := x.Range(2); !ok || s != 20 || c != 8 {
		t.Errorf("Range(2) = %d %d %v", s, c, ok)
	}
	enc, err := Encode(x.Fragments())
	if err != nil || !bytes.Equal(enc, b) {
		t.Fatalf("re-encode differs: %x, %v", enc, err)
	}
}

// The digest's real example (§3.2): 8 bins, all ranges, 4 rows.
func TestReferenceExample(t *testing.T) {
	b, err := Encode([]Fragment{RangeFragment(0, 2), RangeFragment(2, 0), RangeFragment(2, 0), RangeFragment(2, 0),
		RangeFragment(2, 1), RangeFragment(3, 0), RangeFragment(3, 1), RangeFragment(4, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 156 || !bytes.HasPrefix(b, unhex(t, "47465 65a 01000000 08000000 08000000 ff00000000000000")) {
		t.Fatalf("encoded %d bytes: %x", len(b), b[:32])
	}
	x, err := Decode(b, 4)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for f := 0; f < x.Len(); f++ {
		total += x.Count(f)
	}
	if total != 4 {
		t.Fatalf("rows %d", total)
	}
	if _, err := Decode(b, 3); err == nil {
		t.Fatal("range past the chunk's rows accepted")
	}
}

func TestEmpty(t *testing.T) {
	b, _ := Encode(nil)
	x, err := Decode(b, 0)
	if err != nil || x.Len() != 0 || len(b) != 16 {
		t.Fatalf("%v %v %d", x, err, len(b))
	}
}

func TestInvalid(t *testing.T) {
	good := unhex(t, specExample)
	mut := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	put32 := func(off int, v uint32) []byte {
		return mut(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[off:], v); return b })
	}
	put64 := func(off int, v uint64) []byte {
		return mut(func(b []byte) []byte { binary.LittleEndian.PutUint64(b[off:], v); return b })
	}
	for _, tc := range []struct {
		name string
		b    []byte
		rows int64
	}{
		{"short", good[:10], -1},
		{"magic", put32(0, 0x5A56464A), -1},
		{"version", mut(func(b []byte) []byte { b[4] = 2; return b }), -1},
		{"flags", mut(func(b []byte) []byte { b[6] = 1; return b }), -1},
		{"R>F", put32(12, 4), -1},
		{"F lies (huge)", put32(8, 0xFFFFFFFF), -1},
		{"popcount", put32(12, 1), -1},
		{"padding bits", mut(func(b []byte) []byte { b[16] |= 0x10; return b }), -1},
		{"padding bytes", mut(func(b []byte) []byte { b[20] = 1; return b }), -1},
		{"negative start", put64(24, ^uint64(0)), -1},
		{"negative count", put64(32, 1<<63), -1},
		{"range overflow", put64(32, 1<<62), 28},
		{"range past rows", good, 27},
		{"csr start", put32(56, 1), -1},
		{"csr not monotone", put32(60, 0), -1},
		{"csr lies about T", put32(60, 1000), -1},
		{"negative index", put64(64, ^uint64(0)), -1},
		{"index past rows", good, 19},
		{"trailing byte", append(bytes.Clone(good), 0), -1},
		{"truncated", good[:87], -1},
		{"F=0 with body", append(unhex(t, "4746565a0100000000000000000000000"+"0"), 0), -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Decode(tc.b, tc.rows); !errors.Is(err, ErrMalformed) {
				t.Fatalf("Decode = %v, want ErrMalformed", err)
			}
		})
	}
}

func TestEncodeRejectsNegative(t *testing.T) {
	if _, err := Encode([]Fragment{ExplicitFragment([]int64{-1})}); err == nil {
		t.Fatal("negative index encoded")
	}
	if _, err := Encode([]Fragment{RangeFragment(-1, 2)}); err == nil {
		t.Fatal("negative start encoded")
	}
}

// FuzzDecode also bounds what Decode allocates: the bitmap words with their
// prefix counts (16 bytes for 8 of the blob) and the explicit indices (1:1)
// are at most 2 × the blob, so 3 × plus 64 KiB (what the fuzzing worker
// allocates meanwhile), never what F, R or T claim.
func FuzzDecode(f *testing.F) {
	f.Add(unhex(f, specExample), int64(28))
	b, _ := Encode([]Fragment{RangeFragment(0, 2), ExplicitFragment(nil), RangeFragment(2, 3)})
	f.Add(b, int64(-1))
	f.Add(make([]byte, 16), int64(0))
	lie := unhex(f, specExample)
	binary.LittleEndian.PutUint32(lie[8:], 1<<31) // F claims 2^31 fragments
	f.Add(lie, int64(28))
	f.Fuzz(func(t *testing.T, b []byte, rows int64) {
		var x *Index
		var err error
		if n := alloctest.Bytes(func() { x, err = Decode(b, rows) }); n > 3*uint64(len(b))+64<<10 {
			t.Fatalf("%d bytes allocated %d", len(b), n)
		}
		if (err == nil) != refValid(b, rows) {
			t.Fatalf("Decode error %v, but the reference check says valid=%v", err, refValid(b, rows))
		}
		if err != nil {
			return
		}
		// Whatever Decode accepts stays inside the chunk's rows.
		for i := 0; i < x.Len(); i++ {
			if s, c, ok := x.Range(i); ok {
				if s < 0 || c < 0 || (rows >= 0 && s+c > rows) {
					t.Fatalf("fragment %d: range (%d, %d) accepted with %d rows", i, s, c, rows)
				}
				continue
			}
			for _, r := range x.Indices(i) {
				if r < 0 || (rows >= 0 && r >= rows) {
					t.Fatalf("fragment %d: index %d accepted with %d rows", i, r, rows)
				}
			}
		}
		enc, err := Encode(x.Fragments())
		if err != nil {
			t.Fatalf("decoded index does not re-encode: %v", err)
		}
		if !bytes.Equal(enc, b) {
			t.Fatalf("round trip differs:\n%x\n%x", b, enc)
		}
	})
}

// refValid checks the spec's invariants one field at a time, the plain way,
// to cross-check Decode's fused and unrolled validation.
func refValid(b []byte, rows int64) bool {
	le := binary.LittleEndian
	if len(b) < 16 || le.Uint32(b) != Magic || le.Uint16(b[4:]) != 1 || le.Uint16(b[6:]) != 0 {
		return false
	}
	F, R := int(le.Uint32(b[8:])), int(le.Uint32(b[12:]))
	if F == 0 {
		return R == 0 && len(b) == 16
	}
	bmBytes := (F + 7) / 8
	padded := (bmBytes + 7) / 8 * 8
	if len(b) < 16+padded {
		return false
	}
	set := 0
	for f := 0; f < 8*padded; f++ {
		if b[16+f/8]>>(f%8)&1 == 1 {
			if f >= F {
				return false // padding bit or byte
			}
			set++
		}
	}
	if set != R {
		return false
	}
	p := 16 + padded
	if len(b) < p+16*R {
		return false
	}
	for r := 0; r < R; r++ {
		s, c := int64(le.Uint64(b[p+16*r:])), int64(le.Uint64(b[p+16*r+8:]))
		if s < 0 || c < 0 || c > math.MaxInt64-s || (rows >= 0 && s+c > rows) {
			return false
		}
	}
	p += 16 * R
	E := F - R
	if len(b) < p+4*(E+1) {
		return false
	}
	prev := uint32(0)
	for e := 0; e <= E; e++ {
		o := le.Uint32(b[p+4*e:])
		if (e == 0 && o != 0) || o < prev {
			return false
		}
		prev = o
	}
	p += 4 * (E + 1)
	if len(b)-p != 8*int(prev) {
		return false
	}
	for i := 0; i < int(prev); i++ {
		v := int64(le.Uint64(b[p+8*i:]))
		if v < 0 || (rows >= 0 && v >= rows) {
			return false
		}
	}
	return true
}

// TestAgreesWithReference corrupts every 4- and 8-byte field of a mixed
// index with edge values and checks Decode accepts exactly what refValid
// accepts. F=76, R=63, E=13, T=31: none is a multiple of the unrolled
// loops' step, so their tails are hit too.
func TestAgreesWithReference(t *testing.T) {
	var frags []Fragment
	var row int64
	for i := range 76 {
		if i%6 == 3 {
			frags = append(frags, ExplicitFragment([]int64{row + 2, row, row + 1, row + 4, row + 3}[:i/6%4+1]))
		} else {
			frags = append(frags, RangeFragment(row, int64(i%4)))
		}
		row += 5
	}
	good, err := Encode(frags)
	if err != nil {
		t.Fatal(err)
	}
	edges := []uint64{0, 1, 2, 7, uint64(row - 1), uint64(row), uint64(row + 1), 1<<31 - 1, 1 << 32, 1<<62 + 1, 1<<63 - 1, 1 << 63, ^uint64(0)}
	for _, rows := range []int64{-1, 0, row - 1, row, 1 << 62} {
		check := func(b []byte) {
			_, err := Decode(b, rows)
			if want := refValid(b, rows); (err == nil) != want {
				t.Fatalf("rows=%d: Decode error %v, reference valid=%v\n%x", rows, err, want, b)
			}
		}
		check(good)
		// A padding bit traded for a range bit keeps the popcount.
		for _, pad := range []int{76, 79, 80, 127} {
			b := bytes.Clone(good)
			b[16] &^= 1
			b[16+pad/8] |= 1 << (pad % 8)
			check(b)
		}
		for off := 0; off+4 <= len(good); off += 4 {
			for _, v := range edges {
				b := bytes.Clone(good)
				binary.LittleEndian.PutUint32(b[off:], uint32(v))
				check(b)
				if off+8 <= len(good) {
					binary.LittleEndian.PutUint64(b[off:], v)
					check(b)
				}
				// Decrement a CSR offset, or flip a byte.
				b = bytes.Clone(good)
				b[off] ^= byte(v) | 1
				check(b)
			}
		}
	}
}

func bigIndex(b *testing.B) []byte {
	frags := make([]Fragment, 10000)
	var row int64
	for i := range frags {
		if i%10 == 9 {
			frags[i] = ExplicitFragment([]int64{row, row + 1, row + 2})
		} else {
			frags[i] = RangeFragment(row, 7)
		}
		row += 7
	}
	enc, err := Encode(frags)
	if err != nil {
		b.Fatal(err)
	}
	return enc
}

func BenchmarkDecode10k(b *testing.B) {
	enc := bigIndex(b)
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(enc, 1<<40); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLookup(b *testing.B) {
	x, err := Decode(bigIndex(b), -1)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var sink int64
	i := 0
	for b.Loop() {
		f := i % x.Len()
		if s, c, ok := x.Range(f); ok {
			sink += s + c
		} else {
			sink += int64(len(x.Indices(f)))
		}
		i++
	}
	_ = sink
}
