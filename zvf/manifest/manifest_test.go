package manifest

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"reflect"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/zvftest/alloctest"
)

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name   string
		blocks []Block
		ndim   int
		size   int
	}{
		{"empty", []Block{}, 3, 4},
		{"mode0", []Block{{Chunk: []int64{0, 0, 0}, Mode: 0, Start: 0, Count: 1}, {Chunk: []int64{0, 0, 0}, Mode: 0, Start: 1, Count: 1}}, 3, 70},
		{"mode1", []Block{{Chunk: []int64{-1, 2, 3}, Mode: 1, Start: 4, Count: 3}}, 3, 4 + 24 + 1 + 16},
		{"mode2", []Block{{Chunk: []int64{5, 6}, Mode: 2, List: []int64{9, 1, 9}}}, 2, 4 + 16 + 1 + 4 + 24},
		{"mixed", []Block{{Chunk: []int64{1}, Mode: 2, List: []int64{}}, {Chunk: []int64{2}, Mode: 1, Start: 0, Count: 0}}, 1, 4 + 9 + 4 + 9 + 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Encode(tc.blocks, tc.ndim)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) != tc.size {
				t.Fatalf("encoded %d bytes, want %d", len(b), tc.size)
			}
			got, err := Decode(b, tc.ndim)
			if err != nil {
				t.Fatal(err)
			}
			for i := range got {
				if got[i].Mode == ModeList && got[i].List == nil {
					got[i].List = []int64{}
				}
			}
			if !reflect.DeepEqual(got, tc.blocks) {
				t.Fatalf("got %+v", got)
			}
		})
	}
}

// The digest's observed example (§4.2): two mode-0 blocks on chunk (0,0,0).
func TestReferenceBytes(t *testing.T) {
	h := "02000000" + "000000000000000000000000000000000000000000000000" + "00" + "0000000000000000" +
		"000000000000000000000000000000000000000000000000" + "00" + "0100000000000000"
	b, err := hex.DecodeString(h)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := Decode(b, 3)
	if err != nil {
		t.Fatal(err)
	}
	refs, err := Refs(blocks, 1<<20)
	if err != nil || len(refs) != 2 || refs[1].Fragment != 1 {
		t.Fatalf("refs %+v", refs)
	}
}

func TestInvalid(t *testing.T) {
	good, _ := Encode([]Block{{Chunk: []int64{1, 2, 3}, Mode: 2, List: []int64{4, 5}}}, 3)
	mut := func(i int, v byte) []byte { b := bytes.Clone(good); b[i] = v; return b }
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"short count", good[:3]},
		{"huge count", mut(3, 0x7f)},
		{"truncated", good[:len(good)-1]},
		{"trailing", append(bytes.Clone(good), 0)},
		{"unknown mode", mut(28, 7)},
		{"list count lies", mut(29, 0xff)},
		{"negative fragment", mut(40, 0x80)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Decode(tc.b, 3); !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v", err)
			}
		})
	}
	if _, err := Decode(good, 0); err == nil {
		t.Fatal("arity 0 accepted")
	}
}

// FuzzDecode: Decode allocates at most 8 × its input plus 64 KiB (a
// 13-byte block becomes a 72-byte Block, its coordinates and lists stay
// 1:1; the constant absorbs what the fuzzing worker allocates meanwhile),
// never what a count claims; Refs stays within its bound; what
// decodes re-encodes to the same bytes.
func FuzzDecode(f *testing.F) {
	b, _ := Encode([]Block{{Chunk: []int64{0, 0, 0}, Mode: 0, Start: 3, Count: 1}, {Chunk: []int64{1, -1, 0}, Mode: 1, Start: 2, Count: 5}, {Chunk: []int64{0, 0, 0}, Mode: 2, List: []int64{1, 2}}}, 3)
	f.Add(b, 3)
	f.Add([]byte{0, 0, 0, 0}, 2)
	f.Add([]byte{0xff, 0xff, 0xff, 0x7f}, 1) // 2^31 blocks in 4 bytes
	run, _ := Encode([]Block{{Chunk: []int64{0}, Mode: ModeRun, Start: 0, Count: 1 << 62}}, 1)
	f.Add(run, 1)
	list, _ := Encode([]Block{{Chunk: []int64{0}, Mode: ModeList, List: []int64{1}}}, 1)
	binary.LittleEndian.PutUint32(list[13:], 1<<31) // a list count that lies
	f.Add(list, 1)
	f.Fuzz(func(t *testing.T, b []byte, ndim int) {
		var blocks []Block
		var err error
		if n := alloctest.Bytes(func() { blocks, err = Decode(b, ndim) }); n > 8*uint64(len(b))+64<<10 {
			t.Fatalf("%d bytes allocated %d", len(b), n)
		}
		if err != nil || len(b) == 0 {
			return
		}
		const maxRefs = 1 << 16
		var refs []Ref
		if n := alloctest.Bytes(func() { refs, err = Refs(blocks, maxRefs) }); n > 32*maxRefs+64<<10 {
			t.Fatalf("Refs allocated %d", n)
		}
		if err == nil && len(refs) > maxRefs {
			t.Fatalf("%d refs, bound %d", len(refs), maxRefs)
		}
		enc, err := Encode(blocks, ndim)
		if err != nil || !bytes.Equal(enc, b) {
			t.Fatalf("round trip: %v\n%x\n%x", err, b, enc)
		}
	})
}

func BenchmarkDecode(b *testing.B) {
	blocks := make([]Block, 1000)
	for i := range blocks {
		blocks[i] = Block{Chunk: []int64{int64(i % 7), 1, 2}, Mode: 0, Start: int64(i), Count: 1}
	}
	enc, _ := Encode(blocks, 3)
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(enc, 3); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRefsBounded: a run's count is a header field; expanding a manifest
// into references stops at the caller's bound with a typed error instead
// of sizing the slice from the counts (a run of 2^62 fragments panicked
// in make, two of them overflowed the total).
func TestRefsBounded(t *testing.T) {
	run := func(n int64) Block { return Block{Chunk: []int64{0}, Mode: ModeRun, Start: 0, Count: n} }
	for _, tc := range []struct {
		name   string
		blocks []Block
		max    int64
		want   int // refs, or -1 for the error
	}{
		{"within", []Block{run(3), {Chunk: []int64{1}, Mode: ModeList, List: []int64{4, 5}}}, 5, 5},
		{"one over", []Block{run(3), run(3)}, 5, -1},
		{"run of 2^62", []Block{run(1 << 62)}, 1 << 20, -1},
		{"counts overflow", []Block{run(1 << 62), run(1 << 62), run(1 << 62)}, 1<<63 - 1, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Encode(tc.blocks, 1)
			if err != nil {
				t.Fatal(err)
			}
			blocks, err := Decode(b, 1)
			if err != nil {
				t.Fatal(err)
			}
			var refs []Ref
			n := alloctest.Bytes(func() { refs, err = Refs(blocks, tc.max) })
			if tc.want < 0 {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("err = %v, want ErrMalformed", err)
				}
				if n > 64<<10 {
					t.Fatalf("refused after allocating %d bytes", n)
				}
				return
			}
			if err != nil || len(refs) != tc.want {
				t.Fatalf("%d refs, %v", len(refs), err)
			}
		})
	}
}
