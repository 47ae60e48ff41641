package api

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/zvftest/benchtest"
)

// TestAppendIndicesRefusesWideIndex: connectivity indices count the whole
// answer; one past uint32 (or negative) is an error, never wrapped.
func TestAppendIndicesRefusesWideIndex(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in []int64
		ok bool
	}{
		{[]int64{0, 1, 1 << 31, 1<<32 - 1}, true},
		{[]int64{0, 1 << 32}, false},
		{[]int64{-1, 2}, false},
	} {
		b, err := appendIndices(nil, tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("%v: %v", tc.in, err)
			continue
		}
		for i := 0; tc.ok && i < len(tc.in); i++ {
			if got := int64(binary.LittleEndian.Uint32(b[4*i:])); got != tc.in[i] {
				t.Errorf("%v: index %d written as %d", tc.in, i, got)
			}
		}
	}
}

// TestWriteIndicesAsAppend: a connectivity block written piece by piece
// holds appendIndices' bytes, across piece seams, and a wide or negative
// index anywhere is refused before the block's first byte.
func TestWriteIndicesAsAppend(t *testing.T) {
	t.Parallel()
	long := make([]int64, 2*indexPiece+5)
	for i := range long {
		long[i] = int64(i)*65_537 + 3 // high bytes set: byte order shows
	}
	wideLate := append(slices.Clone(long), 1<<32)
	negative := append([]int64{-1}, long[:10]...)
	for _, tc := range []struct {
		name string
		in   []int64
		ok   bool
	}{
		{"empty", nil, true},
		{"odd", []int64{7}, true},
		{"three", []int64{1, 70_000, 1<<32 - 2}, true},
		{"pieces", long, true},
		{"wide late", wideLate, false},
		{"negative", negative, false},
		{"max", []int64{1<<32 - 1, 0}, true},
	} {
		var out bytes.Buffer
		e := &binaryEncoder{w: bufio.NewWriter(&out)}
		err := e.writeIndices(blockEdges, 2, tc.in)
		if ferr := e.w.Flush(); ferr != nil {
			t.Fatal(ferr)
		}
		if (err == nil) != tc.ok {
			t.Errorf("%s: error %v", tc.name, err)
			continue
		}
		if !tc.ok {
			if out.Len() != 0 {
				t.Errorf("%s: %d bytes written before the error", tc.name, out.Len())
			}
			continue
		}
		payload, _ := appendIndices(nil, tc.in)
		want := binary.LittleEndian.AppendUint32(nil, blockEdges)
		want = binary.LittleEndian.AppendUint32(want, 2)
		want = binary.LittleEndian.AppendUint64(want, uint64(len(payload)))
		want = append(want, payload...)
		want = append(want, make([]byte, (8-len(payload)%8)%8)...)
		if !bytes.Equal(out.Bytes(), want) {
			t.Errorf("%s: %d bytes differ from appendIndices' %d", tc.name, out.Len(), len(want))
		}
	}
}

// BenchmarkWriteIndices: a 50k-vertex line answer's edges block (about
// 100,000 indices) narrowed to uint32 and written.
func BenchmarkWriteIndices(b *testing.B) {
	v := make([]int64, 100_000)
	for i := range v {
		v[i] = int64(i/2 + i%2)
	}
	e := &binaryEncoder{w: bufio.NewWriterSize(io.Discard, 64<<10)}
	b.SetBytes(int64(4 * len(v)))
	benchtest.Loop(b, func() {
		if err := e.writeIndices(blockEdges, 2, v); err != nil {
			b.Fatal(err)
		}
	})
}

// TestWriteBlockFraming: a block is its 16-byte header (kind, aux, payload
// length), the payload and zeros to 8 bytes, whether it fits the writer's
// free space (one write) or not (header, payload and padding apart).
func TestWriteBlockFraming(t *testing.T) {
	t.Parallel()
	for _, size := range []int{16, 24, 64, 4096} { // the writer's buffer
		for n := range 41 { // payload bytes
			payload := make([]byte, n)
			for i := range payload {
				payload[i] = byte(i + 1)
			}
			var out bytes.Buffer
			e := &binaryEncoder{w: bufio.NewWriterSize(&out, size)}
			// Three blocks: the later ones start with the buffer part full.
			for b := range 3 {
				if err := e.writeBlock(uint32(b+1), 7, payload); err != nil {
					t.Fatal(err)
				}
			}
			if err := e.w.Flush(); err != nil {
				t.Fatal(err)
			}
			var want []byte
			for b := range 3 {
				want = binary.LittleEndian.AppendUint32(want, uint32(b+1))
				want = binary.LittleEndian.AppendUint32(want, 7)
				want = binary.LittleEndian.AppendUint64(want, uint64(n))
				want = append(want, payload...)
				want = append(want, make([]byte, (8-n%8)%8)...)
			}
			if !bytes.Equal(out.Bytes(), want) {
				t.Fatalf("buffer %d, payload %d: % x, want % x", size, n, out.Bytes(), want)
			}
		}
	}
}

// TestWriteBlockInPlace: a payload matched into the space VertexSpace
// lent (past a block header's place in the body buffer) is written where
// it lies — no copy — with the same framing as a payload from elsewhere,
// its padding zeros whatever the space held; VertexSpace lends nothing
// when the room is short or the answer quantizes.
func TestWriteBlockInPlace(t *testing.T) {
	t.Parallel()
	for n := range 41 { // payload bytes
		payload := make([]byte, n)
		for i := range payload {
			payload[i] = byte(i + 1)
		}
		var out, ref bytes.Buffer
		e := &binaryEncoder{w: bufio.NewWriterSize(&out, 256)}
		r := &binaryEncoder{w: bufio.NewWriterSize(&ref, 256)}
		for b := range 3 { // later blocks start with the buffer part full
			sp := e.VertexSpace(n)
			if sp == nil {
				t.Fatalf("payload %d, block %d: nothing lent with %d bytes free", n, b, e.w.Available())
			}
			sp = sp[:cap(sp)]
			for i := range sp {
				sp[i] = 0xa5 // what a kernel leaves past the rows it kept
			}
			lent := append(sp[:0], payload...)
			if err := e.writeBlock(uint32(b+1), 7, lent); err != nil {
				t.Fatal(err)
			}
			if err := r.writeBlock(uint32(b+1), 7, payload); err != nil {
				t.Fatal(err)
			}
		}
		if err := errors.Join(e.w.Flush(), r.w.Flush()); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), ref.Bytes()) {
			t.Fatalf("payload %d: % x, want % x", n, out.Bytes(), ref.Bytes())
		}
		if e.inPlace != int64(3*n) || r.inPlace != 0 {
			t.Fatalf("payload %d: %d / %d bytes written in place, want %d / 0", n, e.inPlace, r.inPlace, 3*n)
		}
	}
	e := &binaryEncoder{w: bufio.NewWriterSize(io.Discard, 64)}
	if sp := e.VertexSpace(64 - 16 - 8 + 1); sp != nil {
		t.Fatalf("lent %d bytes past a 64-byte buffer's header and padding", cap(sp))
	}
	if sp := e.VertexSpace(64 - 16 - 8); sp == nil {
		t.Fatal("nothing lent where the block fits")
	}
	e.precision = 0.5
	if sp := e.VertexSpace(8); sp != nil {
		t.Fatal("space lent to a quantized answer")
	}
}
