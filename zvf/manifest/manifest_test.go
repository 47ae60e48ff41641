package manifest

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"testing"
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
	refs := Refs(blocks)
	if len(refs) != 2 || refs[1].Fragment != 1 {
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

func FuzzDecode(f *testing.F) {
	b, _ := Encode([]Block{{Chunk: []int64{0, 0, 0}, Mode: 0, Start: 3, Count: 1}, {Chunk: []int64{1, -1, 0}, Mode: 1, Start: 2, Count: 5}, {Chunk: []int64{0, 0, 0}, Mode: 2, List: []int64{1, 2}}}, 3)
	f.Add(b, 3)
	f.Add([]byte{0, 0, 0, 0}, 2)
	f.Fuzz(func(t *testing.T, b []byte, ndim int) {
		blocks, err := Decode(b, ndim)
		if err != nil || len(b) == 0 {
			return
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
